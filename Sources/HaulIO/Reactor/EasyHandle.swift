import CHaul
import Glibc
import HaulValues

/// One libcurl easy handle, with the memory curl borrows from it (error buffer, header list).
/// Loop thread only.
package final class EasyHandle {
    package let raw: UnsafeMutableRawPointer
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private var headers: UnsafeMutablePointer<curl_slist>?
    /// 1 once the last response's head came to its empty line (curl's header callback writes it:
    /// ``CHaul_easy_track_header_end``), 0 while a head is read or none came.
    private let headEnded: UnsafeMutablePointer<Int32>

    init?() {
        guard let raw = curl_easy_init() else { return nil }
        self.raw = raw
        self.errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(to: 0)
        self.headEnded = .allocate(capacity: 1)
        headEnded.initialize(to: 0)
    }

    /// Clears the options of one transfer (its range and headers, its context), ready for another;
    /// the options every transfer shares stay set. Call only once the handle is out of the multi handle.
    func reset() {
        _ = CHaul_easy_setopt_string(raw, CURLOPT_RANGE, nil)
        _ = CHaul_easy_setopt_slist(raw, CURLOPT_HTTPHEADER, nil)
        _ = CHaul_easy_setopt_pointer(raw, CURLOPT_WRITEDATA, nil)
        _ = CHaul_easy_setopt_pointer(raw, CURLOPT_PRIVATE, nil)
        owner = nil
        curl_slist_free_all(headers)
        headers = nil
        errorBuffer[0] = 0
    }

    /// curl's receive buffer (`CURLOPT_BUFFERSIZE`) as last set; curl's default until then.
    package private(set) var receiveBufferSize = EasyHandle.defaultReceiveBufferSize
    package static let defaultReceiveBufferSize = 16 * 1024

    /// Sets the receive buffer of the next transfer (never during one).
    package func setReceiveBufferSize(_ size: Int) {
        guard size != receiveBufferSize else { return }
        set(CURLOPT_BUFFERSIZE, size)
        receiveBufferSize = size
    }

    /// The context of the request it runs now (`CURLOPT_PRIVATE`), nil between requests.
    private var owner: UnsafeMutableRawPointer?
    /// The reactor told of each socket curl opens for it (``openSocketCallback``), when it closes
    /// them through ``Reactor/closeSocketCallback``.
    private var socketReporter: Reactor?

    /// `CURLOPT_OPENSOCKETFUNCTION` of the handles run on a reactor that is told of their sockets,
    /// with the handle as its data: opens the socket close-on-exec (as ``CHaul_open_socket``) and
    /// tells the reactor's owner which request's connection it is. curl calls it on the loop thread,
    /// once per socket it opens (a new connection; two when it tries two addresses at once).
    static let openSocketCallback: curl_opensocket_callback = { context, _, address in
        guard let context, let address else { return CURL_SOCKET_BAD }
        let socket = Glibc.socket(
            address.pointee.family,
            address.pointee.socktype | Int32(SOCK_CLOEXEC.rawValue),
            address.pointee.protocol
        )
        guard socket >= 0 else { return CURL_SOCKET_BAD }
        let easy = Unmanaged<EasyHandle>.fromOpaque(context).takeUnretainedValue()
        if let reactor = easy.socketReporter, easy.owner != nil {
            reactor.socketOpened(socket, for: easy.raw)
        }
        return socket
    }

    /// The HTTP version of the last response (`CURLINFO_HTTP_VERSION`: 2 for HTTP/2, 1 for
    /// HTTP/1.x, 0 before one arrived).
    package var responseHTTPVersion: Int {
        var version = 0
        _ = CHaul_easy_getinfo_long(raw, CURLINFO_HTTP_VERSION, &version)
        switch version {
        case Int(CURL_HTTP_VERSION_2_0): return 2
        case Int(CURL_HTTP_VERSION_3): return 3
        case 0: return 0
        default: return 1
        }
    }

    /// Whether the options every transfer shares are set (they are set once per handle: a
    /// `curl_easy_reset` and twenty options again cost every download a few microseconds).
    private var sharedOptionsSet = false
    /// The User-Agent set instead of the shared one, if any (set again only when it changes).
    private var userAgentOverride: String?

    deinit {
        curl_easy_cleanup(raw)
        curl_slist_free_all(headers)
        errorBuffer.deallocate()
        headEnded.deallocate()
    }

    /// curl's result for the request, unless curl took a connection closed in the middle of the
    /// response's head for a whole answer without a body (libcurl 7.88 does; `curl` exits 0 with an
    /// empty file): that is a receive error, retried as any cut connection is, never an empty file.
    package func vetted(_ result: CURLcode) -> CURLcode {
        guard result == CURLE_OK, headEnded.pointee == 0 else { return result }
        let message = "the connection closed before the end of the response's headers"
        var length = 0
        for byte in message.utf8.prefix(Int(CURL_ERROR_SIZE) - 1) {
            errorBuffer[length] = CChar(bitPattern: byte)
            length += 1
        }
        errorBuffer[length] = 0
        return CURLE_RECV_ERROR
    }

    /// The request every Haul transfer makes, before its per-request options.
    ///
    /// - Parameter ownConnection: the request needs a TCP connection of its own (a segment of a file
    ///   fetched over several: servers limit each connection, so HTTP/2 streams multiplexed on one
    ///   would share its limit): HTTP/1.1, no waiting to multiplex.
    package func configure(
        url: String,
        options: Options,
        write: @escaping CHaul_data_callback,
        context: UnsafeMutableRawPointer,
        ownConnection: Bool = false
    ) {
        errorBuffer[0] = 0
        headEnded.pointee = 0
        set(CURLOPT_URL, url)
        // HTTP/1.1 for a connection of its own, or when the manager offers no HTTP/2.
        let http1 = ownConnection || !options.usesHTTP2
        // Waiting for a connection that might multiplex pays only where HTTP/2 can be negotiated
        // (ALPN over TLS); over plain HTTP it would hold every request to a host behind the first.
        set(CURLOPT_PIPEWAIT, Self.isHTTPS(url) && !http1 ? 1 : 0)
        if http1 != pinnedToHTTP1 {
            pinnedToHTTP1 = http1
            set(CURLOPT_HTTP_VERSION, http1 ? Int(CURL_HTTP_VERSION_1_1) : Int(CURL_HTTP_VERSION_2TLS))
        }
        _ = CHaul_easy_setopt_pointer(raw, CURLOPT_WRITEDATA, context)
        _ = CHaul_easy_setopt_pointer(raw, CURLOPT_PRIVATE, context)
        owner = context
        // A handle serves a transfer's own request or a segment's, whose callbacks differ.
        let callback = unsafeBitCast(write, to: Int.self)
        if callback != writeCallback {
            writeCallback = callback
            _ = CHaul_easy_setopt_data_callback(raw, CURLOPT_WRITEFUNCTION, write)
        }
        guard !sharedOptionsSet else { return }
        sharedOptionsSet = true
        // TLS sessions (and DNS answers) are shared by every transfer: a new connection to a host
        // seen before resumes its TLS session instead of a full handshake.
        if let share = options.share { _ = CHaul_easy_setopt_pointer(raw, CURLOPT_SHARE, share) }
        set(CURLOPT_NOSIGNAL, 1)
        // Redirects are followed by the transfer (``Redirect``), which decides what headers go.
        set(CURLOPT_FOLLOWLOCATION, 0)
        // Only HTTP(S).
        set(CURLOPT_PROTOCOLS_STR, "http,https")
        set(CURLOPT_USERAGENT, options.userAgent)
        set(CURLOPT_CONNECTTIMEOUT_MS, options.connectTimeout.timeoutMilliseconds)
        // A stall: less than 1 byte per second for `stallTimeout` aborts with CURLE_OPERATION_TIMEDOUT.
        set(CURLOPT_LOW_SPEED_LIMIT, 1)
        set(CURLOPT_LOW_SPEED_TIME, max(1, Int(options.stallTimeout.components.seconds)))
        set(CURLOPT_SSL_VERIFYPEER, 1)
        set(CURLOPT_SSL_VERIFYHOST, 2)
        if let file = options.certificateAuthorityFile { set(CURLOPT_CAINFO, file) }
        if let file = options.cookieFile { set(CURLOPT_COOKIEFILE, file) }
        if let proxy = options.proxy { set(CURLOPT_PROXY, proxy) }
        if let noProxy = options.noProxy { set(CURLOPT_NOPROXY, noProxy) }
        if let path = options.unixSocketPath { set(CURLOPT_UNIX_SOCKET_PATH, path) }
        // "": every encoding this libcurl decodes, and it decodes them.
        if options.decodesCompression { set(CURLOPT_ACCEPT_ENCODING, "") }
        set(CURLOPT_TCP_KEEPALIVE, 1)
        if let reactor = options.socketCloser {
            socketReporter = reactor
            _ = CHaul_easy_open_sockets_through(raw, Self.openSocketCallback, Unmanaged.passUnretained(self).toOpaque())
        } else {
            _ = CHaul_easy_open_sockets_close_on_exec(raw)
        }
        if let closer = options.socketCloser {
            _ = CHaul_easy_close_sockets_through(raw, Reactor.closeSocketCallback, closer.callbackContext)
        }
        _ = CHaul_easy_setopt_pointer(raw, CURLOPT_ERRORBUFFER, errorBuffer)
        _ = CHaul_easy_track_header_end(raw, headEnded)
        if let log = options.headerLog {
            // The options keep the log for as long as the pool's handles live.
            set(CURLOPT_VERBOSE, 1)
            _ = CHaul_easy_setopt_debug_callback(raw, HeaderLog.callback)
            _ = CHaul_easy_setopt_pointer(raw, CURLOPT_DEBUGDATA, Unmanaged.passUnretained(log).toOpaque())
        }
    }

    /// The write callback set on the handle (its address), 0 before the first.
    private var writeCallback = 0
    /// The handle asks for HTTP/1.1 only (``configure(url:options:write:context:ownConnection:)``).
    private var pinnedToHTTP1 = false

    /// Sends `custom` as the User-Agent of the next requests, or `options`' when `nil`.
    package func setUserAgent(_ custom: String?, options: Options) {
        guard custom != userAgentOverride else { return }
        userAgentOverride = custom
        set(CURLOPT_USERAGENT, custom ?? options.userAgent)
    }

    /// Whether `url` starts with `https:`, in any case: where HTTP/2 may be negotiated (ALPN).
    package static func isHTTPS(_ url: String) -> Bool {
        var scheme = url.utf8.prefix(6).makeIterator()
        for expected in "https:".utf8 {
            guard let byte = scheme.next(), byte | 0x20 == expected | 0x20 else { return false }
        }
        return true
    }

    /// Asks for the bytes from `offset` on, pinned to `validator` with If-Range when there is one;
    /// or, for a complete file being revalidated, only if it changed (If-None-Match /
    /// If-Modified-Since). Sends `extra` too (the caller's headers, checked when they were given:
    /// none of them is one of these).
    package func setConditions(
        rangeFrom offset: Int64,
        to end: Int64? = nil,
        ifRange validator: String?,
        ifNoneMatch: String? = nil,
        ifModifiedSince: String? = nil,
        extra: [DownloadHeader] = []
    ) {
        curl_slist_free_all(headers)
        headers = nil
        _ = CHaul_easy_setopt_string(raw, CURLOPT_RANGE, nil)
        for header in extra { headers = curl_slist_append(headers, header.line) }
        if let end {
            // A closed range (a segment): `end` is its last byte.
            set(CURLOPT_RANGE, "\(offset)-\(end)")
            if let validator { headers = curl_slist_append(headers, "If-Range: \(validator)") }
        } else if offset > 0 {
            set(CURLOPT_RANGE, "\(offset)-")
            if let validator { headers = curl_slist_append(headers, "If-Range: \(validator)") }
        }
        if let ifNoneMatch { headers = curl_slist_append(headers, "If-None-Match: \(ifNoneMatch)") }
        if let ifModifiedSince { headers = curl_slist_append(headers, "If-Modified-Since: \(ifModifiedSince)") }
        _ = CHaul_easy_setopt_slist(raw, CURLOPT_HTTPHEADER, headers)
    }

    func set(_ option: CURLoption, _ value: Int) {
        _ = CHaul_easy_setopt_long(raw, option, value)
    }

    func set(_ option: CURLoption, _ value: String) {
        _ = value.withCString { CHaul_easy_setopt_string(raw, option, $0) }  // curl copies it
    }

    /// The final response's status code (0 before one arrived).
    package var responseCode: Int {
        var code = 0
        _ = CHaul_easy_getinfo_long(raw, CURLINFO_RESPONSE_CODE, &code)
        return code
    }

    /// Whether a connection was made for the request (`CURLINFO_CONNECT_TIME_T` is set once one is,
    /// or once an open one is taken): a failure without one failed to connect (or to resolve).
    package var madeConnection: Bool {
        var microseconds: curl_off_t = 0
        _ = CHaul_easy_getinfo_off(raw, CURLINFO_CONNECT_TIME_T, &microseconds)
        return microseconds > 0
    }

    /// The request's phases as curl measured them, in microseconds from its start
    /// (`CURLINFO_NAMELOOKUP_TIME_T`, `CONNECT_TIME_T`, `APPCONNECT_TIME_T`, `STARTTRANSFER_TIME_T`):
    /// 0 for a phase it did not go through (no TLS over http; over a connection already open, the
    /// lookup and connect are near 0).
    package var phaseTimes: (nameLookup: Int64, connect: Int64, tls: Int64, firstByte: Int64) {
        func time(_ info: CURLINFO) -> Int64 {
            var microseconds: curl_off_t = 0
            _ = CHaul_easy_getinfo_off(raw, info, &microseconds)
            return Int64(microseconds)
        }
        return (
            time(CURLINFO_NAMELOOKUP_TIME_T), time(CURLINFO_CONNECT_TIME_T), time(CURLINFO_APPCONNECT_TIME_T),
            time(CURLINFO_STARTTRANSFER_TIME_T)
        )
    }

    /// Connections curl opened for the request (0: it went over one already open, or none yet).
    package var connectionsOpened: Int {
        var count = 0
        _ = CHaul_easy_getinfo_long(raw, CURLINFO_NUM_CONNECTS, &count)
        return count
    }

    /// This response's Content-Length, when announced.
    package var contentLength: Int64? {
        var length: curl_off_t = -1
        _ = CHaul_easy_getinfo_off(raw, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length)
        return length >= 0 ? Int64(length) : nil
    }

    /// The URL of the last request (the one a redirect led to).
    package var effectiveURL: String? {
        var pointer: UnsafeMutableRawPointer?
        guard CHaul_easy_getinfo_pointer(raw, CURLINFO_EFFECTIVE_URL, &pointer) == CURLE_OK, let pointer else {
            return nil
        }
        return String(cString: pointer.assumingMemoryBound(to: CChar.self))
    }

    /// Where a redirect answer points (its `Location`, resolved against the request's URL), if it
    /// is one.
    package var redirectURL: String? {
        var pointer: UnsafeMutableRawPointer?
        guard CHaul_easy_getinfo_pointer(raw, CURLINFO_REDIRECT_URL, &pointer) == CURLE_OK, let pointer else {
            return nil
        }
        return String(cString: pointer.assumingMemoryBound(to: CChar.self))
    }

    /// A header of the final response, copied.
    ///
    /// Each lookup walks the response's headers. One pass with `curl_easy_nextheader` is no cheaper
    /// with curl 7.88: each of its calls counts the headers of the same name
    /// (`Benchmarks/CHOICES.md`).
    package func header(_ name: String) -> String? {
        var amount = 0
        // Through withCString: a String handed straight to a C string parameter is first copied
        // into a new array (seven allocations per file in (a), measured with heaptrack).
        return name.withCString { CHaul_easy_header_at(raw, $0, 0, &amount) }.map { String(cString: $0) }
    }

    /// Every header of the final response, in order (not a redirect's, nor a 100 Continue's): one
    /// pass with `curl_easy_nextheader`, made only for a body whose caller wants them, packed
    /// (``PackedHeaders``): the values are made when the caller reads them, off the loop.
    package func responseHeaders() -> PackedHeaders {
        var headers = PackedHeaders()
        var header: UnsafeMutablePointer<curl_header>?
        while let next = curl_easy_nextheader(raw, UInt32(CURLH_HEADER), -1, header) {
            header = next
            guard let name = next.pointee.name, let value = next.pointee.value else { continue }
            headers.append(name: name, value: value)
        }
        return headers
    }

    /// The values of header `name` when the final response has it more than once and they differ
    /// (two Content-Length headers: curl 7.88 believes the last); `nil` otherwise.
    package func conflictingValues(of name: String) -> [String]? {
        name.withCString { name in
            var amount = 0
            guard let first = CHaul_easy_header_at(raw, name, 0, &amount), amount > 1 else { return nil }
            var values = [String(cString: first).trimmingWhitespace]
            for index in 1..<amount {
                var ignored = 0
                if let value = CHaul_easy_header_at(raw, name, index, &ignored) {
                    values.append(String(cString: value).trimmingWhitespace)
                }
            }
            return Set(values).count > 1 ? values : nil
        }
    }

    /// What curl wrote into the error buffer for the last failure, if anything.
    package var errorMessage: String? {
        // curl leaves a trailing space or newline in some messages (OpenSSL's among them), and echoes
        // URLs with their passwords in some (a proxy's): never passed on.
        errorBuffer[0] == 0 ? nil : String(cString: errorBuffer).trimmingWhitespace.redactingURLCredentials
    }

    /// The context pointer set with `CURLOPT_PRIVATE`.
    package static func context(of raw: UnsafeMutableRawPointer) -> UnsafeMutableRawPointer? {
        var pointer: UnsafeMutableRawPointer?
        _ = CHaul_easy_getinfo_pointer(raw, CURLINFO_PRIVATE, &pointer)
        return pointer
    }
}
