import ArgumentParser
import Foundation
import Testing

@testable import Haul
@testable import HaulCLI
@testable import HaulValues

/// haul's error sentences name its options where the library's name its properties (issue 59,
/// item 5: the words are the command's, the library hands it the settings).
@Suite("haul: errors in its own words")
struct ErrorWordsTests {
    @Test("every setting an error's advice names is an option of haul's --help")
    func everySettingIsAnOption() {
        let help = HaulCommand.helpMessage(columns: 200)
        for setting in DownloadError.Setting.allCases {
            let option = DownloadError.option(for: setting)
            // "-H, or header= in the input file": its first word is the option.
            let flag = String(option.prefix { $0 != "," && $0 != " " })
            #expect(flag.hasPrefix("-") && help.contains(flag), "\(setting): \(option)")
        }
    }

    @Test("an error's sentence for haul names options, never the library's properties")
    func sentencesNameOptions() {
        let errors = [
            DownloadError(code: .transport, url: "http://h/a", curlCode: 60),
            DownloadError(code: .transport, url: "http://h/a", curlCode: 47),
            DownloadError(code: .transport, url: "http://h/a", curlCode: 28),
            DownloadError(code: .journal, url: nil, path: "/s/journal.sqlite", detail: "it is not a database"),
            DownloadError(code: .headersUnavailable, url: "http://h/a"),
            DownloadError(code: .fileTooLarge, url: "http://h/a"),
        ]
        let expected = [
            "(--ca-file)", "(--max-redirects)", "raise --stall-timeout", "again with -c:", "(-H, or header=",
            "--max-size",
        ]
        for (error, words) in zip(errors, expected) {
            let sentence = error.forCommandLine
            #expect(sentence.contains(words), "\(sentence)")
            #expect(!sentence.contains("Configuration.") && !sentence.contains("DownloadRequest."), "\(sentence)")
            #expect(error.description.contains("Configuration.") || error.description.contains("DownloadRequest."))
        }
    }
}
