import Foundation

/// Every byte under `directory`: each file's path and contents (journal, WAL, partial files, the
/// finished files), for tests that look for a secret that must never reach the disk.
func everyByte(under directory: URL) -> Data {
    var all = Data()
    let walker = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)
    while let url = walker?.nextObject() as? URL {
        all.append(Data(url.path.utf8))
        if let contents = FileManager.default.contents(atPath: url.path) { all.append(contents) }
    }
    return all
}
