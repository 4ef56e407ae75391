import Haul

extension Download {
    /// Asks for a pause without awaiting it (the synchronous form: a worker's turn goes on, and the
    /// download's end comes on its manager's feed).
    func askToPause() {
        let pause: () -> Void = self.pause
        pause()
    }

    /// Asks for a cancellation without awaiting it (as ``askToPause()``).
    func askToCancel() {
        let cancel: () -> Void = self.cancel
        cancel()
    }
}
