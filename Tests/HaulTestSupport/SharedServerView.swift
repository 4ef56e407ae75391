import Foundation

/// A test's view of a server the test process shares (issue 75, item 2): the folder its URLs and
/// files go under, and its entry in the ``Watchdog`` until it ends, so that a view a test forgets
/// to stop is a leak the watchdog reports. ``NginxServer`` and ``FaultServer`` views hold one.
final class SharedServerView: @unchecked Sendable {
    // @unchecked Sendable: `token` is guarded by `state`.
    /// How every view's folder begins: the fault server's router and nginx's `$haul_view` map
    /// recognise a view's folder by it.
    static let folderPrefix = "t-"

    /// `t-` and 13 characters of a UUID: unique among the process's views.
    let folder: String
    private let state = NSLock()
    private var token: Int?

    /// `what`: the server, as the watchdog names it ("nginx", "fault server :PORT").
    init(of what: String) {
        folder = Self.folderPrefix + UUID().uuidString.prefix(13).lowercased()
        let token = Watchdog.shared.started("\(what) (shared, folder \(folder))") { [weak self] in
            !(self?.hasEnded ?? true)
        }
        state.withLock { self.token = token }
    }

    var hasEnded: Bool { state.withLock { token == nil } }

    /// Ends the view; true the first time only, when the caller has the view's resources to give back.
    func end() -> Bool {
        let token: Int? = state.withLock {
            defer { self.token = nil }
            return self.token
        }
        guard let token else { return false }
        Watchdog.shared.stopped(token)
        return true
    }
}
