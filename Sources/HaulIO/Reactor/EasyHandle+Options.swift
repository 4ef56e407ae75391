extension EasyHandle {
    /// What every transfer of one owner sets the same way, once per easy handle.
    package struct Options {
        /// How many redirects a transfer follows.
        package var maximumRedirects: Int
        /// The User-Agent header.
        var userAgent: String
        /// The longest wait for a connection.
        var connectTimeout: Duration
        /// A transfer that receives nothing for this long (whole seconds, at least 1) is aborted.
        var stallTimeout: Duration
        /// A PEM file of certificate authorities, instead of the system's.
        var certificateAuthorityFile: String?
        /// `CURLOPT_COOKIEFILE`: cookies sent where their rules say, if any.
        var cookieFile: String?
        /// Ask for compressed bodies and decode them.
        package var decodesCompression: Bool = false
        /// Offer HTTP/2 over TLS (ALPN); `false`: HTTP/1.1 for every request.
        package var usesHTTP2: Bool = true
        /// `CURLOPT_PROXY`: a proxy URL, `""` for none (the environment ignored), `nil` for the
        /// environment's.
        var proxy: String?
        /// `CURLOPT_NOPROXY`: hosts reached directly, comma-separated; `nil` for the environment's.
        var noProxy: String?
        /// A `CURLSH` every easy handle shares (TLS sessions, DNS answers), if any.
        var share: UnsafeMutableRawPointer?
        /// Where header lines are logged, when they are (``HeaderLog``).
        var headerLog: HeaderLog?
        /// The reactor told of every socket curl closes, when it parks sockets (``SocketWatches``).
        var socketCloser: Reactor?
        /// `CURLOPT_UNIX_SOCKET_PATH`: every connection goes to this Unix socket, whatever the URL's
        /// host (a test's scripted server, ``Reactor/turn(waiting:)``), when set.
        package var unixSocketPath: String?

        package init(
            maximumRedirects: Int,
            userAgent: String,
            connectTimeout: Duration,
            stallTimeout: Duration,
            certificateAuthorityFile: String? = nil,
            cookieFile: String? = nil,
            decodesCompression: Bool = false,
            usesHTTP2: Bool = true,
            proxy: String? = nil,
            noProxy: String? = nil,
            share: UnsafeMutableRawPointer? = nil,
            headerLog: HeaderLog? = nil,
            socketCloser: Reactor? = nil
        ) {
            self.maximumRedirects = maximumRedirects
            self.userAgent = userAgent
            self.connectTimeout = connectTimeout
            self.stallTimeout = stallTimeout
            self.certificateAuthorityFile = certificateAuthorityFile
            self.cookieFile = cookieFile
            self.decodesCompression = decodesCompression
            self.usesHTTP2 = usesHTTP2
            self.proxy = proxy
            self.noProxy = noProxy
            self.share = share
            self.headerLog = headerLog
            self.socketCloser = socketCloser
        }
    }
}
