import Device
import Foundation
import MerchantAPI
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardStore
import PayAPI
import PayServer
import Testing
import TokenRequestorAPI

/// `Idempotency-Key` on the real routes of the three servers, each started from `orchard init`'s deployment in
/// this process: the merchant's orders and payments, the Pay server's device routes, and the network's acquiring
/// route, which the merchant server calls with its own key.
@Suite("Idempotency-Key end to end: merchant, Pay server, network")
struct IdempotencyKeyEndToEndTests {
    /// The records of `service`'s Idempotency-Key file: scope and HTTP status.
    static func records(_ s: MerchantSandbox, _ service: String) throws -> [(scope: String, status: Int64?)] {
        let database = try Database(
            path: s.deployment.path + "/" + service + "-idempotency.sqlite", options: StoreOptions(durability: .full),
            access: .readOnly)
        return try database.query("SELECT scope, status FROM orchard_idempotency_keys") { row in
            (try row.string(0), try row.optionalInt64(1))
        }
    }

    func createOrder(_ s: MerchantSandbox, key: String, item: String = "Coffee") async throws -> HTTPResponse {
        try await s.merchantClient.send(
            try HTTPClientRequest.json(
                .post, s.merchantBase + MerchantAPI.Route.orders,
                MerchantAPI.CreateOrder(item: item, amount: "9.99", currency: "USD", applicationData: nil),
                headers: ["Idempotency-Key": key]))
    }

    func pay(
        _ s: MerchantSandbox, _ orderID: String, token: String, key: String, contact: Bool = false
    )
        async throws -> HTTPResponse
    {
        let submission = MerchantAPI.PaymentSubmission(
            token: Data(token.utf8), shippingContact: nil,
            billingContact: contact ? MerchantServerTests.billingContact : nil,
            shippingMethod: nil)
        return try await s.merchantClient.send(
            HTTPClientRequest(
                method: .post, url: s.merchantBase + MerchantAPI.Route.payment(orderID),
                headers: ["Content-Type": "application/json", "Idempotency-Key": key], body: try submission.body()))
    }

    @Test("One order, one hold at the issuer, however often the same request is sent; another body: 422")
    func merchantAndNetwork() async throws {
        let s = try await MerchantSandbox()
        try await s.provisionPhone()

        // Orders: each run makes a new random order ID, so the same ID back means the handler ran once.
        let created = try await createOrder(s, key: "order-key-1")
        #expect(created.status == .created)
        let again = try await createOrder(s, key: "order-key-1")
        #expect(again.status == .created && again.body == created.body)
        #expect(try await createOrder(s, key: "order-key-1", item: "Tea").status.code == 422)
        #expect(try s.storedOrders().count == 1)

        let order = try JSONDecoder().decode(MerchantAPI.OrderCreated.self, from: created.body)
        let data = try #require(Data(base64Encoded: order.applicationData))
        let token = try await s.token(amount: 999, applicationData: Array(data))
        let first = try await pay(s, order.orderID, token: token, key: "pay-key-1")
        try #require(first.status == .ok, "\(String(decoding: first.body, as: UTF8.self))")
        #expect(try s.issuerAuthorizations().count == 1)
        let replay = try await pay(s, order.orderID, token: token, key: "pay-key-1")
        #expect(replay.status == .ok && replay.body == first.body)
        let other = try await pay(s, order.orderID, token: token, key: "pay-key-1", contact: true)
        #expect(other.status.code == 422)
        #expect(try s.issuerAuthorizations().count == 1)
        // The kept answer holds the masked DPAN, as the order does; never the FPAN or the DPAN.
        let masked = try #require(MerchantSandbox.json(first)["maskedPAN"] as? String)
        #expect(try s.merchantFilesHolding(masked).contains { $0.hasPrefix("merchant-idempotency.sqlite") })
        for secret in [MerchantSandbox.fpan, s.dpan] {
            #expect(try s.merchantFilesHolding(secret).isEmpty, "found in the merchant's files")
        }

        // The merchant's records: the anonymous app's keys. The network's: the merchant server's own key for the
        // charge, scoped by the merchant's acquiring certificate.
        let merchant = try Self.records(s, "merchant")
        #expect(merchant.count == 2 && merchant.allSatisfy { $0.scope.hasPrefix("anonymous POST /v1/orders") })
        let network = try Self.records(s, "network")
        #expect(network.contains { $0.scope.hasPrefix("acquiring/") && $0.status == 200 })
        await s.close()
    }

