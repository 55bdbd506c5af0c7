import CommandTestSupport
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
        let second = try await sandbox.merchantSession()
        let page = try await browser.currentWindow
        let known = try await browser.windowHandles
        try await Self.gestureButton(
            browser,
            """
            const sessions = [\(merchantSession), \(second)];
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

    @Test(
        "Payment Request retry() as WebKit: payer errors become shippingContactInvalid at the field (address errors only when shipping was asked), the sheet stays, a fresh merchant session, the user corrects the email and authorizes again: payerdetailchange, the retry resolves with the new payment; a second retry, complete during a retry and retry after complete are InvalidStateError, a plain object for an ApplePayError is TypeError"
    )
    func paymentRequestRetry() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        let first = try await Self.storePageAndSession(sandbox, browser)
        let second = try await sandbox.merchantSession()
        let page = try await browser.currentWindow
        let known = try await browser.windowHandles
        try await Self.gestureButton(
            browser,
            """
            const sessions = [\(first), \(second)];
            const request = new PaymentRequest(
                [{ supportedMethods: 'https://apple.com/apple-pay',
                   data: { version: 3, merchantIdentifier: 'merchant.dev.orchard.demo', countryCode: 'US',
                           merchantCapabilities: ['supports3DS'], supportedNetworks: ['visa'] } }],
                { total: { label: 'Orchard Demo Store', amount: { currency: 'USD', value: '1.00' } } },
                { requestPayerName: true, requestPayerEmail: true });
            let validations = 0;
            request.onmerchantvalidation = (event) => {
                validations += 1;
                window.__events.push('validation ' + validations);
                event.complete(Promise.resolve(sessions[validations - 1]));
            };
            const push = (text) => window.__events.push(text);
            request.show().then(async (response) => {
                push('response ' + response.payerName + ' ' + response.payerEmail + ' ' + response.shippingAddress);
                response.onpayerdetailchange = (event) => push('payerdetailchange ' + response.payerEmail);
                await response.retry({ paymentMethod: [{ code: 'unknown' }] }).catch((e) => push('plain ' + e.name));
                const retried = response.retry({
                    payer: { email: 'Use a work address.' }, shippingAddress: { city: 'No shipping was asked.' } });
                await response.retry({}).catch((e) => push('second retry ' + e.name));
                await response.complete('success').catch((e) => push('complete during retry ' + e.name));
                await request.abort().catch((e) => push('abort during retry ' + e.name));
                await retried;
                push('retried ' + response.payerEmail + ' ' + typeof response.details.token.paymentData);
                await response.complete('success');
                push('completed');
                await response.retry().catch((e) => push('retry after complete ' + e.name));
            }).catch((e) => push('rejected ' + e.name + ' ' + e.message));
            return 'shown';
            """)
        _ = try await browser.switchToNewWindow(besides: known)
        try await browser.wait("the sheet", until: "return !document.getElementById('details').hidden;")
        try await Self.giveContact(browser)
        try await browser.click("#pay-face-id")
        // The page's retry: the sheet stays, WebKit's error at the email only (no shipping was asked).
        try await browser.wait(
            "the error at the contact",
            until: """
                return document.getElementById('contact-errors').textContent === 'Use a work address.'
                    && !document.getElementById('contact').hidden;
                """)
        _ = try await browser.evaluate(
            "document.querySelector('#contact input[name=email]').value = 'bob@work.example'; return true;")
        try await browser.click("#use-contact")
        try await browser.wait(
            "the corrected contact and the fresh session",
            until: """
                return document.getElementById('contact-errors').hidden
                    && !document.getElementById('pay-face-id').disabled;
                """)
        try await browser.click("#pay-face-id")
        try await browser.wait("the sheet to finish", until: "return document.title === 'Apple Pay: Done';")
        try await browser.closeWindow()
        try await browser.switchTo(page)
        try await browser.wait(
            "the retry after complete", until: "return window.__events.some((e) => e.startsWith('retry after'));")
        let events = try await Self.events(browser)
        #expect(
            events == [
                "validation 1", "response Bob Appleseed bob@example.com null", "plain TypeError",
                "second retry InvalidStateError", "complete during retry InvalidStateError",
                "abort during retry InvalidStateError", "validation 2", "payerdetailchange bob@work.example",
                "retried bob@work.example object", "completed", "retry after complete InvalidStateError",
            ], "\(events)")
    }

    @Test(
        "Payment Request retry(): with no errors the sheet still stays (WebKit adds an unknown error), and the user cancelling rejects the retry with AbortError"
    )
    func paymentRequestRetryCancelled() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        let merchantSession = try await Self.storePageAndSession(sandbox, browser)
        let second = try await sandbox.merchantSession()
        let page = try await browser.currentWindow
        let known = try await browser.windowHandles
        try await Self.gestureButton(
            browser,
            """
            const sessions = [\(merchantSession), \(second)];
            const request = new PaymentRequest(
                [{ supportedMethods: 'https://apple.com/apple-pay',
                   data: { version: 14, merchantIdentifier: 'merchant.dev.orchard.demo', countryCode: 'US',
                           merchantCapabilities: ['supports3DS'], supportedNetworks: ['visa'] } }],
                { total: { label: 'Orchard Demo Store', amount: { currency: 'USD', value: '1.00' } } },
                { requestPayerEmail: true });
            request.onmerchantvalidation = (event) => event.complete(sessions.shift());
            request.show().then((response) => {
                window.__events.push('response');
                return response.retry().then(() => window.__events.push('retried'),
                    (e) => window.__events.push('retry ' + e.name));
            }, (e) => window.__events.push('show ' + e.name));
            return 'shown';
            """)
        _ = try await browser.switchToNewWindow(besides: known)
        try await browser.wait("the sheet", until: "return !document.getElementById('details').hidden;")
        try await Self.giveContact(browser)
        try await browser.click("#pay-face-id")
        try await browser.wait(
            "the sheet kept with the fresh session",
            until: """
                return document.getElementById('contact-errors').textContent === 'unknown'
                    && !document.getElementById('pay-face-id').disabled;
                """)
        try await browser.click("#cancel")
        try await browser.wait("the sheet to end", until: "return document.title === 'Apple Pay: Cancelled';")
        try await browser.closeWindow()
        try await browser.switchTo(page)
        try await browser.wait("the retry to reject", until: "return window.__events.length === 2;")
        #expect(try await Self.events(browser) == ["response", "retry AbortError"])
    }

    @Test(
        "Payment Request payerdetailchange: updateWith with payerErrors keeps the sheet again with the error, and the retry resolves only after the next authorization"
    )
    func payerDetailChangeWithErrors() async throws {
        let sandbox = try sandbox
        let browser = try await sandbox.browser(for: BrowserSandbox.phone)
        var sessions = [try await Self.storePageAndSession(sandbox, browser)]
        for _ in 0..<2 {
            sessions.append(try await sandbox.merchantSession())
        }
        let page = try await browser.currentWindow
        let known = try await browser.windowHandles
        try await Self.gestureButton(
            browser,
            """
            const sessions = [\(sessions.joined(separator: ", "))];
            const push = (text) => window.__events.push(text);
            const request = new PaymentRequest(
                [{ supportedMethods: 'https://apple.com/apple-pay',
                   data: { version: 14, merchantIdentifier: 'merchant.dev.orchard.demo', countryCode: 'US',
                           merchantCapabilities: ['supports3DS'], supportedNetworks: ['visa'] } }],
                { total: { label: 'Orchard Demo Store', amount: { currency: 'USD', value: '1.00' } } },
                { requestPayerEmail: true });
            request.onmerchantvalidation = (event) => event.complete(sessions.shift());
            request.show().then(async (response) => {
                push('response ' + response.payerEmail);
                response.addEventListener('payerdetailchange', (event) => {
                    push('payerdetailchange ' + response.payerEmail);
                    event.updateWith(Promise.resolve(response.payerEmail.endsWith('@work.example')
                        ? {} : { payerErrors: { email: 'Still not a work address.' } }));
                });
                await response.retry({ payer: { email: 'Use a work address.' } });
                push('retried ' + response.payerEmail);
                await response.complete('success');
                push('completed');
            }).catch((e) => push('rejected ' + e.name));
            return 'shown';
            """)
        _ = try await browser.switchToNewWindow(besides: known)
        try await browser.wait("the sheet", until: "return !document.getElementById('details').hidden;")
        try await Self.giveContact(browser)
        try await browser.click("#pay-face-id")
        func correct(_ email: String, after error: String) async throws {
            try await browser.wait(
                "the error \(error)",
                until: "return document.getElementById('contact-errors').textContent === '\(error)';")
            _ = try await browser.evaluate(
                "document.querySelector('#contact input[name=email]').value = '\(email)'; return true;")
            try await browser.click("#use-contact")
            try await browser.wait(
                "the corrected contact and the fresh session",
                until: """
                    return document.getElementById('contact-errors').hidden
                        && !document.getElementById('pay-face-id').disabled;
                    """)
            try await browser.click("#pay-face-id")
        }
        try await correct("bob@home.example", after: "Use a work address.")
        try await correct("bob@work.example", after: "Still not a work address.")
        try await browser.wait("the sheet to finish", until: "return document.title === 'Apple Pay: Done';")
        try await browser.closeWindow()
        try await browser.switchTo(page)
        try await browser.wait("the payment", until: "return window.__events.includes('completed');")
        #expect(
            try await Self.events(browser) == [
                "response bob@example.com", "payerdetailchange bob@home.example", "payerdetailchange bob@work.example",
                "retried bob@work.example", "completed",
            ])
    }
}
