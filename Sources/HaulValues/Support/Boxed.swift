/// An immutable value on the heap: a field that is set seldom or for a moment costs a pointer in
/// the struct that holds it instead of its whole size. Replaced, never changed in place, so copies
/// of the holder keep value semantics.
package final class Boxed<Value> {
    package let value: Value

    package init(_ value: Value) {
        self.value = value
    }
}

extension Boxed: Sendable where Value: Sendable {}
