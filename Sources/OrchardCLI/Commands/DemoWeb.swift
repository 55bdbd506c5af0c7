import AppPayments
import BrowserAgentAPI
import Device
import DeviceProcess
import Foundation
import MerchantAPI
import MerchantServer
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardX509
import PayClient
import SecureElement
import WebDriverClient
import WebMerchantAPI

#if canImport(Glibc)
    import Glibc
#endif

/// The demo's web row (docs/web.md, part 3). With Chromium installed, a Mac with Touch ID buys in the demo store at
/// https://store.orchard.test in headless Chromium driven over its DevTools pipe, its browser agent in this process
/// (``inChromium(deployment:connections:chromium:context:)``). Without it, the row `web (no browser)`: the calls a browser and
/// the device's browser agent make, in this process, for the phone.
enum DemoWeb {
    static let channel = "web (no browser)"
    static let browserChannel = "web"
    /// The Mac that buys in Chromium.
    static let mac: (name: String, kind: DeviceKind, biometry: Biometry) = ("demo-mac", .mac, .touch)

    /// The web row: in Chromium when Chromium is on `PATH` and certutil is installed, else without a browser (and a
    /// line on stderr saying how to install Chromium).
    static func row(
        deployment: DeploymentDirectory, connections: ServiceConnections, phone: Device, context: CommandContext
    ) async throws -> DemoInStore.Row {
        guard let chromium = locateChromium(context.environment) else {
            context.trace(
                "Chromium was not found (chromium on PATH, certutil): the web row runs "
                    + "without a browser; to buy in Chromium, \(Chromium.installHint)")
            return try await run(
                deployment: deployment, connections: connections, device: phone,
                trace: { context.trace("  " + $0) })
        }
        return try await inChromium(
            deployment: deployment, connections: connections, chromium: chromium, context: context)
    }

    /// Chromium on the environment's `PATH` (the default path without one), when certutil is installed too; nil
    /// otherwise.
    static func locateChromium(_ environment: [String: String]) -> String? {
        guard BrowserCommands.certutil != nil else { return nil }
        return Chromium.locateBrowser(searchPath: environment["PATH"])
    }

    /// The Mac buys Tea in headless Chromium: `orchard browser setup`'s NSS profile and arguments (the names resolved
    /// to the services this demo reaches), its DevTools pipe, the store page, the sheet page, Touch ID, the
    /// confirmation.
    static func inChromium(
        deployment: DeploymentDirectory, connections: ServiceConnections, chromium: String, context: CommandContext
    ) async throws -> DemoInStore.Row {
        let trace: @Sendable (String) -> Void = { context.trace("  " + $0) }
        let (_, devices) = try await DemoProvisioning.run(
            deployment: deployment, connections: connections, trace: trace, only: [mac.name], specs: [mac])
        guard let device = devices[mac.name] else { throw CLIError.failure("the demo Mac is missing") }
        guard let payPort = connections.endpoints[.pay]?.port else { throw CLIError.failure("no Pay server") }
        let root = try Certificate(pemEncoded: connections.rootCertificatePEM)
        let agent = try BrowserAgentHost(
            device: device,
            configuration: try BrowserCommands.agentConfiguration(
                deployment: deployment, port: 0, handlerTimeout: .seconds(10), context: context, payPort: payPort),
            connect: {
                PaymentSheetService.PayServerConnection(
                    client: try PaySession.client(device: mac.name, in: deployment, connections: connections),
                    root: root, close: {})
            }, trace: trace)
        do {
            let orderID =
                try await inBrowser(
                    deployment: deployment, connections: connections, chromium: chromium, agentPort: agent.port,
                    context: context
                ) { session in [try await buy(session, trace: trace)] }.first ?? ""
            await agent.stop()
            return try await paidRow(
                orderID: orderID, channel: browserChannel, device: mac.name, connections: connections)
        } catch {
            await agent.stop()
            throw error
        }
    }

