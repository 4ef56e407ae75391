/// A value handed between the caller and the queue's serial queue, which alone touches it.
struct UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
