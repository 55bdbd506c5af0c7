import CardBasics
import Device
import Foundation
import MerchantAPI
import MerchantKit
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardStore
import OrchardX509
import PayAPI
import PayClient
import PayServer
import PaymentToken
import SecureElement
import Testing
import Wallet
import WebMerchantAPI

@testable import MerchantServer

/// The web side of the sandbox: the merchant's server asks the gateway for a merchant session with its identity
/// certificate; the phone makes a web credential bound to it; the Pay server exchanges it for a token.
extension MerchantSandbox {
    static let storeDomain = "store.orchard.test"

    /// A merchant session from `https://apple-pay-gateway.orchard.test/paymentservices/paymentSession`, as the
    /// demo merchant's server asks for it (mutual TLS, pki/merchant-identity).
    func merchantSession(domain: String = MerchantSandbox.storeDomain) async throws -> MerchantSession {
        let port = try #require(connections.endpoints[.pay]?.port)
        let identity = try TLSIdentity.load(named: "merchant-identity", from: deployment)
        let client = try HTTPClient(
            configuration: HTTPClientConfiguration(
                trustedRootsPEM: connections.rootCertificatePEM,
                clientCertificateChainPEM: identity.certificateChainPEM,
                clientPrivateKeyPEM: identity.privateKeyPEM, maxAttempts: 1,
                connectTo: [WebMerchantAPI.HostNames.gateway: port]))
        defer { client.shutdown() }
        let answer = try await client.send(
            try HTTPClientRequest.json(
                .post, "https://" + WebMerchantAPI.HostNames.gateway + WebMerchantAPI.Gateway.paymentSession,
                PaymentSessionRequest(
                    merchantIdentifier: "merchant.dev.orchard.demo", displayName: "Orchard Demo Store",
                    initiativeContext: domain)))
        try #require(answer.status == .ok, "\(String(decoding: answer.body, as: UTF8.self))")
        return try MerchantSession(json: Array(answer.body))
    }

    /// Face ID for a web payment, a nonce, and the Secure Element's version 2 credential for the page at
    /// `domain` bound to `session`.
    func webCredential(
        session: MerchantSession, domain: String = MerchantSandbox.storeDomain, amount: Int64,
        applicationData: [UInt8]?, merchant: String = "merchant.dev.orchard.demo"
    ) async throws -> [UInt8] {
        let paymentAmount = try PaymentAmount(minorUnits: amount, currency: 840)
        let outcome = try await phone.authenticate(
            .faceID(matched: true), for: .web, card: cardID, amount: paymentAmount)
        guard case .authorized(let statement) = outcome else {
            Issue.record("Face ID did not authorize")
            return []
        }
        let client = try deviceClient()
        defer { client.shutdown() }
        let pay = try connections.baseURL(of: .pay)
        let certificate = try await client.get(pay + PayAPI.Route.credentialCertificate)
            .decodeJSON(CredentialCertificateResponse.self)
        let key = try PayCredentialKey(
            certificate: try Certificate(pemEncoded: certificate.certificate), root: root, now: Date())
        let nonceAnswer = try await client.post(pay + PayAPI.Route.paymentNonce, json: [String: String]())
        let nonce = try #require(
            Data(base64Encoded: try nonceAnswer.decodeJSON(PaymentNonceResponse.self).nonce).map { Array($0) })
        return try await phone.secureElement.remotePaymentCredential(
            authorization: statement, card: try CardIdentifier(hex: cardID),
            request: try RemotePaymentRequest(
                merchantIdentifier: merchant, applicationIdentifier: domain, amount: paymentAmount,
                applicationDataHash: applicationData.map { SHA256.hash($0) },
                merchantSessionIdentifier: session.merchantSessionIdentifier, merchantSessionNonce: session.nonce),
            nonce: nonce, payServerKey: key.publicKey)
    }

    /// The phone's exchange of a sealed credential at the Pay server, whatever the answer.
    func exchange(_ sealed: [UInt8]) async throws -> HTTPResponse {
        let client = try deviceClient()
        defer { client.shutdown() }
        return try await client.post(
            try connections.baseURL(of: .pay) + PayAPI.Route.paymentCredential,
            json: PaymentCredentialExchange(
                credential: Data(sealed).base64EncodedString(),
                paymentMethod: PaymentMethodDisplay(displayName: "Visa 1111", network: "visa", type: "credit")))
    }

    func deviceClient() throws -> HTTPClient {
        let identity = try Device.clientIdentity(of: "phone", in: deployment)
        return try connections.client(
            identity: TLSIdentity(
                certificateChainPEM: identity.certificateChainPEM, privateKeyPEM: identity.privateKeyPEM))
    }
}

