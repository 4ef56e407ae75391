import Foundation
import Glibc
import Testing

@testable import Haul
@testable import HaulTestSupport
@testable import HaulValues

/// Issue 39 through the binary: names written by others (an input file, a list queued for a
/// fleet) stay inside the output folder.
extension HaulCLITests {
    @Test("out=.haul/journal.sqlite and out=../x are refused; haul --queue -o ../.. too; the journal stays whole")
    func namesStayInside() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let source = try server.makeFile("n.bin", size: 20_000, seed: 39)
        let output = work.appendingPathComponent("out")
        // A first run leaves a journal.
        let first = try await haul(["-o", output.path + "/", server.url("n.bin").absoluteString], in: work)
        #expect(first.status == 0, "\(first.stderr)")
        let journal = output.appendingPathComponent(".haul/journal.sqlite")
        let before = try Data(contentsOf: journal)
        for out in [".haul/journal.sqlite", "sub/.haul/x", "../x", "/tmp/x"] {
            let list = work.appendingPathComponent("list.txt")
            try "\(server.url("n.bin?2"))\n  out=\(out)\n".write(to: list, atomically: true, encoding: .utf8)
            let run = try await haul(["-i", list.path, "-o", output.path], in: work)
            #expect(run.status == 64, "\(out): \(run.status) \(run.stderr)")
            #expect(run.stderr.contains("out= on line 2 must be a path inside the output folder"), "\(run.stderr)")
        }
        #expect(try Data(contentsOf: journal) == before)
        #expect(try DownloadManager.journalEntries(stateDirectory: output.appendingPathComponent(".haul")).count == 1)
        #expect(try Data(contentsOf: output.appendingPathComponent("n.bin")) == source)
        // -o naming a file in the state folder, by the user: refused too, nothing sent.
        let named = try await haul(["-o", journal.path, server.url("n.bin?3").absoluteString], in: work)
        #expect(named.status == 64 && named.stderr.contains("inside the state directory"), "\(named.stderr)")
        // (Opened by that run, the journal may have been checkpointed: its rows are what is compared.)
        let entries = try DownloadManager.journalEntries(stateDirectory: output.appendingPathComponent(".haul"))
        #expect(entries.map(\.state) == [.completed])
        // A list queued for a fleet: -o is a folder inside each worker's, never above it.
        let database = try await TestPostgres.database()
        for output in ["../../escape", "a/../../b", ".haul", "/abs"] {
            let run = try await haul(["--queue", database, "-o", output, server.url("n.bin").absoluteString], in: work)
            // A usage error (64), as in every mode; before: 1.
            #expect(
                run.status == 64 && run.stderr.contains("names a folder inside each worker's output folder"),
                "\(run.stderr)"
            )
        }
    }

    @Test(
        "a file made at a name haul chose, during the download, is kept: the download goes to name.1; -o FILE is replaced"
    )
    func fileMadeMeanwhileIsKept() async throws {
        try await withFaultServer { server, work in
            let output = work.appendingPathComponent("out")
            // The first answer stops after 100,000 bytes and holds the connection: the download cannot
            // end before it is interrupted.
            let url = server.url("stall/100000/400000").absoluteString
            let events = work.appendingPathComponent("events.json").path
            // Interrupted once received bytes (SIGTERM pauses, bytes kept), so that the user's file
            // surely appears at the name between the start of the download and its end.
            let process = try await startReceiving(["--json", "-o", output.path + "/", url], events: events)
            process.signal(SIGTERM)
            _ = await process.exited()
            #expect(!FileManager.default.fileExists(atPath: output.appendingPathComponent("400000").path))
            // The name was free when the download started; the user's file appears meanwhile.
            let users = Data("the user's own file".utf8)
            try users.write(to: output.appendingPathComponent("400000"))
            let resumed = try await haul(["--json", "-o", output.path + "/", url], in: work)
            #expect(resumed.status == 0, "\(resumed.stderr)")
            try resumed.stdout.write(toFile: events, atomically: true, encoding: .utf8)
            #expect(try Data(contentsOf: output.appendingPathComponent("400000")) == users)
            #expect(try Data(contentsOf: output.appendingPathComponent("400000.1")) == FaultServer.body(size: 400_000))
            let log = try String(contentsOfFile: events, encoding: .utf8)
            #expect(log.contains("400000.1"), "\(log)")
            // A file -o names is the user's to replace, as curl -o does.
            let named = work.appendingPathComponent("named.bin")
            try users.write(to: named)
            let run = try await haul(["-o", named.path, server.url("file/1000").absoluteString], in: work)
            #expect(run.status == 0, "\(run.stderr)")
            #expect(try Data(contentsOf: named) == FaultServer.body(size: 1000))
        }
    }

    @Test(
        "messages say what happened: a full disk at the journal, a read-only folder across file systems, -i at a folder"
    )
    func messagesNameTheRealCause() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        _ = try server.makeFile("m.bin", size: 300_000, seed: 7)
        let url = server.url("m.bin").absoluteString
        // A rerun on a full disk: the journal is healthy, the disk is full.
        try await withSmallDisk(megabytes: 2) { disk in
            #expect(try await haul(["-o", disk.path + "/", url], in: work).status == 0)
            try fill(disk, leaving: 0)
            let run = try await haul(["-o", disk.path + "/", url + "?again"], in: work)
            #expect(run.status == 7, "\(run.stderr)")
            #expect(run.stderr.contains("No space left on device"), "\(run.stderr)")
            #expect(!run.stderr.contains("Move it away") && !run.stderr.contains("cannot be used"), "\(run.stderr)")
            // Still listed: what is there is what a user looks at to decide what to remove.
            let listed = try await haul(["--list", "-o", disk.path], in: work)
            #expect(listed.status == 0, "\(listed.stderr)")
            #expect(listed.stdout.hasPrefix("completed ") && listed.stdout.contains(url), "\(listed.stdout)")
        }
        // A read-only destination folder, the state directory on another file system: the copy's
        // own error, not the rename's "Invalid cross-device link".
        try await withSmallDisk(megabytes: 2) { disk in
            #expect(try await ChildProcess("/bin/mount", ["-o", "remount,ro", disk.path]).exited() == 0)
            let state = work.appendingPathComponent("state").path
            let run = try await haul(
                ["-o", disk.appendingPathComponent("m.bin").path, "--state", state, url],
                in: work
            )
            #expect(run.status == 7, "\(run.stderr)")
            #expect(
                run.stderr.contains("Read-only file system") && !run.stderr.contains("cross-device"),
                "\(run.stderr)"
            )
            #expect(run.stderr.contains("the partial file is kept") && run.stderr.contains("m.bin'"), "\(run.stderr)")
        }
        // -i naming a folder.
        let folder = try await haul(["-i", work.path], in: work)
        #expect(folder.status == 7 && folder.stderr.contains("is a folder"), "\(folder.stderr)")
        #expect(!folder.stderr.contains("Success"))
    }

    @Test("a journal whose WAL holds rows, without its WAL index (-shm), on a full disk is still listed")
    func listsAKilledRunsJournalOnAFullDisk() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        _ = try server.makeFile("k.bin", size: 3 * 1024 * 1024, seed: 11)
        let url = server.url("held/k.bin").absoluteString
        try await withSmallDisk(megabytes: 8) { disk in
            // /held/: 1 MiB at once, then 1 KB/s: the row is running, in the WAL, when the process dies.
            let running = try ChildProcess(Self.haulPath, ["--quiet", "-o", disk.path + "/", url])
            defer { if running.isRunning { running.signal(SIGKILL) } }
            let state = disk.appendingPathComponent(".haul")
            let clock = ContinuousClock()
            let deadline = clock.now + .seconds(30)
            while Self.partialLength(in: state) < 512 * 1024, clock.now < deadline, running.isRunning {
                try await Task.sleep(for: .milliseconds(20))
            }
            running.signal(SIGKILL)
            #expect(await running.exited() == 128 + SIGKILL)
            let wal = FilePath.fileLength(state.appendingPathComponent("journal.sqlite-wal").path) ?? 0
            #expect(wal > 0, "the killed run's rows are in its WAL")
            // The state directory as a copy that left out SQLite's index file (backup tools skip
            // `*-shm`), on a disk that then fills: reading the WAL's rows means building an index,
            // which needed room for that file. Before, this failed with "No space left on device"
            // and listed nothing.
            try FileManager.default.removeItem(at: state.appendingPathComponent("journal.sqlite-shm"))
            try fill(disk, leaving: 0)
            // Another process reading the database (SQLite's shared lock, held by Python here): the
            // index cannot be kept in this listing's memory either, and the full disk is reported,
            // not the lock (whose advice would be to move the journal away).
            let held = work.appendingPathComponent("held.txt").path
            let reader = try ChildProcess(
                "/usr/bin/python3",
                [
                    "-c",
                    "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY); "
                        + "fcntl.lockf(fd, fcntl.LOCK_SH, 510, 0x40000002); print('held', flush=True); time.sleep(120)",
                    state.appendingPathComponent("journal.sqlite").path,
                ],
                stdout: held
            )
            defer { if reader.isRunning { reader.signal(SIGKILL) } }
            func isHeld() -> Bool { (try? String(contentsOfFile: held, encoding: .utf8)) == "held\n" }
            while !isHeld(), clock.now < deadline, reader.isRunning {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(isHeld())
            let refused = try await haul(["--list", "-o", disk.path], in: work)
            #expect(refused.status == 1, "\(refused.stdout)")
            #expect(refused.stderr.contains("No space left on device"), "\(refused.stderr)")
            #expect(!refused.stderr.contains("Move it away") && !refused.stderr.contains("locked"), "\(refused.stderr)")
            reader.signal(SIGKILL)
            _ = await reader.exited()
            let listed = try await haul(["--list", "-o", disk.path], in: work)
            #expect(listed.status == 0, "\(listed.stderr)")
            #expect(listed.stdout.hasPrefix("interrupted ") && listed.stdout.contains(url), "\(listed.stdout)")
            // Read, not checkpointed nor damaged: with room again, the journal lists the same row.
            try FileManager.default.removeItem(at: disk.appendingPathComponent("filler"))
            let again = try await haul(["--list", "-o", disk.path], in: work)
            #expect(again.status == 0 && again.stdout == listed.stdout, "\(again.stdout) \(again.stderr)")
        }
    }

    @Test(
        "a full disk whose blocks are smaller than a page (ext4 under 512 MiB): every amount of space left ends in exit 7 and ENOSPC, never a signal"
    )
    func fullSmallBlockDisk() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let source = try server.makeFile("s.bin", size: 120_000, seed: 5)
        let url = server.url("s.bin").absoluteString
        // SQLite grows the journal's WAL index (mapped into memory) a page at a time by writing
        // its last byte, which on 1 KiB blocks leaves the page's first three a hole: with no block
        // left for it, SQLite's next store there was SIGBUS (at 60 KiB left, here).
        try await withSmallBlockDisk(megabytes: 4) { disk in
            let output = disk.appendingPathComponent("out")
            for kilobytes in stride(from: 0, through: 160, by: 8) {
                try? FileManager.default.removeItem(at: output)
                try fillAll(disk, thenFree: kilobytes * 1024)
                let run = try await haul(["--retries", "1", "-o", output.path + "/", url], in: work)
                if run.status == 0 {
                    #expect(try Data(contentsOf: output.appendingPathComponent("s.bin")) == source)
                } else {
                    #expect(run.status == 7, "\(kilobytes) KiB left: status \(run.status), \(run.stderr)")
                    #expect(run.stderr.contains("No space left on device"), "\(kilobytes) KiB left: \(run.stderr)")
                }
            }
        }
        // Out of inodes with blocks to spare: the same ENOSPC, and the advice says it can be that.
        try await withSmallBlockDisk(megabytes: 4, inodes: 64) { disk in
            let output = disk.appendingPathComponent("out")
            #expect(try await haul(["-o", output.path + "/", url], in: work).status == 0)
            var files = 0
            while FileManager.default.createFile(atPath: disk.appendingPathComponent("f\(files)").path, contents: nil) {
                files += 1
            }
            let run = try await haul(["--retries", "1", "-o", output.path + "/", url + "?again"], in: work)
            #expect(run.status == 7, "\(run.stderr)")
            #expect(
                run.stderr.contains("No space left on device") && run.stderr.contains("no inode for another file"),
                "\(run.stderr)"
            )
        }
    }

    @Test("a full btrfs: exit 7 and ENOSPC, never a signal; the files placed are whole")
    func fullBtrfs() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        var sources: [String: Data] = [:]
        for index in 0..<30 { sources["b\(index).bin"] = try server.makeFile("b\(index).bin", size: 1_000_000) }
        let list = work.appendingPathComponent("btrfs-list.txt")
        try sources.keys.sorted().map { server.url($0).absoluteString + "\n" }.joined()
            .write(to: list, atomically: true, encoding: .utf8)
        // btrfs reserves space when a mapped page (SQLite's WAL index) is first written: with none
        // left, that write was SIGBUS (4 runs of 4), until the index was made not copied on write.
        try await withLoopDisk(megabytes: 320, making: ["/sbin/mkfs.btrfs", "-q", "-f"]) { disk in
            try fillAll(disk, thenFree: 20 * 1024 * 1024)
            let output = disk.appendingPathComponent("out")
            let run = try await haul(["--retries", "2", "-j", "8", "-i", list.path, "-o", output.path + "/"], in: work)
            #expect(run.status == 7, "status \(run.status): \(run.stderr.suffix(2000))")
            #expect(run.stderr.contains("No space left on device"), "\(run.stderr.suffix(2000))")
            for name in (try? FileManager.default.contentsOfDirectory(atPath: output.path)) ?? [] where name != ".haul"
            {
                #expect(try Data(contentsOf: output.appendingPathComponent(name)) == sources[name], "\(name)")
            }
        }
    }

    @Test("-H @FILE reads headers one per line, so that a secret is never on the command line")
    func headersFromAFile() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let source = try server.makeFile("k.bin", size: 10_000, seed: 3)
        let file = work.appendingPathComponent("headers.txt")
        try "X-Tenant: acme\r\n\nX-Api-Key: \(NginxServer.apiKey)\n".write(to: file, atomically: true, encoding: .utf8)
        let output = work.appendingPathComponent("k.bin")
        let run = try await haul(
            ["-H", "@\(file.path)", "-o", output.path, server.url("apikey/k.bin").absoluteString],
            in: work
        )
        #expect(run.status == 0, "\(run.stderr)")
        #expect(try Data(contentsOf: output) == source)
        #expect(!(run.stdout + run.stderr).contains(NginxServer.apiKey))
        // Without the file's key, the server says 401: the header came from the file.
        let without = try await haul(["-o", output.path + ".2", server.url("apikey/k.bin").absoluteString], in: work)
        #expect(without.status == 2, "\(without.stderr)")
        let missing = try await haul(["-H", "@/nonexistent/headers", server.url("k.bin").absoluteString], in: work)
        #expect(missing.status == 64 && missing.stderr.contains("cannot read the header file"), "\(missing.stderr)")
    }
}

