import CardBasics
import Foundation
import Issuer
import NetworkTestSupport
import OrchardCrypto
import Testing
import TokenService

@Suite("Reconciliation of holds without a final answer")
struct ReconciliationTests {
    /// The issuer's hold step alone, as a crash after it and before the token service's record leaves it.
    static func orphanHold(_ h: NetworkHarness, id: String, amount: Int64) async throws {
        let card = try #require(try await h.issuer.card(pan: PrimaryAccountNumber("4111111111111111")))
        let answer = try await h.issuer.authorize(
            IssuerAuthorizationRequest(
                networkTransactionID: "acq-1:" + id, pan: card.pan, expiry: card.expiry,
                amount: try Money(minorUnits: amount, currency: Currency(TestCards.currency)), channel: .contactless,
                merchant: NetworkHarness.merchant, token: nil, cryptogramVerified: false, transmittedAt: h.clock.now()))
        #expect(answer.responseCode.isApproved)
    }

    @Test("R3: a hold with no answer at the network is reversed once after the bound, not before, and not again")
    func anUnansweredHoldIsReversedOnceAfterTheBoundAndNotBefore() async throws {
        let h = try await NetworkHarness()
        let before = try #require(try await h.issuer.account(id: "acct-1")).balance
        try await Self.orphanHold(h, id: "lost-1", amount: 700)
        #expect(try await h.issuer.account(id: "acct-1")?.balance == before + 700)
        let reconciler = NetworkReconciler(
            tokenService: h.tokenService, issuer: h.issuer, reconcileAfter: 300, clock: h.clock)

        h.clock.advance(by: 299)
        let early = try await reconciler.run()
        #expect(early.count == 0 && early.holds.isEmpty)
        #expect(try await h.issuer.account(id: "acct-1")?.balance == before + 700)

        h.clock.advance(by: 2)
        let report = try await reconciler.run()
        #expect(report.count == 1)
        let hold = try #require(report.holds.first)
        #expect(hold.outcome == "released" && hold.ageSeconds == 301 && hold.amount.minorUnits == 700)
        #expect(hold.maskedPAN == "411111******1111")
        #expect(try await h.issuer.account(id: "acct-1")?.balance == before)

        // Idempotent: the second pass finds nothing open and moves nothing.
        let again = try await reconciler.run()
        #expect(again.count == 0 && again.holds.isEmpty)
        #expect(try await h.issuer.account(id: "acct-1")?.balance == before)
    }

    @Test("R3: a completed authorization is never touched; a late authorization of a reversed hold is declined (12)")
    func aCompletedAuthorizationIsNeverTouched() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let card = try await h.provision("4111111111111111", on: phone)
        let before = try #require(try await h.issuer.account(id: "acct-1")).balance
        #expect(try await h.authorize(card, on: phone, amount: 450, transactionID: "done-1").responseCode == .approved)
        try await Self.orphanHold(h, id: "lost-2", amount: 25)
        h.clock.advance(by: 3600)
        let report = try await NetworkReconciler(
            tokenService: h.tokenService, issuer: h.issuer, reconcileAfter: 300, clock: h.clock
        ).run()
        // Only the orphan is reversed; the completed authorization keeps its hold.
        #expect(report.count == 1 && report.holds.map(\.networkTransactionID) == ["acq-1:lost-2"])
        #expect(try await h.issuer.account(id: "acct-1")?.balance == before + 450)
        // An authorization for the reversed transaction that arrives late is declined and moves nothing.
        let late = try await h.authorize(card, on: phone, amount: 25, transactionID: "lost-2")
        #expect(late.responseCode == .invalidTransaction)
        #expect(try await h.issuer.account(id: "acct-1")?.balance == before + 450)
    }

    @Test("R3: a hold whose recorded answer is a decline (the issuer's approval was lost) is reversed")
    func aHoldBehindARecordedDeclineIsReversed() async throws {
        let h = try await NetworkHarness()
        let before = try #require(try await h.issuer.account(id: "acct-1")).balance
        try await Self.orphanHold(h, id: "lost-3", amount: 90)
        // What the token service records when the issuer's answer does not come back: a decline, 91.
        let declined = NetworkAuthorizationResponse(
            transactionID: "lost-3", pan: try PrimaryAccountNumber("4895370000000007"),
            responseCode: .issuerUnavailable, approvalCode: nil, declineReason: .issuerUnavailable,
            cardSuffix: "1111")
        try await h.vault.saveIdempotencyRecord(
            IdempotencyRecord(
                scope: "authorization:acq-1", key: "lost-3", requestFingerprint: "f",
                response: Array(try JSONEncoder().encode(declined)), createdAt: h.clock.now()))
        h.clock.advance(by: 600)
        let report = try await NetworkReconciler(
            tokenService: h.tokenService, issuer: h.issuer, reconcileAfter: 300, clock: h.clock
        ).run()
        #expect(report.count == 1 && report.holds.first?.outcome == "released")
        #expect(try await h.issuer.account(id: "acct-1")?.balance == before)
    }
}
