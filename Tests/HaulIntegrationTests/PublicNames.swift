import Haul

// The tests speak the public API's names (issue 76, item 4): where a layer below keeps a type of
// the same name, the public one is meant unless the test names the layer's (`HaulIO.DownloadEvent`).
typealias DownloadEvent = Haul.DownloadEvent
typealias DownloadState = Haul.DownloadState
typealias DownloadWarning = Haul.DownloadWarning
typealias RestartReason = Haul.RestartReason
typealias DownloadProgress = Haul.DownloadProgress
typealias DownloadTimings = Haul.DownloadTimings
typealias RateLimits = Haul.RateLimits
typealias QueueState = Haul.QueueState
typealias DownloadHeader = Haul.DownloadHeader
typealias Checksum = Haul.Checksum
typealias DownloadID = Haul.DownloadID
typealias DownloadError = Haul.DownloadError
