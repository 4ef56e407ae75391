import BenchSupport
import CDigest
import FoundationEssentials
import Glibc
import Haul
import Synchronization

// Haul, run in its own process per measurement (one JSON line each), linking Haul only:
//
//   haul-bench many  haul BASE COUNT CONCURRENCY OUTDIR   (COUNT files BASE/f<i % 1000>.bin)
//   haul-bench many-h2 …                                  (the same, recorded as the HTTPS/HTTP/2 scenario)
//   haul-bench many-disk …                                (the same, recorded as written to the disk)
//   haul-bench one   haul URL OUTFILE
//   haul-bench live  haul BASE COUNT OUTDIR               (COUNT transfers at once; RSS while all are live)
//   haul-bench queue BASE COUNT STATEDIR                  (COUNT enqueued; peak RSS, time to first byte)
//   haul-bench rate KIND LIMIT BASE OTHERBASE OUTDIR      (KIND download, host or total: the bytes/s
//                                                          measured over 10 s after 2 s, against LIMIT)
//   haul-bench split haul SCENARIO URL OUTFILE N MINSPLIT (one file over N connections, segments of at
//                                                          least MINSPLIT bytes; recorded as SCENARIO)
//   haul-bench memory haul BASE COUNT CONCURRENCY STATEDIR  (k: COUNT bodies BASE/f<i % 1000>.bin into
//                                                          memory, `data(from:maximumSize:)`)
//   haul-bench discard haul BASE COUNT CONCURRENCY STATEDIR (k: the same bodies counted and thrown away)
//   haul-bench streams haul BASE COUNT CONCURRENCY STATEDIR (k: the same bodies read through `stream(from:)`)
//   haul-bench stream haul URL PACE STATEDIR             (l: one body streamed to a consumer that hashes
//                                                          it with SHA-256, at most PACE MB/s; 0: unpaced)
//
// HAUL_BUFFER_SIZE sets the write buffer; HAUL_CA_FILE the certificate authorities for https;
// HAUL_STREAMS_PER_CONNECTION the HTTP/2 streams one connection carries (issue 44's (e)).

func haulConfiguration(concurrency: Int, state: String) -> DownloadManager.Configuration {
    var configuration = DownloadManager.Configuration()
    configuration.maxConcurrentDownloads = concurrency
    configuration.stateDirectory = URL(fileURLWithPath: state)
    let environment = ProcessInfo.processInfo.environment
    if let size = environment["HAUL_BUFFER_SIZE"].flatMap(Int.init) {
        configuration.bufferSize = size
    }
    if let file = environment["HAUL_CA_FILE"] {
        configuration.certificateAuthorityFile = URL(fileURLWithPath: file)
    }
    if let streams = environment["HAUL_STREAMS_PER_CONNECTION"].flatMap(Int.init) {
        configuration.maxStreamsPerConnection = streams
    }
    return configuration
}

/// The folder `path` is in.
func parent(of path: String) -> String { String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)]) }

