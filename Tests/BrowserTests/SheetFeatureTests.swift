import BrowserAgentAPI
import CommandTestSupport
import Foundation
import OrchardHTTP
import Testing
import WebDriverClient

extension BrowserPurchaseTests {
    /// The conformance page of the store (it loads orchard-pay.js as a merchant's page does), with a genuine
    /// merchant session for store.orchard.test (`orchard merchant session`) to hand `completeMerchantValidation`.
    static func storePageAndSession(_ sandbox: BrowserSandbox, _ browser: WebDriver) async throws -> String {
        let session = try await sandbox.merchantSession()
        try await browser.navigate("https://store.orchard.test/conformance")
        try await browser.wait("the agent's hello", until: "return document.body.dataset.ready === 'true';")
        _ = try await browser.evaluate("window.__events = []; return true;")
        return session
    }

    /// The page's events so far (`window.__events`).
    static func events(_ browser: WebDriver) async throws -> [String] {
        try await browser.string("return window.__events.join('|');").split(separator: "|").map(String.init)
    }

    /// Sets the sheet's coupon code field and applies it.
    static func applyCoupon(_ browser: WebDriver, _ code: String) async throws {
        _ = try await browser.evaluate("document.getElementById('coupon-code').value = '\(code)'; return true;")
        try await browser.click("#apply-coupon")
    }

