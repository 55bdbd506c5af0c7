import Foundation
import Testing
import WebDriverClient

/// What a page can try against Apple Pay in the browser, each refused (docs/security.md W4 to W6; docs/web.md, part 4).
extension BrowserPurchaseTests {
    /// The document's URL in the frame `css` (a frame the browser refused to load shows its error page).
    static func frameLocation(_ browser: WebDriver, _ css: String) async throws -> String {
        try await browser.switchToFrame(css)
        let location = try await browser.string("return location.href;")
        try await browser.switchToFrame(nil)
        return location
    }

    /// chromedriver's own status page: a plain http page on loopback (the one http server the sandbox has).
    static func httpPage(_ sandbox: BrowserSandbox) -> String { "http://127.0.0.1:\(sandbox.driverPort)/status" }

    @Test(
        "W5: an http page, and an https frame under an http page: orchard-pay.js refuses with WebKit's errors and the agent's frame does not load under them"
    )
    func httpPageAndInsecureParent() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        try await browser.navigate(Self.httpPage(sandbox))
        try await Self.loadScript(browser)
        #expect(
            try await browser.string(Self.canMakePayments)
                == "InvalidAccessError: Trying to start an Apple Pay session from an insecure document.")
        #expect(
            try await Self.frameLocation(browser, "iframe[title^='Apple Pay']").hasPrefix("chrome-error:"),
            "the agent's frame loaded under an http page")
        // An https page framed (allow="payment") by the http page.
        _ = try await browser.evaluate(
            """
            const frame = document.createElement('iframe');
            frame.id = 'shop';
            frame.allow = 'payment';
            frame.src = 'https://pay.orchard.test/health';
            document.body.appendChild(frame);
            return true;
            """)
        try await browser.wait("the frame", until: "return document.getElementById('shop').contentWindow !== null;")
        try await Task.sleep(for: .milliseconds(500))
        try await browser.switchToFrame("#shop")
        try await Self.loadScript(browser)
        #expect(
            try await browser.string(Self.canMakePayments)
                == "InvalidAccessError: Trying to start an Apple Pay session from a document with an insecure parent frame."
        )
        #expect(
            try await Self.frameLocation(browser, "iframe[title^='Apple Pay']").hasPrefix("chrome-error:"),
            "the agent's frame loaded under an http ancestor")
        try await browser.switchToFrame(nil)
    }

    @Test(
        "W5: a page cannot frame, script or drive the sheet: the framed sheet does not load, the opened one is another origin, the page's calls to the sheet's routes are refused and the sheet keeps waiting"
    )
    func pageCannotDriveTheSheet() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        let windows = try await Self.startPurchase(browser)
        try await browser.switchTo(windows.store)
        // A page covering the screen with the sheet in a frame of its own: the browser refuses to load it.
        _ = try await browser.evaluate(
            """
            const frame = document.createElement('iframe');
            frame.id = 'fake-sheet';
            frame.src = 'https://agent.orchard.test/sheet';
            frame.style.cssText = 'position:fixed;inset:0;width:100%;height:100%';
            document.body.appendChild(frame);
            return true;
            """)
        try await Task.sleep(for: .milliseconds(800))
        #expect(try await Self.frameLocation(browser, "#fake-sheet").hasPrefix("chrome-error:"))
        // The sheet opened with a handle: another origin, whose document the page cannot touch.
        let known = try await browser.windowHandles
        let scripted = try await browser.string(
            """
            const sheet = window.open('https://agent.orchard.test/sheet', 'mine', 'popup');
            window.__sheet = sheet;
            return 'opened';
            """)
        #expect(scripted == "opened")
        let popup = try await browser.switchToNewWindow(besides: known)
        try await browser.wait("the popup's sheet", until: "return document.readyState === 'complete';")
        try await browser.switchTo(windows.store)
        let touched = try await browser.string(
            """
            try { window.__sheet.document.getElementById('pay-face-id').click(); return 'clicked'; }
            catch (e) { return e.name; }
            """)
        #expect(touched == "SecurityError")
        try await browser.switchTo(popup)
        try await browser.closeWindow()
        try await browser.switchTo(windows.store)
        // The sheet's own routes, called by another page (the store's own page may not even connect there): refused
        // (not the agent's document: same-site, not same-origin, no secret); with CORS it cannot read the refusal.
        let authorized = sandbox.log(of: BrowserSandbox.phone).components(separatedBy: "authorized by").count
        let beforeOther = try await browser.windowHandles
        _ = try await browser.evaluate("window.open('https://pay.orchard.test/health', 'other'); return true;")
        _ = try await browser.switchToNewWindow(besides: beforeOther)
        try await browser.wait("the other page", until: "return document.readyState === 'complete';")
        let forged = try await browser.awaitPromise(
            """
            Promise.all([
                fetch('https://agent.orchard.test/v1/sheet/current/authenticate', { method: 'POST', mode: 'no-cors',
                    body: JSON.stringify({ method: 'face-id', success: true }) }).then((r) => r.type, (e) => e.name),
                fetch('https://agent.orchard.test/v1/sheet/current', { credentials: 'include' })
                    .then(() => 'read', (e) => e.name),
            ]).then((answers) => answers.join(','))
            """)
        #expect(forged == "\"opaque,TypeError\"")
        try await browser.closeWindow()
        // Nothing was authorized: the sheet still waits for the user, who cancels.
        try await browser.switchTo(windows.sheet)
        try await Task.sleep(for: .milliseconds(500))
        #expect(try await browser.string("return document.title;") != "Apple Pay: Done")
        #expect(sandbox.log(of: BrowserSandbox.phone).components(separatedBy: "authorized by").count == authorized)
        try await browser.click("#cancel")
        try await browser.wait("the sheet to end", until: "return document.title === 'Apple Pay: Cancelled';")
        try await browser.closeWindow()
        try await browser.switchTo(windows.store)
    }

    @Test(
        "W4: completeMerchantValidation with a string, twice, or after abort is refused with WebKit's errors; a replayed merchant session is refused by the device"
    )
    func merchantValidationMisuse() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        let merchantSession = try await Self.storePageAndSession(sandbox, browser)
        let page = try await browser.currentWindow
        var known = try await browser.windowHandles
        let attempt = """
            const attempt = (f) => { try { f(); window.__events.push('ok'); }
                catch (e) { window.__events.push(e.name + ': ' + e.message); } };
            """
        try await Self.gestureButton(
            browser,
            """
            \(attempt)
            const session = new ApplePaySession(3, \(Self.request));
            session.onvalidatemerchant = () => {
                attempt(() => session.completeMerchantValidation(JSON.stringify(\(merchantSession))));
                attempt(() => session.completeMerchantValidation(\(merchantSession)));
                attempt(() => session.completeMerchantValidation(\(merchantSession)));
                session.abort();
                attempt(() => session.completeMerchantValidation(\(merchantSession)));
            };
            session.oncancel = () => window.__events.push('cancel');
            session.begin();
            return 'begun';
            """)
        try await browser.wait("the handler", until: "return window.__events.length >= 4;")
        #expect(
            try await Self.events(browser) == [
                "TypeError: Type error", "ok", "InvalidAccessError: ", "InvalidAccessError: ",
            ])
        // The sheet's window, opened by begin().
        _ = try await browser.switchToNewWindow(besides: known)
        try await browser.closeWindow()
        try await browser.switchTo(page)
        // A merchant session the device verified (its sheet shown, then cancelled), handed to a second session:
        // the device refuses it.
        let replayed = try await Self.storePageAndSession(sandbox, browser)
        for round in 1...2 {
            _ = try await browser.evaluate("window.__events = []; return true;")
            known = try await browser.windowHandles
            try await Self.gestureButton(
                browser,
                """
                const session = new ApplePaySession(3, \(Self.request));
                session.onvalidatemerchant = () => session.completeMerchantValidation(\(replayed));
                session.oncancel = () => window.__events.push('cancel');
                session.begin();
                return 'begun';
                """)
            _ = try await browser.switchToNewWindow(besides: known)
            if round == 1 {
                try await browser.wait("the sheet", until: "return !document.getElementById('details').hidden;")
                try await browser.click("#cancel")
            } else {
                try await browser.wait(
                    "the sheet's refusal",
                    until: "return document.getElementById('status').textContent.includes('already used');")
            }
            try await browser.closeWindow()
            try await browser.switchTo(page)
            try await browser.wait("oncancel", until: "return window.__events.includes('cancel');")
        }
        #expect(sandbox.log(of: BrowserSandbox.phone).contains("the merchant session was already used"))
    }

    @Test(
        "The 30-second rule for onpaymentauthorized (4 s here): a page that never calls completePayment has its sheet ended and hears oncancel"
    )
    func authorizationTimeout() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        let merchantSession = try await Self.storePageAndSession(sandbox, browser)
        let page = try await browser.currentWindow
        let known = try await browser.windowHandles
        try await Self.gestureButton(
            browser,
            """
            const session = new ApplePaySession(3, \(Self.request));
            session.onvalidatemerchant = () => session.completeMerchantValidation(\(merchantSession));
            session.onpaymentauthorized = () => window.__events.push('authorized');
            session.oncancel = () => window.__events.push('cancel');
            session.begin();
            return 'begun';
            """)
        _ = try await browser.switchToNewWindow(besides: known)
        try await browser.wait("the sheet", until: "return !document.getElementById('details').hidden;")
        try await browser.click("#pay-face-id")
        try await browser.wait(
            "the sheet to end", seconds: 30, until: "return document.getElementById('details').hidden;")
        #expect(try await browser.string("return document.title;").hasPrefix("Apple Pay: Payment not completed"))
        try await browser.closeWindow()
        try await browser.switchTo(page)
        try await browser.wait("oncancel", until: "return window.__events.includes('cancel');")
        let events = try await Self.events(browser)
        #expect(events == ["authorized", "cancel"], "\(events)")
        #expect(sandbox.log(of: BrowserSandbox.phone).contains("did not complete event"))
    }
}
