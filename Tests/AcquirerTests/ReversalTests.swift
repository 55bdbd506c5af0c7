import Acquirer
import CardBasics
import Foundation
import Issuer
import NetworkAuthorizationAPI
import NetworkTestSupport
import OrchardCrypto
import Testing
import TokenService

@Suite("Acquirer: reversals through the network to the issuer")
struct ReversalTests {
    func reversal(
        _ f: AcquirerFixture, terminal: String = "T0001", stan: String, amount: Int64, merchant: String = "m-coffee",
        reason: String = "timeout"
    ) throws -> AcquirerReversalRequest {
        AcquirerReversalRequest(
            origin: .terminal(terminalID: terminal, systemTraceAuditNumber: stan), merchantID: merchant,
            amount: try Money(minorUnits: amount, currency: Currency("840")), reason: reason)
    }

    func balance(_ f: AcquirerFixture) async throws -> Int64? {
        try await f.network.issuer.account(id: "acct-1")?.balance
    }

    @Test func anApprovedAuthorizationIsReleasedExactlyOnce() async throws {
        let f = try await AcquirerFixture()
        let approved = try await f.acquirer.authorize(try await f.terminalRequest(stan: "000101", amount: 1_250))
        #expect(approved.isApproved)
        #expect(try await balance(f) == 1_250)
        let first = try await f.acquirer.reverse(try reversal(f, stan: "000101", amount: 1_250))
        #expect(first.reversed && first.outcome == .released && first.authorizationID == approved.authorizationID)
        #expect(try await balance(f) == 0)
        // A repeat (another reason does not make it another reversal) gets the first answer; no money moves.
        let repeated = try await f.acquirer.reverse(try reversal(f, stan: "000101", amount: 1_250, reason: "recovery"))
        #expect(repeated == first)
        #expect(try await balance(f) == 0)
        // Concurrent repeats: still once.
        let results = try await withThrowingTaskGroup(of: AcquirerReversalResult.self) { group in
            for _ in 0..<5 {
                group.addTask { try await f.acquirer.reverse(try reversal(f, stan: "000101", amount: 1_250)) }
            }
            var out: [AcquirerReversalResult] = []
            for try await result in group { out.append(result) }
            return out
        }
        #expect(results.allSatisfy { $0 == first })
        #expect(try await balance(f) == 0)
        // The same key reversed with another amount is refused.
        await #expect(throws: AcquirerError(.idempotencyConflict, "")) {
            try await f.acquirer.reverse(try reversal(f, stan: "000101", amount: 1_000))
        }
    }

    @Test func aReversalOfADeclinedAuthorizationIsAcknowledgedWithoutEffect() async throws {
        let f = try await AcquirerFixture()
        _ = try await f.acquirer.authorize(try await f.terminalRequest(stan: "000102", amount: 300))
        // Over the per-transaction limit (2,000.00): declined by the issuer, nothing held.
        let declined = try await f.acquirer.authorize(try await f.terminalRequest(stan: "000103", amount: 250_000))
        #expect(declined.responseCode == .exceedsAmountLimit)
        let result = try await f.acquirer.reverse(try reversal(f, stan: "000103", amount: 250_000))
        #expect(!result.reversed && result.outcome == .notApproved)
        #expect(try await balance(f) == 300)
        // Declined by the token service itself (suspended token): the issuer never saw it.
        try await f.network.tokenService.suspend(tokenReference: f.card.token.tokenReference, by: .cardholder)
        let suspended = try await f.acquirer.authorize(try await f.terminalRequest(stan: "000104", amount: 50))
        #expect(suspended.responseCode == .restrictedCard)
        let again = try await f.acquirer.reverse(try reversal(f, stan: "000104", amount: 50))
        #expect(!again.reversed && again.outcome == .notApproved)
        #expect(try await balance(f) == 300)
    }

    @Test func aReversalBeforeItsAuthorizationLeavesTheIssuerWithNone() async throws {
        let f = try await AcquirerFixture()
        let request = try await f.terminalRequest(stan: "000105", amount: 800)
        let reversed = try await f.acquirer.reverse(try reversal(f, stan: "000105", amount: 800))
        #expect(!reversed.reversed && reversed.outcome == .preempted && reversed.authorizationID == nil)
        // The authorization arrives late: declined with 12, the issuer moves nothing.
        let late = try await f.acquirer.authorize(request)
        #expect(late.responseCode == .invalidTransaction && late.declineReason == "reversedBeforeAuthorization")
        #expect(try await f.acquirer.authorize(request) == late)
        #expect(try await balance(f) == 0)
        // Even if it reached the network directly (the acquirer's record lost), the network and the issuer
        // decline it too.
        let direct = try await f.network.tokenService.authorize(
            NetworkAuthorizationRequest(
                acquirerID: "acq-1",
                transactionID: SHA256.hash(Array("terminal:T0001:000105".utf8)).prefix(16)
                    .map { byte in (byte < 16 ? "0" : "") + String(byte, radix: 16) }.joined(),
                pan: request.pan, expiry: request.expiry, amount: request.amount, channel: .contactless,
                merchant: NetworkHarness.merchant, cryptogram: request.cryptogram, transmittedAt: Date()))
        #expect(direct.responseCode == .invalidTransaction)
        #expect(try await balance(f) == 0)
    }

    @Test func aLostAnswerIsReversedThroughTheNetworksRecord() async throws {
        let flaky = FlakyNetwork()
        let f = try await AcquirerFixture(network: flaky)
        flaky.target = f.network.tokenService
        // The network approves but the answer is lost: the acquirer has no record.
        flaky.loseNextAnswer = true
        await #expect(throws: AcquirerError(.networkUnavailable, "")) {
            try await f.acquirer.authorize(try await f.terminalRequest(stan: "000106", amount: 640))
        }
        #expect(try await balance(f) == 640)
        let result = try await f.acquirer.reverse(try reversal(f, stan: "000106", amount: 640))
        #expect(result.reversed && result.outcome == .released && result.authorizationID == nil)
        #expect(try await balance(f) == 0)
    }

    @Test func anAuthorizationRacingItsReversalEndsWithNothingHeld() async throws {
        for round in 0..<6 {
            let f = try await AcquirerFixture()
            let stan = String(format: "%06d", 200 + round)
            let request = try await f.terminalRequest(stan: stan, amount: 410)
            let reversal = try reversal(f, stan: stan, amount: 410)
            async let authorized = f.acquirer.authorize(request)
            async let reversed = f.acquirer.reverse(reversal)
            let (authorization, result) = try await (authorized, reversed)
            // Either order is allowed; both end with nothing held and consistent answers.
            if authorization.isApproved {
                #expect(result.reversed && result.outcome == .released)
            } else {
                #expect(authorization.responseCode == .invalidTransaction && result.outcome == .preempted)
            }
            #expect(try await balance(f) == 0)
        }
    }

    @Test func aMerchantServerReversesByItsKey() async throws {
        let f = try await AcquirerFixture()
        let approved = try await f.acquirer.authorize(try await f.onlineRequest(key: "order-77", amount: 1_999))
        #expect(approved.isApproved)
        let money = try Money(minorUnits: 1_999, currency: Currency("840"))
        let result = try await f.acquirer.reverse(
            AcquirerReversalRequest(
                origin: .merchantServer(idempotencyKey: "order-77"), merchantID: "m-web", amount: money,
                reason: "cancelled"))
        #expect(result.reversed && result.authorizationID == approved.authorizationID)
        #expect(try await balance(f) == 0)
        // The key belongs to the merchant: another merchant's reversal with it finds nothing of this one's.
        let other = try await f.acquirer.reverse(
            AcquirerReversalRequest(
                origin: .merchantServer(idempotencyKey: "order-77"), merchantID: "m-coffee", amount: money,
                reason: "cancelled"))
        #expect(!other.reversed && other.outcome == .preempted)
        #expect(try await balance(f) == 0)
        // A key that could hold a card number is refused here too.
        await #expect(throws: AcquirerError(.invalidRequest, "")) {
            try await f.acquirer.reverse(
                AcquirerReversalRequest(
                    origin: .merchantServer(idempotencyKey: "order-4111111111111111"), merchantID: "m-web",
                    amount: money, reason: "cancelled"))
        }
    }

    @Test func refusedReversals() async throws {
        let f = try await AcquirerFixture()
        _ = try await f.acquirer.authorize(try await f.terminalRequest(stan: "000107", amount: 500))
        await #expect(throws: AcquirerError(.unknownTerminal, "")) {
            try await f.acquirer.reverse(try reversal(f, terminal: "T9999", stan: "000107", amount: 500))
        }
        await #expect(throws: AcquirerError(.unknownMerchant, "")) {
            try await f.acquirer.reverse(try reversal(f, stan: "000107", amount: 500, merchant: "m-nope"))
        }
        await #expect(throws: AcquirerError(.invalidRequest, "")) {
            try await f.acquirer.reverse(try reversal(f, stan: "000107", amount: 499))
        }
        await #expect(throws: AcquirerError(.invalidRequest, "")) {
            try await f.acquirer.reverse(try reversal(f, stan: "000107", amount: 500, reason: "no spaces allowed"))
        }
        await #expect(throws: AcquirerError(.invalidRequest, "")) {
            try await f.acquirer.reverse(try reversal(f, stan: "107", amount: 500))
        }
        #expect(try await balance(f) == 500)
    }

    @Test func aNetworkThatCannotReverseKeepsTheReversalPending() async throws {
        let f = try await AcquirerFixture(network: DownNetwork())
        await #expect(throws: AcquirerError(.networkUnavailable, "")) {
            try await f.acquirer.reverse(try reversal(f, stan: "000108", amount: 10))
        }
        // Nothing recorded: the late authorization is not blocked by the acquirer (the network decides).
        await #expect(throws: AcquirerError(.networkUnavailable, "")) {
            try await f.acquirer.authorize(try await f.terminalRequest(stan: "000108", amount: 10))
        }
    }
}

