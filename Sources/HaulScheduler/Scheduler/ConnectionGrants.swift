import HaulValues

/// How many downloads to one HTTPS host may start now so that curl opens only the connections
/// their HTTP/2 streams need (a pure value; part of ``Admission``).
///
/// libcurl 7.88 (Debian 12's) waits for a host's first connection to say whether it multiplexes
/// (`CURLOPT_PIPEWAIT`), but once one did, a request added while every known connection is full
/// opens a connection of its own even when another one, opened a moment earlier, is still in its
/// handshake (fixed in curl 8.0, PR #10456): 1,000 downloads admitted at once to one HTTP/2 host
/// opened 993 connections where 125 carry them at 8 streams each. So the grant does curl's waiting:
/// - a host whose protocol is not known yet gets one download (its *opener*); the others wait for
///   its answer. If it ends without one (a refused connection), or none came within
///   ``answerWait`` (a server slow to answer, a long way off), the host is *unproven* until an
///   answer comes, and every download may start, as before: a host is never tried one download at
///   a time for long;
/// - an answer over HTTP/1.x makes the host *serial*: no grant, the per-host limit alone;
/// - an answer over HTTP/2 makes it *multiplexing*: downloads start while the connections known to
///   carry its answers have a free stream (`streams` each, as `CURLMOPT_MAX_CONCURRENT_STREAMS` is
///   set), and beyond that as openers of new connections, at most as many at once as connections
///   are known (a slow start: the count doubles per round) and never past `connectionLimit`
///   connections in all.
///
/// A connection is known by its socket: curl tells which request opened each socket and when it
/// closes (``Scheduler``'s reactor notes), and an HTTP/2 answer to the request that opened it proves
/// it. A closed connection leaves the count at once, so that a burst after an idle spell opens the
/// connections again through openers.
struct ConnectionGrants {
    /// What a host's answers showed.
    enum Standing: Equatable {
        /// No answer yet: one opener at a time.
        case unknown
        /// Its opener ended without an answer: no grant until an answer shows a protocol.
        case unproven
        /// It answered over HTTP/1.x: no grant.
        case serial
        /// It answered over HTTP/2: streams on known connections, openers for new ones.
        case multiplexing
    }

    /// What a download that starts is to its host's connections.
    enum Role: Equatable {
        /// It takes a stream on a connection known to multiplex.
        case stream
        /// It opens a connection (or learns the host's protocol).
        case opener
        /// The host is not granted (serial or unproven).
        case free
    }

    private struct Host {
        var standing = Standing.unknown
        /// Downloads started to it, by role.
        var running: [DownloadID: Role] = [:]
        var openers = 0
        /// When the opener of a host not heard from started (uptime nanoseconds).
        var openerStarted: UInt64 = 0
        /// Sockets of connections proven to multiplex.
        var connections: Set<Int32> = []
    }

    /// How long the other downloads to a host not heard from wait for its opener's answer: past it,
    /// they go (the host is unproven). Two seconds: a first answer four round trips away (name,
    /// TCP, TLS, the request) at 400 ms each.
    static let answerWait: UInt64 = 2_000_000_000

    /// How many hosts it keeps before it forgets idle serial and unproven ones.
    static let hostLimit = 4_096

    /// Streams per connection.
    let streams: Int
    /// The most connections to one host the grant opens.
    let connectionLimit: Int
    private var hosts: [String: Host] = [:]
    /// The host of each download taking part.
    private var members: [DownloadID: String] = [:]
    /// Sockets opened by a download, not proven yet: by socket and by download.
    private var openedBy: [Int32: DownloadID] = [:]
    private var unproven: [DownloadID: [(socket: Int32, order: UInt64)]] = [:]
    /// The host of each proven socket.
    private var provenHosts: [Int32: String] = [:]