    @Test("The Pay server: payment routes keep no answer (nothing ties a payment to a device); provisioning does")
    func payServer() async throws {
        let s = try await MerchantSandbox()
        try await s.provisionPhone()
        let identity = try Device.clientIdentity(of: "phone", in: s.deployment)
        let phone = try s.connections.client(
            identity: TLSIdentity(
                certificateChainPEM: identity.certificateChainPEM, privateKeyPEM: identity.privateKeyPEM))
        let url = try s.connections.baseURL(of: .pay) + PayAPI.Route.paymentNonce
        // Nonces are random: another nonce back means the handler ran again and nothing was kept.
        let first = try await phone.post(url, json: [String: String](), headers: ["Idempotency-Key": "nonce-1"])
        #expect(first.status == .ok)
        let replay = try await phone.post(url, json: [String: String](), headers: ["Idempotency-Key": "nonce-1"])
        #expect(replay.status == .ok && replay.body != first.body)
        let records = try Self.records(s, "pay")
        #expect(!records.contains { $0.scope.contains("/v1/payments/") }, "\(records.map(\.scope))")
        // Provisioning sent its keys too (check and link), under the device's identity.
        #expect(try Self.records(s, "pay").allSatisfy { $0.scope.hasPrefix("device/") })
        phone.shutdown()
        await s.close()
    }

    /// A client of the network holding `role`, with a certificate issued here from the deployment's root.
    func networkClient(_ s: MerchantSandbox, role: ServiceRole, name: String) throws -> HTTPClient {
        let root = try CertificateAuthority.load(named: PKIFiles.rootCA, from: s.deployment)
        try ServiceAccess.issueClientIdentity(
            named: name, role: role, commonName: name, by: root, to: s.deployment, clock: SystemClock(),
            random: SystemRandom())
        return try s.connections.client(identity: try TLSIdentity.load(named: name, from: s.deployment))
    }

    @Test("The network: a replayed issuer action answers as before without acting again; another token: 422")
    func network() async throws {
        let s = try await MerchantSandbox()
        try await s.provisionPhone()
        let vault = try Database(
            path: s.deployment.databasePath(for: .network), options: StoreOptions(durability: .full),
            access: .readOnly)
        let reference = try #require(try vault.queryFirst("SELECT token_reference FROM tokens") { try $0.string(0) })
        let issuer = try networkClient(s, role: .issuer, name: "test-issuer")
        // The token's own requestor (the Pay server's identity): a token is visible to its requestor only.
        let requestor = try s.connections.client(
            identity: try TLSIdentity.load(named: PayService.Files.client, from: s.deployment))
        let base = try s.connections.baseURL(of: .network)
        func act(_ action: TokenRequestorAPI.LifecycleAction, _ token: String, key: String) async throws -> HTTPResponse
        {
            try await issuer.send(
                HTTPClientRequest(
                    method: .post, url: base + TokenRequestorAPI.Route.issuerToken(token, action),
                    headers: ["Idempotency-Key": key]))
        }
        func state() async throws -> TokenRequestorAPI.TokenState {
            let answer = try await requestor.get(base + TokenRequestorAPI.Route.token(reference))
            try #require(answer.status == .ok, "\(String(decoding: answer.body, as: UTF8.self))")
            return try answer.decodeJSON(TokenRequestorAPI.TokenStatus.self).state
        }

        let suspended = try await act(.suspend, reference, key: "issuer-suspend-1")
        #expect(suspended.status == .ok)
        #expect(try await state() == .suspended)
        #expect(try await act(.resume, reference, key: "issuer-resume-1").status == .ok)
        #expect(try await state() == .active)
        // The replay answers "suspended" again, and the token stays active: the action did not run.
        let replay = try await act(.suspend, reference, key: "issuer-suspend-1")
        #expect(replay.status == .ok && replay.body == suspended.body)
        #expect(try await state() == .active)
        // The same key for another token on the route: 422, nothing changes.
        #expect(try await act(.suspend, "tok_other", key: "issuer-suspend-1").status.code == 422)
        #expect(try await state() == .active)
        issuer.shutdown()
        requestor.shutdown()
        await s.close()
    }
}
