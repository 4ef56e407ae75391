/// A value that takes no part in its owner's equality and hash.
package struct Unhashed<Value: Sendable>: Hashable, Sendable {
    package var value: Value
    package init(value: Value) { self.value = value }
    package static func == (lhs: Self, rhs: Self) -> Bool { true }
    package func hash(into hasher: inout Hasher) {}
}