/// Issue 56, items 6 and 7: a usage error exits 64 in every mode (a URL curl would refuse, a list
/// for the fleet's queue), found before a database is asked; `--queue` never drops a secret it
/// cannot carry, it refuses it.
extension HaulCLITests {
    @Test("bad URLs exit 64 at once, whether downloaded, listed or queued; --queue refuses -H, -u, -b, --netrc-file")
    func usageErrorsInEveryMode() async throws {
        let work = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(at: work) }
        // No server, no database: each is refused before anything is asked of either.
        let nowhere = "postgres://haul@127.0.0.1:\(try NginxServer.freePort())/none"
        let bad = ["http://127.0.0.1:99999/x", "http://[bad", "http://127.0.0.1:0/x", "http://exa mple.com/"]
        let list = work.appendingPathComponent("list.txt")
        try bad.map { $0 + "\n" }.joined().write(to: list, atomically: true, encoding: .utf8)
        for url in bad {
            // Before: 8 ("URL using bad/illegal format", curl error 3) for the first two, 4 for port 0.
            let run = try await haul(["-o", work.path + "/out/", url], in: work)
            #expect(run.status == 64 && run.stderr.contains("is not a valid URL"), "\(url): \(run.stderr)")
            let queued = try await haul(["--queue", nowhere, url], in: work)
            #expect(queued.status == 64 && queued.stderr.contains("is not a valid URL"), "\(url): \(queued.stderr)")
        }
        let listed = try await haul(["-o", work.path + "/out/", "-i", list.path], in: work)
        #expect(listed.status == 64, "\(listed.stderr)")
        // Before: 1.
        let queuedList = try await haul(["--queue", nowhere, "-i", list.path], in: work)
        #expect(queuedList.status == 64 && queuedList.stderr.contains("is not a valid URL"), "\(queuedList.stderr)")
        // What a shared queue cannot carry: refused, never dropped (before: exit 0, the workers
        // fetched without the header). The secret is in no message.
        let token = "q-\(UUID().uuidString)"
        let secret = "Bearer \(token)"
        let netrc = work.appendingPathComponent("netrc")
        try "machine a.example login u password p\n".write(to: netrc, atomically: true, encoding: .utf8)
        for options in [
            ["-H", "Authorization: \(secret)"], ["-u", "u:\(token)"], ["-b", "s=\(token)"],
            ["--netrc-file", netrc.path],
        ] {
            let run = try await haul(["--queue", nowhere] + options + ["http://a.example/f"], in: work)
            #expect(run.status == 64 && run.stderr.contains("a shared queue stores no"), "\(options[0]): \(run.stderr)")
            #expect(!run.stderr.contains(token) && !run.stdout.contains(token))
        }
        let withPassword = try await haul(["--queue", nowhere, "http://u:\(token)@a.example/f"], in: work)
        #expect(withPassword.status == 64 && !withPassword.stderr.contains(token), "\(withPassword.stderr)")
    }
}

