import CardBasics
import CommandTestSupport
import Device
import Foundation
import MerchantAPI
import MerchantKit
import NetworkServer
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

@testable import MerchantServer

/// A deployment as `orchard init` makes it (network, Pay server, merchant), the services running in this process
/// on loopback over HTTPS, a phone with the issuer's approve Visa card provisioned through the Pay server, and
/// the app's and the device's side of an in-app payment driven for real: order at the merchant, Face ID, nonce,
/// Secure Element credential, token from the Pay server.
final class MerchantSandbox: @unchecked Sendable {
    static let fpan = "4111111111111111"
    static let application = "dev.orchard.demo-app"

    let path: String
    let deployment: DeploymentDirectory
    let registry: ServiceRegistry
    let environment: ServiceEnvironment
    let connections: ServiceConnections
    let root: Certificate
    private(set) var merchantBase: String
    let merchantClient: HTTPClient
    /// The merchant server this sandbox built itself (with a test gateway), if any.
    private var ownMerchant: (any ServiceInstance)?
    private(set) var phone: Device!
    private(set) var cardID = ""
    private(set) var dpan = ""

    /// With `gateway`, the merchant server is built here with that acquirer gateway instead of the real one.
    /// With `merchantClock`, that server reads the time from it (the other services use the system clock);
    /// `merchantVariables` are its `ORCHARD_MERCHANT_*` overrides.
    init(
        gateway: (@Sendable (DeploymentDirectory, ServicePeers) throws -> any AcquirerGateway)? = nil,
        merchantClock: ManualClock? = nil, merchantVariables: [String: String] = [:]
    ) async throws {
        path =
            FileManager.default.temporaryDirectory.appendingPathComponent("orchard-merchant-\(UUID().uuidString)")
            .path
        deployment = DeploymentDirectory(path: path)
        registry = try ServiceRegistry([NetworkServerService(), PayService(), MerchantService()])
        _ = try await DeploymentInitializer.initialize(deployment, registry: registry)
        var environment = ServiceEnvironment()
        // Every service here logs at debug level; `close` scans the logs (V2).
        environment.variables.merge(LogScan.debugLogEnvironment) { current, _ in current }
        self.environment = environment
        if let gateway {
            connections = try await ServiceConnections.connect(
                [.network, .pay], directory: deployment, registry: registry, environment: environment)
            // The network started in this process registered itself with the shared peers.
            let configuration = try registry.loadConfiguration(
                from: deployment,
                environment: merchantVariables.merging([
                    "ORCHARD_MERCHANT_PORT": "0", "ORCHARD_MERCHANT_LOG_LEVEL": "debug",
                ]) { $1 })
            var merchantEnvironment = environment
            if let merchantClock { merchantEnvironment.wallClock = merchantClock }
            let merchant = try await MerchantServer.build(
                configuration: configuration, directory: deployment, environment: merchantEnvironment,
                gateway: try gateway(deployment, environment.peers))
            let endpoint = try await merchant.start()
            ownMerchant = merchant
            merchantBase = endpoint.baseURL
        } else {
            connections = try await ServiceConnections.connect(
                [.network, .pay, .merchant], directory: deployment, registry: registry, environment: environment)
            ownMerchant = nil
            merchantBase = try connections.baseURL(of: .merchant)
        }
        root = try Certificate(pemEncoded: connections.rootCertificatePEM)
        merchantClient = try connections.client()
    }

    /// Stops the merchant server this sandbox built and builds and starts another on the same files with
    /// `gateway` (a restart after a crash, as far as the merchant's store is concerned).
    func restartMerchant(
        gateway: @Sendable (DeploymentDirectory, ServicePeers) throws -> any AcquirerGateway
    ) async throws {
        await ownMerchant?.shutdown()
        let configuration = try registry.loadConfiguration(
            from: deployment, environment: ["ORCHARD_MERCHANT_PORT": "0", "ORCHARD_MERCHANT_LOG_LEVEL": "debug"])
        let merchant = try await MerchantServer.build(
            configuration: configuration, directory: deployment, environment: environment,
            gateway: try gateway(deployment, environment.peers))
        merchantBase = try await merchant.start().baseURL
        ownMerchant = merchant
    }

    /// Whether the order's status becomes `status` within 10 s (the server's reconciliation runs on its own).
    func orderStatus(_ orderID: String, becomes status: String) async throws -> Bool {
        for _ in 0..<200 {
            if Self.json(try await order(orderID))["status"] as? String == status { return true }
            try await Task.sleep(for: .milliseconds(50))
        }
        return false
    }

