import Acquirer
import CardBasics
import Foundation
import Issuer
import NetworkAuthorizationAPI
import NetworkTestSupport
import OrchardCrypto
import Testing
import TokenService

/// The acquirer in front of the in-memory network (token service + demo issuer).
struct AcquirerFixture {
    let network: NetworkHarness
    let store = InMemoryAcquirerStore()
    let acquirer: Acquirer
    let phone: SimulatedDevice
    let card: InstalledCard

    init(network: (any AcquiringNetwork)? = nil) async throws {
        self.network = try await NetworkHarness()
        acquirer = Acquirer(
            acquirerID: "acq-1", store: store, network: network ?? self.network.tokenService, clock: self.network.clock,
            random: InsecureDeterministicRandom(seed: [7]))
        try await acquirer.registerMerchant(
            MerchantAccount(
                merchantID: "m-coffee", name: "Orchard Coffee", categoryCode: "5814", countryCode: "840",
                terminalIDs: ["T0001", "T0002"]))
        try await acquirer.registerMerchant(
            MerchantAccount(merchantID: "m-web", name: "Orchard Store", categoryCode: "5732", countryCode: "840"))
        try await acquirer.allowAppleMerchantID(Self.webMerchantID, forMerchant: "m-web")
        phone = try self.network.makeDevice("phone-1")
        card = try await self.network.provision("4111111111111111", on: phone)
    }

    func terminalRequest(
        terminal: String = "T0001", stan: String, amount: Int64, merchant: String = "m-coffee",
        channel: PaymentChannel = .contactless
    ) async throws -> AcquirerAuthorizationRequest {
        let money = try Money(minorUnits: amount, currency: Currency("840"))
        return AcquirerAuthorizationRequest(
            origin: .terminal(terminalID: terminal, systemTraceAuditNumber: stan), merchantID: merchant,
            pan: card.data.dpan, expiry: card.data.tokenExpiry, amount: money, channel: channel,
            cryptogram: try await phone.cryptogram(for: card, kind: .proximityARQC, amount: money))
    }

    /// The Apple merchant ID `m-web` charges for.
    static let webMerchantID = "merchant.dev.orchard.web"

    func onlineRequest(
        key: String, amount: Int64, channel: PaymentChannel = .inApp
    ) async throws -> AcquirerAuthorizationRequest {
        let money = try Money(minorUnits: amount, currency: Currency("840"))
        return AcquirerAuthorizationRequest(
            origin: .merchantServer(idempotencyKey: key), merchantID: "m-web", pan: card.data.dpan,
            expiry: card.data.tokenExpiry, amount: money, channel: channel,
            cryptogram: try await phone.cryptogram(for: card, kind: .remote, amount: money),
            appleMerchantID: Self.webMerchantID)
    }
}

@Suite("Acquirer: routing, idempotency, masked card numbers")
struct AcquirerTests {
    @Test func terminalPaymentIsApprovedThroughTheNetwork() async throws {
        let f = try await AcquirerFixture()
        let result = try await f.acquirer.authorize(try await f.terminalRequest(stan: "000001", amount: 375))
        #expect(result.isApproved && result.approvalCode?.count == 6)
        #expect(result.maskedPAN == f.card.data.dpan.masked && result.maskedPAN.hasPrefix("489537"))
        #expect(try await f.network.issuer.account(id: "acct-1")?.balance == 375)
    }

