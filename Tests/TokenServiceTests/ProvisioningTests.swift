import CardBasics
import Foundation
import Issuer
import NetworkTestSupport
import OrchardCrypto
import Testing
import TokenService

@Suite("Provisioning: Check Card, step-up, Link and Provision")
struct ProvisioningTests {
    @Test func approveProvisionsOneTokenForTheDevice() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let check = try await h.checkCard("4111111111111111", on: phone)
        guard case .approve(let profile) = check.decision else {
            Issue.record("expected approval, got \(check.decision)")
            return
        }
        #expect(profile.suffix == "1111" && profile.network == .visa && profile.type == .credit)
        let sessionID = try #require(check.sessionID)
        #expect(check.termsID != nil)
        guard case .provisioned(let token) = try await h.link(sessionID, on: phone) else {
            Issue.record("expected a token")
            return
        }
        let installed = try phone.install(token, from: h.tokenService)
        #expect(installed.data.dpan.digits.hasPrefix(NetworkHarness.visaTokenPrefix))
        #expect(installed.data.dpan.suffix == token.dpanSuffix && installed.data.dpan.digits != "4111111111111111")
        #expect(installed.data.tokenReference == token.tokenReference)
        // The token expires on its own schedule (36 months), not with the card (12/34).
        #expect(installed.data.tokenExpiry == (try CardExpiry(year: 2029, month: 3)))
        #expect(token.domainControls == .all)
        let status = try await h.tokenService.status(tokenReference: token.tokenReference)
        #expect(status.state == .active && status.deviceID == "phone-1")
        #expect(h.outbox.notifications.map(\.event) == [.provisioned])
        #expect(h.vault.snapshot().tokens.count == 1)
    }

    @Test func checkCardAndLinkAreIdempotent() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let envelope = try phone.sealCardData(
            pan: try PrimaryAccountNumber("4111111111111111"), expiry: try h.testCardExpiry(),
            cvv: try h.cvv("4111111111111111"),
            name: "Orchard Tester", to: h.tokenService)
        let request = CheckCardRequest(
            idempotencyKey: "k1", tokenRequestorID: TokenRequestor.orchardPay.id, deviceID: "phone-1",
            deviceKind: "phone",
            encryptedCardData: envelope)
        let first = try await h.tokenService.checkCard(request)
        let again = try await h.tokenService.checkCard(request)
        #expect(first == again)
        #expect(h.vault.snapshot().sessions.count == 1)
        // The same key with another request is refused.
        let other = CheckCardRequest(
            idempotencyKey: "k1", tokenRequestorID: TokenRequestor.orchardPay.id, deviceID: "phone-1",
            deviceKind: "watch",
            encryptedCardData: envelope)
        await #expect(throws: TokenServiceError(.idempotencyConflict, "")) { try await h.tokenService.checkCard(other) }

        let sessionID = try #require(first.sessionID)
        let linked = try await h.link(sessionID, on: phone, idempotencyKey: "L1")
        let retried = try await h.link(sessionID, on: phone, idempotencyKey: "L1")
        #expect(linked == retried)
        #expect(h.vault.snapshot().tokens.count == 1)
        // Concurrent retries also create one DPAN.
        let concurrent = try await withThrowingTaskGroup(of: LinkAndProvisionResponse.self) { group in
            for _ in 0..<8 { group.addTask { try await h.link(sessionID, on: phone, idempotencyKey: "L1") } }
            var out: [LinkAndProvisionResponse] = []
            for try await response in group { out.append(response) }
            return out
        }
        #expect(Set(concurrent).count == 1 && concurrent.first == linked)
        #expect(h.vault.snapshot().tokens.count == 1)
        // A new key for the same session cannot make a second token.
        await #expect(throws: TokenServiceError(.sessionState, "")) {
            try await h.link(sessionID, on: phone, idempotencyKey: "L2")
        }
    }

    @Test func stepUpThenProvision() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let check = try await h.checkCard("4000000000003220", on: phone)
        guard case .stepUp = check.decision, let sessionID = check.sessionID else {
            Issue.record("expected a step-up")
            return
        }
        // Link and Provision before the code is refused.
        await #expect(throws: TokenServiceError(.sessionState, "")) { try await h.link(sessionID, on: phone) }
        let wrong = try await h.tokenService.submitOneTimeCode(
            sessionID: sessionID, deviceID: "phone-1", code: "654321")
        guard case .stepUp = wrong.decision else {
            Issue.record("a wrong code should leave the step-up")
            return
        }
        let right = try await h.tokenService.submitOneTimeCode(
            sessionID: sessionID, deviceID: "phone-1", code: "123456")
        guard case .approve = right.decision else {
            Issue.record("the code should approve")
            return
        }
        // Repeating the code answers the approval again.
        #expect(
            try await h.tokenService.submitOneTimeCode(sessionID: sessionID, deviceID: "phone-1", code: "123456")
                == right)
        guard case .provisioned = try await h.link(sessionID, on: phone) else {
            Issue.record("expected a token after step-up")
            return
        }
    }

    @Test func stepUpFailsAfterTooManyCodes() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let sessionID = try #require(try await h.checkCard("4000000000003220", on: phone).sessionID)
        for code in ["1", "2"] {
            _ = try await h.tokenService.submitOneTimeCode(sessionID: sessionID, deviceID: "phone-1", code: code)
        }
        let last = try await h.tokenService.submitOneTimeCode(sessionID: sessionID, deviceID: "phone-1", code: "3")
        #expect(last.decision == .decline(.tooManyAttempts) && last.sessionID == nil)
        await #expect(throws: TokenServiceError(.sessionState, "")) {
            try await h.tokenService.submitOneTimeCode(sessionID: sessionID, deviceID: "phone-1", code: "123456")
        }
    }

    @Test("P4: declines make no session and no token, and repeat on a retry")
    func declinesMakeNoSessionNoTokenAndRepeatOnRetry() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let envelope = try phone.sealCardData(
            pan: try PrimaryAccountNumber("4000000000000002"), expiry: try h.testCardExpiry(),
            cvv: try h.cvv("4000000000000002"), name: "Orchard Tester", to: h.tokenService)
        let request = CheckCardRequest(
            idempotencyKey: "d1", tokenRequestorID: TokenRequestor.orchardPay.id, deviceID: "phone-1",
            deviceKind: "phone",
            encryptedCardData: envelope)
        let declined = try await h.tokenService.checkCard(request)
        #expect(declined.decision == .decline(.notEligible) && declined.sessionID == nil && declined.termsID == nil)
        #expect(try await h.tokenService.checkCard(request) == declined)
        // A wrong CVV, an unknown card.
        #expect(
            try await h.checkCard("4111111111111111", on: phone, cvv: "000", idempotencyKey: "d2").decision
                == .decline(.verificationFailed))
        #expect(try await h.checkCard("4242424242424242", on: phone, cvv: "123").decision == .decline(.unknownCard))
        // A DPAN is not a card.
        #expect(try await h.checkCard("4895370012345671", on: phone, cvv: "123").decision == .decline(.notEligible))
        let snapshot = h.vault.snapshot()
        #expect(snapshot.sessions.isEmpty && snapshot.tokens.isEmpty && snapshot.cards.isEmpty)
    }

    @Test("P4: refused terms decline, and the retry repeats it")
    func refusedTermsDeclineAndTheRetryRepeatsIt() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let sessionID = try #require(try await h.checkCard("4111111111111111", on: phone).sessionID)
        let refused = try await h.link(sessionID, on: phone, termsAccepted: false, idempotencyKey: "t1")
        #expect(refused == .declined(.termsNotAccepted))
        #expect(try await h.link(sessionID, on: phone, termsAccepted: false, idempotencyKey: "t1") == refused)
        await #expect(throws: TokenServiceError(.sessionState, "")) {
            try await h.link(sessionID, on: phone, termsAccepted: true, idempotencyKey: "t2")
        }
        #expect(h.vault.snapshot().tokens.isEmpty)
    }

    @Test("P2: two devices for one card get different DPANs and keys")
    func twoDevicesForOneCardGetDifferentDPANsAndKeys() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let watch = try h.makeDevice("watch-1", kind: "watch")
        let onPhone = try await h.provision("5555555555554444", on: phone)
        let onWatch = try await h.provision("5555555555554444", on: watch)
        #expect(onPhone.data.dpan != onWatch.data.dpan)
        #expect(onPhone.data.dpan.digits.hasPrefix(NetworkHarness.mastercardTokenPrefix))
        #expect(onPhone.data.proximityMasterKey != onWatch.data.proximityMasterKey)
        #expect(onPhone.data.remoteMasterKey != onWatch.data.remoteMasterKey)
        // One card record, shared PAR; two tokens.
        let snapshot = h.vault.snapshot()
        #expect(snapshot.cards.count == 1 && snapshot.tokens.count == 2)
        #expect(Set(snapshot.tokens.map(\.cardID)).count == 1)
        #expect(snapshot.cards[0].paymentAccountReference.count == 29)
        #expect(snapshot.cards[0].paymentAccountReference.hasPrefix("O001"))
    }

    @Test("P3: the personalisation opens only on the Secure Element it was sealed to")
    func personalisationOpensOnlyOnTheRightSecureElement() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let other = try h.makeDevice("phone-2")
        let check = try await h.checkCard("4111111111111111", on: phone)
        guard case .provisioned(let token) = try await h.link(try #require(check.sessionID), on: phone) else {
            Issue.record("expected a token")
            return
        }
        #expect(throws: TokenServiceError(.envelopeRejected, "")) { try other.install(token, from: h.tokenService) }
        #expect(throws: Never.self) { try phone.install(token, from: h.tokenService) }
    }

    @Test func sessionChecks() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let intruder = try h.makeDevice("phone-2")
        let sessionID = try #require(try await h.checkCard("4111111111111111", on: phone).sessionID)
        // Another device cannot use the session.
        await #expect(throws: TokenServiceError(.sessionState, "")) { try await h.link(sessionID, on: intruder) }
        // An SE whose certificate was not issued by the device CA is refused.
        let rogue = try SimulatedDevice(deviceID: "phone-1", kind: "phone")
        await #expect(throws: TokenServiceError(.deviceNotTrusted, "")) {
            try await h.tokenService.linkAndProvision(
                LinkAndProvisionRequest(
                    idempotencyKey: "r", sessionID: sessionID, deviceID: "phone-1",
                    secureElementCertificateChain: rogue.certificateChain, termsAccepted: true))
        }
        await #expect(throws: TokenServiceError(.notFound, "")) { try await h.link("chk_nope", on: phone) }
        // Sessions expire.
        h.clock.advance(by: 901)
        await #expect(throws: TokenServiceError(.sessionState, "")) { try await h.link(sessionID, on: phone) }
    }

    @Test("R6: A provisioning session expires on the monotonic clock, not when the wall clock moves an hour")
    func sessionsIgnoreTheWallClock() async throws {
        let h = try await NetworkHarness()
        let start = h.clock.now()
        for (index, shift) in [3600.0, -3600.0].enumerated() {
            let phone = try h.makeDevice("phone-r6-\(index)")
            let sessionID = try #require(try await h.checkCard("4111111111111111", on: phone).sessionID)
            h.clock.setWall(start.addingTimeInterval(shift))
            await #expect(throws: Never.self, "wall clock moved \(shift) s") { try await h.link(sessionID, on: phone) }
            h.clock.setWall(start)
        }
        // Monotonic time past the lifetime ends a session even with the wall clock set back an hour.
        let late = try h.makeDevice("phone-r6-late")
        let sessionID = try #require(try await h.checkCard("4111111111111111", on: late).sessionID)
        h.clock.advance(by: 901)
        h.clock.setWall(start.addingTimeInterval(-3600))
        await #expect(throws: TokenServiceError(.sessionState, "")) { try await h.link(sessionID, on: late) }
    }

    @Test("A provisioning session in a shared store expires on the store's clock, not this process's")
    func sessionsInASharedStoreExpireOnItsClock() async throws {
        let database = ManualClock(now: NetworkHarness.start.addingTimeInterval(86_400))
        let h = try await NetworkHarness(vaultStore: SharedClockVault(clock: database))
        let phone = try h.makeDevice("phone-shared")
        let sessionID = try #require(try await h.checkCard("4111111111111111", on: phone).sessionID)
        // This process's clocks (another instance's, say) move past the lifetime: the shared clock decides.
        h.clock.advance(by: 901)
        database.advance(by: 899)
        let kept = try h.makeDevice("phone-shared-2")
        let keptID = try #require(try await h.checkCard("4111111111111111", on: kept).sessionID)
        guard case .provisioned = try await h.link(sessionID, on: phone) else {
            Issue.record("a session live on the shared clock should provision")
            return
        }
        database.advance(by: 901)
        await #expect(throws: TokenServiceError(.sessionState, "")) { try await h.link(keptID, on: kept) }
    }

    @Test func tamperedOrMisaddressedCardDataIsRefused() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let envelope = try phone.sealCardData(
            pan: try PrimaryAccountNumber("4111111111111111"), expiry: try h.testCardExpiry(), cvv: "266",
            name: "Orchard Tester", to: h.tokenService)
        var wire = envelope.serialized
        wire[wire.count - 20] ^= 0x04
        await #expect(throws: TokenServiceError(.envelopeRejected, "")) {
            try await h.tokenService.checkCard(
                CheckCardRequest(
                    idempotencyKey: "x", tokenRequestorID: TokenRequestor.orchardPay.id, deviceID: "phone-1",
                    deviceKind: "phone", encryptedCardData: try EncryptedEnvelope(serialized: wire)))
        }
        // Sealed by phone-1, presented as phone-2's: the label names the device, so it does not open.
        await #expect(throws: TokenServiceError(.envelopeRejected, "")) {
            try await h.tokenService.checkCard(
                CheckCardRequest(
                    idempotencyKey: "y", tokenRequestorID: TokenRequestor.orchardPay.id, deviceID: "phone-2",
                    deviceKind: "phone", encryptedCardData: envelope))
        }
        await #expect(throws: TokenServiceError(.invalidRequest, "")) {
            try await h.tokenService.checkCard(
                CheckCardRequest(
                    idempotencyKey: "z", tokenRequestorID: "99999999999", deviceID: "phone-1", deviceKind: "phone",
                    encryptedCardData: envelope))
        }
        // A failed request records nothing: the same key works once the request is right.
        #expect(try await h.checkCard("4111111111111111", on: phone, idempotencyKey: "x").sessionID != nil)
    }

    @Test func domainControlsAreLimitedToTheRequestorsDomains() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let installed = try await h.provision("4111111111111111", on: phone, domainControls: [.inApp])
        #expect(installed.token.domainControls == [.inApp])
        let sessionID = try #require(try await h.checkCard("4000056655665556", on: phone).sessionID)
        await #expect(throws: TokenServiceError(.invalidRequest, "")) {
            try await h.link(sessionID, on: phone, domainControls: [])
        }
    }

    @Test func requestShapesAreChecked() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        await #expect(throws: TokenServiceError(.invalidRequest, "")) {
            try await h.checkCard("4111111111111111", on: phone, idempotencyKey: "add-4111111111111111")
        }
        let envelope = try phone.sealCardData(
            pan: try PrimaryAccountNumber("4111111111111111"), expiry: try h.testCardExpiry(), cvv: "266",
            name: "Orchard Tester", to: h.tokenService)
        await #expect(throws: TokenServiceError(.invalidRequest, "")) {
            try await h.tokenService.checkCard(
                CheckCardRequest(
                    idempotencyKey: "k", tokenRequestorID: TokenRequestor.orchardPay.id, deviceID: "phone-1",
                    deviceKind: "toaster", encryptedCardData: envelope))
        }
        #expect(h.vault.snapshot().idempotencyRecords.isEmpty)
    }

    @Test func devicesThatCannotTapGetNoContactlessDomain() async throws {
        let h = try await NetworkHarness()
        let ipad = try h.makeDevice("ipad-1", kind: "ipad")
        let mac = try h.makeDevice("mac-1", kind: "mac")
        let onIPad = try await h.provision("4111111111111111", on: ipad)
        #expect(onIPad.token.domainControls == [.inApp, .web])
        #expect(try await h.authorize(onIPad, on: ipad, amount: 100).declineReason == .domainNotAllowed)
        #expect(try await h.authorize(onIPad, on: ipad, amount: 100, channel: .inApp).responseCode == .approved)
        let sessionID = try #require(try await h.checkCard("4111111111111111", on: mac).sessionID)
        await #expect(throws: TokenServiceError(.invalidRequest, "")) {
            try await h.link(sessionID, on: mac, domainControls: [.contactless])
        }
    }

    @Test func anUnreachableIssuerFailsCheckCardWithoutRecordingIt() async throws {
        let h = try await NetworkHarness(issuerHost: UnreachableIssuer(issuerID: TestCards.issuerID))
        let phone = try h.makeDevice("phone-1")
        await #expect(throws: TokenServiceError(.issuerUnavailable, "")) {
            try await h.checkCard("4111111111111111", on: phone, idempotencyKey: "u")
        }
        #expect(h.vault.snapshot().idempotencyRecords.isEmpty)
    }
}

/// An in-memory vault with a clock of its own, like a database shared by several instances of the token service.
final class SharedClockVault: TokenVaultStore {
    let inner = InMemoryTokenVaultStore()
    let clock: ManualClock
    init(clock: ManualClock) { self.clock = clock }

    func sharedClock() async throws -> Date? { clock.now() }
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
        try await inner.saveIdempotencyRecord(record)
    }
}
