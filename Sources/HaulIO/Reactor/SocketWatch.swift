import CHaul

/// One per socket curl asks us to watch; its libevent `struct event` lives inside it and is
/// re-assigned when curl changes the flags it wants, or when the watch is reused for another socket.
final class SocketWatch {
    let event: OpaquePointer
    private(set) var armed = false
    /// The socket and the events it watches while armed.
    private(set) var socket: curl_socket_t = -1
    private(set) var flags: Int16 = 0
    /// Whether it may be parked when curl stops watching its socket (``SocketWatches``).
    var parkable = false

    init() {
        event = OpaquePointer(
            UnsafeMutableRawPointer.allocate(byteCount: event_get_struct_event_size(), alignment: 16)
        )
    }

    func arm(
        base: OpaquePointer,
        socket: curl_socket_t,
        flags: Int16,
        callback: event_callback_fn,
        argument: UnsafeMutableRawPointer
    ) {
        // Armed already as asked (a parked watch handed back): nothing to change.
        if armed, socket == self.socket, flags == self.flags { return }
        if armed { event_del(event) }
        event_assign(event, base, socket, flags, callback, argument)
        event_add(event, nil)
        armed = true
        self.socket = socket
        self.flags = flags
    }

    /// Stops watching (curl no longer wants the socket); the watch may be armed again for another.
    func disarm() {
        if armed { event_del(event) }
        armed = false
    }

    deinit {
        disarm()
        UnsafeMutableRawPointer(event).deallocate()
    }
}
