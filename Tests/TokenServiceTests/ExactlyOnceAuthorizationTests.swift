import CardBasics
import Foundation
import Issuer
import NetworkAuthorizationAPI
import NetworkTestSupport
import OrchardCrypto
import Testing
import TokenService

/// A vault whose writes of final answers fail while `failAnswers` is set: the token service stops between the
/// issuer's hold and its own record, as a crash or a full disk would stop it.
final class AnswerLosingVault: TokenVaultStore, @unchecked Sendable {
    let inner = InMemoryTokenVaultStore()
    private let lock = NSLock()
    private var failing = false
    var failAnswers: Bool {
        get { lock.withLock { failing } }
        set { lock.withLock { failing = newValue } }
    }

    func card(id: String) async throws -> CardRecord? { try await inner.card(id: id) }
    func card(panLookup: String) async throws -> CardRecord? { try await inner.card(panLookup: panLookup) }
    func saveCard(_ card: CardRecord) async throws { try await inner.saveCard(card) }
    func token(reference: String) async throws -> TokenRecord? { try await inner.token(reference: reference) }
    func token(dpan: PrimaryAccountNumber) async throws -> TokenRecord? { try await inner.token(dpan: dpan) }
    func tokens(cardID: String) async throws -> [TokenRecord] { try await inner.tokens(cardID: cardID) }
    func tokens(deviceID: String) async throws -> [TokenRecord] { try await inner.tokens(deviceID: deviceID) }
    func saveToken(_ token: TokenRecord) async throws { try await inner.saveToken(token) }
    func saveToken(_ token: TokenRecord, with record: IdempotencyRecord) async throws {
        try await inner.saveToken(token, with: record)
    }
    func session(id: String) async throws -> ProvisioningSession? { try await inner.session(id: id) }
    func saveSession(_ session: ProvisioningSession) async throws { try await inner.saveSession(session) }
    func purgeSessions(expiredBefore date: Date) async throws -> Int {
        try await inner.purgeSessions(expiredBefore: date)
    }
    func idempotencyRecord(scope: String, key: String) async throws -> IdempotencyRecord? {
        try await inner.idempotencyRecord(scope: scope, key: key)
    }
    func saveIdempotencyRecord(_ record: IdempotencyRecord) async throws {
        if failAnswers, record.scope.hasPrefix("authorization:") { throw TestDoubleError("disk full") }
        try await inner.saveIdempotencyRecord(record)
    }
}

/// Records the steps an authorization passed.
final class StepRecorder: AuthorizationProbe, @unchecked Sendable {
    private let lock = NSLock()
    private var passed: [AuthorizationStep] = []
    var steps: [AuthorizationStep] { lock.withLock { passed } }
    func reached(_ step: AuthorizationStep, transactionID: String) async { lock.withLock { passed.append(step) } }
}

@Suite("Authorizations exactly once: a lost answer resumed, reconciled or refused")
struct ExactlyOnceAuthorizationTests {
    let h: NetworkHarness
    let vault = AnswerLosingVault()
    let phone: SimulatedDevice
    let card: InstalledCard

    init() async throws {
        h = try await NetworkHarness(vaultStore: vault)
        phone = try h.makeDevice("phone-1")
        card = try await h.provision("4111111111111111", on: phone)
    }

    func request(_ id: String, amount: Int64) async throws -> NetworkAuthorizationRequest {
        let money = try Money(minorUnits: amount, currency: Currency(TestCards.currency))
        return NetworkAuthorizationRequest(
            acquirerID: "acq-1", transactionID: id, pan: card.data.dpan, expiry: card.data.tokenExpiry,
            amount: money, channel: .contactless, merchant: NetworkHarness.merchant,
            cryptogram: try await phone.cryptogram(for: card, kind: .proximityARQC, amount: money),
            transmittedAt: h.clock.now())
    }

