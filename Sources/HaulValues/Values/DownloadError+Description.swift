import CHaul
import FoundationEssentials
import Glibc

extension DownloadError {
    /// A setting that the advice of an error's ``DownloadError/description`` names: a property of
    /// ``DownloadManager/Configuration`` or of ``DownloadRequest``. A program built on Haul names each
    /// in its own words with ``DownloadError/description(naming:)`` (`haul` gives its options:
    /// `--ca-file` for ``certificateAuthorityFile``).
    package enum Setting: String, Sendable, Hashable, CaseIterable {
        case proxy
        case connectTimeout
        case stallTimeout
        case maximumRedirects
        case certificateAuthorityFile
        case decodesCompression
        case maxConcurrentDownloads
        case stateDirectory
        case maximumFileSize
        case resumesWithoutValidator
        case continuesExistingFile
        case headers

        /// The setting as the library's ``DownloadError/description`` names it: `Configuration.stallTimeout`.
        package var libraryName: String {
            switch self {
            case .continuesExistingFile: "DownloadRequest.continuesExistingFile"
            case .headers: "DownloadRequest.headers, or Configuration.headerProvider"
            default: "Configuration.\(rawValue)"
            }
        }
    }

    /// ``description`` with the settings its advice names in the caller's words, `name` giving
    /// each one's (a command-line tool's options, say); ``description`` is this with
    /// ``Setting/libraryName``.
    package func description(naming name: (Setting) -> String) -> String {
        let subject = url.map { "Downloading \($0)" } ?? "Haul"
        switch code.base {
        case .invalidURL, .unsupportedScheme, .invalidHeader:
            return requestDescription(subject: subject)
        case .httpStatus, .transport, .rangeNotHonored, .sizeMismatch, .unexpectedAnswer, .streamCannotRestart:
            return answerDescription(subject: subject, naming: name)
        case .fileSystem, .journal, .journalLocked, .checksumMismatch, .fileTooLarge, .destinationInUse,
            .unsupportedDestination, .unsafeFile, .untrustedDestination:
            return localDescription(subject: subject, naming: name)
        case .shutdown, .cancelled, .internalError, .headersUnavailable:
            return endingDescription(subject: subject, naming: name)
        }
    }

    /// What the request itself got wrong (its URL, a header): nothing was sent.
    private func requestDescription(subject: String) -> String {
        switch code.base {
        case .invalidURL:
            return "\(url.map { "'\($0)'" } ?? "The URL") is not a valid URL: \(detail ?? "it could not be parsed"). "
                + "Check the spelling; Haul needs an absolute http:// or https:// URL with a host."
        case .unsupportedScheme:
            return "\(url.map { "'\($0)'" } ?? "The URL") uses \(detail ?? "a scheme") Haul does not download: "
                + "only http:// and https:// URLs are supported."
        case .invalidHeader:
            let what = url == nil ? "The download manager was not started" : "\(subject) was not queued"
            return "\(what): \(detail ?? "a request header cannot be sent"). Fix or remove that header."
        default:
            preconditionFailure("\(code) is described by another group")
        }
    }

    /// What the server answered, or how the transfer of its answer failed.
    private func answerDescription(subject: String, naming name: (Setting) -> String) -> String {
        switch code.base {
        case .httpStatus:
            let status = httpStatus.map(String.init) ?? "an error status"
            return "\(subject) failed: the server answered HTTP \(status)\(Self.reason(forStatus: httpStatus)). "
                + Self.advice(forStatus: httpStatus, setting: name)
        case .transport:
            let cause =
                detail ?? curlCode.map { String(cString: curl_easy_strerror(CURLcode(UInt32($0)))) } ?? "unknown"
            return "\(subject) failed: \(cause)\(curlCode.map { " (curl error \($0))" } ?? ""). "
                + Self.advice(
                    forCurlCode: curlCode,
                    kept: !nothingKept,
                    proxy: stage == .connectingToProxy,
                    connecting: failedToConnect,
                    setting: name
                ) + decodedBodyNote(setting: name)
        case .rangeNotHonored:
            return "\(subject) failed: the server did not answer the byte range that was asked for "
                + "\(detail.map { "(\($0)) " } ?? "")even after restarting from zero; nothing was spliced. "
                + "Try again later or use another mirror."
        case .sizeMismatch:
            // Nothing kept (a stream's bytes went through; a file got none): nothing to resume.
            return "\(subject) failed: \(detail ?? "the body was shorter than the server announced"). "
                + (nothingKept
                    ? "Try again later; the download starts from its first byte."
                    : "Resume the download to fetch the rest.") + decodedBodyNote(setting: name)
        case .unexpectedAnswer:
            return "\(subject) failed: \(detail ?? "the server's answer is not the file"). Nothing on disk was "
                + "replaced; try again later (the server may be overloaded)."
        case .streamCannotRestart:
            let option = "Turn on \(name(.resumesWithoutValidator)) to continue such a "
            let advice = suggestsUnvalidatedResume ? option + "stream after checking its last bytes, or ask" : "Ask"
            return "\(subject) failed: \(detail ?? "it would have to start over"). \(advice) for the download again "
                + "to get the whole file from its start."
        default:
            preconditionFailure("\(code) is described by another group")
        }
    }

