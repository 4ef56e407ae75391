import Testing

@testable import HaulScheduler
@testable import HaulTestSupport
@testable import HaulValues

/// The grant of HTTP/2 hosts' connections (``ConnectionGrants``), driven by hand: which download may
/// start, and in which role, as answers, sockets and stops come.
@Suite("Connection grants")
struct ConnectionGrantsTests {
    let host = "h:443"
    static func id(_ index: Int) -> HaulValues.DownloadID { HaulValues.DownloadID(rawValue: "d\(index)") }

    /// Starts downloads to `host` while the grant allows, from `first` on; returns their roles.
    func startAll(_ grants: inout ConnectionGrants, from first: Int, upTo last: Int) -> [ConnectionGrants.Role] {
        var roles: [ConnectionGrants.Role] = []
        for index in first...last {
            guard grants.mayStart(to: host) else { break }
            roles.append(grants.start(Self.id(index), to: host))
        }
        return roles
    }

    /// Starts download `index` to `to` as its host's opener, has it open `socket` and answer (over
    /// HTTP/2 unless `multiplexes` is false); returns what `answered` returned.
    @discardableResult
    func openAndAnswer(
        _ grants: inout ConnectionGrants,
        _ index: Int,
        socket: Int32,
        to target: String? = nil,
        multiplexes: Bool = true
    ) -> Bool {
        grants.start(Self.id(index), to: target ?? host)
        grants.opened(socket, by: Self.id(index))
        return grants.answered(Self.id(index), multiplexes: multiplexes)
    }

    @Test("a host not heard from yet gets one download; the others wait for its answer")
    func oneOpenerWhileUnknown() {
        var grants = ConnectionGrants(streams: 8, mostAtOnce: 1_000)
        #expect(grants.connectionLimit == 125)
        #expect(grants.standing(of: host) == .unknown && grants.mayStart(to: host))
        let result1 = grants.start(Self.id(0), to: host)
        #expect(result1 == .opener)
        #expect(!grants.mayStart(to: host))
        // Another host is not held by this one.
        #expect(grants.mayStart(to: "other:443"))
    }

    @Test("an HTTP/2 answer proves its opener's connection: its streams fill, then one opener, then wait")
    func multiplexingFillsStreamsThenOpens() {
        var grants = ConnectionGrants(streams: 8, mostAtOnce: 1_000)
        let result2 = openAndAnswer(&grants, 0, socket: 10)
        #expect(result2)
        #expect(grants.standing(of: host) == .multiplexing && grants.provenConnections(to: host) == 1)
        // Seven more streams share the proven connection, then one opener, then nothing.
        let roles = startAll(&grants, from: 1, upTo: 20)
        #expect(roles == Array(repeating: .stream, count: 7) + [.opener])
        // The opener's connection proven, two at once may open (a slow start: as many as are known).
        grants.opened(11, by: Self.id(8))
        let result3 = grants.answered(Self.id(8), multiplexes: true)
        #expect(result3)
        #expect(grants.provenConnections(to: host) == 2)
        let next = startAll(&grants, from: 9, upTo: 40)
        #expect(next == Array(repeating: .stream, count: 7) + [.opener, .opener])
        // A stream that ends frees its place for a stream, not a connection.
        let result4 = grants.stop(Self.id(1))
        #expect(result4 == host)
        let result5 = grants.start(Self.id(41), to: host)
        #expect(result5 == .stream)
        #expect(!grants.mayStart(to: host))
    }

    @Test("a download redirected to another host frees its stream here once curl let go of it")
    func redirectedElsewhereLeaves() {
        var grants = ConnectionGrants(streams: 2, mostAtOnce: 100)
        let proved = openAndAnswer(&grants, 0, socket: 10)
        #expect(proved && grants.provenConnections(to: host) == 1)
        let leftHost = grants.leave(Self.id(0))
        #expect(leftHost == host)
        // Its bytes come from the CDN: both streams of the proven connection are free.
        let roles = startAll(&grants, from: 1, upTo: 10)
        #expect(roles == [.stream, .stream, .opener])
        // An answer that does not leave keeps its place.
        let kept = grants.answered(Self.id(1), multiplexes: true)
        #expect(!kept && !grants.mayStart(to: host))
        // It is off the books: its stop changes nothing here.
        let stopped = grants.stop(Self.id(0))
        #expect(stopped == nil && grants.brokenRules().isEmpty)
    }

