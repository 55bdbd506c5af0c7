import CardBasics
import Foundation
import Issuer
import NetworkAuthorizationAPI
import NetworkTestSupport
import OrchardCrypto
import Testing
import TokenService

@Suite("Authorization through the token service")
struct AuthorizationTests {
    @Test func contactlessApprovalSwapsTheDPANBack() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let card = try await h.provision("4111111111111111", on: phone)
        let response = try await h.authorize(card, on: phone, amount: 450)
        #expect(response.responseCode == .approved && response.declineReason == nil)
        #expect(response.approvalCode?.count == 6)
        #expect(response.pan == card.data.dpan)
        #expect(response.cardSuffix == "1111")
        // The issuer saw the FPAN and moved the money.
        #expect(try await h.issuer.account(id: "acct-1")?.balance == 450)
    }

    @Test func inAppUsesTheRemoteKey() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let card = try await h.provision("4111111111111111", on: phone)
        #expect(try await h.authorize(card, on: phone, amount: 999, channel: .inApp).responseCode == .approved)
        #expect(try await h.authorize(card, on: phone, amount: 999, channel: .web).responseCode == .approved)
        // A proximity cryptogram sent for an in-app payment is the wrong kind.
        let proximity = try await phone.cryptogram(
            for: card, kind: .proximityARQC, amount: try Money(minorUnits: 5, currency: Currency("840")))
        let wrongKind = try await h.tokenService.authorize(
            request(card, amount: 5, channel: .inApp, cryptogram: proximity, id: "wk", clock: h.clock))
        #expect(wrongKind.responseCode == .cryptographicFailure && wrongKind.declineReason == .cryptogramKindMismatch)
        // A remote-kind cryptogram computed with the proximity key does not verify.
        let data = TestDoubleCryptogramVerifier.transactionData(
            amount: try Money(minorUnits: 5, currency: Currency("840")), unpredictableNumber: [0, 0, 0, 0], atc: 40)
        let forged = CryptogramSubmission(
            kind: .remote,
            cryptogram: TestDoubleCryptogramVerifier.cryptogram(
                kind: .remote, transactionData: data, cardMasterKey: card.data.proximityMasterKey),
            applicationTransactionCounter: 40, transactionData: data)
        let response = try await h.tokenService.authorize(
            request(card, amount: 5, channel: .inApp, cryptogram: forged, id: "fg", clock: h.clock))
        #expect(response.declineReason == .cryptogramInvalid)
    }

    @Test("N1: the token service's ATC window")
    func theATCWindow() async throws {
        let h = try await NetworkHarness(atcPolicy: ATCPolicy(lookBehind: 16, maxForwardJump: 1000))
        let phone = try h.makeDevice("phone-1")
        let card = try await h.provision("4111111111111111", on: phone)
        #expect(try await h.authorize(card, on: phone, amount: 100, atc: 5).responseCode == .approved)
        // The same cryptogram again (same ATC, new transaction ID): replay.
        let replay = try await h.authorize(card, on: phone, amount: 100, atc: 5)
        #expect(replay.responseCode == .cryptographicFailure && replay.declineReason == .atcReplayed)
        // Out of order inside the window: accepted once.
        #expect(try await h.authorize(card, on: phone, amount: 100, atc: 3).responseCode == .approved)
        #expect(try await h.authorize(card, on: phone, amount: 100, atc: 3).declineReason == .atcReplayed)
        // A jump beyond the window: declined, and it does not move the window.
        #expect(try await h.authorize(card, on: phone, amount: 100, atc: 1_006).declineReason == .atcTooFarAhead)
        #expect(try await h.authorize(card, on: phone, amount: 100, atc: 1_005).responseCode == .approved)
        // Below the look-behind: stale.
        #expect(try await h.authorize(card, on: phone, amount: 100, atc: 989).declineReason == .atcStale)
        #expect(try await h.authorize(card, on: phone, amount: 100, atc: 990).responseCode == .approved)
    }

    @Test func aFailedCryptogramDoesNotUseUpTheCounter() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let card = try await h.provision("4111111111111111", on: phone)
        let good = try await phone.cryptogram(
            for: card, kind: .proximityARQC, amount: try Money(minorUnits: 100, currency: Currency("840")), atc: 7)
        var bad = good.cryptogram
        bad[0] ^= 1
        let forged = CryptogramSubmission(
            kind: good.kind, cryptogram: bad, applicationTransactionCounter: 7, transactionData: good.transactionData)
        let declined = try await h.tokenService.authorize(
            request(card, amount: 100, cryptogram: forged, id: "f", clock: h.clock))
        #expect(declined.responseCode == .cryptographicFailure && declined.declineReason == .cryptogramInvalid)
        let approved = try await h.tokenService.authorize(
            request(card, amount: 100, cryptogram: good, id: "g", clock: h.clock))
        #expect(approved.responseCode == .approved)
    }

    @Test("N3: an amount or currency changed after the cryptogram is declined")
    func amountOrCurrencyChangedAfterTheCryptogramIsDeclined() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let card = try await h.provision("4111111111111111", on: phone)
        let changed = try await h.authorize(card, on: phone, amount: 10_000, cryptogramAmount: 100)
        #expect(changed.responseCode == .cryptographicFailure && changed.declineReason == .cryptogramDataMismatch)
        let cryptogram = try await phone.cryptogram(
            for: card, kind: .proximityARQC, amount: try Money(minorUnits: 100, currency: Currency("978")))
        let otherCurrency = try await h.tokenService.authorize(
            request(card, amount: 100, cryptogram: cryptogram, id: "c", clock: h.clock))
        #expect(otherCurrency.declineReason == .cryptogramDataMismatch)
        #expect(try await h.issuer.account(id: "acct-1")?.balance == 0)
    }

    @Test func anotherDevicesKeysDoNotVerify() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let watch = try h.makeDevice("watch-1", kind: "watch")
        let onPhone = try await h.provision("4111111111111111", on: phone)
        let onWatch = try await h.provision("4111111111111111", on: watch)
        // The watch's cryptogram presented with the phone's DPAN.
        let cryptogram = try await watch.cryptogram(
            for: onWatch, kind: .proximityARQC, amount: try Money(minorUnits: 100, currency: Currency("840")))
        let response = try await h.tokenService.authorize(
            request(onPhone, amount: 100, cryptogram: cryptogram, id: "x", clock: h.clock))
        #expect(response.declineReason == .cryptogramInvalid)
    }

    @Test("N4: domain controls, magstripe and manual entry, no cryptogram: declined")
    func domainControlsAndCardNotPresentEntryModes() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let inAppOnly = try await h.provision("4111111111111111", on: phone, domainControls: [.inApp])
        let contactless = try await h.authorize(inAppOnly, on: phone, amount: 100)
        #expect(contactless.responseCode == .notPermittedToCardholder && contactless.declineReason == .domainNotAllowed)
        #expect(
            try await h.authorize(inAppOnly, on: phone, amount: 100, channel: .web).declineReason == .domainNotAllowed)
        #expect(try await h.authorize(inAppOnly, on: phone, amount: 100, channel: .inApp).responseCode == .approved)
        let full = try await h.provision("5555555555554444", on: phone)
        for channel in [PaymentChannel.magneticStripe, .manualEntry] {
            #expect(
                try await h.authorize(full, on: phone, amount: 100, channel: channel).declineReason == .domainNotAllowed
            )
        }
        // No cryptogram at all.
        let bare = try await h.authorize(full, on: phone, amount: 100, withCryptogram: false)
        #expect(bare.responseCode == .cryptographicFailure && bare.declineReason == .cryptogramMissing)
        // The issuer can narrow the domains later.
        try await h.tokenService.setDomainControls([.web], tokenReference: full.token.tokenReference)
        #expect(try await h.authorize(full, on: phone, amount: 100).declineReason == .domainNotAllowed)
        #expect(try await h.authorize(full, on: phone, amount: 100, channel: .web).responseCode == .approved)
    }

    @Test func unknownTokenExpiryAndIssuerDeclines() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let card = try await h.provision("4000056655665556", on: phone)
        let unknown = NetworkAuthorizationRequest(
            acquirerID: "acq-1", transactionID: "u", pan: try PrimaryAccountNumber("4895370012345671"), expiry: nil,
            amount: try Money(minorUnits: 1, currency: Currency("840")), channel: .contactless,
            merchant: NetworkHarness.merchant,
            cryptogram: nil, transmittedAt: h.clock.now())
        #expect(try await h.tokenService.authorize(unknown).responseCode == .invalidCardNumber)
        // The card's expiry is not the token's: presenting it is a mismatch.
        let cryptogram = try await phone.cryptogram(
            for: card, kind: .proximityARQC, amount: try Money(minorUnits: 1, currency: Currency("840")))
        let cardExpiry = NetworkAuthorizationRequest(
            acquirerID: "acq-1", transactionID: "e", pan: card.data.dpan, expiry: try h.testCardExpiry(),
            amount: try Money(minorUnits: 1, currency: Currency("840")), channel: .contactless,
            merchant: NetworkHarness.merchant,
            cryptogram: cryptogram, transmittedAt: h.clock.now())
        #expect(try await h.tokenService.authorize(cardExpiry).declineReason == .expiryMismatch)
        // Debit balance 2,500.00: the issuer answers 51 and the network passes it on.
        let large = try await h.authorize(card, on: phone, amount: 190_000)
        #expect(large.responseCode == .approved)
        let tooMuch = try await h.authorize(card, on: phone, amount: 100_000)
        #expect(tooMuch.responseCode == .insufficientFunds && tooMuch.declineReason == .issuerDeclined)
        #expect(tooMuch.approvalCode == nil)
        // After the token expires (March 2029), even the right cryptogram is declined.
        h.clock.advance(by: 3.2 * 365 * 86_400)
        #expect(try await h.authorize(card, on: phone, amount: 1).declineReason == .tokenExpired)
    }

    @Test("R3: retries return the first answer")
    func retriesReturnTheFirstAnswer() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let card = try await h.provision("4111111111111111", on: phone)
        let cryptogram = try await phone.cryptogram(
            for: card, kind: .proximityARQC, amount: try Money(minorUnits: 300, currency: Currency("840")))
        let first = try await h.tokenService.authorize(
            request(card, amount: 300, cryptogram: cryptogram, id: "r1", clock: h.clock))
        let retry = try await h.tokenService.authorize(
            request(card, amount: 300, cryptogram: cryptogram, id: "r1", clock: h.clock))
        #expect(first == retry && first.responseCode == .approved)
        // Acquirer transaction IDs are machine-made and may hold long digit runs (hex): they are accepted.
        let digits = try await phone.cryptogram(
            for: card, kind: .proximityARQC, amount: try Money(minorUnits: 300, currency: Currency("840")))
        let hexLike = try await h.tokenService.authorize(
            request(card, amount: 300, cryptogram: digits, id: "7a41234567890123456789ab", clock: h.clock))
        #expect(hexLike.responseCode == .approved)
        #expect(try await h.issuer.account(id: "acct-1")?.balance == 600)
        await #expect(throws: TokenServiceError(.idempotencyConflict, "")) {
            try await h.tokenService.authorize(
                request(card, amount: 301, cryptogram: cryptogram, id: "r1", clock: h.clock))
        }
    }

    @Test func anUnreachableIssuerAnswers91() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let card = try await h.provision("4111111111111111", on: phone)
        h.issuerSwitch.reachable = false
        let response = try await h.authorize(card, on: phone, amount: 1)
        #expect(response.responseCode == .issuerUnavailable && response.declineReason == .issuerUnavailable)
        h.issuerSwitch.reachable = true
        #expect(try await h.authorize(card, on: phone, amount: 1).responseCode == .approved)
    }
}

func request(
    _ card: InstalledCard, amount: Int64, channel: PaymentChannel = .contactless, cryptogram: CryptogramSubmission?,
    id: String, clock: ManualClock, appleMerchantID: String? = nil
) throws -> NetworkAuthorizationRequest {
    NetworkAuthorizationRequest(
        acquirerID: "acq-1", transactionID: id, pan: card.data.dpan, expiry: card.data.tokenExpiry,
        amount: try Money(minorUnits: amount, currency: Currency("840")), channel: channel,
        merchant: NetworkHarness.merchant, appleMerchantID: appleMerchantID, cryptogram: cryptogram,
        transmittedAt: clock.now())
}
