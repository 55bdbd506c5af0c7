import Foundation
import Testing
import WebDriverClient

extension BrowserPurchaseTests {
    /// One check of the conformance page (web/store/conformance.js).
    struct ConformanceResult: Decodable {
        let version: String
        let check: String
        let expected: String
        let actual: String
    }

    @Test(
        "The Apple Pay JS API by version in Chromium: the conformance page's table passes for every version 1 to 14 (15 refused)"
    )
    func conformanceByVersion() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        try await browser.navigate("https://store.orchard.test/conformance")
        try await browser.wait("the agent's hello", until: "return document.body.dataset.ready === 'true';")
        try await browser.click("#run")
        try await browser.wait("the checks", until: "return document.body.dataset.done === 'true';")
        let json = try await browser.string("return JSON.stringify(window.conformance);")
        let results = try JSONDecoder().decode([ConformanceResult].self, from: Data(json.utf8))
        let versions = (1...14).map(String.init) + ["15", "all"]
        #expect(Set(results.map(\.version)) == Set(versions))
        // Every version 1 to 14 ran the whole table.
        let perVersion = Dictionary(grouping: results, by: \.version)
        let rows = perVersion["1"]?.count ?? 0
        #expect(rows >= 30, "the table has \(rows) checks")
        for version in versions {
            let checks = perVersion[version] ?? []
            if Int(version).map({ $0 <= 14 }) == true { #expect(checks.count == rows, "version \(version)") }
            let failed = checks.filter { $0.expected != $0.actual }
            #expect(
                failed.isEmpty,
                "version \(version): \(failed.map { "\($0.check): expected \($0.expected), got \($0.actual)" })")
        }
    }
}