    /// Makes the phone and provisions the approve Visa card to it through the Pay server.
    func provisionPhone() async throws {
        _ = try Device.create(
            in: deployment, name: "phone", profile: try DeviceProfile(kind: .phone, biometry: .face, account: "demo"))
        let device = try await Device.open(in: deployment, name: "phone")
        try await device.secureEnclave.setPasscode(SecureBytes(Array("123456".utf8)), current: nil)
        let flow = AddCardFlow(
            client: try payClient(), root: root, deviceID: "phone",
            secureElementCertificate: try Device.identity(of: "phone", in: deployment).certificate,
            enclavePublicKey: try Device.identity(of: "phone", in: deployment).enclavePublicKey)
        let outcome = try await flow.run(
            card: try CardEntry(
                number: Self.fpan, expiry: "12/34", verificationValue: "266", cardholderName: "Alice Doe"),
            idempotencyKey: UUID().uuidString, oneTimeCode: { _ in nil }, acceptTerms: { _ in true },
            install: { envelope, display in
                try await device.installCard(
                    envelope: envelope,
                    display: CardDisplayInput(
                        type: CardType(rawValue: display.type) ?? .credit, suffix: display.suffix,
                        displayName: display.description)
                ).id
            })
        guard case .added(let walletCardID, _, _, _) = outcome else {
            Issue.record("the approve card was not added")
            throw MerchantServerError(.internalFailure, "provisioning failed")
        }
        phone = device
        cardID = walletCardID
        let vault = try SQLiteTokenVaultStoreAccess.tokens(deviceID: "phone", in: deployment)
        dpan = try #require(vault.first)
    }

    func payClient() throws -> PayServerClient {
        try PayServerClient(
            baseURL: try connections.baseURL(of: .pay), trustedRootPEM: connections.rootCertificatePEM,
            identity: try Device.clientIdentity(of: "phone", in: deployment))
    }

    func close() async {
        if let ownMerchant { await ownMerchant.shutdown() }
        merchantClient.shutdown()
        await connections.close()
        // V2: no card number, DPAN, CVV, cryptogram, key or address in any party's log.
        let secrets = LogScan.Secrets(texts: [Self.fpan] + (dpan.isEmpty ? [] : [dpan]))
        LogScan.expectCleanLogs(of: path, secrets: secrets, requireDebug: true)
        try? FileManager.default.removeItem(atPath: path)
    }

    // MARK: The app and the merchant

    struct Order {
        let id: String
        let applicationData: [UInt8]
        let created: MerchantAPI.OrderCreated
    }

    /// `POST /v1/orders` as the app sends it (with the app's own `applicationData` if given).
    func createOrder(
        item: String = "Coffee", amount: String = "9.99", currency: String = "USD", applicationData: Data? = nil
    ) async throws -> Order {
        let response = try await send(
            MerchantAPI.CreateOrder(item: item, amount: amount, currency: currency, applicationData: applicationData))
        try #require(response.status == .created, "order: \(String(decoding: response.body, as: UTF8.self))")
        let created = try JSONDecoder().decode(MerchantAPI.OrderCreated.self, from: response.body)
        let data = try #require(Data(base64Encoded: created.applicationData))
        return Order(id: created.orderID, applicationData: Array(data), created: created)
    }

    /// `POST /v1/orders` with `order`, whatever the answer.
    func send(_ order: MerchantAPI.CreateOrder) async throws -> HTTPResponse {
        try await merchantClient.send(try HTTPClientRequest.json(.post, merchantBase + MerchantAPI.Route.orders, order))
    }

    /// `POST /v1/orders/{id}/payment` as the app sends it: `token` (the Pay server's JSON, verbatim) and the
    /// approved contacts.
    func pay(
        _ orderID: String, token: String, shippingContact: MerchantAPI.Contact? = nil,
        billingContact: MerchantAPI.Contact? = nil, shippingMethod: MerchantAPI.ShippingMethod? = nil
    ) async throws -> HTTPResponse {
        let submission = MerchantAPI.PaymentSubmission(
            token: Data(token.utf8), shippingContact: shippingContact, billingContact: billingContact,
            shippingMethod: shippingMethod)
        return try await pay(orderID, body: try submission.body())
    }

    /// `POST /v1/orders/{id}/payment` with `body` as it is (for bodies no app would send).
    func pay(_ orderID: String, body: Data) async throws -> HTTPResponse {
        try await merchantClient.send(
            HTTPClientRequest(
                method: .post, url: merchantBase + MerchantAPI.Route.payment(orderID),
                headers: ["Content-Type": "application/json"], body: body))
    }

    func order(_ orderID: String) async throws -> HTTPResponse {
        try await merchantClient.get(merchantBase + MerchantAPI.Route.order(orderID))
    }

    // MARK: The device

