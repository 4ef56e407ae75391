/// When the row must take an accepted answer's validators: a resume trusts the row's validators
/// for the bytes in the partial file, so the row must have this answer's before any of its bytes
/// is written there.
enum RowTiming: Equatable {
    /// Not before the transfer is set aside: the row of a stream, a body in memory or a discard is
    /// this process's alone, and read again only by a later transfer of it, after this one set it
    /// aside (a pause, a retry's wait), which writes the row whole. Nothing on disk trusts it.
    case whenSetAside
    /// At once: other connections write their segments from this turn's end, or the partial holds
    /// bytes that the row's old validators vouch for.
    case now
    /// Just before the answer's first byte is written: a download that ends inside its buffer
    /// writes its row once, at completion, instead of twice.
    case beforeFirstWrite
}
