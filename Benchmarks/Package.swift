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
        .executableTarget(
            name: "haul-bench",
            dependencies: [
                .product(name: "Haul", package: "Haul"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            path: "Sources/HaulBench"
        ),
    ],
    swiftLanguageModes: [.v6]
)
