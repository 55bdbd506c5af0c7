import CommandTestSupport
import Foundation
import Testing
import WebDriverClient

extension BrowserPurchaseTests {
    /// Loads orchard-pay.js into the current page (as a merchant's page does) and waits for the agent's hello.
    static func loadScript(_ browser: WebDriver, waitForAgent: Bool = true) async throws {
        _ = try await browser.evaluate(
            """
            const script = document.createElement('script');
            script.src = 'https://pay.orchard.test/jsapi/1.latest/orchard-pay.js';
            document.head.appendChild(script);
            return true;
            """)
        try await browser.wait("orchard-pay.js", until: "return typeof ApplePaySession === 'function';")
        if waitForAgent {
            try await browser.wait("the agent's frame", until: "return document.querySelector('iframe') !== null;")
            try await Task.sleep(for: .milliseconds(500))
        }
    }

    /// A button that runs `body` on a click (a user gesture), its result (or thrown error) kept in
    /// `window.__result`.
    static func gestureButton(_ browser: WebDriver, _ body: String) async throws {
        _ = try await browser.evaluate(
            """
            const button = document.createElement('button');
            button.id = 'go';
            button.textContent = 'Go';
            button.addEventListener('click', function () {
                try { window.__result = (function () { \(body) })(); }
                catch (error) { window.__result = error.name + ': ' + error.message; }
            });
            document.body.appendChild(button);
            return true;
            """)
        try await browser.click("#go")
    }

    static let request = """
        { countryCode: 'US', currencyCode: 'USD', supportedNetworks: ['visa'], merchantCapabilities: ['supports3DS'],
          total: { label: 'Orchard Demo Store', amount: '1.00' } }
        """

