// Benchmark (g): the fleet's queue in PostgreSQL, measured alone (no HTTP): how many rows per second
// workers claim and record as completed.
//
//   fleet-bench fill   DATABASE ROWS            (queues ROWS rows)
//   fleet-bench claims DATABASE BATCH           (one worker: claims BATCH at a time and records them
//                                                 completed, in one statement per batch, until none is
//                                                 left; prints one JSON line)
import Foundation
import Haul
import HaulPostgres

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count == 3, let number = Int(arguments[2]) else {
    FileHandle.standardError.write(Data("usage: fleet-bench fill|claims DATABASE N\n".utf8))
    exit(2)
}
let queue = try await FleetQueue(configuration: .init(connectionString: arguments[1], worker: "bench-\(getpid())"))
switch arguments[0] {
case "fill":
    let requests = (0..<number).map { index in
        DownloadRequest(
            url: URL(string: "http://127.0.0.1:9/f\(index % 1000).bin?\(index)")!,
            destination: URL(fileURLWithPath: "/out/\(index).bin")
        )
    }
    var added = 0
    for start in stride(from: 0, to: requests.count, by: 10_000) {
        added += try await queue.enqueue(
            Array(requests[start..<min(start + 10_000, requests.count)]),
            relativeTo: URL(fileURLWithPath: "/")
        )
    }
    print("{\"scenario\":\"fleet-fill\",\"rows\":\(added)}")
case "claims":
    let clock = ContinuousClock()
    let started = clock.now
    var rows = 0
    while true {
        let leases = try await queue.claim(upTo: number)
        if leases.isEmpty { break }
        let recorded = try await queue.record(leases.map { FleetOutcome($0, .completed(bytes: 0)) })
        precondition(recorded.count == leases.count, "a lease was lost in the benchmark")
        rows += leases.count
    }
    let seconds =
        Double((clock.now - started).components.attoseconds) / 1e18 + Double((clock.now - started).components.seconds)
    print(
        "{\"scenario\":\"fleet-claims\",\"client\":\"haul\",\"batch\":\(number),\"rows\":\(rows),\"wallSeconds\":\(String(format: "%.3f", seconds))}"
    )
default:
    FileHandle.standardError.write(Data("fleet-bench: unknown mode \(arguments[0])\n".utf8))
    exit(2)
}
