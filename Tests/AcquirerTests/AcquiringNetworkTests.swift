import Acquirer
import CardBasics
import Foundation
import Issuer
import NetworkAuthorizationAPI
import OrchardCrypto
import Testing

/// The acquirer against implementations of `AcquiringNetwork` that are not the token service: its behaviour
/// depends only on the protocol.
@Suite("Acquirer: any AcquiringNetwork")
struct AcquiringNetworkTests {
    static let dpan = "4895370012345671"

    /// An acquirer with one merchant and terminal, in front of `network`.
    func acquirer(_ network: any AcquiringNetwork) async throws -> (Acquirer, InMemoryAcquirerStore) {
        let store = InMemoryAcquirerStore()
        let acquirer = Acquirer(
            acquirerID: "acq-2", store: store, network: network,
            clock: ManualClock(now: Date(timeIntervalSince1970: 1_800_000_000)),
            random: InsecureDeterministicRandom(seed: [9]))
        try await acquirer.registerMerchant(
            MerchantAccount(
                merchantID: "m-tea", name: "Orchard Tea", categoryCode: "5814", countryCode: "826",
                terminalIDs: ["T0009"]))
        return (acquirer, store)
    }

    func request(stan: String, amount: Int64 = 420) throws -> AcquirerAuthorizationRequest {
        AcquirerAuthorizationRequest(
            origin: .terminal(terminalID: "T0009", systemTraceAuditNumber: stan), merchantID: "m-tea",
            pan: try PrimaryAccountNumber(Self.dpan), expiry: try CardExpiry(year: 2031, month: 7),
            amount: try Money(minorUnits: amount, currency: Currency("826")), channel: .contactless,
            cryptogram: CryptogramSubmission(
                kind: .proximityARQC, cryptogram: [1, 2, 3, 4, 5, 6, 7, 8], applicationTransactionCounter: 5,
                transactionData: [0x9F, 0x02]))
    }

    func reversal(stan: String, amount: Int64 = 420) throws -> AcquirerReversalRequest {
        AcquirerReversalRequest(
            origin: .terminal(terminalID: "T0009", systemTraceAuditNumber: stan), merchantID: "m-tea",
            amount: try Money(minorUnits: amount, currency: Currency("826")), reason: "timeout")
    }