@Suite("Web payments: merchant sessions, web credentials, tokens", .serialized)
struct WebPaymentTests {
    @Test("W4: a web purchase without a browser: gateway session, the phone's web credential, token, charge approved")
    func webPurchase() async throws {
        let s = try await MerchantSandbox()
        try await s.provisionPhone()
        let order = try await s.createOrder()
        let session = try await s.merchantSession()
        let sealed = try await s.webCredential(session: session, amount: 999, applicationData: order.applicationData)
        let exchanged = try await s.exchange(sealed)
        try #require(exchanged.status == .ok, "\(String(decoding: exchanged.body, as: UTF8.self))")
        let paid = try await MerchantServerTests.payWithContacts(
            s, order.id, token: String(decoding: exchanged.body, as: UTF8.self))
        try #require(paid.status == .ok, "\(String(decoding: paid.body, as: UTF8.self))")
        #expect(MerchantSandbox.json(paid)["outcome"] as? String == "approved")

        // The same session again: used.
        let replay = try await s.exchange(
            try await s.webCredential(session: session, amount: 999, applicationData: order.applicationData))
        #expect(replay.status == .conflict && MerchantSandbox.errorCode(replay) == "sessionUsed")
        // A page on another domain than the session's.
        let fresh = try await s.merchantSession()
        let elsewhere = try await s.exchange(
            try await s.webCredential(session: fresh, domain: "evil.orchard.test", amount: 999, applicationData: nil))
        #expect(elsewhere.status == .forbidden && MerchantSandbox.errorCode(elsewhere) == "sessionMismatch")
        // Another merchant's credential with this merchant's session.
        let other = try await s.exchange(
            try await s.webCredential(
                session: fresh, amount: 999, applicationData: nil, merchant: "merchant.dev.someone-else"))
        #expect(other.status == .forbidden && MerchantSandbox.errorCode(other) == "sessionMismatch")
        // Two credentials racing for one session: one token.
        let first = try await s.webCredential(session: fresh, amount: 500, applicationData: nil)
        let second = try await s.webCredential(session: fresh, amount: 500, applicationData: nil)
        async let a = s.exchange(first)
        async let b = s.exchange(second)
        let statuses = try await [a, b].map(\.status)
        #expect(statuses.filter { $0 == .ok }.count == 1 && statuses.contains(.conflict))
        await s.close()
    }