    /// Headless Chromium with `orchard browser setup`'s NSS profile and arguments (the names resolved to the services
    /// this demo reaches, agent.orchard.test to `agentPort`), driven over its DevTools pipe: no chromedriver and no
    /// port another user of the machine could drive the browser through (docs/security.md, U4). `body`'s order
    /// identifiers.
    static func inBrowser(
        deployment: DeploymentDirectory, connections: ServiceConnections, chromium: String,
        agentPort: Int, context: CommandContext, body: (DevToolsBrowser) async throws -> [String]
    ) async throws -> [String] {
        let trace: @Sendable (String) -> Void = { context.trace("  " + $0) }
        guard let sitePort = connections.endpoints[.merchant]?.ports["site"],
            let payPort = connections.endpoints[.pay]?.port
        else {
            throw CLIError.failure("the merchant server runs no site for \(WebMerchantAPI.HostNames.store)")
        }
        let profile = FileManager.default.temporaryDirectory.appendingPathComponent(
            "orchard-demo-chromium-\(UUID().uuidString)"
        ).path
        var pipe: DevToolsPipe?
        var process: Subprocess?
        var browser: DevToolsBrowser?
        do {
            var names = try DeploymentCommands.registry().loadConfiguration(
                from: deployment, environment: context.environment
            ).hostNames
            names[WebMerchantAPI.HostNames.store] = sitePort
            names[WebMerchantAPI.HostNames.pay] = payPort
            names[WebMerchantAPI.HostNames.gateway] = payPort
            names[BrowserAgentAPI.host] = agentPort
            let arguments = try await BrowserCommands.chromiumArguments(
                deployment: deployment, names: names, profile: profile)
            let devTools = try DevToolsPipe()
            pipe = devTools
            process = try Subprocess(
                chromium,
                arguments + [
                    "--headless=new", "--window-size=1000,900", "--disable-gpu", "--remote-debugging-pipe",
                    "about:blank",
                ], environment: ["HOME": profile], stdoutPath: profile + "/chromium.log",
                stderrPath: profile + "/chromium.log", inherited: devTools.childDescriptors)
            devTools.browserStarted()
            trace("headless Chromium (DevTools over a pipe, no port), profile \(profile)")
            let session = try await DevToolsBrowser(pipe: devTools)
            browser = session
            let orders = try await body(session)
            await end(browser: session, pipe: devTools, process: process)
            try? FileManager.default.removeItem(atPath: profile)
            return orders
        } catch {
            // The log goes into the error: the profile, with it, is removed.
            let log = (try? String(contentsOfFile: profile + "/chromium.log", encoding: .utf8)) ?? ""
            await end(browser: browser, pipe: pipe, process: process)
            try? FileManager.default.removeItem(atPath: profile)
            let detail = log.isEmpty ? "" : "; Chromium's log ends: \(log.suffix(400))"
            throw CLIError.failure("the web payment in Chromium failed: \(error)\(detail)")
        }
    }

    /// Ends Chromium: `Browser.close` and the pipe closed, then SIGTERM, then SIGKILL, 5 s apart.
    private static func end(browser: DevToolsBrowser?, pipe: DevToolsPipe?, process: Subprocess?) async {
        await browser?.quit()
        pipe?.close()
        guard let process else { return }
        for _ in 0..<50 where process.isRunning { try? await Task.sleep(for: .milliseconds(100)) }
        if process.isRunning { process.send(SIGTERM) }
        _ = await process.exit(within: 5)  // SIGKILL after that
    }

