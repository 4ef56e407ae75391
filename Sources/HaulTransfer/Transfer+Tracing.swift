import FoundationEssentials
import HaulValues
import Tracing

/// A span per attempt (swift-distributed-tracing), with OpenTelemetry's HTTP client attributes: a
/// request and the redirects it follows, from its start to the next attempt or the transfer's end.
/// Its parent is the caller's service context when it asked for the download. With the no-op tracer
/// (nothing bootstrapped) no attribute is built.
extension Transfer {
    /// An attempt begins (its request's range known): the last one's span ends.
    func startSpan() {
        endSpan()
        attemptsStarted += 1
        download.ledger.withLock { $0.requestStarted() }
        let span = environment.tracer.startAnySpan("GET", context: serviceContext ?? .topLevel, ofKind: .client)
        self.span = span
        spanStartBytes = sink?.receivedLength ?? 0
        guard span.isRecording else { return }
        span.attributes["http.request.method"] = "GET"
        span.attributes["url.full"] = urlForErrors  // without user name and password
        let url = download.url
        if let host = url.host {
            span.attributes["server.address"] = host
            span.attributes["server.port"] = url.port ?? (url.scheme?.lowercased() == "https" ? 443 : 80)
        }
        // Sent before, for this download: earlier failures' attempts and this admission's.
        let resends = record.failures + attemptsStarted - 1
        if resends > 0 { span.attributes["http.request.resend_count"] = resends }
        if own.rangeStart > 0 { span.attributes["haul.range.first"] = Int(own.rangeStart) }
    }

    /// The attempt's answer had `status` (an error status marks the span failed).
    func spanAnswered(status: Int) {
        guard let span, span.isRecording else { return }
        span.attributes["http.response.status_code"] = status
        if status >= 400 { span.setStatus(SpanStatus(code: .error)) }
    }

    /// The attempt failed with `error`.
    func spanFailed(_ error: DownloadError) {
        guard let span, span.isRecording else { return }
        span.recordError(error)
        span.setStatus(SpanStatus(code: .error, message: error.code.description))
    }

    /// The attempt ended: its body's size is what it added, and the span ends.
    func endSpan() {
        guard let span else { return }
        self.span = nil
        if span.isRecording {
            let bytes = (sink?.receivedLength ?? segmentedBytes ?? spanStartBytes) - spanStartBytes
            span.attributes["http.response.body.size"] = Int(max(0, bytes))
        }
        span.end()
    }
}