    /// - Parameters:
    ///   - streams: streams per connection (``DownloadManager/Configuration/maxStreamsPerConnection``).
    ///   - mostAtOnce: the most downloads that may run to one host at once (slots, or the per-host
    ///     limit): connections beyond what they fill are never opened.
    init(streams: Int, mostAtOnce: Int) {
        self.streams = max(1, streams)
        self.connectionLimit = max(1, (max(1, mostAtOnce) + self.streams - 1) / self.streams)
    }

    /// What `host`'s answers showed so far.
    func standing(of host: String) -> Standing { hosts[host]?.standing ?? .unknown }

    /// How many connections to `host` are proven to multiplex.
    func provenConnections(to host: String) -> Int { hosts[host]?.connections.count ?? 0 }

    /// Whether one more download to `host` may start now.
    func mayStart(to host: String) -> Bool { role(forNextTo: host) != nil }

    /// The role the next download to `host` would take, or nil when it must wait.
    private func role(forNextTo host: String) -> Role? {
        guard let entry = hosts[host] else { return .opener }
        switch entry.standing {
        case .unknown:
            return entry.openers == 0 ? .opener : nil
        case .unproven, .serial:
            return .free
        case .multiplexing:
            let proven = entry.connections.count
            if entry.running.count < proven * streams + entry.openers { return .stream }
            let opening = entry.openers < max(1, proven) && proven + entry.openers < connectionLimit
            return opening ? .opener : nil
        }
    }

    /// `id`, to `host`, starts: it takes the role the grant gives it (call only when ``mayStart(to:)``).
    @discardableResult
    mutating func start(_ id: DownloadID, to host: String, at now: UInt64 = 0) -> Role {
        guard members[id] == nil else { return hosts[host]?.running[id] ?? .free }
        let role = role(forNextTo: host) ?? .opener
        members[id] = host
        hosts[host, default: Host()].running[id] = role
        if role == .opener {
            hosts[host]?.openers += 1
            hosts[host]?.openerStarted = now
        }
        return role
    }

    /// Hosts not heard from whose opener has waited ``answerWait`` by `now` become unproven: every
    /// download to them may start. Returns them.
    mutating func expireWaits(now: UInt64) -> [String] {
        var expired: [String] = []
        for (host, entry) in hosts where entry.standing == .unknown && entry.openers > 0 {
            if now >= entry.openerStarted + Self.answerWait { expired.append(host) }
        }
        for host in expired { hosts[host]?.standing = .unproven }
        return expired
    }

    /// curl opened `socket`, the `order`-th it opened, for `id`'s request.
    mutating func opened(_ socket: Int32, by id: DownloadID, order: UInt64 = 0) {
        guard let host = members[id], hosts[host]?.standing != .serial else { return }
        openedBy[socket] = id
        unproven[id, default: []].append((socket, order))
    }

    /// The sockets `id` opened (up to the `upTo`-th) that are still open and not proven, taken off
    /// its list; later ones stay on it.
    private mutating func takeUnproven(of id: DownloadID, upTo last: UInt64 = .max) -> [Int32] {
        guard let sockets = unproven.removeValue(forKey: id) else { return [] }
        var taken: [Int32] = []
        var later: [(socket: Int32, order: UInt64)] = []
        for (socket, order) in sockets where openedBy[socket] == id {  // else closed, perhaps reused
            if order <= last {
                openedBy[socket] = nil
                taken.append(socket)
            } else {
                later.append((socket, order))
            }
        }
        if !later.isEmpty { unproven[id] = later }
        return taken
    }

    /// curl closes `socket`. Returns the host whose grant grew (a known connection left: openers
    /// may replace it), if any.
    mutating func closing(_ socket: Int32) -> String? {
        openedBy[socket] = nil  // (its download's list is filtered when read)
        guard let host = provenHosts.removeValue(forKey: socket) else { return nil }
        hosts[host]?.connections.remove(socket)
        return hosts[host]?.standing == .multiplexing ? host : nil
    }

