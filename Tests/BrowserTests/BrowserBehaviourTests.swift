import Foundation
import Testing
import WebDriverClient

extension BrowserPurchaseTests {
    @Test("A Mac with Touch ID buys in the store in Chromium")
    func macBuys() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.mac)
        let windows = try await Self.startPurchase(browser, items: ["Coffee"])
        try await Self.giveContact(browser)
        let confirmation = try await Self.payAndConfirm(browser, method: "touch-id", windows: windows)
        #expect(confirmation.contains("is paid"), "\(confirmation)")
        #expect(sandbox.log(of: BrowserSandbox.mac).contains("authorized by Touch ID"))
    }

    @Test("The user cancels on the sheet: the page's oncancel fires, nothing is charged")
    func cancel() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        let windows = try await Self.startPurchase(browser)
        try await browser.click("#cancel")
        try await browser.wait("the sheet to end", until: "return document.title === 'Apple Pay: Cancelled';")
        try await browser.closeWindow()
        try await browser.switchTo(windows.store)
        try await browser.wait(
            "oncancel", until: "return document.getElementById('status').textContent === 'Payment cancelled.';")
        #expect(sandbox.log(of: BrowserSandbox.phone).contains(#""outcome":"cancelled""#))
    }

    @Test("A face that does not match, then Face ID: the sheet stays up and the payment is approved")
    func failedThenGoodAuthentication() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        let windows = try await Self.startPurchase(browser)
        try await Self.giveContact(browser)
        try await browser.click("#pay-mismatch")
        try await browser.wait(
            "the rejection", until: "return document.getElementById('errors').textContent.startsWith('Not recognised');"
        )
        let confirmation = try await Self.payAndConfirm(browser, method: "face-id", windows: windows)
        #expect(confirmation.contains("is paid"), "\(confirmation)")
    }

    @Test("Express shipping chosen on the sheet: the page's update changes the total, which is charged")
    func shippingChangeUpdatesTotal() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        let windows = try await Self.startPurchase(browser)
        #expect(try await browser.string("return document.getElementById('total').textContent;") == "Total 4.50 USD")
        try await browser.click("#shipping-express")
        try await browser.wait(
            "the new total", until: "return document.getElementById('total').textContent === 'Total 9.50 USD';")
        try await Self.giveContact(browser)
        let confirmation = try await Self.payAndConfirm(browser, method: "face-id", windows: windows)
        #expect(confirmation.contains("is paid"), "\(confirmation)")
        let merchantLog =
            (try? String(contentsOfFile: sandbox.dataDirectory + "/logs/merchant.log", encoding: .utf8)) ?? ""
        #expect(merchantLog.contains(#""amount_minor":950"#), "\(merchantLog.suffix(600))")
    }
}