/// Issue 56, item 3: a name in a list (out=) never goes through a link another user planted in a
/// shared output folder, wherever it leads; the user's own link inside the folder is followed.
extension HaulCLITests {
    @Test("out=link/x.bin through another user's link in a shared folder: refused (64), nothing written where it leads")
    func plantedFolderLink() async throws {
        let (server, work) = try await startServerAndDirectory()
        defer { stop(server, work) }
        let source = try server.makeFile("p.bin", size: 20_000, seed: 563)
        let shared = work.appendingPathComponent("shared")
        try FileManager.default.createDirectory(at: shared, withIntermediateDirectories: true)
        #expect(chmod(shared.path, 0o1777) == 0)
        let elsewhere = work.appendingPathComponent("elsewhere")
        let mine = shared.appendingPathComponent("mine")
        for folder in [elsewhere, mine] {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        }
        // nobody's links: one out of the folder, one to a folder inside it; the user's own, inside.
        for (name, target) in [("out-link", elsewhere), ("in-link", mine)] {
            #expect(symlink(target.path, shared.appendingPathComponent(name).path) == 0)
            #expect(lchown(shared.appendingPathComponent(name).path, 65534, 65534) == 0)
        }
        #expect(symlink(mine.path, shared.appendingPathComponent("own-link").path) == 0)
        let list = work.appendingPathComponent("list.txt")
        for name in ["out-link", "in-link"] {
            try "\(server.url("p.bin"))\n  out=\(name)/x.bin\n".write(to: list, atomically: true, encoding: .utf8)
            let run = try await haul(["-i", list.path, "-o", shared.path], in: work)
            // Before: 0, and the file was written into the link's target.
            #expect(run.status == 64, "\(name): \(run.status) \(run.stderr)")
            #expect(run.stderr.contains("which user 65534 made"), "\(run.stderr)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere.path).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: mine.path).isEmpty)
        try "\(server.url("p.bin"))\n  out=own-link/x.bin\n".write(to: list, atomically: true, encoding: .utf8)
        let own = try await haul(["-i", list.path, "-o", shared.path], in: work)
        #expect(own.status == 0, "\(own.stderr)")
        #expect(try Data(contentsOf: mine.appendingPathComponent("x.bin")) == source)
    }
}
