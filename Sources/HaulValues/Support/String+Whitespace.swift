/// Trimming that Foundation's `CharacterSet` used to provide: Haul links FoundationEssentials only
/// (the whole of Foundation, with ICU, added about 6 MB of resident memory to every process that
/// uses Haul).
extension StringProtocol {
    /// Without leading and trailing spaces, tabs, carriage returns and line feeds.
    package var trimmingWhitespace: String { String(trimmedWhitespace) }

    /// Without leading and trailing spaces, tabs, carriage returns and line feeds, as a slice (no copy).
    package var trimmedWhitespace: SubSequence {
        func isSpace(_ character: Character) -> Bool {
            character == " " || character == "\t" || character == "\r" || character == "\n" || character == "\r\n"
        }
        guard let first = firstIndex(where: { !isSpace($0) }) else { return self[endIndex...] }
        let last = lastIndex(where: { !isSpace($0) })!
        return self[first...last]
    }
}