    @Test("only the sockets a download opened before its answer are its connection to the host")
    func socketsAfterTheAnswerProveNothing() {
        var grants = ConnectionGrants(streams: 8, mostAtOnce: 100)
        grants.start(Self.id(0), to: host)
        grants.opened(10, by: Self.id(0), order: 1)
        // Its redirect's request to another host opened a socket before this turn's answer was read.
        grants.opened(11, by: Self.id(0), order: 2)
        _ = grants.answered(Self.id(0), multiplexes: true, socketsOpened: 1)
        #expect(grants.provenConnections(to: host) == 1)
        let other = grants.closing(11)
        #expect(other == nil && grants.brokenRules().isEmpty)
        // What it still holds unproven is forgotten when it stops.
        grants.opened(12, by: Self.id(0), order: 3)
        _ = grants.stop(Self.id(0))
        #expect(grants.brokenRules().isEmpty && grants.provenConnections(to: host) == 1)
    }

    @Test("connections never pass what the most downloads at once fill")
    func connectionsStopAtTheLimit() {
        // Two streams a connection, at most five downloads at once: three connections.
        var grants = ConnectionGrants(streams: 2, mostAtOnce: 5)
        #expect(grants.connectionLimit == 3)
        var next = 0
        var socket: Int32 = 10
        // Each round: start what may start; every opener opens a socket and answers over HTTP/2.
        for _ in 0..<6 {
            let first = next
            while grants.mayStart(to: host) {
                let id = Self.id(next)
                if grants.start(id, to: host) == .opener {
                    grants.opened(socket, by: id)
                    socket += 1
                }
                next += 1
            }
            for index in first..<next { _ = grants.answered(Self.id(index), multiplexes: true) }
        }
        #expect(grants.provenConnections(to: host) == 3)
        #expect(socket == 13)  // three sockets opened in all
        #expect(next == 6)  // three connections' streams
        #expect(!grants.mayStart(to: host))
    }

    @Test("a host whose first answer is late lets its downloads go after answerWait, until an answer")
    func lateAnswerLeavesTheHostUnproven() {
        var grants = ConnectionGrants(streams: 8, mostAtOnce: 100)
        let wait = ConnectionGrants.answerWait
        grants.start(Self.id(0), to: host, at: 1_000)
        let early = grants.expireWaits(now: 1_000 + wait - 1)
        #expect(early.isEmpty && !grants.mayStart(to: host))
        let late = grants.expireWaits(now: 1_000 + wait)
        #expect(late == [host] && grants.standing(of: host) == .unproven)
        let roles = startAll(&grants, from: 1, upTo: 10)
        #expect(roles == Array(repeating: .free, count: 10))
        // Only hosts still waiting expire: a multiplexing one is left as it is.
        openAndAnswer(&grants, 20, socket: 40, to: "fast:443")
        let none = grants.expireWaits(now: 10 * wait)
        #expect(none.isEmpty && grants.standing(of: "fast:443") == .multiplexing)
        // The late opener's HTTP/2 answer then proves its connection.
        grants.opened(41, by: Self.id(0))
        _ = grants.answered(Self.id(0), multiplexes: true)
        #expect(grants.standing(of: host) == .multiplexing && grants.provenConnections(to: host) == 1)
    }

    @Test("an HTTP/1.x answer lets every download go, and the host stays known as serial")
    func serialHostIsNotGranted() {
        var grants = ConnectionGrants(streams: 8, mostAtOnce: 100)
        let result6 = openAndAnswer(&grants, 0, socket: 10, multiplexes: false)
        #expect(result6)
        #expect(grants.standing(of: host) == .serial && grants.provenConnections(to: host) == 0)
        let result7 = startAll(&grants, from: 1, upTo: 50)
        #expect(result7 == Array(repeating: .free, count: 50))
        for index in 0...50 { _ = grants.stop(Self.id(index)) }
        // Known as serial after its downloads left: the next one does not wait as an opener.
        #expect(grants.standing(of: host) == .serial && grants.start(Self.id(51), to: host) == .free)
    }

    @Test("past hostLimit hosts, an idle serial host is forgotten when its last download stops")
    func idleHostsAreBounded() {
        var grants = ConnectionGrants(streams: 8, mostAtOnce: 100)
        let limit = ConnectionGrants.hostLimit
        for index in 0...limit + 1 {
            let id = Self.id(index)
            grants.start(id, to: "h\(index):443")
            _ = grants.answered(id, multiplexes: false)
            _ = grants.stop(id)
        }
        // The first ones are kept (known serial), the ones stopped past the limit forgotten.
        #expect(grants.standing(of: "h0:443") == .serial)
        #expect(grants.standing(of: "h\(limit + 1):443") == .unknown)
    }

