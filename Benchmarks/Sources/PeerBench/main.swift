import AsyncHTTPClient
import BenchSupport
import Foundation
import Glibc
import NIOCore
import NIOPosix

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// The peers, each run in its own process (one JSON line each), so that its peak RSS holds only its
// own code and data:
//
//   peer-bench many CLIENT BASE COUNT CONCURRENCY OUTDIR   (COUNT files BASE/f<i % 1000>.bin)
//   peer-bench one  CLIENT URL OUTFILE
//   peer-bench memory CLIENT BASE COUNT CONCURRENCY        (k: COUNT bodies into memory: AsyncHTTPClient's
//                                                          `execute` collecting `response.body`, URLSession's
//                                                          `data(from:)`)
//
// CLIENT is ahc (AsyncHTTPClient with FileDownloadDelegate) or urlsession.

enum Client: String { case ahc, urlsession }

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

let arguments = Array(CommandLine.arguments.dropFirst())
let started = ContinuousClock.now
switch (arguments.first, arguments.count) {
case ("many", 6):
    guard let client = Client(rawValue: arguments[1]) else { usageError() }
    let (base, count, width, out) = (arguments[2], Int(arguments[3])!, Int(arguments[4])!, arguments[5])
    try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
    let url = { @Sendable (index: Int) in "\(base)/f\(index % 1000).bin" }
    let path = { @Sendable (index: Int) in "\(out)/\(index).bin" }
    switch client {
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
    guard let client = Client(rawValue: arguments[1]) else { usageError() }
    let (url, out) = (arguments[2], arguments[3])
    switch client {
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
case ("memory", 5):
    guard let client = Client(rawValue: arguments[1]) else { usageError() }
    let (base, count, width) = (arguments[2], Int(arguments[3])!, Int(arguments[4])!)
    let url = { @Sendable (index: Int) in "\(base)/f\(index % 1000).bin" }
    let total = Counter()
    switch client {
    case .ahc:
        let http = makeAHC(connections: width)
        try await bounded(count, width: width) { index in
            let response = try await http.execute(HTTPClientRequest(url: url(index)), timeout: .seconds(60))
            guard response.status == .ok else { throw NSError(domain: "ahc", code: Int(response.status.code)) }
            let body = try await response.body.collect(upTo: 1 << 20)
            total.add(body.readableBytes)
        }
        try await http.shutdown()
    case .urlsession:
        let session = makeSession(connections: width)
        try await bounded(count, width: width) { index in
            let (data, response) = try await session.data(from: URL(string: url(index))!)
            guard (response as? HTTPURLResponse)?.statusCode == 200 else { throw NSError(domain: "urlsession", code: 1) }
            total.add(data.count)
        }
    }
    report(["scenario": "memory", "client": client.rawValue, "files": count, "bytes": total.value], started: started)
default:
    usageError()
}

/// A count added to from many tasks.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add(_ amount: Int) { lock.withLock { count += amount } }
    var value: Int { lock.withLock { count } }
}