    /// What went wrong on this machine: its files, its journal, its destination, a check of the bytes.
    private func localDescription(subject: String, naming name: (Setting) -> String) -> String {
        switch code.base {
        case .fileSystem:
            let cause = errno.map { String(cString: strerror($0)) } ?? detail ?? "an I/O error"
            // Only a partial file's own failure says it is kept: before one exists (the state
            // directory, the journal) there is nothing to keep.
            let kept = !nothingKept && path?.hasSuffix(".part") == true ? "; the partial file is kept" : ""
            return "\(subject) failed writing \(path.map { "'\($0)'" } ?? "a local file"): \(cause)"
                + "\(detail.map { " (\($0))" } ?? ""). \(fileSystemAdvice(kept: kept, setting: name))"
        case .journal:
            return
                "\(subject) failed: the journal \(path.map { "'\($0)'" } ?? "") cannot be used: \(detail ?? "unknown error"). "
                + "Move it away or choose another state directory (\(name(.stateDirectory))); no downloaded file was touched. "
                + "Then ask for the downloads again with \(name(.continuesExistingFile)): each file already at its "
                + "destination is proven against the server (its length and last bytes, asked for with a range) and "
                + "kept, not fetched again, and the partial files left in the state directory are continued."
        case .journalLocked:
            return
                "\(subject) failed: the state directory's journal \(path.map { "'\($0)'" } ?? "") is in use by another "
                + "Haul process or manager that holds it alone (one taking it over, or an older Haul), or did not let a "
                + "write in for 10 s. Wait for it to finish, or choose another state directory (\(name(.stateDirectory)))."
        case .checksumMismatch:
            return "\(subject) failed: \(detail ?? "the file is not the expected one"). Nothing was placed at the "
                + "destination and the partial file was deleted; check the expected value, or the source."
        case .fileTooLarge:
            let limit =
                exceededMaximumSizeArgument
                ? "the maximumSize given to data(from:headers:maximumSize:)"
                : "the maximum size (\(name(.maximumFileSize)))"
            return "\(subject) failed: \(detail ?? "the file is larger than the configured maximum"). "
                + "Raise \(limit) to fetch it."
        case .destinationInUse:
            return "\(subject) failed: \(detail ?? "another download") is already writing to "
                + "\(path.map { "'\($0)'" } ?? "the same destination"); nothing was sent. Wait for that download to "
                + "end, cancel it, or choose another destination."
        case .unsupportedDestination:
            return "\(subject) failed: \(path.map { "'\($0)'" } ?? "the destination") is "
                + "\(detail ?? "not a regular file"); nothing there was changed. Give another destination."
        case .unsafeFile:
            return "\(subject) failed: \(path.map { "'\($0)'" } ?? "a file in the state directory") is "
                + "\(detail ?? "not a file Haul made"); Haul wrote nothing through it and left it as it is. "
                + "Remove it (it is not Haul's) or choose another state directory "
                + "(\(name(.stateDirectory))), then try again."
        case .untrustedDestination:
            return "\(subject) failed: \(path.map { "'\($0)'" } ?? "the destination") is "
                + "\(detail ?? "another user's link in a shared folder"); nothing was written through it. Remove it (or "
                + "ask its owner to), or choose a destination outside that folder, then try again."
        default:
            preconditionFailure("\(code) is described by another group")
        }
    }

    /// How a download stopped without failing (a shutdown, a cancel), or could not go on by itself.
    private func endingDescription(subject: String, naming name: (Setting) -> String) -> String {
        switch code.base {
        case .shutdown where path != nil:
            return "\(subject) stopped because \(detail ?? "its download manager shut down"); nothing was written to "
                + "'\(path!)'. Ask for the download again."
        case .shutdown:
            return "\(subject) stopped because its download manager shut down; the partial file is kept "
                + "and a new manager with the same state directory resumes it."
        case .cancelled:
            return "\(subject) was cancelled; its partial file was deleted."
        case .internalError:
            return "\(subject) failed: \(detail ?? "an internal resource was not available")"
                + "\(errno.map { ": \(String(cString: strerror($0)))" } ?? "")."
        case .headersUnavailable:
            return "\(subject) was not resumed: \(detail ?? "it needs request headers whose values are not stored"). "
                + "Header values are never written to disk: ask for the download again with its headers "
                + "(\(name(.headers))). The partial file is kept."
        default:
            preconditionFailure("\(code) is described by another group")
        }
    }
}
