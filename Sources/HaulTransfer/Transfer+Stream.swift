import CHaul
import HaulValues

/// A download into a stream (a device, a FIFO, standard output; ``StreamTarget``): each chunk is
/// written as it comes; a reader that falls behind holds the transfer (curl keeps the next chunk
/// paused, as for the rate limiter) until the descriptor is writable again; the download completes
/// once every byte reached the reader.
extension Transfer {
    /// Called by the write callback before a chunk: whether the chunk must wait (the reader has not
    /// taken the bytes before it). Then its request is held (``Connection/heldBy``) and curl keeps the chunk.
    func holdsForReader() -> Bool {
        guard let stream, stream.hasPending else { return false }
        do {
            if try stream.flushPending() { return false }
        } catch {
            bodyFailed(attributed(error))
            return false  // the chunk is refused with the error
        }
        own.heldBy = .reader
        watchStream()
        return true
    }

    /// Arms the watch on the stream's descriptor (made once per request).
    private func watchStream() {
        guard let stream else { return }
        if streamWatch == nil {
            streamWatch = environment.reactor.watchWritable(stream.descriptor) { [unowned self] in readerCaughtUp() }
        }
        streamWatch?.arm()
    }

    /// The stream's descriptor can be written: the pending bytes go; once none is left, the transfer
    /// goes on (curl gives the chunk it kept again, inside `curl_easy_pause`), or completes.
    private func readerCaughtUp() {
        guard let stream else { return }
        var failure: DownloadError?
        do {
            guard try stream.flushPending() else {
                watchStream()
                return
            }
        } catch {
            failure = attributed(error)
        }
        if let finishing = streamFinishing {
            streamFinishing = nil
            closeStreamWatch()
            finishing(failure.map { .failure($0) } ?? .success(stream.delivered))
            return
        }
        if let failure { bodyFailed(failure) }
        own.letGo(by: .reader)
    }

    /// The body is complete: `done` is called, on the loop thread, once every byte reached the
    /// reader (with how many were written), or with the error that stopped them.
    func finishStream(_ done: @escaping (Result<Int64, DownloadError>) -> Void) {
        streamFinishing = done
        readerCaughtUp()  // completes now when nothing is pending; else once the reader took it
    }

    /// Frees the watch (the request ended).
    func closeStreamWatch() {
        streamWatch?.close()
        streamWatch = nil
    }
}
