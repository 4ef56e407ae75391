/// A value that takes no part in its owner's equality and hash.
struct Unhashed<Value: Sendable>: Hashable, Sendable {
    var value: Value
    static func == (lhs: Self, rhs: Self) -> Bool { true }
    func hash(into hasher: inout Hasher) {}
}