@Suite("Issuer: reversals")
struct IssuerReversalTests {
    @Test func theIssuerReleasesOnceBlocksUnknownIDsAndChecksTheAmount() async throws {
        let h = try await NetworkHarness()
        let issuer = h.issuer
        let money = try Money(minorUnits: 700, currency: Currency("840"))
        func request(_ id: String, _ amount: Money = money) -> IssuerReversalRequest {
            IssuerReversalRequest(networkTransactionID: id, amount: amount, transmittedAt: Date())
        }
        // A reversal of an unknown ID blocks it.
        #expect(try await issuer.reverse(request("x:1")).outcome == .preempted)
        #expect(try await issuer.reverse(request("x:1")).outcome == .preempted)
        await #expect(throws: IssuerError(.invalidInput, "")) {
            try await issuer.reverse(request("x:1", try Money(minorUnits: 701, currency: Currency("840"))))
        }
        await #expect(throws: IssuerError(.invalidInput, "")) { try await issuer.reverse(request("")) }
    }
}

/// A network that is down: it decides nothing.
struct DownNetwork: AcquiringNetwork {
    func authorize(
        _ request: NetworkAuthorizationAPI.AuthorizationRequest
    ) async throws(NetworkAuthorizationAPI.Failure) -> NetworkAuthorizationAPI.AuthorizationAnswer {
        throw NetworkAuthorizationAPI.Failure(.unavailable, "down")
    }

    func reverse(
        _ request: NetworkAuthorizationAPI.ReversalRequest
    ) async throws(NetworkAuthorizationAPI.Failure) -> NetworkAuthorizationAPI.ReversalAnswer {
        throw NetworkAuthorizationAPI.Failure(.unavailable, "down")
    }
}