    /// The store, Tea in the cart, Apple Pay, the contact on the sheet, Touch ID: the order's identifier.
    private static func buy(_ browser: DevToolsBrowser, trace: @Sendable (String) -> Void) async throws -> String {
        try await browser.navigate("https://" + WebMerchantAPI.HostNames.store + "/")
        try await browser.wait("the Apple Pay button", until: "return document.body.dataset.applePay === 'available';")
        trace("Chromium: the store shows the Apple Pay button (orchard-pay.js, the Mac's browser agent)")
        try await browser.click("button[data-item=Tea]")
        let store = try await browser.currentWindow
        let known = try await browser.windowHandles
        try await browser.click("#apple-pay")
        _ = try await browser.switchToNewWindow(besides: known)
        try await browser.wait("the sheet", until: "return !document.getElementById('details').hidden;")
        trace("Chromium: the sheet page of agent.orchard.test is open")
        // The demo contact (PaymentSheetService.demoContact), typed on the sheet.
        for (field, value) in [
            ("name", "Alice Appleseed"), ("email", "alice@example.com"), ("phone", "+1 555 0100"),
            ("street", "1 Orchard Way"), ("city", "Cupertino"), ("state", "CA"), ("postalCode", "95014"),
        ] {
            try await browser.type("#contact input[name=\(field)]", value)
        }
        try await browser.click("#use-contact")
        try await browser.wait(
            "the contact applied", until: "return !document.getElementById('contact-summary').hidden;")
        try await browser.click("#pay-touch-id")
        try await browser.wait("the sheet to finish", until: "return document.title === 'Apple Pay: Done';")
        trace("Chromium: Touch ID on the sheet; the token went to the store")
        try await browser.closeWindow()
        try await browser.switchTo(store)
        try await browser.wait("the confirmation", until: "return location.pathname === '/confirmation';")
        return try await browser.string("return new URLSearchParams(location.search).get('order') || '';")
    }

    /// The merchant server's answer for the order the browser paid (its order route, on its API port).
    static func paidRow(
        orderID: String, channel: String, device: String, connections: ServiceConnections
    ) async throws -> DemoInStore.Row {
        guard let merchant = connections.endpoints[.merchant] else { throw CLIError.failure("no merchant server") }
        let client = try HTTPClient(
            configuration: HTTPClientConfiguration(trustedRootsPEM: connections.rootCertificatePEM, maxAttempts: 1))
        defer { client.shutdown() }
        let answer = try await client.send(
            HTTPClientRequest(
                method: .get, url: "https://127.0.0.1:\(merchant.port)" + MerchantAPI.Route.order(orderID)))
        guard answer.status == .ok else {
            throw CLIError.failure("the merchant server has no order \(orderID): \(answer.status.code)")
        }
        let order = try JSONDecoder().decode(MerchantAPI.OrderStatus.self, from: answer.body)
        guard let payment = order.payment else { throw CLIError.failure("order \(orderID) has no payment") }
        return DemoInStore.Row(
            channel: channel, device: device, card: payment.maskedPAN,
            amount: order.total + " " + order.currency, result: payment.outcome, responseCode: payment.responseCode)
    }

    static func run(
        deployment: DeploymentDirectory, connections: ServiceConnections, device: Device,
        trace: @escaping @Sendable (String) -> Void
    ) async throws -> DemoInStore.Row {
        trace("no browser in the demo: it makes the calls Chromium and the device's browser agent would")
        // The site's port: the running merchant server's (a service started for the demo listens on a free port).
        guard let sitePort = connections.endpoints[.merchant]?.ports["site"] else {
            throw CLIError.failure("the merchant server runs no site for \(WebMerchantAPI.HostNames.store)")
        }
        let browser = try HTTPClient(
            configuration: HTTPClientConfiguration(
                trustedRootsPEM: connections.rootCertificatePEM, maxAttempts: 1,
                connectTo: [WebMerchantAPI.HostNames.store: sitePort]))
        defer { browser.shutdown() }
        let store = "https://" + WebMerchantAPI.HostNames.store
        // onvalidatemerchant: the page asks its server, which asks the gateway with its identity certificate.
        let answer = try await browser.send(
            try HTTPClientRequest.json(
                .post, store + MerchantAPI.Web.merchantSession,
                MerchantAPI.MerchantSessionRequest(validationURL: BrowserAgentAPI.validationURL)))
        guard answer.status == .ok else {
            throw CLIError.failure(
                "the store gave no merchant session: \(String(decoding: answer.body, as: UTF8.self))")
        }
        let session = try MerchantSession(json: Array(answer.body))
        // The device's check before any sheet.
        let check = try MerchantSessionCheck(
            tokenRoot: try DeploymentPKI.readCertificate(named: "token-root", from: deployment), clock: SystemClock())
        if let problem = check.problem(with: session, domain: WebMerchantAPI.HostNames.store) {
            throw CLIError.failure("the device refused the merchant session: \(problem)")
        }
        trace("device: merchant session verified (token-signing chain, \(session.domainName), unused, fresh)")
        let applicationData = Data(SystemRandom().bytes(16))
        let request = PaymentRequest(
            merchantIdentifier: session.merchantIdentifier, countryCode: "US", currencyCode: "USD",
            supportedNetworks: [PaymentNetwork(rawValue: "visa"), PaymentNetwork(rawValue: "masterCard")],
            merchantCapabilities: MerchantCapabilities(names: ["supports3DS"]),
            paymentSummaryItems: [
                PaymentSummaryItem(label: "Tea", amount: "4.50"),
                PaymentSummaryItem(label: "Orchard Demo Store", amount: "4.50"),
            ], applicationData: applicationData, requiredShippingContactFields: [.name, .postalAddress])
        let sheet = DevicePaymentSheet(
            device: device,
            client: try PaySession.client(device: device.name, in: deployment, connections: connections),
            root: try Certificate(pemEncoded: connections.rootCertificatePEM),
            user: AcceptingSheetUser(contact: PaymentSheetService.demoContact), trace: { trace("  " + $0) })
        let page = StorePage(browser: browser, store: store, applicationData: applicationData)
        let outcome = try await sheet.present(
            request,
            web: WebPaymentContext(
                domain: WebMerchantAPI.HostNames.store, merchantSessionIdentifier: session.merchantSessionIdentifier,
                merchantSessionNonce: session.nonce), delegate: page)
        guard case .completed = outcome, let result = page.result else {
            throw CLIError.failure("the web payment did not complete")
        }
        return DemoInStore.Row(
            channel: channel, device: device.name, card: result.maskedPAN, amount: "4.50 USD", result: result.outcome,
            responseCode: result.responseCode)
    }
}