    @Test("WebKit's rules in Chromium: user gesture, versions, exceptions and their messages, one active session")
    func webKitRules() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        try await browser.navigate(Self.store)
        try await browser.wait("the store", until: "return document.body.dataset.applePay === 'available';")
        // Outside a user gesture (WebDriver's script is none).
        let noGesture = try await browser.string(
            "try { new ApplePaySession(3, \(Self.request)); return 'made'; } catch (e) { return e.name + ': ' + e.message; }"
        )
        #expect(noGesture == "InvalidAccessError: Must create a new ApplePaySession from a user gesture handler.")
        let versions = try await browser.string(
            """
            let zero; try { ApplePaySession.supportsVersion(0); zero = 'no error'; } catch (e) { zero = e.name; }
            return [ApplePaySession.supportsVersion(3), ApplePaySession.supportsVersion(14),
                    ApplePaySession.supportsVersion(15), zero, ApplePaySession.STATUS_PIN_LOCKOUT].join(',');
            """)
        #expect(versions == "true,true,false,InvalidAccessError,7")
        try await Self.gestureButton(
            browser,
            """
            const out = [];
            const attempt = (f) => { try { f(); out.push('ok'); } catch (e) { out.push(e.name + ': ' + e.message); } };
            attempt(() => new ApplePaySession(3, Object.assign(\(Self.request), { total: { label: 'x', amount: '4.5x' } })));
            attempt(() => new ApplePaySession(3, Object.assign(\(Self.request), { supportedNetworks: [] })));
            attempt(() => new ApplePayError('nonsense'));
            const first = new ApplePaySession(3, \(Self.request));
            // Made before begin(), which opens the sheet and so consumes the page's user activation.
            const second = new ApplePaySession(3, \(Self.request));
            attempt(() => first.completeMerchantValidation({}));
            attempt(() => first.completeMerchantValidation('{"a":1}'));
            attempt(() => first.completePayment(0));
            first.begin();
            attempt(() => first.begin());
            attempt(() => second.begin());
            first.abort();
            return out.join('|');
            """)
        try await browser.wait("the gesture's results", until: "return typeof window.__result === 'string';")
        let results = try await browser.string("return window.__result;").split(separator: "|").map(String.init)
        #expect(
            results == [
                "TypeError: \"4.5x\" is not a valid amount.",
                "TypeError: At least one supported network must be provided.",
                "TypeError: Failed to construct 'ApplePayError': The provided value 'nonsense' is not a valid enum "
                    + "value of type ApplePayErrorCode.",
                "InvalidAccessError: ", "TypeError: Type error", "InvalidAccessError: ",
                "InvalidAccessError: Payment session is already active.",
                "InvalidAccessError: Page already has an active payment session.",
            ], "\(results)")
        // The sheet window the first begin() opened.
        for handle in try await browser.windowHandles where handle != (try await browser.currentWindow) {
            try await browser.switchTo(handle)
            try await browser.closeWindow()
        }
        try await browser.switchTo(try #require(try await browser.windowHandles.first))
    }

    @Test("W4: a merchant session for another domain: the device refuses it before any sheet, the page gets oncancel")
    func sessionForAnotherDomain() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        // A genuine session, signed by the token-signing chain, for store.orchard.test ...
        let json = try await sandbox.merchantSession()
        // ... presented by a page of https://pay.orchard.test.
        try await browser.navigate("https://pay.orchard.test/health")
        try await Self.loadScript(browser)
        let main = try await browser.currentWindow
        let known = try await browser.windowHandles
        try await Self.gestureButton(
            browser,
            """
            const session = new ApplePaySession(3, \(Self.request));
            session.onvalidatemerchant = () => session.completeMerchantValidation(\(json));
            session.oncancel = () => { window.__cancelled = true; };
            session.begin();
            return 'begun';
            """)
        try await browser.wait("oncancel", until: "return window.__cancelled === true;")
        _ = try await browser.switchToNewWindow(besides: known)
        try await browser.wait(
            "the sheet's refusal",
            until: "return document.getElementById('status').textContent.includes('is for store.orchard.test');")
        try await browser.closeWindow()
        try await browser.switchTo(main)
        let log = sandbox.log(of: BrowserSandbox.phone)
        #expect(
            log.contains(
                "pay.orchard.test's merchant session refused: the merchant session is for store.orchard.test, but the page is pay.orchard.test"
            ), "\(log.suffix(800))")
    }

    @Test("The 30-second rule (4 s here): a page that does not complete a selection ends the sheet")
    func handlerTimeout() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        try await browser.navigate(Self.store)
        try await browser.wait("the store", until: "return document.body.dataset.applePay === 'available';")
        _ = try await browser.evaluate(
            "ApplePaySession.prototype.completeShippingMethodSelection = function () {}; return true;")
        for item in ["Tea"] { try await browser.click("button[data-item=\(item)]") }
        let store = try await browser.currentWindow
        let known = try await browser.windowHandles
        try await browser.click("#apple-pay")
        _ = try await browser.switchToNewWindow(besides: known)
        try await browser.wait("the sheet", until: "return !document.getElementById('details').hidden;")
        try await browser.click("#shipping-express")
        try await browser.wait(
            "the sheet to end", seconds: 30, until: "return document.title === 'Apple Pay: Cancelled';")
        try await browser.closeWindow()
        try await browser.switchTo(store)
        try await browser.wait(
            "oncancel", until: "return document.getElementById('status').textContent === 'Payment cancelled.';")
        #expect(sandbox.log(of: BrowserSandbox.phone).contains("did not complete event"))
    }

    @Test("A11: everything the page's script can observe before authorization: no card number, DPAN or full contact")
    func pageObservesNoSecrets() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        try await browser.navigate(Self.store)
        try await browser.wait("the store", until: "return document.body.dataset.applePay === 'available';")
        // Every message any frame posts to the page, every event orchard-pay.js dispatches, kept across the
        // navigation to the confirmation page.
        _ = try await browser.evaluate(
            """
            sessionStorage.setItem('seen', '[]');
            const keep = (kind, value) => {
                const seen = JSON.parse(sessionStorage.getItem('seen'));
                seen.push(kind + ' ' + JSON.stringify(value));
                sessionStorage.setItem('seen', JSON.stringify(seen));
            };
            window.addEventListener('message', (e) => keep('message', e.data), true);
            const dispatch = EventTarget.prototype.dispatchEvent;
            EventTarget.prototype.dispatchEvent = function (event) {
                const fields = {};
                for (const key of Object.keys(event)) { fields[key] = event[key]; }
                keep('event ' + event.type, fields);
                return dispatch.call(this, event);
            };
            return true;
            """)
        let store = try await browser.currentWindow
        let known = try await browser.windowHandles
        try await browser.click("button[data-item=Tea]")
        try await browser.click("#apple-pay")
        let sheet = try await browser.switchToNewWindow(besides: known)
        try await browser.wait("the sheet", until: "return !document.getElementById('details').hidden;")
        try await Self.giveContact(browser)
        try await browser.switchTo(store)
        try await browser.wait(
            "the redacted contact",
            until: "return sessionStorage.getItem('seen').includes('event shippingcontactselected');")
        let before = try await browser.string(
            "return sessionStorage.getItem('seen') + document.documentElement.outerHTML;")
        #expect(before.contains("Springfield") && before.contains("62701"), "\(before.prefix(2000))")
        for secret in ["4111111111111111", "Bob", "Appleseed", "bob@example.com", "2 Main St", "555 0199"] {
            #expect(!before.contains(secret), "the page saw \(secret) before authorization")
        }
        #expect(before.range(of: #"\b[0-9]{13,19}\b"#, options: .regularExpression) == nil, "a card-like number")
        try await browser.switchTo(sheet)
        _ = try await Self.payAndConfirm(browser, method: "face-id", windows: (store, sheet))
        // After authorization the page has the token (encrypted to the merchant) and the contact it asked for.
        let after = try await browser.string("return sessionStorage.getItem('seen');")
        #expect(after.contains("event paymentauthorized") && after.contains("paymentData"), "\(after.suffix(1500))")
        #expect(after.contains("2 Main St") && !after.contains("4111111111111111"))
        #expect(after.range(of: #"\b[0-9]{13,19}\b"#, options: .regularExpression) == nil, "a card-like number")
    }
}

