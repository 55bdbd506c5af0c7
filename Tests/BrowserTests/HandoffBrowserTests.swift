import CommandTestSupport
import Foundation
import Testing
import WebDriverClient

/// Handoff and the browser (docs/handoff.md): the phone and the Mac of the sandbox approved for each other, in one
/// room, each hearing the other's advertisements.
@Suite(
    "Handoff in Chromium", .serialized, .pairedBrowserSandbox,
    .enabled(if: Chromium.installed || Chromium.required, Chromium.hint))
struct HandoffBrowserTests {
    var sandbox: BrowserSandbox {
        get throws {
            guard let sandbox = BrowserSandbox.current else { throw BrowserTestFailure("no browser sandbox") }
            return sandbox
        }
    }

    /// Waits until `device` hears `other` (`orchard device nearby`).
    static func waitUntil(_ device: String, hears other: String, in sandbox: BrowserSandbox) async throws {
        for _ in 0..<600 {
            let nearby = try await orchard(["device", "nearby", "--data-dir", sandbox.dataDirectory, "--name", device])
            if nearby.status == 0, nearby.stdout.contains("\"\(other)\"") { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw BrowserTestFailure("\(device) does not hear \(other)")
    }

    @Test("A Mac with Touch ID and its phone near pays itself in Chromium: no Handoff message reaches the phone")
    func macWithTouchIDPaysItself() async throws {
        let sandbox = try sandbox
        try await Self.waitUntil(BrowserSandbox.mac, hears: BrowserSandbox.phone, in: sandbox)
        try await Self.waitUntil(BrowserSandbox.phone, hears: BrowserSandbox.mac, in: sandbox)
        let browser = try await sandbox.browser(for: BrowserSandbox.mac)
        let windows = try await BrowserPurchaseTests.startPurchase(browser, items: ["Coffee"])
        try await BrowserPurchaseTests.giveContact(browser)
        let confirmation = try await BrowserPurchaseTests.payAndConfirm(
            browser, method: "touch-id", windows: windows)
        #expect(confirmation.contains("is paid"), "\(confirmation)")
        #expect(sandbox.log(of: BrowserSandbox.mac).contains("authorized by Touch ID"))
        // The relay between them works (the Mac's advertising key came over it), and the Mac sent the phone neither a
        // discovery nor a payment request.
        let phoneLog = sandbox.log(of: BrowserSandbox.phone)
        #expect(phoneLog.contains("radio: \(BrowserSandbox.mac)'s advertising key received"), "\(phoneLog)")
        #expect(!phoneLog.contains("handoff relay: \(BrowserSandbox.mac) asks"), "\(phoneLog)")
        #expect(!phoneLog.contains("handoff: \(BrowserSandbox.mac)"), "\(phoneLog)")
    }
}