    @Test func terminalIDAndSTANMakeTheRequestIdempotent() async throws {
        let f = try await AcquirerFixture()
        let request = try await f.terminalRequest(stan: "000002", amount: 500)
        let first = try await f.acquirer.authorize(request)
        let retry = try await f.acquirer.authorize(request)
        #expect(first == retry && first.isApproved)
        #expect(try await f.network.issuer.account(id: "acct-1")?.balance == 500)
        // Concurrent retries: one authorization.
        let results = try await withThrowingTaskGroup(of: AcquirerAuthorizationResult.self) { group in
            for _ in 0..<6 { group.addTask { try await f.acquirer.authorize(request) } }
            var out: [AcquirerAuthorizationResult] = []
            for try await result in group { out.append(result) }
            return out
        }
        #expect(Set(results).count == 1 && results.first == first)
        #expect(try await f.network.issuer.account(id: "acct-1")?.balance == 500)
        // The same STAN on the same terminal for another payment is refused; another terminal may use it.
        await #expect(throws: AcquirerError(.idempotencyConflict, "")) {
            try await f.acquirer.authorize(try await f.terminalRequest(stan: "000002", amount: 501))
        }
        #expect(
            try await f.acquirer.authorize(try await f.terminalRequest(terminal: "T0002", stan: "000002", amount: 501))
                .isApproved)
    }

    @Test func merchantKeyMakesTheRequestIdempotent() async throws {
        let f = try await AcquirerFixture()
        let request = try await f.onlineRequest(key: "order-42", amount: 2_000)
        let first = try await f.acquirer.authorize(request)
        #expect(first.isApproved)
        #expect(try await f.acquirer.authorize(request) == first)
        await #expect(throws: AcquirerError(.idempotencyConflict, "")) {
            try await f.acquirer.authorize(try await f.onlineRequest(key: "order-42", amount: 2_001))
        }
        #expect(try await f.network.issuer.account(id: "acct-1")?.balance == 2_000)
    }

    @Test func declinesArePassedOnAndRemembered() async throws {
        let f = try await AcquirerFixture()
        try await f.network.tokenService.suspend(tokenReference: f.card.token.tokenReference, by: .cardholder)
        let request = try await f.terminalRequest(stan: "000003", amount: 100)
        let declined = try await f.acquirer.authorize(request)
        #expect(declined.responseCode == .restrictedCard && declined.declineReason == "tokenSuspended")
        // The retry gets the first answer even after the token is resumed.
        try await f.network.tokenService.resume(tokenReference: f.card.token.tokenReference, by: .cardholder)
        #expect(try await f.acquirer.authorize(request) == declined)
    }

    @Test func refusalsBeforeRouting() async throws {
        let f = try await AcquirerFixture()
        await #expect(throws: AcquirerError(.unknownMerchant, "")) {
            try await f.acquirer.authorize(try await f.terminalRequest(stan: "000004", amount: 1, merchant: "m-nope"))
        }
        await #expect(throws: AcquirerError(.unknownTerminal, "")) {
            try await f.acquirer.authorize(try await f.terminalRequest(terminal: "T9999", stan: "000004", amount: 1))
        }
        await #expect(throws: AcquirerError(.invalidRequest, "")) {
            try await f.acquirer.authorize(try await f.terminalRequest(stan: "4", amount: 1))
        }
        // A zero amount cannot reach the acquirer: CardBasics' Money refuses it.
        await #expect(throws: CardBasicsError(.invalidAmount, "")) {
            try await f.acquirer.authorize(try await f.terminalRequest(stan: "000005", amount: 0))
        }
        // A terminal does not send in-app payments, a merchant server does not send contactless ones.
        await #expect(throws: AcquirerError(.invalidRequest, "")) {
            try await f.acquirer.authorize(try await f.terminalRequest(stan: "000006", amount: 1, channel: .inApp))
        }
        await #expect(throws: AcquirerError(.invalidRequest, "")) {
            try await f.acquirer.authorize(try await f.onlineRequest(key: "k", amount: 1, channel: .contactless))
        }
        // A merchant key that could hold a card number is refused (keys are stored in clear).
        await #expect(throws: AcquirerError(.invalidRequest, "")) {
            try await f.acquirer.authorize(try await f.onlineRequest(key: "order-4111111111111111", amount: 1))
        }
        try await f.acquirer.setMerchantStatus(.suspended, merchantID: "m-coffee")
        await #expect(throws: AcquirerError(.merchantNotActive, "")) {
            try await f.acquirer.authorize(try await f.terminalRequest(stan: "000007", amount: 1))
        }
        await #expect(throws: AcquirerError(.duplicate, "")) {
            try await f.acquirer.registerMerchant(
                MerchantAccount(merchantID: "m-web", name: "X", categoryCode: "5732", countryCode: "840"))
        }
        await #expect(throws: AcquirerError(.invalidRequest, "")) {
            try await f.acquirer.registerMerchant(
                MerchantAccount(merchantID: "m-bad", name: "X", categoryCode: "57", countryCode: "840"))
        }
        #expect(f.store.allAuthorizations.isEmpty)
    }

    @Test func aNetworkFailureRecordsNothingAndTheRetryReachesTheSameTransaction() async throws {
        let flaky = FlakyNetwork()
        let f = try await AcquirerFixture(network: flaky)
        flaky.target = f.network.tokenService
        let request = try await f.terminalRequest(stan: "000008", amount: 250)
        // The network decides but the answer is lost on the way back.
        flaky.loseNextAnswer = true
        await #expect(throws: AcquirerError(.networkUnavailable, "")) { try await f.acquirer.authorize(request) }
        #expect(f.store.allAuthorizations.isEmpty)
        // The retry carries the same network transaction ID, so it gets the network's stored answer
        // instead of an ATC replay decline, and the issuer moved the money once.
        let result = try await f.acquirer.authorize(request)
        #expect(result.isApproved)
        #expect(try await f.network.issuer.account(id: "acct-1")?.balance == 250)
        #expect(flaky.transactionIDs.count == 2 && Set(flaky.transactionIDs).count == 1)
    }

    @Test func theAcquirerKeepsTheCardNumberOnlyMasked() async throws {
        let f = try await AcquirerFixture()
        _ = try await f.acquirer.authorize(try await f.terminalRequest(stan: "000009", amount: 100))
        _ = try await f.acquirer.authorize(try await f.onlineRequest(key: "order-1", amount: 100))
        let json = String(decoding: try JSONEncoder().encode(f.store.allAuthorizations), as: UTF8.self)
        let dpan = f.card.data.dpan.digits
        let fullDPAN = json.contains(dpan)
        let fpan = json.contains("4111111111111111")
        #expect(!fullDPAN && !fpan)
        #expect(json.contains(f.card.data.dpan.masked))
        // Not even an unkeyed hash of the DPAN (cheap to invert) is stored.
        let hashed = json.contains(
            SHA256.hash(Array(dpan.utf8)).map { byte in (byte < 16 ? "0" : "") + String(byte, radix: 16) }.joined())
        #expect(!hashed)
        #expect(f.store.allAuthorizations.count == 2)
    }
}

