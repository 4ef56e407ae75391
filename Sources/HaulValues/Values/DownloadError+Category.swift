extension DownloadError {
    /// What kind of failure it is, in the classes a script acts on differently: `haul` exits with a
    /// status of its own for each (see `haul --help`).
    package enum Category: Sendable, Hashable, CaseIterable {
        case invalidRequest
        case httpStatus
        case nameResolution
        case connection
        case tls
        case verification
        case localFiles
        case transfer
        case stopped
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
