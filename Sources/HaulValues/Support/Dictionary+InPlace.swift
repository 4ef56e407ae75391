extension Dictionary {
    /// Calls `body` on each value, in place. Iterating `keys` while writing through the subscript
    /// keeps a second reference to the storage, so each write copied the whole dictionary and, with
    /// it, the value it changed (an event buffer of thousands, copied for each event published).
    package mutating func mutateEachValue(_ body: (inout Value) throws -> Void) rethrows {
        var index = startIndex
        while index != endIndex {
            try body(&values[index])
            index = self.index(after: index)
        }
    }
}