    @Test("an opener that ends unanswered (a refused connection) lets every download go, until an answer")
    func unansweredOpenerLeavesTheHostUnproven() {
        var grants = ConnectionGrants(streams: 8, mostAtOnce: 100)
        grants.start(Self.id(0), to: host)
        let result8 = grants.stop(Self.id(0))
        #expect(result8 == host)
        // Unproven, and kept so while nothing answers: never one download at a time to a dead host.
        #expect(grants.standing(of: host) == .unproven)
        let result9 = startAll(&grants, from: 1, upTo: 20)
        #expect(result9 == Array(repeating: .free, count: 20))
        for index in 1...20 { _ = grants.stop(Self.id(index)) }
        #expect(grants.standing(of: host) == .unproven && grants.mayStart(to: host))
        let result10 = startAll(&grants, from: 21, upTo: 40)
        #expect(result10 == Array(repeating: .free, count: 20))
        // An answer over HTTP/2 then: 20 run, more than the one proven connection carries: one
        // opener may go, no stream.
        grants.opened(30, by: Self.id(21))
        let result11 = grants.answered(Self.id(21), multiplexes: true)
        #expect(result11)
        #expect(grants.standing(of: host) == .multiplexing)
        let after = startAll(&grants, from: 41, upTo: 50)
        #expect(after == [.opener])
    }

    @Test("a proven connection that closes leaves the count at once; its host's grant grows back through openers")
    func closedConnectionsLeave() {
        var grants = ConnectionGrants(streams: 2, mostAtOnce: 100)
        openAndAnswer(&grants, 0, socket: 10)
        grants.start(Self.id(1), to: host)
        #expect(grants.mayStart(to: host))  // one opener may go beside the full connection
        let result12 = grants.closing(99)
        #expect(result12 == nil)  // a socket nobody proved
        let result13 = grants.closing(10)
        #expect(result13 == host)
        #expect(grants.provenConnections(to: host) == 0)
        // Two run on no known connection: the next waits for an opener's proof...
        let result14 = grants.start(Self.id(2), to: host)
        #expect(result14 == .opener)
        #expect(!grants.mayStart(to: host))
        // ...which a socket of the same number, opened again by it, gives.
        grants.opened(10, by: Self.id(2))
        _ = grants.answered(Self.id(2), multiplexes: true)
        #expect(grants.provenConnections(to: host) == 1)
    }

    @Test("a socket closed and its number reused by another download proves only that download's connection")
    func reusedSocketNumbers() {
        var grants = ConnectionGrants(streams: 8, mostAtOnce: 100)
        grants.start(Self.id(0), to: host)
        grants.opened(10, by: Self.id(0))
        _ = grants.closing(10)  // its first address failed...
        grants.start(Self.id(1), to: "other:443")
        grants.opened(10, by: Self.id(1))  // ...and the number went to another host's connection
        grants.opened(11, by: Self.id(0))
        _ = grants.answered(Self.id(0), multiplexes: true)
        #expect(grants.provenConnections(to: host) == 1)
        let result15 = grants.closing(10)
        #expect(result15 == nil)  // not this host's
        let result16 = grants.closing(11)
        #expect(result16 == host)
        #expect(grants.provenConnections(to: host) == 0)
    }

    @Test("idle proven connections keep their host known: a later burst takes their streams at once")
    func idleConnectionsAreKept() {
        var grants = ConnectionGrants(streams: 4, mostAtOnce: 100)
        openAndAnswer(&grants, 0, socket: 10)
        _ = grants.stop(Self.id(0))
        #expect(grants.standing(of: host) == .multiplexing)
        let result17 = startAll(&grants, from: 1, upTo: 10)
        #expect(result17 == [.stream, .stream, .stream, .stream, .opener])
        // Once every connection closed and nothing runs, the host is learned again.
        for index in 1...5 { _ = grants.stop(Self.id(index)) }
        _ = grants.closing(10)
        #expect(grants.provenConnections(to: host) == 0)
        let result18 = startAll(&grants, from: 20, upTo: 30)
        #expect(result18 == [.opener])
    }

