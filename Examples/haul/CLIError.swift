import Haul

extension DownloadError {
    /// The error's sentence in haul's words: its advice names options (`--ca-file`), never the
    /// library's properties.
    var forCommandLine: String { description(naming: Self.option(for:)) }

    /// The option of haul that sets `setting`.
    static func option(for setting: Setting) -> String {
        switch setting {
        case .proxy: "--proxy"
        case .connectTimeout: "--connect-timeout"
        case .stallTimeout: "--stall-timeout"
        case .maximumRedirects: "--max-redirects"
        case .certificateAuthorityFile: "--ca-file"
        case .decodesCompression: "--compressed"
        case .maxConcurrentDownloads: "-j"
        case .stateDirectory: "--state"
        case .maximumFileSize: "--max-size"
        case .resumesWithoutValidator: "--resume-unvalidated"
        case .continuesExistingFile: "-c"
        case .headers: "-H, or header= in the input file"
        }
    }
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