    func balance() async throws -> Int64 { try #require(try await h.issuer.account(id: "acct-1")).balance }

    /// The network's answer is lost after the issuer held the money: the started record stays.
    func loseTheAnswer(_ request: NetworkAuthorizationRequest) async throws {
        vault.failAnswers = true
        await #expect(throws: TestDoubleError.self) { try await h.tokenService.authorize(request) }
        vault.failAnswers = false
        let record = try #require(
            try await vault.idempotencyRecord(scope: "authorization:acq-1", key: request.transactionID))
        #expect(record.started?.applicationTransactionCounter == request.cryptogram?.applicationTransactionCounter)
        #expect(record.response.isEmpty)
    }

    @Test("R2: the retry after a lost answer resumes at the issuer and gets its first answer; the money held once")
    func aRetryResumesAndGetsTheFirstAnswer() async throws {
        let start = try await balance()
        let request = try await request("txn-lost", amount: 500)
        try await loseTheAnswer(request)
        #expect(try await balance() == start + 500)
        let held = try #require(try await h.issuerStore.authorization(networkTransactionID: "acq-1:txn-lost"))

        // Today's design would decline the retry as a replayed ATC (88); it resumes instead.
        let retry = try await h.tokenService.authorize(request)
        #expect(retry.responseCode == .approved && retry.approvalCode == held.response.approvalCode)
        #expect(try await h.tokenService.authorize(request) == retry)
        #expect(try await balance() == start + 500)
        let record = try #require(try await vault.idempotencyRecord(scope: "authorization:acq-1", key: "txn-lost"))
        #expect(record.started == nil && !record.response.isEmpty)
    }

    @Test("R2: the steps of an authorization, in order; a stored answer passes none again")
    func theStepsInOrder() async throws {
        let recorder = StepRecorder()
        let h = try await NetworkHarness(authorizationProbe: recorder)
        let phone = try h.makeDevice("phone-2")
        let card = try await h.provision("4111111111111111", on: phone)
        let first = try await h.authorize(card, on: phone, amount: 120, transactionID: "txn-steps")
        #expect(first.responseCode == .approved)
        #expect(recorder.steps == [.counterRecorded, .issuerAnswered, .networkAnswerRecorded])
    }

    @Test("R3: a started authorization whose retry never comes is reversed after the bound; a late retry gets 12")
    func aStartedAuthorizationIsReconciled() async throws {
        let start = try await balance()
        let request = try await request("txn-abandoned", amount: 250)
        try await loseTheAnswer(request)
        let reconciler = NetworkReconciler(
            tokenService: h.tokenService, issuer: h.issuer, reconcileAfter: 300, clock: h.clock)
        h.clock.advance(by: 299)
        #expect(try await reconciler.run().holds.isEmpty)
        h.clock.advance(by: 2)
        let report = try await reconciler.run()
        #expect(report.count == 1 && report.holds.first?.networkTransactionID == "acq-1:txn-abandoned")
        #expect(try await balance() == start)

        let late = try await h.tokenService.authorize(request)
        #expect(late.responseCode == .invalidTransaction && late.declineReason == .reversedBeforeAuthorization)
        #expect(try await balance() == start)
        #expect(try await reconciler.run().holds.isEmpty)
    }

    @Test("R2: a reversal of a started authorization reaches the token's issuer and releases the hold")
    func aStartedAuthorizationIsReversed() async throws {
        let start = try await balance()
        let request = try await request("txn-reversed", amount: 75)
        try await loseTheAnswer(request)
        let reversal = try await h.tokenService.reverse(
            NetworkReversalRequest(
                acquirerID: "acq-1", transactionID: "txn-reversed", amount: request.amount,
                transmittedAt: h.clock.now()))
        #expect(reversal.outcome == .released)
        #expect(try await balance() == start)
    }

    @Test("A different request under a started authorization's transaction ID is refused; nothing moves")
    func anotherRequestUnderAStartedIDIsRefused() async throws {
        let start = try await balance()
        let request = try await request("txn-conflict", amount: 60)
        try await loseTheAnswer(request)
        let other = try await self.request("txn-conflict", amount: 61)
        await #expect {
            try await h.tokenService.authorize(other)
        } throws: { error in
            (error as? TokenServiceError)?.code == .idempotencyConflict
        }
        #expect(try await balance() == start + 60)
    }
}
