import AcquirerAPI
import CardBasics
import Foundation
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices

/// One in-app charge as the merchant sends it to its acquirer: the DPAN and expiry from the decrypted token,
/// the amount, and the remote cryptogram with the data it covers (docs/in-app.md, "At the token service").
///
/// Holds the DPAN in clear for the one request: its description, debug description and mirror show it masked.
struct AcquirerCharge: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    let merchantID: String
    /// Derived from the order (``PaymentProcessor/idempotencyKey(orderID:attempt:)``).
    let idempotencyKey: String
    let dpan: String
    let expiryYear: Int
    let expiryMonth: Int
    let amountMinorUnits: Int64
    /// ISO 4217 numeric, three digits.
    let currency: String
    /// The 20-byte remote cryptogram (`onlinePaymentCryptogram`).
    let cryptogram: [UInt8]
    let applicationTransactionCounter: UInt16
    /// `RemoteTransactionData`: SHA-256(merchant ID) ‖ amount (8) ‖ currency (2).
    let transactionData: [UInt8]
    /// The token's ECI (`05` Visa, `02` Mastercard), passed on for an acquirer that reads it.
    let eci: String?
    /// The Apple merchant ID the token was made for (the merchant's own: it decrypted the token with the key of
    /// its processing certificate for this ID); the network declines a cryptogram made for another.
    let appleMerchantID: String
    /// Paid on a website (the site's route) rather than in an app: the acquirer's channel `web`.
    var web = false

    var maskedDPAN: String { PrimaryAccountNumber.mask(dpan) }
    var description: String { "charge \(idempotencyKey) \(maskedDPAN) \(amountMinorUnits) \(currency)" }
    var debugDescription: String { description }
    var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

/// The acquirer's decision on an authorization, as its answer says it.
typealias AcquirerDecision = AcquirerAPI.AuthorizationAnswer

/// How a request to the acquirer ended: a value, so the caller decides between retry, reversal and giving up.
enum AcquirerOutcome<Answer: Sendable>: Sendable {
    /// A 2xx answer.
    case answered(Answer)
    /// The request surely did not arrive (no connection could be made, or the network is not running).
    case notDelivered(String)
    /// It may have arrived, but no usable answer came (timeout, broken connection, 409, 5xx, garbled body).
    case noAnswer(String)
    /// The acquirer refused the request itself (4xx other than 409).
    case refused(status: Int, message: String)
}

/// What the merchant server asks of its acquirer. ``AcquirerHTTPSGateway`` is the real one; tests may install
/// another to force a lost answer.
protocol AcquirerGateway: Sendable {
    func authorize(_ charge: AcquirerCharge) async -> AcquirerOutcome<AcquirerDecision>
    /// Reverses the authorization of `idempotencyKey` (the same key, the same amount).
    func reverse(
        merchantID: String, idempotencyKey: String, amountMinorUnits: Int64, currency: String, reason: String
    ) async -> AcquirerOutcome<Bool>
}

/// The network's acquiring routes over mutual TLS with the merchant's `pki/merchant/merchant-acquiring` certificate
/// (role `acquiring`), trusting only the network's root. The network is found per call through
/// ``ServicePeers``, so it may start after the merchant. The client never retries by itself.
final class AcquirerHTTPSGateway: AcquirerGateway {
    private let client: HTTPClient
    private let directory: DeploymentDirectory
    private let peers: ServicePeers

    init(directory: DeploymentDirectory, peers: ServicePeers, requestTimeout: Duration = .seconds(10)) throws {
        // The network's root only: the deployment's own, or the network party's imported one (`peers.json`).
        let root = try PeerAddresses.trustedRootPEM(for: .network, in: directory)
        let chain = try directory.readCertificate(named: MerchantService.acquiringClientFile)
        let key = try directory.readPrivateKey(named: MerchantService.acquiringClientFile)
        client = try HTTPClient(
            configuration: HTTPClientConfiguration(
                trustedRootsPEM: root, clientCertificateChainPEM: chain, clientPrivateKeyPEM: key,
                connectTimeout: .seconds(3), requestTimeout: requestTimeout, maxResponseBytes: 64 << 10,
                maxAttempts: 1))
        self.directory = directory
        self.peers = peers
    }

    deinit { client.shutdown() }

