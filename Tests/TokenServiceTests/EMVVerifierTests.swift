import CardBasics
import EMV
import Foundation
import Issuer
import NetworkAuthorizationAPI
import NetworkTestSupport
import OrchardCrypto
import Testing
import TokenService

/// The EMV module's ARQC check behind the token service: real contactless transactions (the EMV card applet
/// personalised from the SE envelope, read by the EMV terminal kernel) verified through the HSM.
@Suite("EMV proximity cryptogram verifier")
struct EMVVerifierTests {
    func submission(
        _ base: CryptogramSubmission, changing tag: TLVTag, _ change: ([UInt8]) -> [UInt8]
    ) throws
        -> CryptogramSubmission
    {
        let elements = try TLV.decode(base.transactionData).map { $0.tag == tag ? TLV(tag, change($0.value)) : $0 }
        return CryptogramSubmission(
            kind: base.kind, cryptogram: base.cryptogram,
            applicationTransactionCounter: base.applicationTransactionCounter,
            transactionData: elements.encoded)
    }

    func verify(
        _ h: NetworkHarness, _ card: InstalledCard, _ submission: CryptogramSubmission
    ) throws
        -> TokenCryptogramVerification
    {
        try h.hsm.verifyCryptogram(
            submission,
            issuerMasterKey: card.data.network == .mastercard
                ? h.mastercardRange.proximityKey : h.visaRange.proximityKey,
            pan: card.data.dpan, panSequenceNumber: card.data.panSequenceNumber)
    }

    @Test(arguments: ["4111111111111111", "5555555555554444"])
    func realTransactionsVerifyAndReportTheirAmount(pan: String) async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let card = try await h.provision(pan, on: phone)
        let amount = try Money(minorUnits: 1_234, currency: Currency("840"))
        let good = try await phone.cryptogram(for: card, kind: .proximityARQC, amount: amount, atc: 7)
        #expect(
            try verify(h, card, good)
                == .valid(AuthenticatedTransaction(amount: amount, applicationTransactionCounter: 7)))
        // Through the token service and the issuer.
        let response = try await h.authorize(card, on: phone, amount: 1_234)
        #expect(response.responseCode == .approved)
    }

    @Test("N2/N3: changed fields of field 55 are refused")
    func changedFieldsAreRefused() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let card = try await h.provision("4111111111111111", on: phone)
        let good = try await phone.cryptogram(
            for: card, kind: .proximityARQC, amount: try Money(minorUnits: 500, currency: Currency("840")), atc: 3)
        // N2: another unpredictable number; N3: another amount or currency inside field 55.
        for (tag, change) in [
            (TLVTag.unpredictableNumber, { (v: [UInt8]) in v.map { $0 ^ 0x01 } }),
            (TLVTag.amountAuthorised, { (v: [UInt8]) in Array(v.dropLast()) + [0x99] }),
            (TLVTag.transactionCurrencyCode, { (_: [UInt8]) in [0x09, 0x78] }),
        ] {
            guard case .invalid = try verify(h, card, try submission(good, changing: tag, change)) else {
                Issue.record("a change to \(tag) was accepted")
                continue
            }
        }
        // The cryptogram or ATC submitted beside field 55 must be the ones inside it.
        var other = good.cryptogram
        other[7] ^= 0x80
        let swapped = CryptogramSubmission(
            kind: .proximityARQC, cryptogram: other, applicationTransactionCounter: 3,
            transactionData: good.transactionData)
        #expect(try verify(h, card, swapped) == .invalid(reason: "the cryptogram differs from the one in field 55"))
        let wrongATC = CryptogramSubmission(
            kind: .proximityARQC, cryptogram: good.cryptogram, applicationTransactionCounter: 4,
            transactionData: good.transactionData)
        #expect(try verify(h, card, wrongATC) == .invalid(reason: "the ATC differs from the one in field 55"))
        // Garbage where field 55 should be.
        let garbage = CryptogramSubmission(
            kind: .proximityARQC, cryptogram: good.cryptogram, applicationTransactionCounter: 3, transactionData: [0xFF]
        )
        guard case .invalid = try verify(h, card, garbage) else {
            Issue.record("garbage field 55 was accepted")
            return
        }
    }

    @Test func aCryptogramWithoutCDCVMIsRefused() async throws {
        let h = try await NetworkHarness()
        let phone = try h.makeDevice("phone-1")
        let card = try await h.provision("4111111111111111", on: phone)
        let profile = try CardApplicationProfile(
            scheme: .visa, pan: card.data.dpan.digits, expiry: card.data.tokenExpiry.yymm,
            masterKey: card.data.proximityMasterKey)
        let link = InProcessCardLink(
            card: try ContactlessCard(applications: [CardApplication(profile: profile, atcStore: InMemoryATCStore())]))
        await link.authorize(CardholderAuthorization(cdcvm: CDCVMResult(performed: false, method: .none)))
        let outcome = try await TerminalKernel(
            configuration: TerminalConfiguration(countryCode: 840, currencyCode: 840)
        )
        .run(TransactionParameters(amount: 100, date: try TransactionDate(yymmdd: "260301")), card: link)
        let read = try #require(outcome.card)
        let submission = CryptogramSubmission(
            kind: .proximityARQC, cryptogram: read.cryptogram, applicationTransactionCounter: read.atc,
            transactionData: read.field55Bytes)
        #expect(
            try verify(h, card, submission)
                == .invalid(reason: "the cryptogram does not authenticate a performed CDCVM"))
        // A verifier configured not to require it accepts the same cryptogram (the MAC itself is right).
        let lenient = EMVProximityCryptogramVerifier(requiresCDCVM: false)
        guard
            case .valid = try lenient.verify(
                submission, pan: card.data.dpan, panSequenceNumber: 0, cardMasterKey: card.data.proximityMasterKey)
        else {
            Issue.record("the lenient verifier refused a correct MAC")
            return
        }
        // The token service (which requires CDCVM) declines it.
        let response = try await h.tokenService.authorize(
            NetworkAuthorizationRequest(
                acquirerID: "acq-1", transactionID: "no-cdcvm", pan: card.data.dpan, expiry: card.data.tokenExpiry,
                amount: try Money(minorUnits: 100, currency: Currency("840")), channel: .contactless,
                merchant: NetworkHarness.merchant, cryptogram: submission, transmittedAt: h.clock.now()))
        #expect(response.responseCode == .cryptographicFailure && response.declineReason == .cryptogramInvalid)
    }
}
