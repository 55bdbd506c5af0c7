import Foundation
import Testing
import WebDriverClient

/// Apple Pay on the web in a real Chromium (docs/web.md, "Apple Pay in a browser"): the demo store at
/// https://store.orchard.test loads orchard-pay.js from the Pay server, the device's browser agent verifies the
/// merchant session, and the user pays on the sheet page on the device's screen.
@Suite(
    "Apple Pay on the web in Chromium", .serialized, .browserSandbox,
    .enabled(if: Chromium.installed || Chromium.required, Chromium.hint))
struct BrowserPurchaseTests {
    static let store = "https://store.orchard.test/"

    var sandbox: BrowserSandbox {
        get throws {
            guard let sandbox = BrowserSandbox.current else { throw BrowserTestFailure("no browser sandbox") }
            return sandbox
        }
    }

    /// The store with `items` in the cart, the Apple Pay button clicked: the sheet's window, and the store's.
    static func startPurchase(
        _ browser: WebDriver, items: [String] = ["Tea"]
    ) async throws -> (store: String, sheet: String) {
        try await browser.navigate(store)
        try await browser.wait("the Apple Pay button", until: "return document.body.dataset.applePay === 'available';")
        for item in items { try await browser.click("button[data-item=\(item)]") }
        let storeWindow = try await browser.currentWindow
        let known = try await browser.windowHandles
        try await browser.click("#apple-pay")
        let sheet = try await browser.switchToNewWindow(besides: known)
        try await browser.wait("the sheet", until: "return !document.getElementById('details').hidden;")
        return (storeWindow, sheet)
    }

    /// Gives the shipping contact on the sheet (the current window).
    static func giveContact(_ browser: WebDriver) async throws {
        for (field, value) in [
            ("name", "Bob Appleseed"), ("email", "bob@example.com"), ("phone", "+1 555 0199"),
            ("street", "2 Main St"), ("city", "Springfield"), ("state", "IL"), ("postalCode", "62701"),
        ] {
            try await browser.type("#contact input[name=\(field)]", value)
        }
        try await browser.click("#use-contact")
        try await browser.wait(
            "the contact applied", until: "return !document.getElementById('contact-summary').hidden;")
    }

    /// Authenticates on the sheet with `method` and waits for the store's confirmation page.
    static func payAndConfirm(
        _ browser: WebDriver, method: String, windows: (store: String, sheet: String)
    ) async throws -> String {
        try await browser.click("#pay-\(method)")
        try await browser.wait("the sheet to finish", until: "return document.title === 'Apple Pay: Done';")
        try await browser.closeWindow()
        try await browser.switchTo(windows.store)
        try await browser.wait("the confirmation", until: "return location.pathname === '/confirmation';")
        return try await browser.string("return document.getElementById('confirmation').textContent;")
    }

    @Test(
        "A phone buys in the store in Chromium: orchard-pay.js, merchant session verified by the device, Face ID, approved"
    )
    func phoneBuys() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        let windows = try await Self.startPurchase(browser, items: ["Tea", "Scone"])
        let sheet = try await browser.string("return document.getElementById('details').innerText;")
        #expect(sheet.contains("Orchard Demo Store") && sheet.contains("store.orchard.test"), "\(sheet)")
        #expect(sheet.contains("Total 7.75 USD") && sheet.contains("•••• 1111 (visa, credit)"), "\(sheet)")
        #expect(!sheet.contains("4111111111111111"))
        try await Self.giveContact(browser)
        let confirmation = try await Self.payAndConfirm(browser, method: "face-id", windows: windows)
        #expect(confirmation.contains("is paid"), "\(confirmation)")
        let log = sandbox.log(of: BrowserSandbox.phone)
        #expect(log.contains("merchant session verified"), "\(log)")
        #expect(log.contains(#""detail":"success","event":"sheet-ended""#), "\(log)")
    }
}
