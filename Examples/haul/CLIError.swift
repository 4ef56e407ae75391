import Haul

extension DownloadError {
    /// The error's sentence in haul's words: its advice names options (`--ca-file`), never the
    /// library's properties.
    var forCommandLine: String { describe(forCommandLine: true) }
}

/// A failure of the command itself (not of one download), printed as one line.
struct CLIError: Error, CustomStringConvertible {
    let description: String
    /// The exit status it ends the run with (``ExitStatus``): a mistake in the arguments or the
    /// list by default; ``ExitStatus/localFiles`` for a file or folder that cannot be read or made.
    let exitStatus: Int32
    init(_ description: String, exitStatus: Int32 = ExitStatus.usage) {
        self.description = description
        self.exitStatus = exitStatus
    }
}