let arguments = Array(CommandLine.arguments.dropFirst())
let started = ContinuousClock.now
switch (arguments.first, arguments.count) {
case ("many", 6) where arguments[1] == "haul", ("many-h2", 6) where arguments[1] == "haul",
    ("many-disk", 6) where arguments[1] == "haul":
    let (base, count, width, out) = (arguments[2], Int(arguments[3])!, Int(arguments[4])!, arguments[5])
    try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
    let manager = try DownloadManager(configuration: haulConfiguration(concurrency: width, state: "\(out)/.haul"))
    try manager.enqueue(
        (0..<count).lazy.map {
            DownloadRequest(url: URL(string: "\(base)/f\($0 % 1000).bin")!, destination: URL(fileURLWithPath: "\(out)/\($0).bin", isDirectory: false))
        })
    await manager.waitUntilIdle()
    await manager.shutdown()
    report(["scenario": arguments[0], "client": "haul", "files": count], started: started)
case ("one", 4) where arguments[1] == "haul":
    let (url, out) = (arguments[2], arguments[3])
    let state = parent(of: out) + "/.haul"
    try await withDownloadManager(configuration: haulConfiguration(concurrency: 1, state: state)) { manager in
        _ = try await manager.download(from: URL(string: url)!, to: URL(fileURLWithPath: out)).finished()
    }
    var status = stat()
    stat(out, &status)
    report(["scenario": "one", "client": "haul", "bytes": Int(status.st_size)], started: started)
case ("split", 7) where arguments[1] == "haul":
    let (scenario, url, out) = (arguments[2], arguments[3], arguments[4])
    var configuration = haulConfiguration(concurrency: 1, state: parent(of: out) + "/.haul")
    configuration.connectionsPerFile = Int(arguments[5])!
    configuration.minimumSegmentSize = Int64(arguments[6])!
    try await withDownloadManager(configuration: configuration) { manager in
        _ = try await manager.download(from: URL(string: url)!, to: URL(fileURLWithPath: out)).finished()
    }
    var status = stat()
    stat(out, &status)
    report(["scenario": scenario, "client": "haul", "bytes": Int(status.st_size), "connections": Int(arguments[5])!],
           started: started)
case ("live", 5) where arguments[1] == "haul":
    // Every transfer admitted at once against a rate-limited location; RSS is read once all are
    // receiving, minus the RSS before the first one started.
    let (base, count, out) = (arguments[2], Int(arguments[3])!, arguments[4])
    let manager = try DownloadManager(configuration: haulConfiguration(concurrency: count, state: "\(out)/.haul"))
    let before = Usage.currentRSSKB()
    // Enqueued in one call (its rows written in runs), then each handle looked up: asked for one
    // `download` at a time, each call waited for its row's commit on a loop already busy with the
    // transfers admitted before it, and on a slow VM the first 64 KiB at 2 KB/s (32 s) ended before
    // the last was asked for.
    let requests = (0..<count).map { index in
        DownloadRequest(url: URL(string: "\(base)/f\(index % 1000).bin?\(index)")!, destination: URL(fileURLWithPath: "\(out)/\(index).bin"))
    }
    _ = try manager.enqueue(requests)
    let downloads = requests.compactMap { manager.download(id: $0.id) }
    guard downloads.count == count else {
        _ = "haul-bench live: \(count - downloads.count) downloads have no handle\n".withCString { write(2, $0, strlen($0)) }
        exit(1)
    }
    while downloads.contains(where: { if case .receiving = $0.state { false } else { !$0.state.isFinal } }) {
        try await Task.sleep(for: .milliseconds(50))
    }
    if let failed = downloads.first(where: { $0.state.isFinal }) {
        let count = downloads.count(where: { $0.state.isFinal })
        let message = "haul-bench live: \(count) of \(downloads.count) downloads ended early; the first: \(failed.state)\n"
        _ = message.withCString { write(2, $0, strlen($0)) }
        exit(1)
    }
    let during = Usage.currentRSSKB()
    await manager.shutdown()
    report(["scenario": "live", "client": "haul", "transfers": count, "rssBeforeKB": before, "rssLiveKB": during,
            "bytesPerTransfer": (during - before) * 1024 / count], started: started)
case ("queue", 4):
    let (base, count, state) = (arguments[1], Int(arguments[2])!, arguments[3])
    let manager = try DownloadManager(configuration: haulConfiguration(concurrency: 100, state: state))
    let out = parent(of: state)
    let request = { (index: Int) in
        DownloadRequest(url: URL(string: "\(base)/f\(index % 1000).bin?\(index)")!, destination: URL(fileURLWithPath: "\(out)/q/\(index / 1000)/\(index).bin"))
    }
    let first = try manager.download(request(0))
    let firstByte = Task.detached {  // not on the main actor, which is busy enqueueing
        for await event in first.events { if case .receiving = event { return ContinuousClock.now } }
        return ContinuousClock.now
    }
    try manager.enqueue((1..<count).lazy.map(request))
    let enqueued = ContinuousClock.now - started
    let ttfb = await firstByte.value - started
    await manager.shutdown()
    func seconds(_ duration: Duration) -> Double { Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18 }
    report(["scenario": "queue", "client": "haul", "queued": count, "enqueueSeconds": seconds(enqueued),
            "timeToFirstByteSeconds": seconds(ttfb)], started: started)
case ("rate", 6):
    // One download (per-download limit), four from one host (per-host limit), or two from each of
    // two hosts (the manager's limit), of a file far larger than 12 s at the limit.
    let (kind, limit, base, other, out) = (arguments[1], Int64(arguments[2])!, arguments[3], arguments[4], arguments[5])
    var configuration = haulConfiguration(concurrency: 8, state: "\(out)/.haul")
    configuration.rateLimits =
        switch kind {
        case "download": RateLimits(perDownload: limit)
        case "host": RateLimits(perHost: limit)
        default: RateLimits(total: limit)
        }
    let urls =
        switch kind {
        case "download": ["\(base)/big.bin"]
        case "host": (0..<4).map { "\(base)/big.bin?\($0)" }
        default: ["\(base)/big.bin?a", "\(base)/big.bin?b", "\(other)/big.bin?c", "\(other)/big.bin?d"]
        }
    let manager = try DownloadManager(configuration: configuration)
    let downloads = try urls.enumerated().map { index, url in
        try manager.download(from: URL(string: url)!, to: URL(fileURLWithPath: "\(out)/\(index).bin"))
    }
    func received() -> Int64 { downloads.reduce(0) { $0 + $1.bytesReceivedInThisProcess } }
    try await Task.sleep(for: .seconds(2))
    let (startBytes, startTime) = (received(), ContinuousClock.now)
    try await Task.sleep(for: .seconds(10))
    let (endBytes, window) = (received(), ContinuousClock.now - startTime)
    if downloads.contains(where: { $0.state.isFinal }) {
        // A download that ended in the window would make the rate look low: the file must outlast it.
        let message = "haul-bench rate: a download ended within 12 s; serve a larger file or ask for a lower rate\n"
        _ = message.withCString { write(2, $0, strlen($0)) }
        exit(1)
    }
    for download in downloads { await download.cancel() }
    await manager.shutdown()
    let seconds = Double(window.components.seconds) + Double(window.components.attoseconds) / 1e18
    let measured = Double(endBytes - startBytes) / seconds
    report(["scenario": "rate-\(kind)", "client": "haul", "limit": Int(limit), "measured": Int(measured),
            "ratio": measured / Double(limit)], started: started)
case ("memory", 6) where arguments[1] == "haul":
    let (base, count, width, state) = (arguments[2], Int(arguments[3])!, Int(arguments[4])!, arguments[5])
    let manager = try DownloadManager(configuration: haulConfiguration(concurrency: width, state: state))
    let bytes = Mutex<Int>(0)
    try await bounded(count, width: width) { index in
        let body = try await manager.data(from: URL(string: "\(base)/f\(index % 1000).bin")!, maximumSize: 1 << 20)
        bytes.withLock { $0 += body.data.count }
    }
    await manager.shutdown()
    report(["scenario": "memory", "client": "haul", "files": count, "bytes": bytes.withLock { $0 }], started: started)
case ("streams", 6) where arguments[1] == "haul":
    // The same bodies read through `stream(from:)` (a pipe each), collected as they come.
    let (base, count, width, state) = (arguments[2], Int(arguments[3])!, Int(arguments[4])!, arguments[5])
    let manager = try DownloadManager(configuration: haulConfiguration(concurrency: width, state: state))
    let bytes = Mutex<Int>(0)
    try await bounded(count, width: width) { index in
        var body = [UInt8]()
        for try await chunk in try manager.stream(from: URL(string: "\(base)/f\(index % 1000).bin")!) {
            body.append(contentsOf: chunk)
        }
        bytes.withLock { $0 += body.count }
    }
    await manager.shutdown()
    report(["scenario": "memory", "client": "haul-stream", "files": count, "bytes": bytes.withLock { $0 }],
           started: started)
case ("discard", 6) where arguments[1] == "haul":
    // The same bodies counted and thrown away (`discard(from:)`, `--discard`'s way).
    let (base, count, width, state) = (arguments[2], Int(arguments[3])!, Int(arguments[4])!, arguments[5])
    let manager = try DownloadManager(configuration: haulConfiguration(concurrency: width, state: state))
    let bytes = Mutex<Int64>(0)
    try await bounded(count, width: width) { index in
        let download = try manager.discard(from: URL(string: "\(base)/f\(index % 1000).bin")!)
        _ = try await download.finished()
        bytes.withLock { $0 += download.timings.bytes }
    }
    await manager.shutdown()
    report(["scenario": "memory", "client": "haul-discard", "files": count, "bytes": Int(bytes.withLock { $0 })],
           started: started)
case ("stream", 5) where arguments[1] == "haul":
    let (url, pace, state) = (arguments[2], Double(arguments[3])!, arguments[4])
    var configuration = haulConfiguration(concurrency: 1, state: state)
    configuration.stallTimeout = .seconds(120)
    let context = EVP_MD_CTX_new()
    EVP_DigestInit_ex(context, EVP_sha256(), nil)
    var bytes = 0
    try await withDownloadManager(configuration: configuration) { manager in
        let stream = try manager.stream(from: URL(string: url)!)
        let begun = ContinuousClock.now
        for try await chunk in stream {
            chunk.withUnsafeBytes { _ = EVP_DigestUpdate(context, $0.baseAddress, $0.count) }
            bytes += chunk.count
            if pace > 0 {
                // A consumer of `pace` MB/s: never ahead of it.
                let due = begun + .nanoseconds(Int64(Double(bytes) / (pace * 1e6) * 1e9))
                let now = ContinuousClock.now
                if due > now { try await Task.sleep(for: due - now) }
            }
        }
    }
    var digest = [UInt8](repeating: 0, count: 32)
    var length: UInt32 = 0
    EVP_DigestFinal_ex(context, &digest, &length)
    EVP_MD_CTX_free(context)
    let hex = digest.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    report(["scenario": pace > 0 ? "stream-paced" : "stream", "client": "haul", "bytes": bytes, "sha256": hex,
            "paceMBps": pace], started: started)
default:
    usageError()
}