    @Test func theIssuersDeclineIsPassedThroughAndKeptAsTheKeysAnswer() async throws {
        let network = ScriptedNetwork(
            answer: .success(("51", nil, "issuerDeclined")), reversal: .success("notApproved"))
        let (acquirer, store) = try await acquirer(network)
        let result = try await acquirer.authorize(try request(stan: "000301"))
        #expect(!result.isApproved && result.responseCode == .insufficientFunds && result.approvalCode == nil)
        #expect(result.declineReason == "issuerDeclined" && result.maskedPAN == "489537******5671")
        // A retry gets the recorded answer without asking the network again.
        #expect(try await acquirer.authorize(try request(stan: "000301")) == result)
        #expect(network.authorizations.count == 1 && store.allAuthorizations.map(\.result) == [result])
        // What the network was sent: the DPAN (the acquirer has nothing else), the merchant and the amount, and a
        // transaction ID derived from the terminal and STAN; its description shows no card number.
        let sent = try #require(network.authorizations.first)
        #expect(sent.acquirerID == "acq-2" && sent.pan == Self.dpan && sent.channel == "contactless")
        #expect(sent.amount == NetworkAuthorizationAPI.Money(minorUnits: 420, currency: "826"))
        #expect(sent.expiry == NetworkAuthorizationAPI.Expiry(year: 2031, month: 7))
        #expect(sent.merchant.merchantID == "m-tea" && sent.merchant.countryCode == "826")
        #expect(sent.transactionID.count == 32 && sent.cryptogram?.applicationTransactionCounter == 5)
        #expect(!"\(sent)".contains(Self.dpan) && !String(reflecting: sent).contains(Self.dpan))
        // The reversal is the network's too: a declined authorization had nothing to release.
        let reversed = try await acquirer.reverse(try reversal(stan: "000301"))
        #expect(
            !reversed.reversed && reversed.outcome == .notApproved && reversed.authorizationID == result.authorizationID
        )
        #expect(network.reversals.map(\.transactionID) == [sent.transactionID])
    }

    @Test func anApprovalAndAReleaseAreTheNetworks() async throws {
        let network = ScriptedNetwork(answer: .success(("00", "A1B2C3", nil)), reversal: .success("released"))
        let (acquirer, _) = try await acquirer(network)
        let result = try await acquirer.authorize(try request(stan: "000302"))
        #expect(result.isApproved && result.approvalCode == "A1B2C3" && result.declineReason == nil)
        let reversed = try await acquirer.reverse(try reversal(stan: "000302"))
        #expect(reversed.reversed && reversed.outcome == .released)
    }

    @Test func anUnavailableNetworkAnswersNetworkUnavailableAndNothingIsRecorded() async throws {
        let network = ScriptedNetwork(
            answer: .failure(.init(.unavailable, "down")), reversal: .failure(.init(.unavailable, "down")))
        let (acquirer, store) = try await acquirer(network)
        await #expect(throws: AcquirerError(.networkUnavailable, "")) {
            try await acquirer.authorize(try request(stan: "000303"))
        }
        await #expect(throws: AcquirerError(.networkUnavailable, "")) {
            try await acquirer.reverse(try reversal(stan: "000304"))
        }
        #expect(store.allAuthorizations.isEmpty)
        #expect(try await store.reversal(idempotencyKey: "terminal:T0009:000304") == nil)
        // Nothing was recorded, so the retries reach the network again.
        await #expect(throws: AcquirerError(.networkUnavailable, "")) {
            try await acquirer.authorize(try request(stan: "000303"))
        }
        #expect(network.authorizations.count == 2 && network.reversals.count == 1)
    }

    @Test func theNetworksRefusalsOfAReversalKeepTheirMeaning() async throws {
        for (failure, expected) in [
            (NetworkAuthorizationAPI.Failure(.invalidRequest, "x"), AcquirerError(.invalidRequest, "")),
            (NetworkAuthorizationAPI.Failure(.idempotencyConflict, "x"), AcquirerError(.idempotencyConflict, "")),
        ] {
            let network = ScriptedNetwork(answer: .success(("00", "A1B2C3", nil)), reversal: .failure(failure))
            let (acquirer, store) = try await acquirer(network)
            await #expect(throws: expected) { try await acquirer.reverse(try reversal(stan: "000305")) }
            #expect(try await store.reversal(idempotencyKey: "terminal:T0009:000305") == nil)
        }
    }
}

/// A network that answers every authorization and reversal with the same scripted result and records what it
/// was sent.
final class ScriptedNetwork: AcquiringNetwork, @unchecked Sendable {
    typealias Decision = (responseCode: String, approvalCode: String?, declineReason: String?)
    private let answer: Result<Decision, NetworkAuthorizationAPI.Failure>
    private let reversal: Result<String, NetworkAuthorizationAPI.Failure>
    // Guarded by `lock`.
    private let lock = NSLock()
    private var _authorizations: [NetworkAuthorizationAPI.AuthorizationRequest] = []
    private var _reversals: [NetworkAuthorizationAPI.ReversalRequest] = []

    init(
        answer: Result<Decision, NetworkAuthorizationAPI.Failure>,
        reversal: Result<String, NetworkAuthorizationAPI.Failure>
    ) {
        self.answer = answer
        self.reversal = reversal
    }

    var authorizations: [NetworkAuthorizationAPI.AuthorizationRequest] { lock.withLock { _authorizations } }
    var reversals: [NetworkAuthorizationAPI.ReversalRequest] { lock.withLock { _reversals } }

    func authorize(
        _ request: NetworkAuthorizationAPI.AuthorizationRequest
    ) async throws(NetworkAuthorizationAPI.Failure) -> NetworkAuthorizationAPI.AuthorizationAnswer {
        lock.withLock { _authorizations.append(request) }
        let decision = try answer.get()
        return NetworkAuthorizationAPI.AuthorizationAnswer(
            transactionID: request.transactionID, responseCode: decision.responseCode,
            approvalCode: decision.approvalCode, declineReason: decision.declineReason, cardSuffix: "0000")
    }

    func reverse(
        _ request: NetworkAuthorizationAPI.ReversalRequest
    ) async throws(NetworkAuthorizationAPI.Failure) -> NetworkAuthorizationAPI.ReversalAnswer {
        lock.withLock { _reversals.append(request) }
        return NetworkAuthorizationAPI.ReversalAnswer(transactionID: request.transactionID, outcome: try reversal.get())
    }
}