    @Test("W3, W4: a scripted browser buys at store.orchard.test: order, merchant session, the phone's token, payment")
    func scriptedBrowser() async throws {
        let channels = ChannelLog()
        let s = try await MerchantSandbox(gateway: { directory, peers in
            ChannelRecordingGateway(real: try AcquirerHTTPSGateway(directory: directory, peers: peers), log: channels)
        })
        try await s.provisionPhone()
        // The browser: the page's origin only, https://store.orchard.test, mapped to the merchant's site listener.
        let sitePort = try s.registry.loadConfiguration(from: s.deployment, environment: [:])[MerchantService.sitePort]
        let browser = try HTTPClient(
            configuration: HTTPClientConfiguration(
                trustedRootsPEM: s.connections.rootCertificatePEM, maxAttempts: 1,
                connectTo: [WebMerchantAPI.HostNames.store: sitePort]))
        defer { browser.shutdown() }
        let origin = "https://" + WebMerchantAPI.HostNames.store
        let created = try await browser.send(
            try HTTPClientRequest.json(
                .post, origin + MerchantAPI.Route.orders, MerchantAPI.CreateOrder(item: "Tea", amount: "4.50")))
        try #require(created.status == .created, "\(String(decoding: created.body, as: UTF8.self))")
        let order = try JSONDecoder().decode(MerchantAPI.OrderCreated.self, from: created.body)
        let applicationData = Array(try #require(Data(base64Encoded: order.applicationData)))

        // onvalidatemerchant: the page sends the validation URL; the session comes back untouched.
        let validationURL = "https://apple-pay-gateway.orchard.test/paymentservices/paymentSession"
        let answer = try await browser.send(
            try HTTPClientRequest.json(
                .post, origin + MerchantAPI.Web.merchantSession,
                MerchantAPI.MerchantSessionRequest(validationURL: validationURL)))
        try #require(answer.status == .ok, "\(String(decoding: answer.body, as: UTF8.self))")
        let session = try MerchantSession(json: Array(answer.body))
        #expect(session.domainName == WebMerchantAPI.HostNames.store)
        // The device checks the session as Safari does: signed by the token-signing chain, fresh.
        let tokenRoot = try DeploymentPKI.readCertificate(named: "token-root", from: s.deployment)
        #expect(
            MerchantSessions.problem(
                with: session, verifier: try MerchantSessions.verifier(root: tokenRoot, clock: SystemClock()),
                now: Date()) == nil)

        // onpaymentauthorized: the phone's web credential, the token, the ApplePayPayment posted.
        let sealed = try await s.webCredential(session: session, amount: 450, applicationData: applicationData)
        let exchanged = try await s.exchange(sealed)
        try #require(exchanged.status == .ok, "\(String(decoding: exchanged.body, as: UTF8.self))")
        let payment = MerchantAPI.PaymentSubmission(
            token: exchanged.body, shippingContact: MerchantServerTests.shippingContact,
            billingContact: MerchantServerTests.billingContact)
        let paid = try await browser.send(
            HTTPClientRequest(
                method: .post, url: origin + MerchantAPI.Web.payment(order.orderID),
                headers: ["Content-Type": "application/json"], body: try payment.body()))
        try #require(paid.status == .ok, "\(String(decoding: paid.body, as: UTF8.self))")
        #expect(MerchantSandbox.json(paid)["outcome"] as? String == "approved")
        // Charged at the acquirer as a web payment (the app route's charges are in-app).
        #expect(channels.web == [true])

        // No SSRF: a validation URL elsewhere is refused, nothing is sent with the identity certificate.
        let ssrf = try await browser.send(
            try HTTPClientRequest.json(
                .post, origin + MerchantAPI.Web.merchantSession,
                MerchantAPI.MerchantSessionRequest(validationURL: "https://evil.example/paymentservices/paymentSession")
            ))
        #expect(ssrf.status == .badRequest && MerchantSandbox.errorCode(ssrf) == "malformedRequest")
        await s.close()
    }