    func authorize(_ charge: AcquirerCharge) async -> AcquirerOutcome<AcquirerDecision> {
        let body = AcquirerAPI.AuthorizationRequest(
            merchantID: charge.merchantID, idempotencyKey: charge.idempotencyKey, pan: charge.dpan,
            expiry: AcquirerAPI.Expiry(year: charge.expiryYear, month: charge.expiryMonth),
            amount: AcquirerAPI.Money(minorUnits: charge.amountMinorUnits, currency: charge.currency),
            cryptogram: AcquirerAPI.Cryptogram(
                kind: "remote", cryptogram: charge.cryptogram,
                applicationTransactionCounter: charge.applicationTransactionCounter,
                transactionData: charge.transactionData),
            eci: charge.eci, appleMerchantID: charge.appleMerchantID, channel: charge.web ? "web" : "inApp")
        switch await post(AcquirerAPI.Route.authorizations, body, idempotencyKey: charge.idempotencyKey) {
        case .answered(let data):
            // A key given twice is refused, as every Orchard party refuses it (DuplicateJSONKeys).
            guard DuplicateJSONKeys.first(in: data) == nil,
                // try?: an answer that is not the contract's JSON is no answer (below).
                let decision = try? JSONDecoder().decode(AcquirerDecision.self, from: data),
                Self.isResponseCode(decision.responseCode)
            else { return .noAnswer("the acquirer's authorization answer is not the expected JSON") }
            return .answered(decision)
        case .notDelivered(let why): return .notDelivered(why)
        case .noAnswer(let why): return .noAnswer(why)
        case .refused(let status, let message): return .refused(status: status, message: message)
        }
    }

    func reverse(
        merchantID: String, idempotencyKey: String, amountMinorUnits: Int64, currency: String, reason: String
    ) async -> AcquirerOutcome<Bool> {
        let body = AcquirerAPI.ReversalRequest(
            merchantID: merchantID, idempotencyKey: idempotencyKey,
            amount: AcquirerAPI.Money(minorUnits: amountMinorUnits, currency: currency), reason: reason)
        switch await post(AcquirerAPI.Route.reversals, body, idempotencyKey: idempotencyKey) {
        case .answered(let data):
            guard DuplicateJSONKeys.first(in: data) == nil,
                // try?: an answer that is not the contract's JSON is no answer (below).
                let answer = try? JSONDecoder().decode(AcquirerAPI.ReversalAnswer.self, from: data)
            else {
                return .noAnswer("the acquirer's reversal answer is not the expected JSON")
            }
            return .answered(answer.reversed)
        case .notDelivered(let why): return .notDelivered(why)
        case .noAnswer(let why): return .noAnswer(why)
        case .refused(let status, let message): return .refused(status: status, message: message)
        }
    }

    private func post(
        _ path: String, _ body: some Encodable & Sendable, idempotencyKey: String
    ) async -> AcquirerOutcome<Data> {
        // Every instance of the network service, tried in order: one that cannot be reached or answers 503 is
        // passed over for the next, with the same Idempotency-Key (so a repeat gets the first answer).
        // try?: no instance found is the network not running (below).
        guard let endpoints = try? FailoverEndpoints(peers.baseURLs(of: .network, in: directory)) else {
            return .notDelivered("the network service is not running")
        }
        let request: HTTPClientRequest
        do {
            request = try HTTPClientRequest.json(
                .post, path, body, headers: ["Idempotency-Key": idempotencyKey])
        } catch {
            return .notDelivered("the request to the acquirer could not be encoded")
        }
        let response: HTTPResponse
        do {
            response = try await client.send(request, failover: endpoints)
        } catch {
            switch error.code {
            case .connectionFailed, .invalidURL, .tlsFailure, .notRunning:
                return .notDelivered("the acquirer cannot be reached: \(error.code)")
            default:
                return .noAnswer("no answer from the acquirer: \(error.code)")
            }
        }
        switch response.status.code {
        case 200..<300:
            return .answered(response.body)
        case 409, 500...:
            return .noAnswer("the acquirer answered \(response.status.code): the outcome is unknown")
        default:
            let message = response.errorBody?.message ?? "status \(response.status.code)"
            return .refused(status: response.status.code, message: String(message.prefix(200)))
        }
    }

    static func isResponseCode(_ code: String) -> Bool {
        let bytes = Array(code.utf8)
        return bytes.count == 2 && bytes.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) }
    }
}
