// swift-tools-version:6.0
import PackageDescription

// A small download service: Haul's DownloadService beside a Hummingbird 2 HTTP server in one
// ServiceGroup, metrics for Prometheus at /metrics. A package of its own (as Benchmarks/ is), so
// that building the library and `haul` never builds SwiftNIO. `bash test.sh` is its integration test.
let package = Package(
    name: "HaulServiceExample",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "Haul", path: "../.."),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    ],
    targets: [
        .executableTarget(
            name: "haul-service",
            dependencies: [
                .product(name: "Haul", package: "Haul"),
                .product(name: "HaulService", package: "Haul"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources"
        )
    ],
    swiftLanguageModes: [.v6]
)
