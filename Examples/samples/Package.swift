// swift-tools-version:6.0
import PackageDescription

// The Swift samples of the README and of the DocC articles, compiled as a user's package would
// compile them: a package of its own that depends on Haul by path. `bash build.sh` extracts them
// (scripts/samples.py) and builds them; the test command runs it. Compiled, never run.
let package = Package(
    name: "HaulSamples",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(name: "Haul", path: "../.."),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.1.0"),
    ],
    targets: [
        .target(
            name: "Samples",
            dependencies: [
                .product(name: "Haul", package: "Haul"),
                .product(name: "HaulService", package: "Haul"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            path: "Sources/Samples"
        )
    ],
    swiftLanguageModes: [.v6]
)
