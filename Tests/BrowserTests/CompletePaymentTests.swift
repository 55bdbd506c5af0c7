import CommandTestSupport
import Foundation
import Testing
import WebDriverClient

extension BrowserPurchaseTests {
    /// A page of store.orchard.test whose own session (a genuine merchant session for the store) answers its first
    /// authorization with `firstResult` (JavaScript) and any later one with SUCCESS; the sheet's window is current.
    /// Its `onvalidatemerchant` hands the first merchant session, and a second one (made fresh when
    /// `freshSession`, else the same again) when the device asks again.
    static func beginOwnSession(
        _ sandbox: BrowserSandbox, _ browser: WebDriver, firstResult: String, freshSession: Bool = false
    ) async throws -> (store: String, sheet: String) {
        var sessions: [String] = []
        for _ in 0..<(freshSession ? 2 : 1) {
            sessions.append(try await sandbox.merchantSession())
        }
        try await browser.navigate(store)
        try await browser.wait("the Apple Pay button", until: "return document.body.dataset.applePay === 'available';")
        let storeWindow = try await browser.currentWindow
        let known = try await browser.windowHandles
        try await gestureButton(
            browser,
            """
            window.__payments = 0; window.__cancelled = false; window.__validations = 0;
            const sessions = [\(sessions.joined(separator: ", "))];
            const session = new ApplePaySession(3, Object.assign(\(request),
                { requiredShippingContactFields: ['postalAddress'] }));
            window.__session = session;
            session.onvalidatemerchant = () => {
                window.__validations += 1;
                session.completeMerchantValidation(sessions[Math.min(window.__validations, sessions.length) - 1]);
            };
            session.onshippingcontactselected = () => session.completeShippingContactSelection(
                { newTotal: { label: 'Orchard Demo Store', amount: '1.00' } });
            session.onpaymentauthorized = (event) => {
                window.__payments += 1;
                session.completePayment(window.__payments === 1 ? \(firstResult) : ApplePaySession.STATUS_SUCCESS);
            };
            session.oncancel = () => { window.__cancelled = true; };
            session.begin();
            return 'begun';
            """)
        let sheet = try await browser.switchToNewWindow(besides: known)
        try await browser.wait("the sheet", until: "return !document.getElementById('details').hidden;")
        return (storeWindow, sheet)
    }

    static let springfieldError = """
        { status: ApplePaySession.STATUS_FAILURE, errors: [new ApplePayError('shippingContactInvalid', \
        'postalAddress', 'We do not ship to Springfield.')] }
        """

    @Test(
        "completePayment FAILURE with an ApplePayError: the sheet stays with the error at the contact, the page hands a fresh merchant session, the user corrects the contact and authorizes again: a second token, paid"
    )
    func failureWithContactErrorKeepsSheet() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        let logged = sandbox.log(of: BrowserSandbox.phone).count
        let windows = try await Self.beginOwnSession(
            sandbox, browser, firstResult: Self.springfieldError, freshSession: true)
        try await Self.giveContact(browser)
        try await browser.click("#pay-face-id")
        // The sheet stays, the page's error next to the contact form, open again for the correction.
        try await browser.wait(
            "the error at the contact",
            until: """
                return document.getElementById('contact-errors').textContent === 'We do not ship to Springfield.'
                    && !document.getElementById('contact').hidden;
                """)
        #expect(try await browser.string("return document.title;") != "Apple Pay: Done")
        // The user corrects the city; the page's answer to the new contact clears the error.
        _ = try await browser.evaluate(
            "document.querySelector('#contact input[name=city]').value = 'Chicago'; return true;")
        try await browser.click("#use-contact")
        try await browser.wait(
            "the corrected contact and the fresh session",
            until: """
                return document.getElementById('contact-errors').hidden && document.getElementById('contact').hidden
                    && !document.getElementById('pay-face-id').disabled;
                """)
        // The second authorization binds the fresh merchant session: a second token.
        try await browser.click("#pay-face-id")
        try await browser.wait("the sheet to finish", until: "return document.title === 'Apple Pay: Done';")
        try await browser.closeWindow()
        try await browser.switchTo(windows.store)
        try await browser.wait("the second payment", until: "return window.__payments === 2;")
        #expect(try await browser.string("return [window.__validations, window.__cancelled].join(',');") == "2,false")
        let log = String(sandbox.log(of: BrowserSandbox.phone).dropFirst(logged))
        #expect(log.contains("the sheet stays"), "\(log.suffix(800))")
        #expect(log.contains("fresh merchant session verified"), "\(log.suffix(800))")
        #expect(log.contains(#""detail":"success","event":"sheet-ended""#), "\(log.suffix(800))")
    }

    @Test(
        "W4: after a FAILURE that keeps the sheet, a page handing the spent merchant session again is refused: the sheet ends, oncancel, one onpaymentauthorized"
    )
    func spentSessionAgainIsRefused() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        let windows = try await Self.beginOwnSession(sandbox, browser, firstResult: Self.springfieldError)
        try await Self.giveContact(browser)
        try await browser.click("#pay-face-id")
        try await browser.wait(
            "the sheet to end", until: "return document.title.startsWith('Apple Pay: Payment not completed');")
        #expect(try await browser.string("return document.title;").contains("already used"))
        try await browser.closeWindow()
        try await browser.switchTo(windows.store)
        try await browser.wait("oncancel", until: "return window.__cancelled === true;")
        #expect(try await browser.string("return [window.__payments, window.__validations].join(',');") == "1,2")
        #expect(sandbox.log(of: BrowserSandbox.phone).contains("the merchant session was already used"))
    }

    @Test("completePayment FAILURE without errors ends the sheet (WebKit's final state)")
    func failureWithoutErrorsEndsSheet() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        let logged = sandbox.log(of: BrowserSandbox.phone).count
        let windows = try await Self.beginOwnSession(
            sandbox, browser, firstResult: "{ status: ApplePaySession.STATUS_FAILURE, errors: [] }")
        try await Self.giveContact(browser)
        try await browser.click("#pay-face-id")
        try await browser.wait("the sheet to end", until: "return document.title === 'Apple Pay: Done';")
        try await browser.closeWindow()
        try await browser.switchTo(windows.store)
        #expect(try await browser.string("return String(window.__payments);") == "1")
        #expect(try await browser.string("return String(window.__cancelled);") == "false")
        let log = String(sandbox.log(of: BrowserSandbox.phone).dropFirst(logged))
        #expect(log.contains(#""outcome":"completed""#) && !log.contains("the sheet stays"), "\(log.suffix(800))")
    }
}
