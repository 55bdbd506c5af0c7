import CardBasics
import Foundation
import Issuer
import NetworkTestSupport
import OrchardCrypto
import Testing
import TokenService

@Suite("Token lifecycle, FPAN update and notifications")
struct LifecycleTests {
    @Test("N5: a suspended token is declined, and approved after resume")
    func suspendedTokenIsDeclinedAndApprovedAfterResume() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let card = try await h.provision("4111111111111111", on: phone)
        let reference = card.token.tokenReference
        try await h.tokenService.suspend(tokenReference: reference, by: .cardholder)
        let declined = try await h.authorize(card, on: phone, amount: 100)
        #expect(declined.responseCode == .restrictedCard && declined.declineReason == .tokenSuspended)
        try await h.tokenService.resume(tokenReference: reference, by: .cardholder)
        // A fresh cryptogram after resume is approved.
        #expect(try await h.authorize(card, on: phone, amount: 100).responseCode == .approved)
    }

    @Test("L3: only the issuer resumes what the issuer suspended")
    func onlyTheIssuerResumesWhatTheIssuerSuspended() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let card = try await h.provision("4111111111111111", on: phone)
        let reference = card.token.tokenReference
        #expect(try await h.issuer.tokenAction(.suspend, pan: try PrimaryAccountNumber("4111111111111111")) == 1)
        #expect(try await h.tokenService.status(tokenReference: reference).suspendedBy == [.issuer])
        for actor in [LifecycleActor.cardholder, .tokenRequestor, .network] {
            await #expect(throws: TokenServiceError(.lifecycleNotPermitted, "")) {
                try await h.tokenService.resume(tokenReference: reference, by: actor)
            }
        }
        // Lost mode on top of the issuer's suspension: both must be lifted.
        try await h.tokenService.suspendDevice("phone-1", by: .cardholder)
        #expect(try await h.issuer.tokenAction(.resume, pan: try PrimaryAccountNumber("4111111111111111")) == 1)
        #expect(try await h.tokenService.status(tokenReference: reference).state == .suspended)
        #expect(try await h.authorize(card, on: phone, amount: 1).declineReason == .tokenSuspended)
        try await h.tokenService.resumeDevice("phone-1", by: .cardholder)
        #expect(try await h.tokenService.status(tokenReference: reference).state == .active)
        #expect(try await h.authorize(card, on: phone, amount: 1).responseCode == .approved)
    }

    @Test("N5/L3: a deleted token is declined forever")
    func deletedIsFinal() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let card = try await h.provision("4111111111111111", on: phone)
        let reference = card.token.tokenReference
        try await h.tokenService.applyIssuerAction(.delete, issuerID: TestCards.issuerID, tokenReference: reference)
        let declined = try await h.authorize(card, on: phone, amount: 1)
        #expect(declined.responseCode == .restrictedCard && declined.declineReason == .tokenDeleted)
        for actor in LifecycleActor.allCases {
            await #expect(throws: TokenServiceError(.lifecycleNotPermitted, "")) {
                try await h.tokenService.resume(tokenReference: reference, by: actor)
            }
        }
        await #expect(throws: TokenServiceError(.lifecycleNotPermitted, "")) {
            try await h.tokenService.suspend(tokenReference: reference, by: .issuer)
        }
        #expect(try await h.tokenService.status(tokenReference: reference).state == .deleted)
        #expect(try await h.authorize(card, on: phone, amount: 1).declineReason == .tokenDeleted)
        // Another issuer cannot act on this token.
        await #expect(throws: TokenServiceError(.notFound, "")) {
            try await h.tokenService.applyIssuerAction(.suspend, issuerID: "other-bank", tokenReference: reference)
        }
    }

    /// P2 / L1: lost mode on the phone suspends the phone's tokens only; the watch keeps paying.
    @Test("P2/L1: lost mode suspends one device's tokens only")
    func lostModeSuspendsOneDeviceOnly() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let watch = try h.makeDevice("watch-1", kind: "watch")
        let onPhone = try await h.provision("4111111111111111", on: phone)
        let onPhone2 = try await h.provision("5555555555554444", on: phone)
        let onWatch = try await h.provision("4111111111111111", on: watch)
        let suspended = try await h.tokenService.suspendDevice("phone-1", by: .cardholder)
        #expect(suspended.count == 2 && suspended.allSatisfy { $0.state == .suspended })
        #expect(try await h.authorize(onPhone, on: phone, amount: 1).declineReason == .tokenSuspended)
        #expect(try await h.authorize(onPhone2, on: phone, amount: 1).declineReason == .tokenSuspended)
        #expect(try await h.authorize(onWatch, on: watch, amount: 1).responseCode == .approved)
        // Erase deletes the phone's tokens for good.
        let deleted = try await h.tokenService.deleteDevice("phone-1", by: .cardholder)
        #expect(deleted.count == 2 && deleted.allSatisfy { $0.state == .deleted })
        #expect(try await h.tokenService.resumeDevice("phone-1", by: .cardholder).isEmpty)
        #expect(try await h.authorize(onWatch, on: watch, amount: 1).responseCode == .approved)
    }

    @Test func reissuedCardKeepsItsDPAN() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let card = try await h.provision("4111111111111111", on: phone)
        let dpanBefore = try #require(h.vault.snapshot().tokens.first?.dpan)
        let newPAN = try PrimaryAccountNumber("4111111111111129")
        try await h.issuer.reissueCard(
            pan: try PrimaryAccountNumber("4111111111111111"), newPAN: newPAN,
            newExpiry: try CardExpiry(year: 2035, month: 6))
        #expect(h.vault.snapshot().tokens.first?.dpan == dpanBefore)
        // The old card is closed at the issuer (05 if it were used): approval proves the network now sends
        // the new FPAN, behind the unchanged DPAN and the SE's unchanged keys.
        let response = try await h.authorize(card, on: phone, amount: 100)
        #expect(response.responseCode == .approved && response.pan == card.data.dpan && response.cardSuffix == "1129")
        let last = try #require(h.outbox.notifications.last)
        #expect(
            last.event == .cardUpdated && last.cardSuffix == "1129" && last.tokenReference == card.token.tokenReference)
        // The vault finds the card by its new number only.
        #expect(try await h.issuer.tokenAction(.suspend, pan: newPAN) == 1)
        #expect(
            try await h.tokenService.applyIssuerAction(
                .suspend, issuerID: TestCards.issuerID, pan: try PrimaryAccountNumber("4111111111111111")) == 0)
    }

    @Test func notificationsFollowEveryChangeAndCarryNoCardNumbers() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let card = try await h.provision("4111111111111111", on: phone)
        let reference = card.token.tokenReference
        try await h.tokenService.suspend(tokenReference: reference, by: .cardholder)
        try await h.tokenService.suspend(tokenReference: reference, by: .cardholder)  // no change, no event
        try await h.tokenService.resume(tokenReference: reference, by: .cardholder)
        try await h.tokenService.setDomainControls([.inApp], tokenReference: reference)
        try await h.tokenService.delete(tokenReference: reference, by: .tokenRequestor)
        let events = h.outbox.notifications
        #expect(events.map(\.event) == [.provisioned, .suspended, .resumed, .domainControlsChanged, .deleted])
        #expect(events.map(\.state) == [.active, .suspended, .active, .active, .deleted])
        #expect(
            events.allSatisfy { $0.tokenReference == reference && $0.tokenRequestorID == TokenRequestor.orchardPay.id })
        let json = String(decoding: try JSONEncoder().encode(events), as: UTF8.self)
        #expect(!json.contains("4111111111111111") && !json.contains(card.data.dpan.digits))
        await #expect(throws: TokenServiceError(.notFound, "")) {
            try await h.tokenService.suspend(tokenReference: "tok_nope", by: .issuer)
        }
    }
}
