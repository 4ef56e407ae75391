extension DownloadError {
    /// What kind of failure it is, in the classes a script acts on differently: `haul` exits with a
    /// status of its own for each (see `haul --help`).
    package enum Category: Sendable, Hashable, CaseIterable {
        /// The request itself cannot be made: an invalid URL, an unsupported scheme, a bad header, a
        /// destination that cannot take it (a block device), header values that are not available.
        case invalidRequest
        /// The server answered with an HTTP error status (after any retries).
        case httpStatus
        /// A host name (the server's, or the proxy's) could not be resolved.
        case nameResolution
        /// No connection: refused, the host or network unreachable, or connecting timed out.
        case connection
        /// The TLS handshake or the certificate's verification failed.
        case tls
        /// The file failed a check: its checksum, its expected size, the maximum size.
        case verification
        /// Local files: the disk is full or unwritable, the state directory or journal cannot be used.
        case localFiles
        /// The transfer failed midway: a dropped or stalled connection, or a server that misbehaves
        /// (ranges, lengths, error pages, redirects).
        case transfer
        /// The download was cancelled or its manager shut down.
        case stopped
        /// Anything else (an internal failure, a destination another download is writing).
        case other

        /// The class's name, as in Swift (`httpStatus`, `connection`…): what a queue stores.
        package var name: String { "\(self)" }

        /// The class named `name` (``name``), or `nil`.
        package init?(name: String) {
            guard let found = Self.allCases.first(where: { $0.name == name }) else { return nil }
            self = found
        }
    }

    /// Where a transport failure happened (``DownloadError/stage``).
    package enum TransportStage: Hashable, Sendable {
        /// No connection to the server was made: refused, unreachable, or connecting (or resolving)
        /// timed out.
        case connecting
        /// No connection to the proxy was made: the address curl could not reach is the proxy's.
        case connectingToProxy
        /// Connected, then nothing arrived for the stall timeout: Haul's own sweep ended the request.
        case stalled
    }

    /// No connection was made, to the server or to the proxy (``stage``).
    var failedToConnect: Bool { stage == .connecting || stage == .connectingToProxy }

    /// The class of this failure (see ``Category``).
    package var category: Category {
        switch code.base {
        case .invalidURL, .unsupportedScheme, .invalidHeader, .headersUnavailable, .unsupportedDestination:
            return .invalidRequest
        case .httpStatus:
            return .httpStatus
        case .transport:
            switch curlCode {
            case 5, 6: return .nameResolution
            case 7: return .connection
            case 28 where failedToConnect: return .connection
            case 35, 58, 59, 60, 77, 83, 90, 91: return .tls
            default: return .transfer
            }
        case .checksumMismatch, .fileTooLarge:
            return .verification
        case .fileSystem, .journal, .journalLocked, .unsafeFile, .untrustedDestination:
            return .localFiles
        case .sizeMismatch, .rangeNotHonored, .unexpectedAnswer, .streamCannotRestart:
            return .transfer
        case .shutdown, .cancelled:
            return .stopped
        case .destinationInUse, .internalError:
            return .other
        }
    }
}
