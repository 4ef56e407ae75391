// swift-tools-version:6.0
// Haul's benchmarks, side by side with the peers a Swift developer would use instead. Not part of the
// test suite: run `bash Benchmarks/run.sh` from the repository (see RESULTS.md).
import PackageDescription

let package = Package(
    name: "HaulBenchmarks",
    dependencies: [
        .package(name: "Haul", path: "../"),
        .package(url: "https://github.com/swift-server/async-http-client", exact: "1.37.0"),
    ],
    targets: [
        // Measuring helpers shared by the two programs.
        .target(name: "BenchSupport", path: "Sources/BenchSupport"),
        // OpenSSL's SHA-256, for (l)'s consumer that hashes what it is streamed.
        .systemLibrary(name: "CDigest", path: "Sources/CDigest"),
        // Haul alone, so that its peak RSS holds no peer's code.
        .executableTarget(
            name: "haul-bench",
            dependencies: ["BenchSupport", "CDigest", .product(name: "Haul", package: "Haul")],
            path: "Sources/HaulBench"
        ),
        // (g): the fleet's queue in PostgreSQL alone.
        .executableTarget(
            name: "fleet-bench",
            dependencies: [.product(name: "Haul", package: "Haul"), .product(name: "HaulPostgres", package: "Haul")],
            path: "Sources/FleetBench"
        ),
        // AsyncHTTPClient and URLSession.
        .executableTarget(
            name: "peer-bench",
            dependencies: ["BenchSupport", .product(name: "AsyncHTTPClient", package: "async-http-client")],
            path: "Sources/PeerBench"
        ),
    ],
    swiftLanguageModes: [.v6]
)
