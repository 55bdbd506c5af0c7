import Acquirer
import CardBasics
import Foundation
import Issuer
import NetworkTestSupport
import OrchardCrypto
import Testing

/// Reconciliation at the acquirer: authorizations it sent whose client never came back are reversed once,
/// after the bound, and only those.
@Suite("Acquirer: reconciliation of authorizations without a result")
struct AcquirerReconciliationTests {
    func balance(_ f: AcquirerFixture) async throws -> Int64 {
        try #require(try await f.network.issuer.account(id: "acct-1")).balance
    }

    @Test("R3: an answer lost on its way back, never asked for again: reversed once after the bound, not before")
    func aLostAnswerIsReversedOnceAfterTheBound() async throws {
        let flaky = FlakyNetwork()
        let f = try await AcquirerFixture(network: flaky)
        flaky.target = f.network.tokenService
        let request = try await f.terminalRequest(stan: "000201", amount: 640)
        flaky.loseNextAnswer = true
        await #expect(throws: AcquirerError(.networkUnavailable, "")) { try await f.acquirer.authorize(request) }
        // The network approved and the issuer holds the money; the terminal vanished.
        #expect(try await balance(f) == 640)
        #expect(try await f.store.pendingAuthorizations(sentBefore: .distantFuture).count == 1)

        f.network.clock.advance(by: 299)
        let early = try await f.acquirer.reconcile(sentBefore: f.network.clock.now().addingTimeInterval(-300))
        #expect(early.isEmpty)
        #expect(try await balance(f) == 640)

        f.network.clock.advance(by: 2)
        let pass = try await f.acquirer.reconcile(sentBefore: f.network.clock.now().addingTimeInterval(-300))
        #expect(pass.count == 1)
        let reversed = try #require(pass.first)
        #expect(reversed.outcome == "released" && reversed.ageSeconds == 301 && reversed.amount.minorUnits == 640)
        #expect(reversed.idempotencyKey == "terminal:T0001:000201" && reversed.maskedPAN.contains("******"))
        #expect(try await balance(f) == 0)
        #expect(try await f.store.pendingAuthorizations(sentBefore: .distantFuture).isEmpty)

        // Again: nothing left. The terminal's late retry is declined with 12 and moves nothing.
        #expect(try await f.acquirer.reconcile(sentBefore: f.network.clock.now()).isEmpty)
        let late = try await f.acquirer.authorize(request)
        #expect(late.responseCode == .invalidTransaction)
        #expect(try await balance(f) == 0)
    }

    @Test("R3: answered authorizations, and one whose retry came back, are never reversed")
    func completedAuthorizationsAreLeftAlone() async throws {
        let flaky = FlakyNetwork()
        let f = try await AcquirerFixture(network: flaky)
        flaky.target = f.network.tokenService
        #expect(try await f.acquirer.authorize(try await f.terminalRequest(stan: "000202", amount: 100)).isApproved)
        let retried = try await f.terminalRequest(stan: "000203", amount: 50)
        flaky.loseNextAnswer = true
        await #expect(throws: AcquirerError(.networkUnavailable, "")) { try await f.acquirer.authorize(retried) }
        #expect(try await f.acquirer.authorize(retried).isApproved)
        #expect(try await f.store.pendingAuthorizations(sentBefore: .distantFuture).isEmpty)

        f.network.clock.advance(by: 3600)
        #expect(try await f.acquirer.reconcile(sentBefore: f.network.clock.now()).isEmpty)
        #expect(try await balance(f) == 150)
    }

    @Test("R3: a network that does not take the reversal: reported failed, retried by the next pass")
    func aFailedReversalIsRetried() async throws {
        let flaky = FlakyNetwork()
        let f = try await AcquirerFixture(network: flaky)
        flaky.target = f.network.tokenService
        flaky.loseNextAnswer = true
        await #expect(throws: AcquirerError(.networkUnavailable, "")) {
            try await f.acquirer.authorize(try await f.terminalRequest(stan: "000204", amount: 80))
        }
        f.network.clock.advance(by: 600)
        flaky.target = nil
        let failed = try await f.acquirer.reconcile(sentBefore: f.network.clock.now())
        #expect(failed.map(\.outcome) == ["failed"])
        #expect(try await balance(f) == 80)
        flaky.target = f.network.tokenService
        let released = try await f.acquirer.reconcile(sentBefore: f.network.clock.now())
        #expect(released.map(\.outcome) == ["released"])
        #expect(try await balance(f) == 0)
    }
}
