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
import WebMerchantAPI

/// The demo's web row without a browser (docs/web.md, part 3): the calls a browser and the device's browser agent
/// make for the demo store at https://store.orchard.test, in this process. The row through a real Chromium is the
/// browser tests' (`Tests/BrowserTests`); the demo runs no browser.
enum DemoWeb {
    static let channel = "web (no browser)"

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
