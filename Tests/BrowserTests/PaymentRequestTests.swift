import Foundation
import Testing
import WebDriverClient

extension BrowserPurchaseTests {
    @Test(
        "Payment Request with https://apple.com/apple-pay: merchantvalidation completed once (a second complete is InvalidStateError), the shipping option change updates the total, show() resolves with the ApplePayPayment; other methods stay the browser's own"
    )
    func paymentRequestRoute() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        let merchantSession = try await Self.storePageAndSession(sandbox, browser)
        let page = try await browser.currentWindow
        let known = try await browser.windowHandles
        // Another method: the browser's own PaymentRequest (which has no merchant validation).
        let other = try await browser.string(
            """
            const details = { total: { label: 'x', amount: { currency: 'USD', value: '1.00' } } };
            const native = new PaymentRequest([{ supportedMethods: 'https://store.orchard.test/pay' }], details);
            const apple = new PaymentRequest([{ supportedMethods: 'https://apple.com/apple-pay',
                data: { version: 3, merchantIdentifier: 'merchant.dev.orchard.demo', countryCode: 'US',
                        merchantCapabilities: ['supports3DS'], supportedNetworks: ['visa'] } }], details);
            let missing;
            try { new PaymentRequest([{ supportedMethods: 'https://apple.com/apple-pay', data: { version: 3 } }], details); }
            catch (e) { missing = e.name; }
            return ['onmerchantvalidation' in native, 'onmerchantvalidation' in apple, missing].join(',');
            """)
        #expect(other == "false,true,TypeError")
        try await Self.gestureButton(
            browser,
            """
            const request = new PaymentRequest(
                [{ supportedMethods: 'https://apple.com/apple-pay',
                   data: { version: 3, merchantIdentifier: 'merchant.dev.orchard.demo', countryCode: 'US',
                           merchantCapabilities: ['supports3DS'], supportedNetworks: ['visa', 'masterCard'] } }],
                { total: { label: 'Orchard Demo Store', amount: { currency: 'USD', value: '4.50' } },
                  displayItems: [{ label: 'Tea', amount: { currency: 'USD', value: '4.50' } }],
                  shippingOptions: [
                      { id: 'standard', label: 'Standard', amount: { currency: 'USD', value: '0.00' }, selected: true },
                      { id: 'express', label: 'Express', amount: { currency: 'USD', value: '5.00' } }] },
                { requestShipping: true });
            request.onmerchantvalidation = (event) => {
                window.__events.push('validation ' + event.methodName);
                event.complete(Promise.resolve(\(merchantSession)));
                try { event.complete(Promise.resolve({})); } catch (e) { window.__events.push(e.name); }
            };
            request.onshippingoptionchange = (event) => {
                window.__events.push('option ' + request.shippingOption);
                event.updateWith(Promise.resolve({
                    total: { label: 'Orchard Demo Store', amount: { currency: 'USD', value: '9.50' } } }));
            };
            request.show().then((response) => {
                window.__events.push('response ' + response.methodName + ' '
                    + typeof response.details.token.paymentData + ' ' + response.shippingAddress.city
                    + ' ' + response.shippingOption);
                return response.complete('success');
            }).then(() => window.__events.push('completed'), (e) => window.__events.push('rejected ' + e.name));
            return 'shown';
            """)
        _ = try await browser.switchToNewWindow(besides: known)
        try await browser.wait("the sheet", until: "return !document.getElementById('details').hidden;")
        try await browser.click("#shipping-express")
        try await browser.wait(
            "the new total", until: "return document.getElementById('total').textContent === 'Total 9.50 USD';")
        try await Self.giveContact(browser)
        try await browser.click("#pay-face-id")
        try await browser.wait("the sheet to finish", until: "return document.title === 'Apple Pay: Done';")
        try await browser.closeWindow()
        try await browser.switchTo(page)
        try await browser.wait("show() to resolve", until: "return window.__events.includes('completed');")
        let events = try await Self.events(browser)
        #expect(
            events == [
                "validation https://apple.com/apple-pay", "InvalidStateError", "option express",
                "response https://apple.com/apple-pay object Springfield express", "completed",
            ], "\(events)")
    }

    @Test("Payment Request: the user cancels on the sheet and show() rejects with AbortError")
    func paymentRequestCancelled() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        let merchantSession = try await Self.storePageAndSession(sandbox, browser)
        let page = try await browser.currentWindow
        let known = try await browser.windowHandles
        try await Self.gestureButton(
            browser,
            """
            const request = new PaymentRequest(
                [{ supportedMethods: 'https://apple.com/apple-pay',
                   data: { version: 14, merchantIdentifier: 'merchant.dev.orchard.demo', countryCode: 'US',
                           merchantCapabilities: ['supports3DS'], supportedNetworks: ['visa'] } }],
                { total: { label: 'Orchard Demo Store', amount: { currency: 'USD', value: '1.00' } } });
            request.onmerchantvalidation = (event) => event.complete(\(merchantSession));
            request.show().then(() => window.__events.push('resolved'), (e) => window.__events.push(e.name));
            return 'shown';
            """)
        _ = try await browser.switchToNewWindow(besides: known)
        try await browser.wait("the sheet", until: "return !document.getElementById('details').hidden;")
        try await browser.click("#cancel")
        try await browser.wait("the sheet to end", until: "return document.title === 'Apple Pay: Cancelled';")
        try await browser.closeWindow()
        try await browser.switchTo(page)
        try await browser.wait("show() to reject", until: "return window.__events.length === 1;")
        #expect(try await Self.events(browser) == ["AbortError"])
    }
}