    @Test("admission saturates a granted host and frees it on the answer; plain-HTTP downloads are not granted")
    func admissionFollowsTheGrant() {
        var admission = Admission(slots: 100, perHostLimit: nil, streamsPerConnection: 8)
        admission.startTransferring(Self.id(0), host: host, multiplexes: true)
        #expect(admission.saturatedHosts == [host])
        #expect(admission.grantsFollow(host))
        admission.socketOpened(10, by: Self.id(0))
        let result19 = admission.answered(Self.id(0), multiplexes: true)
        #expect(result19)
        #expect(admission.saturatedHosts.isEmpty)
        for index in 1...8 { admission.startTransferring(Self.id(index), host: host, multiplexes: true) }
        #expect(admission.saturatedHosts == [host])
        // The proven connection closes: still saturated (nine run on none known).
        let result20 = admission.socketClosing(10)
        #expect(!result20)
        // Stops free the host again once the grant allows.
        for index in 0...8 { admission.stopTransferring(Self.id(index)) }
        #expect(admission.saturatedHosts.isEmpty)
        // Over plain HTTP, or in a manager without HTTP/2, nothing is granted.
        var plain = Admission(slots: 100, perHostLimit: nil)
        plain.startTransferring(Self.id(0), host: host, multiplexes: true)
        #expect(plain.saturatedHosts.isEmpty && !plain.grantsFollow(host))
        admission.startTransferring(Self.id(50), host: "p:80")
        admission.startTransferring(Self.id(51), host: "p:80")
        #expect(admission.saturatedHosts.isEmpty)
    }
}

/// Random inputs, as AsyncHTTPClient's `HTTPConnectionPool+StateFuzzTests` drives its pool: the
/// books keep their rules, and once everything stops every host may take a download again.
@Suite("Connection grants, random inputs")
struct ConnectionGrantsFuzzTests {
    @Test("10,000 random steps over four hosts keep the books' rules", arguments: [1, 2, 3, 4, 5] as [UInt64])
    func randomSteps(seed: UInt64) {
        var random = SeededRandom(seed: seed)
        var grants = ConnectionGrants(streams: 3, mostAtOnce: 12)
        let hosts = ["a:443", "b:443", "c:443", "d:443"]
        var running: [HaulValues.DownloadID: String] = [:]
        var open: [Int32: HaulValues.DownloadID] = [:]  // sockets curl holds, by the download that opened them
        var left: Set<HaulValues.DownloadID> = []  // redirected elsewhere: no longer on the books
        var nextID = 0
        var nextSocket: Int32 = 10
        var now: UInt64 = 0
        for step in 0..<10_000 {
            now += UInt64.random(in: 0...50_000_000, using: &random)
            switch Int.random(in: 0..<100, using: &random) {
            case 0..<30:  // a download starts where the grant allows
                let host = hosts.randomElement(using: &random)!
                guard grants.mayStart(to: host) else { continue }
                let id = HaulValues.DownloadID(rawValue: "d\(nextID)")
                nextID += 1
                grants.start(id, to: host, at: now)
                running[id] = host
            case 30..<50:  // one opens a socket (a socket number may be one closed before)
                guard let id = running.keys.randomElement(using: &random) else { continue }
                let socket =
                    Bool.random(using: &random) ? nextSocket : Int32.random(in: 10...nextSocket, using: &random)
                if open[socket] != nil { continue }
                nextSocket += socket == nextSocket ? 1 : 0
                open[socket] = id
                grants.opened(socket, by: id)
            case 50..<65:  // one answers, over HTTP/2 mostly, now and then with a redirect elsewhere
                guard let id = running.keys.randomElement(using: &random) else { continue }
                _ = grants.answered(id, multiplexes: Int.random(in: 0..<10, using: &random) > 0)
                if Int.random(in: 0..<10, using: &random) == 0, grants.leave(id) != nil { left.insert(id) }
            case 65..<80:  // a socket closes
                guard let socket = open.keys.randomElement(using: &random) else { continue }
                open[socket] = nil
                _ = grants.closing(socket)
            case 80..<95:  // one stops
                guard let id = running.keys.randomElement(using: &random) else { continue }
                running[id] = nil
                let host = grants.stop(id)
                #expect((host == nil) == left.contains(id))
            default:
                _ = grants.expireWaits(now: now)
            }
            let broken = grants.brokenRules()
            #expect(broken.isEmpty, "step \(step): \(broken)")
            if !broken.isEmpty { return }
        }
        // Everything stops: nothing is left running, and every host may take a download again.
        for id in running.keys { _ = grants.stop(id) }
        for socket in open.keys { _ = grants.closing(socket) }
        #expect(grants.brokenRules().isEmpty)
        for host in hosts { #expect(grants.mayStart(to: host)) }
    }
}