/// A network that forwards to the token service and can lose one answer on the way back.
final class FlakyNetwork: AcquiringNetwork, @unchecked Sendable {
    private let lock = NSLock()
    private var _target: TokenService?
    private var _lose = false
    private var _ids: [String] = []

    var target: TokenService? {
        get { lock.withLock { _target } }
        set { lock.withLock { _target = newValue } }
    }
    var loseNextAnswer: Bool {
        get { lock.withLock { _lose } }
        set { lock.withLock { _lose = newValue } }
    }
    var transactionIDs: [String] { lock.withLock { _ids } }

    func authorize(
        _ request: NetworkAuthorizationAPI.AuthorizationRequest
    ) async throws(NetworkAuthorizationAPI.Failure) -> NetworkAuthorizationAPI.AuthorizationAnswer {
        lock.withLock { _ids.append(request.transactionID) }
        guard let target else { throw NetworkAuthorizationAPI.Failure(.unavailable, "no network") }
        let answer = try await target.authorize(request)
        let lose: Bool = lock.withLock {
            defer { _lose = false }
            return _lose
        }
        if lose { throw NetworkAuthorizationAPI.Failure(.unavailable, "connection reset") }
        return answer
    }

    func reverse(
        _ request: NetworkAuthorizationAPI.ReversalRequest
    ) async throws(NetworkAuthorizationAPI.Failure) -> NetworkAuthorizationAPI.ReversalAnswer {
        guard let target else { throw NetworkAuthorizationAPI.Failure(.unavailable, "no network") }
        return try await target.reverse(request)
    }
}
