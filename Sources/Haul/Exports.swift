// A user imports `Haul` alone: the public types of the layers below (the values, the download handles,
// the queue's states) come with it, as NIO's `NIO` re-exports `NIOCore` and `NIOPosix`.
@_exported import HaulIO
@_exported import HaulValues
