import ArgumentParser
import FoundationEssentials
import Haul

/// How haul's requests go over the network: timeouts, redirects, the proxy, TLS, the user agent,
/// compression, bandwidth and connections per file. Shared by `haul` and `haul worker` (and meant
/// for `haul load`); applied to a manager's configuration by ``apply(to:)``.
struct NetworkOptions: ParsableArguments {
    @Option(name: .long, help: "Seconds without receiving anything before a transfer is aborted and retried.")
    var stallTimeout = Seconds(30)

    @Option(name: .long, help: "Seconds a connection may take to be made (TCP and TLS), as curl's (default: 30).")
    var connectTimeout: Double?

    @Option(name: .long, help: "How many redirects a download follows.")
    var maxRedirects: Int = 10

    @Option(
        name: .long,
        help: "A proxy for every request: http://[user:password@]host:port (https://, socks5h:// too); \"\" for none."
    )
    var proxy: String?

    @Option(name: .long, help: "Hosts reached without the proxy, comma-separated (as no_proxy; * for all).")
    var noproxy: String?

    @Flag(name: .long, help: "Ignore http_proxy, https_proxy, all_proxy and no_proxy: connect directly unless --proxy.")
    var noProxy = false

    @Option(name: .long, help: "A PEM file of certificate authorities for HTTPS (instead of the system's).")
    var caFile: String?

    @Option(
        name: [.customShort("A", allowingJoined: true), .long],
        help: "The User-Agent header of every request (default: Haul/VERSION)."
    )
    var userAgent: String?

    @Flag(
        name: .long,
        help: "Ask for a compressed body and decode it (as curl --compressed); such a download cannot resume mid-body."
    )
    var compressed = false

    @Flag(
        name: .customLong("http1.1"),
        help: "HTTP/1.1 only: do not offer HTTP/2 over https (as curl --http1.1)."
    )
    var http1 = false

    @Option(
        name: .long,
        help: "Each download's bandwidth limit, in bytes per second; K, M and G suffixes count 1024s (as curl's)."
    )
    var limitRate: String?

    @Option(name: .long, help: "The bandwidth limit of all downloads together, as --limit-rate.")
    var totalRate: String?

    @Option(
        name: [.customShort("x", allowingJoined: true), .long],
        help: ArgumentHelp(
            "Connections per file (1 to 64), as aria2c -x: a large file is split into segments fetched at once.",
            discussion:
                "Only where the server honours ranges and sends a length and a strong validator; else one connection."
        )
    )
    var connections: Int = 1

    @Option(name: .long, help: "The smallest segment a file is split into for -x (default 4M; at least 64K).")
    var minSplitSize: String?

    func validate() throws {
        if maxRedirects < 0 { throw ValidationError("--max-redirects must be 0 or more.") }
        if !(stallTimeout.value >= 1) { throw ValidationError("--stall-timeout must be at least 1 second.") }
        if let connectTimeout, !(connectTimeout > 0 && connectTimeout <= 86_400) {
            throw ValidationError("--connect-timeout must be a number of seconds above 0, such as 5 or 0.5.")
        }
        if !(1...64).contains(connections) { throw ValidationError("--connections must be from 1 to 64.") }
        if let minSplitSize {
            guard let bytes = HaulCommand.parseSize(minSplitSize), bytes >= 64 * 1024 else {
                throw ValidationError("--min-split-size must be a size of at least 64K, such as 1M or 20M.")
            }
        }
        for (flag, value) in [("--limit-rate", limitRate), ("--total-rate", totalRate)] {
            if let value, HaulCommand.parseSize(value) == nil {
                throw ValidationError("\(flag) must be a number of bytes per second, such as 500K or 2M.")
            }
        }
        if let proxy, !proxy.isEmpty {
            guard let url = URL(string: proxy), url.host != nil else {
                throw ValidationError("--proxy must be a URL such as http://proxy.example:3128.")
            }
        }
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile) {
            throw ValidationError("--ca-file '\(caFile)' cannot be read.")
        }
    }

    /// Sets what these options say on `configuration` (validated: a value that does not parse was
    /// refused before).
    func apply(to configuration: inout DownloadManager.Configuration) {
        configuration.stallTimeout = stallTimeout.duration
        if let seconds = connectTimeout { configuration.connectTimeout = .milliseconds(Int64(seconds * 1000)) }
        configuration.maximumRedirects = maxRedirects
        if let proxy {
            if proxy.isEmpty {
                configuration.ignoresProxyEnvironment = true  // curl's --proxy "": no proxy at all
            } else {
                configuration.proxy = URL(string: proxy)
            }
        }
        if noProxy { configuration.ignoresProxyEnvironment = true }
        configuration.proxyBypass = noproxy.map { $0.split(separator: ",").map { String($0).trimmingSpaces } }
        configuration.certificateAuthorityFile = caFile.map { URL(fileURLWithPath: $0) }
        if let userAgent { configuration.userAgent = userAgent }
        configuration.decodesCompression = compressed
        if http1 { configuration.usesHTTP2 = false }
        configuration.rateLimits = RateLimits(
            perDownload: limitRate.flatMap(HaulCommand.parseSize),
            total: totalRate.flatMap(HaulCommand.parseSize)
        )
        configuration.connectionsPerFile = connections
        if let size = minSplitSize.flatMap(HaulCommand.parseSize) { configuration.minimumSegmentSize = size }
    }
}