    @Test(
        "Version 12 coupon codes and version 14 payment types on the sheet: a recurring payment shown, a pending line item, an invalid code's error beside the field, a valid code's new total paid"
    )
    func couponAndRecurringPayment() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        let merchantSession = try await Self.storePageAndSession(sandbox, browser)
        let page = try await browser.currentWindow
        let known = try await browser.windowHandles
        try await Self.gestureButton(
            browser,
            """
            const total = (amount) => ({ label: 'Orchard Demo Store', amount: amount });
            const session = new ApplePaySession(14, Object.assign(\(Self.request), {
                total: total('4.50'), supportsCouponCode: true, couponCode: 'SPRING',
                lineItems: [{ label: 'Tea', amount: '4.50' }, { label: 'Tax', type: 'pending' }],
                recurringPaymentRequest: {
                    paymentDescription: 'Orchard tea club',
                    regularBilling: { label: 'Monthly tea', amount: '4.50', paymentTiming: 'recurring',
                        recurringPaymentIntervalUnit: 'month', recurringPaymentStartDate: '2027-01-01T00:00:00Z' },
                    managementURL: 'https://store.orchard.test/subscriptions',
                    billingAgreement: 'Cancel at any time.',
                },
            }));
            session.onvalidatemerchant = () => session.completeMerchantValidation(\(merchantSession));
            session.oncouponcodechanged = (event) => {
                window.__events.push('coupon ' + event.couponCode);
                if (event.couponCode === 'HALF') {
                    session.completeCouponCodeChange({ newTotal: total('2.25'),
                        newLineItems: [{ label: 'Tea', amount: '4.50' }, { label: 'Coupon HALF', amount: '-2.25' }] });
                } else {
                    session.completeCouponCodeChange({ newTotal: total('4.50'),
                        errors: [new ApplePayError('couponCodeInvalid')] });
                }
            };
            session.onpaymentauthorized = (event) => {
                window.__events.push('authorized ' + typeof event.payment.token.paymentData);
                session.completePayment({ status: ApplePaySession.STATUS_SUCCESS });
            };
            session.oncancel = () => window.__events.push('cancel');
            session.begin();
            return 'begun';
            """)
        _ = try await browser.switchToNewWindow(besides: known)
        try await browser.wait("the sheet", until: "return !document.getElementById('details').hidden;")
        let shown = try await browser.string("return document.getElementById('details').innerText;")
        for text in [
            "Recurring payment", "Orchard tea club", "Monthly tea 4.50 USD every month from 2027-01-01",
            "Cancel at any time.", "Manage at https://store.orchard.test/subscriptions", "Amount pending",
            "Total 4.50 USD",
        ] {
            #expect(shown.contains(text), "the sheet does not show \(text): \(shown)")
        }
        #expect(try await browser.string("return document.getElementById('coupon-code').value;") == "SPRING")
        try await Self.applyCoupon(browser, "BOGUS")
        try await browser.wait(
            "the coupon's error",
            until: "return document.getElementById('coupon-errors').textContent === 'couponCodeInvalid';")
        try await Self.applyCoupon(browser, "HALF")
        try await browser.wait(
            "the coupon's total", until: "return document.getElementById('total').textContent === 'Total 2.25 USD';")
        #expect(try await browser.string("return String(document.getElementById('coupon-errors').hidden);") == "true")
        try await browser.click("#pay-face-id")
        try await browser.wait("the sheet to finish", until: "return document.title === 'Apple Pay: Done';")
        try await browser.closeWindow()
        try await browser.switchTo(page)
        try await browser.wait("onpaymentauthorized", until: "return window.__events.length === 3;")
        let events = try await Self.events(browser)
        #expect(events == ["coupon BOGUS", "coupon HALF", "authorized object"], "\(events)")
        #expect(sandbox.log(of: BrowserSandbox.phone).contains("Orchard Demo Store 2.25 USD authorized"))
    }

    @Test(
        "Versions 1 and 2: the positional completions and their closing rules: a shipping method's failure cancels the sheet; a shipping contact's address status keeps it for a correction"
    )
    func positionalCompletions() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        var merchantSession = try await Self.storePageAndSession(sandbox, browser)
        let page = try await browser.currentWindow
        var known = try await browser.windowHandles
        let methods = """
            shippingMethods: [{ label: 'Standard', detail: '', amount: '0.00', identifier: 'standard' },
                              { label: 'Express', detail: '', amount: '5.00', identifier: 'express' }]
            """
        // Version 2: STATUS_FAILURE for a shipping method cancels the sheet (and the page hears oncancel).
        try await Self.gestureButton(
            browser,
            """
            const session = new ApplePaySession(2, Object.assign(\(Self.request), { \(methods) }));
            session.onvalidatemerchant = () => session.completeMerchantValidation(\(merchantSession));
            session.onshippingmethodselected = (event) => {
                window.__events.push('method ' + event.shippingMethod.identifier);
                session.completeShippingMethodSelection(ApplePaySession.STATUS_FAILURE,
                    { label: 'Orchard Demo Store', amount: '6.00' }, []);
            };
            session.oncancel = () => window.__events.push('cancel');
            session.begin();
            return 'begun';
            """)
        _ = try await browser.switchToNewWindow(besides: known)
        try await browser.wait("the sheet", until: "return !document.getElementById('details').hidden;")
        try await browser.click("#shipping-express")
        try await browser.wait("the sheet to end", until: "return document.title === 'Apple Pay: Cancelled';")
        try await browser.closeWindow()
        try await browser.switchTo(page)
        try await browser.wait("oncancel", until: "return window.__events.length === 2;")
        #expect(try await Self.events(browser) == ["method express", "cancel"])

        // Version 1: STATUS_INVALID_SHIPPING_POSTAL_ADDRESS keeps the sheet with the error at the contact; the
        // corrected contact answered with STATUS_SUCCESS lets the user pay.
        merchantSession = try await Self.storePageAndSession(sandbox, browser)
        known = try await browser.windowHandles
        try await Self.gestureButton(
            browser,
            """
            const total = { label: 'Orchard Demo Store', amount: '1.00' };
            const session = new ApplePaySession(1, Object.assign(\(Self.request),
                { requiredShippingContactFields: ['postalAddress', 'name'] }));
            session.onvalidatemerchant = () => session.completeMerchantValidation(\(merchantSession));
            session.onshippingcontactselected = (event) => {
                window.__events.push('contact ' + event.shippingContact.postalCode);
                const status = event.shippingContact.postalCode === '00000'
                    ? ApplePaySession.STATUS_INVALID_SHIPPING_POSTAL_ADDRESS : ApplePaySession.STATUS_SUCCESS;
                session.completeShippingContactSelection(status, [], total, []);
            };
            session.onpaymentauthorized = () => {
                window.__events.push('authorized');
                session.completePayment(ApplePaySession.STATUS_SUCCESS);
            };
            session.oncancel = () => window.__events.push('cancel');
            session.begin();
            return 'begun';
            """)
        _ = try await browser.switchToNewWindow(besides: known)
        try await browser.wait("the sheet", until: "return !document.getElementById('details').hidden;")
        for (field, value) in [
            ("name", "Bob Appleseed"), ("street", "2 Main St"), ("city", "Springfield"), ("state", "IL"),
            ("postalCode", "00000"),
        ] {
            try await browser.type("#contact input[name=\(field)]", value)
        }
        try await browser.click("#use-contact")
        try await browser.wait(
            "the contact's error",
            until: "return document.getElementById('contact-errors').textContent === 'shippingContactInvalid';")
        #expect(try await browser.string("return String(document.getElementById('contact').hidden);") == "false")
        _ = try await browser.evaluate(
            "document.querySelector('#contact input[name=postalCode]').value = '62701'; return true;")
        try await browser.click("#use-contact")
        try await browser.wait(
            "the error cleared", until: "return document.getElementById('contact-errors').hidden === true;")
        try await browser.click("#pay-face-id")
        try await browser.wait("the sheet to finish", until: "return document.title === 'Apple Pay: Done';")
        try await browser.closeWindow()
        try await browser.switchTo(page)
        try await browser.wait("onpaymentauthorized", until: "return window.__events.includes('authorized');")
        #expect(try await Self.events(browser) == ["contact 00000", "contact 62701", "authorized"])
    }
}

