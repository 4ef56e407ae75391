import CHaul

/// What the reactor's owner does on the loop thread.
///
/// Every method is called on the loop thread, and all but the two socket notes never inside a
/// libcurl callback, so an implementation may add and remove easy handles there.
package protocol ReactorDelegate: AnyObject {
    /// Another thread called ``Reactor/wake()``: the moment to drain its commands.
    func reactorWasWoken(_ reactor: Reactor)
    /// libcurl finished a transfer (successfully or not). The handle is still in the multi handle.
    func reactor(_ reactor: Reactor, requestDidEnd easy: UnsafeMutableRawPointer, result: CURLcode)
    /// The loop thread starts; nothing else ran on it yet.
    func reactorWillRun(_ reactor: Reactor)
    /// The loop ran every event that was ready and is about to wait for more: the moment to write
    /// out what the turn's callbacks collected (journal rows, background work) in one go.
    func reactorTurnDidEnd(_ reactor: Reactor)
    /// curl opened `socket` for a new connection of the request of the easy handle `easy`. Called
    /// inside curl (``EasyHandle/openSocketCallback``): an implementation only takes note.
    func reactor(_ reactor: Reactor, socketOpened socket: curl_socket_t, for easy: UnsafeMutableRawPointer)
    /// curl is about to close `socket` (a connection ends). Called inside curl
    /// (``Reactor/closeSocketCallback``), also while the multi handle is cleaned up: an
    /// implementation only takes note.
    func reactor(_ reactor: Reactor, socketWillClose socket: curl_socket_t)
    /// Whether work the delegate sent off the loop (a disk job, a hook) is still to report back:
    /// an embedded loop's ``Reactor/run(limit:)`` waits for it.
    var awaitsWorkOffLoop: Bool { get }
    /// The alarm the delegate set (``Reactor/setAlarm(after:)``) rang.
    func reactorAlarmRang(_ reactor: Reactor)
}

extension ReactorDelegate {
    package func reactor(_ reactor: Reactor, socketOpened socket: curl_socket_t, for easy: UnsafeMutableRawPointer) {}
    package func reactor(_ reactor: Reactor, socketWillClose socket: curl_socket_t) {}
    package var awaitsWorkOffLoop: Bool { false }
    package func reactorAlarmRang(_ reactor: Reactor) {}
}