    @Test(
        "The page's merchant-session body giving validationURL twice is 400 duplicate_key, whatever the order; no session is asked for"
    )
    func merchantSessionBodyWithAKeyTwice() async throws {
        // The merchant server built here, as in the scripted browser's test: it serves the site listener.
        let s = try await MerchantSandbox(gateway: { directory, peers in
            try AcquirerHTTPSGateway(directory: directory, peers: peers)
        })
        let sitePort = try s.registry.loadConfiguration(from: s.deployment, environment: [:])[MerchantService.sitePort]
        let browser = try HTTPClient(
            configuration: HTTPClientConfiguration(
                trustedRootsPEM: s.connections.rootCertificatePEM, maxAttempts: 1,
                connectTo: [WebMerchantAPI.HostNames.store: sitePort]))
        defer { browser.shutdown() }
        let gateway = "https://apple-pay-gateway.orchard.test/paymentservices/paymentSession"
        let elsewhere = "https://evil.example/paymentservices/paymentSession"
        for (first, second) in [(gateway, elsewhere), (elsewhere, gateway)] {
            let answer = try await browser.send(
                HTTPClientRequest(
                    method: .post, url: "https://" + WebMerchantAPI.HostNames.store + MerchantAPI.Web.merchantSession,
                    headers: ["Content-Type": "application/json"],
                    body: Data(#"{"validationURL":"\#(first)","validationURL":"\#(second)"}"#.utf8)))
            #expect(
                answer.status == .badRequest && MerchantSandbox.errorCode(answer) == "duplicate_key",
                "\(String(decoding: answer.body, as: UTF8.self))")
        }
        // Nothing reached the gateway: it recorded no merchant session.
        let payStore = try PayStore.open(in: s.deployment)
        let sessions = try await payStore.read { db in
            try db.queryFirst("SELECT count(*) FROM merchant_sessions", []) { try $0.int(0) }
        }
        #expect(sessions == 0)
        await payStore.close()
        await s.close()
    }

    @Test(
        "W3: canMakePaymentsWithActiveCard: the wallet asks pay.orchard.test without a certificate, believes only a signed statement"
    )
    func activeCardQuery() async throws {
        let s = try await MerchantSandbox()
        try await s.provisionPhone()
        let port = try #require(s.connections.endpoints[.pay]?.port)
        // No client certificate: the Pay server cannot tell which device asks.
        let anonymous = try HTTPClient(
            configuration: HTTPClientConfiguration(
                trustedRootsPEM: s.connections.rootCertificatePEM, maxAttempts: 1,
                connectTo: [WebMerchantAPI.HostNames.pay: port]))
        defer { anonymous.shutdown() }
        let tokenRoot = try DeploymentPKI.readCertificate(named: "token-root", from: s.deployment)
        let check = try WebCapabilityCheck(
            client: anonymous, baseURL: "https://" + WebMerchantAPI.HostNames.pay, tokenRoot: tokenRoot,
            clock: SystemClock())
        func ask(_ domain: String, _ check: WebCapabilityCheck) async throws -> Bool {
            try await s.phone.wallet.answer(.canMakePaymentsWithActiveCard(networks: ["visa"])) {
                try await check.isValidated(merchantIdentifier: "merchant.dev.orchard.demo", domain: domain)
            }
        }
        #expect(try await ask(MerchantSandbox.storeDomain, check))
        #expect(!(try await ask("elsewhere.orchard.test", check)))
        // A statement that does not verify to the token root the device holds: false.
        let foreign = try TokenSigningPKI.generate(
            notValidBefore: Date().addingTimeInterval(-3600), notValidAfter: Date().addingTimeInterval(3600))
        let distrusting = try WebCapabilityCheck(
            client: anonymous, baseURL: "https://" + WebMerchantAPI.HostNames.pay, tokenRoot: foreign.root,
            clock: SystemClock())
        #expect(!(try await ask(MerchantSandbox.storeDomain, distrusting)))
        await s.close()
    }
}

/// Which charges the merchant server sent as web payments.
final class ChannelLog: @unchecked Sendable {
    private let lock = NSLock()
    private var charges: [Bool] = []
    var web: [Bool] { lock.withLock { charges } }
    func record(_ web: Bool) { lock.withLock { charges.append(web) } }
}

/// The real acquirer gateway, noting each charge's channel.
final class ChannelRecordingGateway: AcquirerGateway {
    let real: any AcquirerGateway
    let log: ChannelLog
    init(real: any AcquirerGateway, log: ChannelLog) {
        self.real = real
        self.log = log
    }

    func authorize(_ charge: AcquirerCharge) async -> AcquirerOutcome<AcquirerDecision> {
        log.record(charge.web)
        return await real.authorize(charge)
    }

    func reverse(
        merchantID: String, idempotencyKey: String, amountMinorUnits: Int64, currency: String, reason: String
    ) async -> AcquirerOutcome<Bool> {
        await real.reverse(
            merchantID: merchantID, idempotencyKey: idempotencyKey, amountMinorUnits: amountMinorUnits,
            currency: currency, reason: reason)
    }
}