extension BrowserPurchaseTests {
    @Test(
        "The agent checks a page's version 12 and 14 members again (the page's script is the page's): every bad payment type, timing and coupon code refused"
    )
    func agentChecksPaymentTypes() async throws {
        let sandbox = try sandbox
        let client = try Self.agentClient(sandbox, BrowserSandbox.phone)
        defer { client.shutdown() }
        let secret = try await Self.secret(client, .frame)
        func begin(_ change: (inout BrowserAgentAPI.PaymentRequest) -> Void) async throws -> String {
            var request = BrowserAgentAPI.PaymentRequest(
                countryCode: "US", currencyCode: "USD", supportedNetworks: ["visa"],
                merchantCapabilities: ["supports3DS"], total: .init(label: "Orchard Demo Store", amount: "1.00"))
            change(&request)
            let body = BrowserAgentAPI.BeginSession(
                version: 14,
                page: .init(ancestorOrigins: ["https://store.orchard.test"], secureContext: true, paymentAllowed: true),
                request: request)
            let answer = try await client.send(
                HTTPClientRequest(
                    method: .post, url: BrowserAgentAPI.origin + BrowserAgentAPI.Route.sessions,
                    headers: [
                        "Content-Type": "application/json", "Sec-Fetch-Site": "same-origin",
                        BrowserAgentAPI.secretHeader: secret,
                    ], body: try JSONEncoder().encode(body)))
            let object = try JSONSerialization.jsonObject(with: answer.body) as? [String: Any]
            let error = object?["error"] as? [String: Any]
            if let session = object?["session"] as? String {
                // Begun: aborted at once, freeing the device for the next test.
                _ = try await client.send(
                    HTTPClientRequest(
                        method: .post,
                        url: BrowserAgentAPI.origin
                            + BrowserAgentAPI.Route.path(BrowserAgentAPI.Route.abort, session: session),
                        headers: [
                            "Content-Type": "application/json", "Sec-Fetch-Site": "same-origin",
                            BrowserAgentAPI.secretHeader: secret,
                        ], body: Data("{}".utf8)))
            }
            return "\(answer.status.code) \(error?["message"] ?? "")"
        }
        func item(_ timing: String?, amount: String = "9.99") -> BrowserAgentAPI.LineItem {
            var item = BrowserAgentAPI.LineItem(label: "Monthly tea", amount: amount)
            item.paymentTiming = timing
            return item
        }
        func recurring(_ change: (inout BrowserAgentAPI.PaymentType) -> Void) -> BrowserAgentAPI.PaymentType {
            var type = BrowserAgentAPI.PaymentType(kind: "recurring")
            type.paymentDescription = "Orchard tea club"
            type.billing = item("recurring")
            type.managementURL = "https://store.orchard.test/subscriptions"
            change(&type)
            return type
        }
        func items(_ items: [BrowserAgentAPI.LineItem]) -> (inout BrowserAgentAPI.PaymentRequest) -> Void {
            {
                $0 = BrowserAgentAPI.PaymentRequest(
                    countryCode: $0.countryCode, currencyCode: $0.currencyCode,
                    supportedNetworks: $0.supportedNetworks, merchantCapabilities: $0.merchantCapabilities,
                    total: $0.total, lineItems: items)
            }
        }
        let refused: [(String, (inout BrowserAgentAPI.PaymentRequest) -> Void)] = [
            ("a coupon code has at most 64 characters", { $0.couponCode = String(repeating: "A", count: 65) }),
            (
                "The provided value 'weekly' is not a valid enum value of type ApplePayPaymentTiming.",
                items([item("weekly")])
            ),
            ("Missing 'deferredPaymentDate'.", items([item("deferred")])),
            ("Missing 'automaticReloadPaymentThresholdAmount'.", items([item("automaticReload")])),
            ("\"subscription\" is not a payment type", { $0.paymentType = .init(kind: "subscription") }),
            ("Missing 'paymentDescription'.", { $0.paymentType = recurring { $0.paymentDescription = nil } }),
            ("Missing 'regularBilling'.", { $0.paymentType = recurring { $0.billing = nil } }),
            (
                "'regularBilling' must be a 'recurring' line item.",
                { $0.paymentType = recurring { $0.billing = item(nil) } }
            ),
            (
                "'trialBilling' must be a 'recurring' line item.",
                { $0.paymentType = recurring { $0.trialBilling = item("deferred") } }
            ),
            ("Missing 'managementURL'.", { $0.paymentType = recurring { $0.managementURL = "http://x.test/" } }),
            (
                "a payment type's texts have at most 512 characters",
                { $0.paymentType = recurring { $0.billingAgreement = String(repeating: "x", count: 513) } }
            ),
            ("'multiTokenContexts' must be a non-empty list.", { $0.paymentType = .init(kind: "multiToken") }),
        ]
        for (message, change) in refused {
            #expect(try await begin(change) == "400 \(message)")
        }
        // A good recurring request begins.
        let good = try await begin { $0.paymentType = recurring { _ in } }
        #expect(good.hasPrefix("201"), "\(good)")
    }
}
