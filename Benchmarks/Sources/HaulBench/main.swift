import AsyncHTTPClient
import Foundation
import Glibc
import Haul
import NIOCore
import NIOPosix

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// One benchmark run per process, so that each has its own peak RSS and CPU time:
//
//   haul-bench many  CLIENT BASE COUNT CONCURRENCY OUTDIR   (COUNT files BASE/f<i % 1000>.bin)
//   haul-bench one   CLIENT URL OUTFILE
//   haul-bench live  CLIENT BASE COUNT OUTDIR               (COUNT transfers at once; RSS while all are live)
//   haul-bench queue BASE COUNT STATEDIR                    (Haul: COUNT enqueued; peak RSS, time to first byte)
//
// CLIENT is haul, ahc (AsyncHTTPClient with FileDownloadDelegate) or urlsession. Prints one JSON line.

struct Usage {
    static func now() -> (user: Double, system: Double, peakKB: Int) {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return (seconds(usage.ru_utime), seconds(usage.ru_stime), usage.ru_maxrss)
    }

    static func currentRSSKB() -> Int {
        let text = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
        }
        return 0
    }
}

func report(_ fields: [String: Any], started: ContinuousClock.Instant) {
    let elapsed = ContinuousClock.now - started
    let usage = Usage.now()
    var object = fields
    object["wallSeconds"] = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    object["cpuSeconds"] = usage.user + usage.system
    object["peakRSSKB"] = usage.peakKB
    let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    print(String(decoding: data, as: UTF8.self))
}

enum Client: String { case haul, ahc, urlsession }

/// Runs `work(i)` for i in 0..<count with at most `width` at once.
func bounded(_ count: Int, width: Int, _ work: @escaping @Sendable (Int) async throws -> Void) async throws {
    try await withThrowingTaskGroup(of: Void.self) { group in
        var next = 0
        while next < min(width, count) {
            let index = next
            group.addTask { try await work(index) }
            next += 1
        }
        while try await group.next() != nil {
            if next < count {
                let index = next
                group.addTask { try await work(index) }
                next += 1
            }
        }
    }
}

func makeAHC(connections: Int) -> HTTPClient {
    var configuration = HTTPClient.Configuration()
    configuration.connectionPool = .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: connections)
    return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
}

func ahcDownload(_ client: HTTPClient, _ url: String, to path: String) async throws {
    let delegate = try FileDownloadDelegate(path: path)
    let request = try HTTPClient.Request(url: url)
    let response = try await client.execute(request: request, delegate: delegate).futureResult.get()
    guard response.head.status == .ok else { throw NSError(domain: "ahc", code: Int(response.head.status.code)) }
}

func makeSession(connections: Int) -> URLSession {
    let configuration = URLSessionConfiguration.default
    configuration.httpMaximumConnectionsPerHost = connections
    configuration.urlCache = nil
    return URLSession(configuration: configuration)
}

func sessionDownload(_ session: URLSession, _ url: String, to path: String) async throws {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        let task = session.downloadTask(with: URL(string: url)!) { location, response, error in
            if let error { return continuation.resume(throwing: error) }
            guard let location, (response as? HTTPURLResponse)?.statusCode == 200 else {
                return continuation.resume(throwing: NSError(domain: "urlsession", code: 1))
            }
            do {
                try? FileManager.default.removeItem(atPath: path)
                try FileManager.default.moveItem(at: location, to: URL(fileURLWithPath: path))
                continuation.resume()
            } catch {
                continuation.resume(throwing: error)
            }
        }
        task.resume()
    }
}

func haulConfiguration(concurrency: Int, state: String) -> DownloadManager.Configuration {
    var configuration = DownloadManager.Configuration()
    configuration.maxConcurrentDownloads = concurrency
    configuration.stateDirectory = URL(fileURLWithPath: state)
    if let size = ProcessInfo.processInfo.environment["HAUL_BUFFER_SIZE"].flatMap(Int.init) {
        configuration.bufferSize = size
    }
    return configuration
}

let arguments = Array(CommandLine.arguments.dropFirst())
let started = ContinuousClock.now
switch (arguments.first, arguments.count) {
case ("many", 6):
    let client = Client(rawValue: arguments[1])!
    let (base, count, width, out) = (arguments[2], Int(arguments[3])!, Int(arguments[4])!, arguments[5])
    try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
    let url = { @Sendable (index: Int) in "\(base)/f\(index % 1000).bin" }
    let path = { @Sendable (index: Int) in "\(out)/\(index).bin" }
    switch client {
    case .haul:
        let manager = try DownloadManager(configuration: haulConfiguration(concurrency: width, state: "\(out)/.haul"))
        try manager.enqueue((0..<count).lazy.map { DownloadRequest(url: URL(string: url($0))!, destination: URL(fileURLWithPath: path($0))) })
        await manager.waitUntilIdle()
        await manager.shutdown()
    case .ahc:
        let http = makeAHC(connections: width)
        try await bounded(count, width: width) { try await ahcDownload(http, url($0), to: path($0)) }
        try await http.shutdown()
    case .urlsession:
        let session = makeSession(connections: width)
        try await bounded(count, width: width) { try await sessionDownload(session, url($0), to: path($0)) }
    }
    report(["scenario": "many", "client": client.rawValue, "files": count], started: started)
case ("one", 4):
    let client = Client(rawValue: arguments[1])!
    let (url, out) = (arguments[2], arguments[3])
    switch client {
    case .haul:
        let state = (out as NSString).deletingLastPathComponent + "/.haul"
        try await withDownloadManager(configuration: haulConfiguration(concurrency: 1, state: state)) { manager in
            _ = try await manager.download(from: URL(string: url)!, to: URL(fileURLWithPath: out)).finished()
        }
    case .ahc:
        let http = makeAHC(connections: 1)
        try await ahcDownload(http, url, to: out)
        try await http.shutdown()
    case .urlsession:
        try await sessionDownload(makeSession(connections: 1), url, to: out)
    }
    var status = stat()
    stat(out, &status)
    report(["scenario": "one", "client": client.rawValue, "bytes": Int(status.st_size)], started: started)
case ("live", 5) where arguments[1] == "haul":
    // Every transfer admitted at once against a rate-limited location; RSS is read once all are
    // receiving, minus the RSS before the first one started.
    let (base, count, out) = (arguments[2], Int(arguments[3])!, arguments[4])
    let manager = try DownloadManager(configuration: haulConfiguration(concurrency: count, state: "\(out)/.haul"))
    let before = Usage.currentRSSKB()
    let downloads = try (0..<count).map { index in
        try manager.download(from: URL(string: "\(base)/f\(index % 1000).bin?\(index)")!, to: URL(fileURLWithPath: "\(out)/\(index).bin"))
    }
    while downloads.contains(where: { if case .receiving = $0.state { false } else { true } }) {
        try await Task.sleep(for: .milliseconds(50))
    }
    let during = Usage.currentRSSKB()
    await manager.shutdown()
    report(["scenario": "live", "client": "haul", "transfers": count, "rssBeforeKB": before, "rssLiveKB": during,
            "bytesPerTransfer": (during - before) * 1024 / count], started: started)
case ("queue", 4):
    let (base, count, state) = (arguments[1], Int(arguments[2])!, arguments[3])
    let manager = try DownloadManager(configuration: haulConfiguration(concurrency: 100, state: state))
    let out = (state as NSString).deletingLastPathComponent
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
default:
    FileHandle.standardError.write(Data("usage: see the comment at the top of main.swift\n".utf8))
    exit(2)
}
