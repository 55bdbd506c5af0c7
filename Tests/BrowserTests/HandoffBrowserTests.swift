import BrowserAgentAPI
import CommandTestSupport
import Foundation
import OrchardHTTP
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

    /// The sandbox and the Mac without Touch ID's browser, once the Mac and the phone hear each other.
    func macBrowserNearThePhone() async throws -> (BrowserSandbox, WebDriver) {
        let sandbox = try sandbox
        let mac = BrowserSandbox.handoffMac
        try await Self.waitUntil(mac, hears: BrowserSandbox.phone, in: sandbox)
        try await Self.waitUntil(BrowserSandbox.phone, hears: mac, in: sandbox)
        return (sandbox, try await sandbox.browser(for: mac))
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
        #expect(!phoneLog.contains("handoff: \(BrowserSandbox.mac) asks"), "\(phoneLog)")
        #expect(!phoneLog.contains("handoff: \(BrowserSandbox.mac)'s payment"), "\(phoneLog)")
    }

    /// U3: the phone's own sheet page (its agent's sheet secret) neither sees nor acts on the sheet the phone presented
    /// for the Mac's Handoff request, which waits for Face ID: only the sheets the agent presented for a page.
    static func phoneSheetPageCannotActOnTheHandoffSheet(_ sandbox: BrowserSandbox) async throws {
        let agent = try BrowserPurchaseTests.agentClient(sandbox, BrowserSandbox.phone)
        defer { agent.shutdown() }
        let secret = try await BrowserPurchaseTests.secret(agent, .sheet)
        let headers: HTTPHeaders = [
            "Sec-Fetch-Site": "same-origin", BrowserAgentAPI.secretHeader: secret, "Content-Type": "application/json",
        ]
        let pressed = try await agent.send(
            HTTPClientRequest(
                method: .post, url: BrowserAgentAPI.origin + BrowserAgentAPI.Route.screen + "/authenticate",
                headers: headers, body: Data(#"{"method":"face-id","success":true}"#.utf8)))
        #expect(pressed.status.code == 409, "\(String(decoding: pressed.body, as: UTF8.self))")
        let shown = try await agent.send(
            HTTPClientRequest(
                method: .get, url: BrowserAgentAPI.origin + BrowserAgentAPI.Route.screen, headers: headers))
        let screen = try JSONDecoder().decode(BrowserAgentAPI.SheetScreen.self, from: shown.body)
        #expect(screen.sheet == nil, "\(screen)")
        try await phoneSheetWaits(sandbox)
    }

    /// Waits until the phone's sheet (presented for the Mac's page) waits for its user.
    static func phoneSheetWaits(_ sandbox: BrowserSandbox) async throws {
        for _ in 0..<600 {
            let shown = try await orchard([
                "device", "sheet", "show", "--data-dir", sandbox.dataDirectory, "--name", BrowserSandbox.phone,
            ])
            if shown.status == 0, shown.stdout.filter({ !$0.isWhitespace }).contains(#""waitingFor":"user""#) {
                return
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw BrowserTestFailure("the phone's sheet never waited for its user")
    }

    /// On the Mac without Touch ID: the store, Tea in the cart, the Apple Pay button clicked; the Mac's sheet window
    /// listing the nearby devices.
    static func startHandoffPurchase(
        _ browser: WebDriver, script: String? = nil
    ) async throws -> (store: String, sheet: String) {
        try await browser.navigate(BrowserPurchaseTests.store)
        try await browser.wait("the Apple Pay button", until: "return document.body.dataset.applePay === 'available';")
        if let script { _ = try await browser.evaluate(script) }
        try await browser.click("button[data-item=Tea]")
        let storeWindow = try await browser.currentWindow
        let known = try await browser.windowHandles
        try await browser.click("#apple-pay")
        let sheet = try await browser.switchToNewWindow(besides: known)
        try await browser.wait(
            "the nearby phone on the sheet",
            until: "return document.getElementById('handoff-\(BrowserSandbox.phone)') !== null;")
        return (storeWindow, sheet)
    }

    @Test(
        "A Mac without Touch ID pays in Chromium with its phone near: the sheet lists Pay with iPhone, Face ID on the phone, the token reaches onpaymentauthorized; the phone's cancel reaches oncancel; payments on a Mac off: canMakePayments() false"
    )
    func macWithoutTouchIDPaysWithPhone() async throws {
        let (sandbox, browser) = try await macBrowserNearThePhone()
        var windows = try await Self.startHandoffPurchase(browser)
        let offered = try await browser.string("return document.getElementById('handoff').innerText;")
        #expect(offered.contains("Pay with iPhone") && offered.contains("•••• 1111 (visa, credit)"), "\(offered)")
        #expect(!offered.contains("4111111111111111"))
        try await browser.click("#handoff-\(BrowserSandbox.phone)")
        try await browser.wait("the Mac waits", until: "return document.title === 'Apple Pay: Waiting';")

        // On the phone: its sheet shows the store's payment; the user gives the contact and pays with Face ID.
        try await Self.phoneSheetWaits(sandbox)
        try await Self.giveContactOnPhone(sandbox)
        try await Self.phoneSheetPageCannotActOnTheHandoffSheet(sandbox)
        let faceID = try await orchard([
            "device", "sheet", "authenticate", "--data-dir", sandbox.dataDirectory, "--name", BrowserSandbox.phone,
            "--method", "face-id",
        ])
        #expect(faceID.status == 0, "\(faceID.stderr)")
        try await browser.wait("the Mac's sheet to finish", until: "return document.title === 'Apple Pay: Done';")
        try await browser.closeWindow()
        try await browser.switchTo(windows.store)
        try await browser.wait("the confirmation", until: "return location.pathname === '/confirmation';")
        let confirmation = try await browser.string(
            "return document.getElementById('confirmation').textContent;")
        #expect(confirmation.contains("is paid"), "\(confirmation)")
        let phoneLog = sandbox.log(of: BrowserSandbox.phone)
        #expect(phoneLog.contains("handoff: \(BrowserSandbox.handoffMac) asks for a payment"), "\(phoneLog)")

        // The phone's user cancels: nothing comes back, the Mac's page gets oncancel.
        windows = try await Self.startHandoffPurchase(browser)
        try await browser.click("#handoff-\(BrowserSandbox.phone)")
        try await Self.phoneSheetWaits(sandbox)
        let cancelled = try await orchard([
            "device", "sheet", "cancel", "--data-dir", sandbox.dataDirectory, "--name", BrowserSandbox.phone,
        ])
        #expect(cancelled.status == 0, "\(cancelled.stderr)")
        try await browser.wait(
            "the Mac's sheet to end", until: "return document.title.startsWith('Apple Pay: Payment not completed');")
        try await browser.closeWindow()
        try await browser.switchTo(windows.store)
        try await browser.wait(
            "oncancel", until: "return document.getElementById('status').textContent === 'Payment cancelled.';")

        // Payments on a Mac turned off on the phone: the Mac's page hears canMakePayments() false.
        for setting in ["off", "on"] {
            let changed = try await orchard([
                "device", "settings", "--data-dir", sandbox.dataDirectory, "--name", BrowserSandbox.phone,
                "--allow-payments-on-mac", setting,
            ])
            #expect(changed.status == 0, "\(changed.stderr)")
            try await browser.navigate(BrowserPurchaseTests.store)
            try await browser.wait(
                "canMakePayments() with payments on a Mac \(setting)",
                until: "return document.body.dataset.applePay === '\(setting == "off" ? "unavailable" : "available")';")
        }
    }

    /// The page's session kept as `window.testSession` (for `abort()`); with `dropAuthorization`, its
    /// `onpaymentauthorized` only notes the event (`window.testAuthorized`) and never completes the payment.
    static func keepSession(dropAuthorization: Bool = false) -> String {
        """
        const begin = ApplePaySession.prototype.begin;
        ApplePaySession.prototype.begin = function () {
            window.testSession = this;
            \(dropAuthorization ? "this.onpaymentauthorized = function () { window.testAuthorized = true; };" : "")
            return begin.call(this);
        };
        return true;
        """
    }

    /// The phone's sheet as `orchard device sheet show` prints it, without blanks.
    static func phoneSheet(_ sandbox: BrowserSandbox) async throws -> String {
        let shown = try await orchard([
            "device", "sheet", "show", "--data-dir", sandbox.dataDirectory, "--name", BrowserSandbox.phone,
        ])
        return shown.stdout.filter { !$0.isWhitespace }
    }

    /// Waits until the phone's sheet ended: with `status` (`cancelled`), or any (nil).
    static func phoneSheetEnds(_ sandbox: BrowserSandbox, _ status: String?) async throws {
        for _ in 0..<600 {
            let sheet = try await phoneSheet(sandbox)
            if let status, sheet.contains(#""status":"\#(status)""#) { return }
            if status == nil, sheet.contains(#""waitingFor":"nobody""#) { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw BrowserTestFailure("the phone's sheet never ended \(status ?? ""): \(try await phoneSheet(sandbox))")
    }

    /// The phone's user tries Face ID on its sheet: the exit status.
    /// The phone's user gives the shipping contact on its sheet.
    static func giveContactOnPhone(_ sandbox: BrowserSandbox) async throws {
        let contact = try await orchard([
            "device", "sheet", "contact", "--data-dir", sandbox.dataDirectory, "--name", BrowserSandbox.phone,
            "--contact-name", "Bob Appleseed", "--email", "bob@example.com", "--phone", "+1 555 0199", "--street",
            "2 Main St", "--city", "Springfield", "--state", "IL", "--postal-code", "62701", "--country", "US",
        ])
        #expect(contact.status == 0, "\(contact.stderr)")
    }

    static func authorizeOnPhone(_ sandbox: BrowserSandbox) async throws -> Int32 {
        try await orchard([
            "device", "sheet", "authenticate", "--data-dir", sandbox.dataDirectory, "--name", BrowserSandbox.phone,
            "--method", "face-id",
        ]).status
    }

    @Test(
        "Handoff: the page's abort() and the Mac's Cancel while the phone's sheet is up dismiss the phone's sheet without authorizing; a later authorization there is refused; the Mac's Cancel reaches oncancel"
    )
    func pageAbortAndMacCancelDismissThePhonesSheet() async throws {
        let (sandbox, browser) = try await macBrowserNearThePhone()

        // The page aborts while the phone's user looks at its sheet.
        var windows = try await Self.startHandoffPurchase(browser, script: Self.keepSession())
        try await browser.click("#handoff-\(BrowserSandbox.phone)")
        try await Self.phoneSheetWaits(sandbox)
        try await browser.switchTo(windows.store)
        _ = try await browser.evaluate("window.testSession.abort(); return true;")
        try await Self.phoneSheetEnds(sandbox, "cancelled")
        #expect(try await Self.authorizeOnPhone(sandbox) != 0)
        #expect(
            sandbox.log(of: BrowserSandbox.phone).contains(
                "handoff: \(BrowserSandbox.handoffMac) ended its payment (the page aborted"))
        try await browser.switchTo(windows.sheet)
        try await browser.wait(
            "the Mac's sheet to end", until: "return document.title.startsWith('Apple Pay: Payment not completed');")
        try await browser.closeWindow()
        try await browser.switchTo(windows.store)

        // The Mac's user cancels on the Mac's sheet while the phone's sheet is up.
        windows = try await Self.startHandoffPurchase(browser)
        try await browser.click("#handoff-\(BrowserSandbox.phone)")
        try await browser.wait("the Mac waits", until: "return document.title === 'Apple Pay: Waiting';")
        try await Self.phoneSheetWaits(sandbox)
        try await browser.click("#handoff-cancel")
        try await browser.wait("the Mac's sheet to end", until: "return document.title === 'Apple Pay: Cancelled';")
        try await Self.phoneSheetEnds(sandbox, "cancelled")
        #expect(try await Self.authorizeOnPhone(sandbox) != 0)
        try await browser.closeWindow()
        try await browser.switchTo(windows.store)
        try await browser.wait(
            "oncancel", until: "return document.getElementById('status').textContent === 'Payment cancelled.';")
        let macLog = sandbox.log(of: BrowserSandbox.handoffMac)
        #expect(
            macLog.contains("Handoff payment ended (the page aborted its session); \(BrowserSandbox.phone) is told"))
        #expect(macLog.contains("Handoff payment ended (cancelled); \(BrowserSandbox.phone) is told"))
    }

    @Test(
        "Handoff and the 30-second rule (4 s here): a page that does not complete the phone's payment gets oncancel and the phone's sheet is dismissed without completing"
    )
    func handlerTimeoutDismissesThePhonesSheet() async throws {
        let (sandbox, browser) = try await macBrowserNearThePhone()
        let windows = try await Self.startHandoffPurchase(
            browser, script: Self.keepSession(dropAuthorization: true))
        try await browser.click("#handoff-\(BrowserSandbox.phone)")
        try await Self.phoneSheetWaits(sandbox)
        try await Self.giveContactOnPhone(sandbox)
        // The phone's sheet waits for the page's verdict, which never comes.
        _ = try await Self.authorizeOnPhone(sandbox)
        try await Self.phoneSheetEnds(sandbox, nil)
        #expect(!(try await Self.phoneSheet(sandbox)).contains(#""status":"presented""#))
        try await browser.wait(
            "the Mac's sheet to end", seconds: 30,
            until: "return document.title.startsWith('Apple Pay: Payment not completed');")
        try await browser.closeWindow()
        try await browser.switchTo(windows.store)
        try await browser.wait(
            "oncancel", until: "return document.getElementById('status').textContent === 'Payment cancelled.';")
        #expect(try await browser.evaluate("return window.testAuthorized === true;") == "true")
        #expect(
            sandbox.log(of: BrowserSandbox.handoffMac).contains("the page did not complete its Handoff payment in time")
        )
        #expect(sandbox.log(of: BrowserSandbox.phone).contains("ended its payment (the page did not complete"))
    }
}