    /// `id`'s first answer came, over HTTP/2 (`multiplexes`) or not, when curl had opened
    /// `socketsOpened` sockets: those `id` opened up to then are its connection to the host; any
    /// later (where a redirect leads) prove nothing here. Returns whether its host's grant changed
    /// (more downloads may start).
    mutating func answered(_ id: DownloadID, multiplexes: Bool, socketsOpened: UInt64 = .max) -> Bool {
        // Taken out while it changes: a copy left in `hosts` would make each change copy the
        // host's table of running downloads (1,000 entries at 1,000 at once), per answer.
        guard let host = members[id], var entry = hosts.removeValue(forKey: host) else { return false }
        let before = (entry.standing, entry.connections.count, entry.openers)
        if entry.running[id] == .opener {
            entry.openers -= 1
            entry.running[id] = multiplexes ? .stream : .free
        }
        entry.standing = multiplexes ? .multiplexing : .serial
        let sockets = takeUnproven(of: id, upTo: socketsOpened)
        if multiplexes {
            for socket in sockets {
                entry.connections.insert(socket)
                provenHosts[socket] = host
            }
        } else {
            for socket in entry.connections { provenHosts[socket] = nil }
            entry.connections = []
        }
        hosts[host] = entry
        return before != (entry.standing, entry.connections.count, entry.openers)
    }

    /// `id` was sent to another host (a redirect to a CDN) after its first answer, and curl let go
    /// of its stream here: it no longer counts against this host's streams for the rest of its
    /// bytes. Returns its host, whose grant grew.
    mutating func leave(_ id: DownloadID) -> String? {
        guard let host = members[id], hosts[host]?.running[id] != nil else { return nil }
        if hosts[host]?.running.removeValue(forKey: id) == .opener { hosts[host]?.openers -= 1 }
        members[id] = nil
        _ = takeUnproven(of: id)
        return host
    }

    /// `id` stopped (its bytes all came, it paused, failed or was cancelled). Returns its host,
    /// whose grant may have grown, if it took part.
    mutating func stop(_ id: DownloadID) -> String? {
        guard let host = members.removeValue(forKey: id), var entry = hosts.removeValue(forKey: host) else {
            return nil
        }
        if entry.running.removeValue(forKey: id) == .opener {
            entry.openers -= 1
            // Its opener left without an answer: nothing says the host multiplexes.
            if entry.standing == .unknown { entry.standing = .unproven }
        }
        _ = takeUnproven(of: id)
        let idle = entry.running.isEmpty && entry.connections.isEmpty
        if idle, entry.standing == .multiplexing || hosts.count > Self.hostLimit {
            // No connection left (the next download learns the host again), or too many hosts
            // kept: a serial or unproven host is forgotten once idle, so that a crawl of many
            // hosts keeps about ``hostLimit``.
        } else {
            hosts[host] = entry
        }
        return host
    }

    /// What breaks the books' own rules, if anything (for tests that drive it with random inputs):
    /// every running download a member of its host, the openers counted as they run, each socket
    /// known once, a proven one under its host.
    func brokenRules() -> [String] {
        var broken: [String] = []
        for (host, entry) in hosts {
            if entry.openers != entry.running.values.filter({ $0 == .opener }).count {
                broken.append("\(host): \(entry.openers) openers counted, \(entry.running) running")
            }
            for id in entry.running.keys where members[id] != host { broken.append("\(host): \(id) runs unlisted") }
            for socket in entry.connections where provenHosts[socket] != host {
                broken.append("\(host): socket \(socket) proven but not listed")
            }
            if entry.standing == .serial, !entry.connections.isEmpty {
                broken.append("\(host): serial with proven sockets")
            }
        }
        for (id, host) in members where hosts[host]?.running[id] == nil { broken.append("\(id) listed, not running") }
        for (socket, host) in provenHosts where hosts[host]?.connections.contains(socket) != true {
            broken.append("socket \(socket) listed for \(host), not proven there")
        }
        for (socket, id) in openedBy {
            if members[id] == nil { broken.append("socket \(socket) opened by \(id), which left") }
            if provenHosts[socket] != nil { broken.append("socket \(socket) both proven and not") }
        }
        return broken
    }
}