extension BrowserPurchaseTests {
    @Test(
        "W6: website queries in Chromium: canMakePaymentsWithActiveCard and applePayCapabilities ask for the Pay server's statement; off, they disclose nothing and ask nothing"
    )
    func websiteQueries() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        try await browser.navigate(Self.store)
        try await browser.wait("the store", until: "return document.body.dataset.applePay === 'available';")
        func asked() -> Int {
            sandbox.log(of: BrowserSandbox.phone).components(separatedBy: "asks the Pay server's capability").count - 1
        }
        let before = asked()
        let query = "ApplePaySession.canMakePaymentsWithActiveCard"
        #expect(try await browser.awaitPromise("\(query)('merchant.dev.orchard.demo')") == "true")
        #expect(try await browser.awaitPromise("\(query)('merchant.dev.never-registered')") == "false")
        #expect(asked() == before + 2)
        // The SDK's applePayCapabilities asks the same question.
        let capabilities = "ApplePaySession.applePayCapabilities"
        let status = ".then((answer) => answer.paymentCredentialStatus)"
        #expect(
            try await browser.awaitPromise("\(capabilities)('merchant.dev.never-registered')\(status)")
                == "\"paymentCredentialsUnavailable\"")
        #expect(asked() == before + 3)
        let off = try await orchard([
            "device", "settings", "--data-dir", sandbox.dataDirectory, "--name", BrowserSandbox.phone,
            "--website-queries", "off",
        ])
        try #require(off.status == 0, "\(off.stderr)")
        #expect(try await browser.awaitPromise("\(query)('merchant.dev.never-registered')") == "true")
        #expect(try await browser.evaluate("return ApplePaySession.canMakePayments();") == "true")
        // Off, applePayCapabilities discloses nothing either.
        #expect(
            try await browser.awaitPromise("\(capabilities)('merchant.dev.orchard.demo')\(status)")
                == "\"paymentCredentialStatusUnknown\"")
        #expect(asked() == before + 3)
        let on = try await orchard([
            "device", "settings", "--data-dir", sandbox.dataDirectory, "--name", BrowserSandbox.phone,
            "--website-queries", "on",
        ])
        #expect(on.status == 0, "\(on.stderr)")
    }
}

extension BrowserPurchaseTests {
    static let canMakePayments =
        "try { return String(ApplePaySession.canMakePayments()); } catch (e) { return e.name + ': ' + e.message; }"

    @Test(
        "W5: in Chromium, a third-party frame without allow=\"payment\" and the agent's frame on its own are refused with WebKit's errors"
    )
    func insecureAndThirdPartyPages() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        // A third-party frame (another origin) without allow="payment", and one with it.
        try await browser.navigate("https://pay.orchard.test/health")
        _ = try await browser.evaluate(
            """
            for (const [id, allow] of [['plain', ''], ['allowed', 'payment']]) {
                const frame = document.createElement('iframe');
                frame.id = id;
                if (allow) { frame.allow = allow; }
                frame.src = 'https://apple-pay-gateway.orchard.test/health';
                document.body.appendChild(frame);
            }
            return true;
            """)
        try await browser.wait(
            "the frames",
            until:
                "return [...document.querySelectorAll('iframe')].every((f) => f.contentWindow && f.dataset.x !== 'y');")
        try await Task.sleep(for: .milliseconds(500))
        try await browser.switchToFrame("#plain")
        try await Self.loadScript(browser)
        #expect(
            try await browser.string(Self.canMakePayments)
                == "SecurityError: Third-party iframes are not allowed to request payments unless explicitly allowed via Feature-Policy (payment)"
        )
        try await browser.switchToFrame(nil)
        try await browser.switchToFrame("#allowed")
        try await Self.loadScript(browser)
        #expect(try await browser.string(Self.canMakePayments) == "true")
        try await browser.switchToFrame(nil)
        // The agent's frame loaded on its own (no page embeds it): it says nothing to anyone and the agent refuses
        // its calls for a page.
        try await browser.navigate("https://agent.orchard.test/frame")
        let refused = try await browser.awaitPromise(
            """
            fetch('/v1/secret', { method: 'POST', headers: { 'Content-Type': 'application/json' },
                body: JSON.stringify({ document: 'frame' }) }).then((r) => r.json())
            .then((s) => fetch('/v1/frame/sessions', { method: 'POST', headers: { 'Content-Type': 'application/json',
                'X-Orchard-Agent-Secret': s.secret },
                body: JSON.stringify({ version: 3, page: { ancestorOrigins: [], secureContext: true, paymentAllowed: true },
                request: { countryCode: 'US', currencyCode: 'USD', supportedNetworks: ['visa'],
                    merchantCapabilities: ['supports3DS'], total: { label: 'x', amount: '1.00' } } }) }))
                .then((r) => r.json()).then((j) => j.error.message)
            """)
        #expect(refused == "\"Trying to start an Apple Pay session from an inactive document.\"")
    }
}
