// swift-tools-version:6.0
import PackageDescription

// Platforms: Linux only (glibc 2.28 or later, kernel 3.15 or later: O_TMPFILE, renameat2, syncfs;
// Debian 12 is what CI runs). SwiftPM's `platforms:` names Apple platforms only, so this is said here
// and enforced by `Sources/HaulValues/Platform.swift`, which stops a build elsewhere with that message.
/// The library's layers, top to bottom: one target each (ARCHITECTURE.md), so that the compiler refuses an
/// upward reference and `internal` means "this layer's". A target's folders, each with a README of its
/// detail, keep their own order within it (`scripts/check-layers.py`).
let layers: [(target: String, folders: [String])] = [
    ("Haul", ["Queue", "Handles", "Values"]),
    ("HaulScheduler", ["Scheduler", "Catalog"]),
    ("HaulTransfer", []),
    ("HaulIO", ["Download", "Disk", "Journal", "Reactor", "Metrics"]),
    ("HaulValues", ["Values", "Support"]),
]
/// The READMEs of a layer's folders, which are not sources.
func readmes(of target: String) -> [String] {
    (layers.first { $0.target == target }?.folders ?? []).map { "\($0)/README.md" }
}

let package = Package(
    name: "Haul",
    products: [
        .library(name: "Haul", targets: ["Haul"]),
        // The manager as a swift-service-lifecycle Service: a product of its own, so that the
        // library and `haul` build without it.
        .library(name: "HaulService", targets: ["HaulService"]),
        // A download queue shared by a fleet of processes in PostgreSQL (libpq): a product of its
        // own, so that the library builds without libpq (`haul` links it for --queue and worker).
        .library(name: "HaulPostgres", targets: ["HaulPostgres"]),
        .executable(name: "haul", targets: ["HaulCLI"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.1.0"),
        // `swift package generate-documentation --target Haul` (the test command builds the same
        // catalog with docc directly, warnings as errors).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.0.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.0.0"),
    ],
    targets: [
        // The one C module: libcurl, libevent, SQLite and OpenSSL digest headers plus typed shims for curl's variadic functions.
        .target(
            name: "CHaul",
            linkerSettings: [
                .linkedLibrary("curl"),
                .linkedLibrary("event_core"),
                .linkedLibrary("sqlite3"),
                .linkedLibrary("crypto"),
            ]
        ),
        // The bottom layer: the public values (requests, states, progress, errors) and small support.
        .target(
            name: "HaulValues",
            dependencies: ["CHaul", .product(name: "Logging", package: "swift-log")],
            exclude: readmes(of: "HaulValues")
        ),
        // What talks to the world: the loop and its handles, the journal, the disk, the metrics, and
        // the download handles callers hold.
        .target(
            name: "HaulIO",
            dependencies: [
                "CHaul", "HaulValues",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            exclude: readmes(of: "HaulIO")
        ),
        // One admitted download: its request, the response decision, the body, the state machine.
        .target(
            name: "HaulTransfer",
            dependencies: [
                "CHaul", "HaulValues", "HaulIO",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            exclude: ["README.md"]
        ),
        // The loop's owner: admission, commands, a download's end, checkpoints; and the catalog it
        // shares with the queue (open journals, live handles).
        .target(
            name: "HaulScheduler",
            dependencies: [
                "CHaul", "HaulValues", "HaulIO", "HaulTransfer",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            exclude: readmes(of: "HaulScheduler")
        ),
        // The facade (DownloadManager), the queue, and every public type (a user imports `Haul`
        // alone; it re-exports nothing). The products above it build against its public API only
        // (`packageAccess: false`), as a package of someone else's would.
        .target(
            name: "Haul",
            dependencies: [
                "CHaul", "HaulValues", "HaulIO", "HaulTransfer", "HaulScheduler",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            exclude: ["README.md"] + readmes(of: "Haul")
        ),
        .target(
            name: "HaulService",
            dependencies: ["Haul", .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            packageAccess: false
        ),
        .systemLibrary(
            name: "CHaulPostgres",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .target(
            name: "HaulPostgres",
            dependencies: ["Haul", "CHaulPostgres"],
            exclude: ["README.md"],
            packageAccess: false
        ),
        // The `haul` command-line downloader, built against Haul's public API only.
        .executableTarget(
            name: "HaulCLI",
            dependencies: [
                "Haul",
                "HaulPostgres",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/haul",
            exclude: ["README.md"],
            packageAccess: false
        ),
        // The tests, by what they need (CONTRIBUTING.md): pure logic (no process, no network);
        // integration against nginx, the fault servers and the other real servers the tests start;
        // the `haul` command; PostgreSQL (the fleet queue and workers). Their helpers (servers,
        // processes, fixtures) are one target of their own.
        .target(
            name: "HaulTestSupport",
            dependencies: [
                "Haul", "HaulScheduler", "HaulTransfer", "HaulIO", "HaulValues", "HaulPostgres",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/HaulTestSupport"
        ),
        .testTarget(
            name: "HaulLogicTests",
            dependencies: [
                "Haul", "HaulScheduler", "HaulTransfer", "HaulIO", "HaulValues", "HaulPostgres", "HaulTestSupport",
            ]
        ),
        .testTarget(
            name: "HaulIntegrationTests",
            dependencies: [
                "Haul", "HaulScheduler", "HaulTransfer", "HaulIO", "HaulValues", "HaulService", "HaulTestSupport",
                "CHaul",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]
        ),
        .testTarget(
            name: "HaulCommandLineTests",
            dependencies: ["Haul", "HaulIO", "HaulValues", "HaulCLI", "HaulPostgres", "HaulTestSupport"]
        ),
        .testTarget(
            name: "HaulPostgresTests",
            dependencies: ["Haul", "HaulIO", "HaulValues", "HaulCLI", "HaulPostgres", "HaulTestSupport"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