    /// A real token: Face ID on the phone for an in-app payment of `amount` (USD unless `currency`), a nonce
    /// from the Pay server, the Secure Element's credential for `merchant` with the hash of
    /// `applicationData`, exchanged at the Pay server. Returns the token JSON as the Pay server answered it.
    func token(
        amount: Int64, currency: UInt16 = 840, applicationData: [UInt8]?,
        merchant: String = "merchant.dev.orchard.demo"
    ) async throws -> String {
        let paymentAmount = try PaymentAmount(minorUnits: amount, currency: currency)
        let outcome = try await phone.authenticate(
            .faceID(matched: true), for: .inApp, card: cardID, amount: paymentAmount)
        guard case .authorized(let statement) = outcome else {
            Issue.record("Face ID did not authorize")
            throw MerchantServerError(.internalFailure, "not authorized")
        }
        let identity = try Device.clientIdentity(of: "phone", in: deployment)
        let client = try connections.client(
            identity: TLSIdentity(
                certificateChainPEM: identity.certificateChainPEM, privateKeyPEM: identity.privateKeyPEM))
        defer { client.shutdown() }
        let pay = try connections.baseURL(of: .pay)
        let certificateAnswer = try await client.get(pay + PayAPI.Route.credentialCertificate)
        let certificate = try certificateAnswer.decodeJSON(CredentialCertificateResponse.self)
        let key = try PayCredentialKey(
            certificate: try Certificate(pemEncoded: certificate.certificate), root: root, now: Date())
        let nonceAnswer = try await client.post(pay + PayAPI.Route.paymentNonce, json: [String: String]())
        let nonce = try #require(
            Data(base64Encoded: try nonceAnswer.decodeJSON(PaymentNonceResponse.self).nonce).map { Array($0) })
        let sealed = try await phone.secureElement.remotePaymentCredential(
            authorization: statement, card: try CardIdentifier(hex: cardID),
            request: try RemotePaymentRequest(
                merchantIdentifier: merchant, applicationIdentifier: Self.application, amount: paymentAmount,
                applicationDataHash: applicationData.map { SHA256.hash($0) }),
            nonce: nonce, payServerKey: key.publicKey)
        let exchange = try await client.post(
            pay + PayAPI.Route.paymentCredential,
            json: PaymentCredentialExchange(
                credential: Data(sealed).base64EncodedString(),
                paymentMethod: PaymentMethodDisplay(displayName: "Visa 1111", network: "visa", type: "credit")))
        try #require(exchange.status == .ok, "exchange: \(String(decoding: exchange.body, as: UTF8.self))")
        return String(decoding: exchange.body, as: UTF8.self)
    }

    // MARK: The network's books

    /// Authorizations the issuer recorded (issuer.sqlite).
    func issuerAuthorizations() throws -> [String] {
        try records(in: deployment.databasePath(for: .issuer), "SELECT record FROM authorizations")
    }

    /// Reversals the acquirer recorded (acquirer.sqlite).
    func acquirerReversals() throws -> [String] {
        try records(in: deployment.databasePath(for: .acquirer), "SELECT record FROM reversals")
    }

    /// The orders in merchant.sqlite: order ID and the exact applicationData bytes stored.
    func storedOrders() throws -> [String: [UInt8]] {
        let db = try Database(
            path: deployment.databasePath(for: .merchant), options: StoreOptions(durability: .full, secureDelete: true),
            access: .readOnly)
        let rows = try db.query("SELECT order_id, application_data FROM orders") { row in
            (try row.string(0), try row.blob(1))
        }
        return Dictionary(uniqueKeysWithValues: rows)
    }

    private func records(in file: String, _ sql: String) throws -> [String] {
        let db = try Database(
            path: file, options: StoreOptions(durability: .full, secureDelete: true), access: .readOnly)
        return try db.query(sql) { row in String(decoding: try row.blob(0), as: UTF8.self) }
    }

    // MARK: Files

    /// The merchant's files: merchant.sqlite and merchant-idempotency.sqlite with their WAL and SHM, and
    /// logs/merchant.log.
    func merchantFiles() throws -> [String: [UInt8]] {
        var result: [String: [UInt8]] = [:]
        let databases = ["merchant.sqlite", "merchant-idempotency.sqlite"].flatMap { [$0, $0 + "-wal", $0 + "-shm"] }
        for relative in databases + ["logs/merchant.log"] {
            let full = path + "/" + relative
            if FileManager.default.fileExists(atPath: full) {
                result[relative] = Array(try Data(contentsOf: URL(fileURLWithPath: full)))
            }
        }
        return result
    }

    /// The merchant files holding `text` (as ASCII).
    func merchantFilesHolding(_ text: String) throws -> [String] {
        let needle = Array(text.utf8)
        return try merchantFiles().filter { _, bytes in Self.contains(bytes, needle) }.map(\.key).sorted()
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        var index = 0
        while index <= haystack.count - needle.count {
            if haystack[index] == needle[0], Array(haystack[index..<(index + needle.count)]) == needle { return true }
            index += 1
        }
        return false
    }

    static func json(_ response: HTTPResponse) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: response.body) as? [String: Any]) ?? [:]
    }

    static func errorCode(_ response: HTTPResponse) -> String? {
        (json(response)["error"] as? [String: Any])?["code"] as? String
    }
}

/// The phone's DPANs, read from the network's vault beside the running service.
enum SQLiteTokenVaultStoreAccess {
    static func tokens(deviceID: String, in deployment: DeploymentDirectory) throws -> [String] {
        let db = try Database(
            path: deployment.databasePath(for: .network), options: StoreOptions(durability: .full, secureDelete: true),
            access: .readOnly)
        return try db.query("SELECT dpan FROM tokens WHERE device_id = ?", [.text(deviceID)]) { try $0.string(0) }
    }
}
