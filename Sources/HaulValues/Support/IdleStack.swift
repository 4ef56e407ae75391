/// Idle resources kept for reuse (write buffers, easy handles), newest on top, with a trim that gives
/// back only what sat idle a whole period: a busy manager's burst of finished transfers keeps its
/// buffers and handles for the next ones, and an idle one frees them a period later.
package struct IdleStack<Element> {
    /// How many are kept at most; ``push(_:)`` refuses more.
    package let limit: Int
    package private(set) var items: [Element] = []
    /// The fewest items since the last trim: that many were not needed all along.
    private var fewest = 0

    package init(limit: Int) {
        self.limit = limit
    }

    /// The most recently idle item, if any.
    package mutating func pop() -> Element? {
        guard let item = items.popLast() else { return nil }
        fewest = min(fewest, items.count)
        return item
    }

    /// Keeps `item`, unless `limit` are kept already: then `false`, and the caller frees it.
    package mutating func push(_ item: Element) -> Bool {
        guard items.count < limit else { return false }
        items.append(item)
        return true
    }

    /// Removes and returns the items that stayed idle since the last trim (the oldest ones).
    package mutating func trim() -> [Element] {
        let unused = Array(items.prefix(fewest))
        items.removeFirst(unused.count)
        fewest = items.count
        return unused
    }

    /// Removes and returns every item.
    package mutating func removeAll() -> [Element] {
        defer {
            items = []
            fewest = 0
        }
        return items
    }
}