/// The store's page: on authorization it creates the order with the request's applicationData and posts the
/// ApplePayPayment, as `web/store/store.js` does.
private final class StorePage: PaymentAuthorizationControllerDelegate, @unchecked Sendable {
    // @unchecked: `paid` is guarded by `lock`.
    let browser: HTTPClient
    let store: String
    let applicationData: Data
    private let lock = NSLock()
    private var paid: MerchantAPI.PaymentResult?

    init(browser: HTTPClient, store: String, applicationData: Data) {
        self.browser = browser
        self.store = store
        self.applicationData = applicationData
    }

    var result: MerchantAPI.PaymentResult? { lock.withLock { paid } }

    func didSelectPaymentMethod(_ method: PaymentMethod, request: PaymentRequest) async -> PaymentRequestUpdate {
        PaymentRequestUpdate(paymentSummaryItems: request.paymentSummaryItems, shippingMethods: nil)
    }

    func didAuthorizePayment(_ payment: Payment) async -> PaymentAuthorizationResult {
        do {
            let created = try await browser.send(
                try HTTPClientRequest.json(
                    .post, store + MerchantAPI.Route.orders,
                    MerchantAPI.CreateOrder(
                        item: "Tea", amount: "4.50", currency: "USD", applicationData: applicationData)))
            let order = try JSONDecoder().decode(MerchantAPI.OrderCreated.self, from: created.body)
            let contact = payment.shippingContact
            let submission = MerchantAPI.PaymentSubmission(
                token: payment.token,
                shippingContact: contact.map {
                    MerchantAPI.Contact(
                        name: $0.name.map { MerchantAPI.Contact.Name(full: $0) },
                        addressLines: $0.postalAddress.map { [$0.street] }, locality: $0.postalAddress?.city,
                        administrativeArea: $0.postalAddress?.state, postalCode: $0.postalAddress?.postalCode,
                        countryCode: $0.postalAddress?.country)
                })
            let answer = try await browser.send(
                HTTPClientRequest(
                    method: .post, url: store + MerchantAPI.Web.payment(order.orderID),
                    headers: ["Content-Type": "application/json"], body: try submission.body()))
            let result = try JSONDecoder().decode(MerchantAPI.PaymentResult.self, from: answer.body)
            lock.withLock { paid = result }
            return PaymentAuthorizationResult(status: result.outcome == "approved" ? .success : .failure)
        } catch {
            return PaymentAuthorizationResult(status: .failure, errors: ["\(error)"])
        }
    }
}
