import Foundation
import Issuer
import NetworkAuthorizationAPI
import NetworkTestSupport
import OrchardCrypto
import PaymentCredential
import Testing
import TokenService

/// The token service with the real remote cryptogram check (in-app and web authorizations).
@Suite("Remote cryptogram at the token service")
struct RemoteCryptogramAuthorizationTests {
    static let merchant = "merchant.dev.orchard.demo"

    /// A remote cryptogram for `card` as its Secure Element computes it, with its submission.
    func submission(
        _ card: InstalledCard, atc: UInt16, amount: Int64 = 1999, merchant: String = Self.merchant,
        submittedMerchant: String? = nil, submittedAmount: Int64? = nil, flip: Int? = nil
    ) throws -> CryptogramSubmission {
        let nonce = [UInt8](repeating: UInt8(atc & 0xFF), count: 32)
        var bytes = try RemoteCryptogram.generate(
            masterKey: card.data.remoteMasterKey, atc: atc, amount: amount, currency: 840, nonce: nonce,
            merchantIdentifier: merchant
        ).bytes
        if let flip { bytes[flip / 8] ^= UInt8(1 << (flip % 8)) }
        return CryptogramSubmission(
            kind: .remote, cryptogram: bytes, applicationTransactionCounter: atc,
            transactionData: RemoteTransactionData(
                merchantIdentifier: submittedMerchant ?? merchant, amount: submittedAmount ?? amount, currency: 840
            ).encoded)
    }

    /// Sends `submission` as the acquirer does; `charging` is the Apple merchant ID the acquirer vouches for.
    func authorize(
        _ h: NetworkHarness, _ card: InstalledCard, _ submission: CryptogramSubmission, amount: Int64 = 1999,
        id: String, charging: String? = Self.merchant
    ) async throws -> NetworkAuthorizationResponse {
        try await h.tokenService.authorize(
            request(
                card, amount: amount, channel: .inApp, cryptogram: submission, id: id, clock: h.clock,
                appleMerchantID: charging))
    }

    func harness() async throws -> (NetworkHarness, InstalledCard) {
        let h = try await NetworkHarness(verifiers: [EMVProximityCryptogramVerifier(), RemoteCryptogramVerifier()])
        let phone = try h.makeDevice("phone-1")
        return (h, try await h.provision("4111111111111111", on: phone))
    }

    @Test("A good remote cryptogram is approved; the same one again is declined as replayed (88)")
    func goodAndReplayed() async throws {
        let (h, card) = try await harness()
        let good = try submission(card, atc: 3)
        let approved = try await authorize(h, card, good, id: "t1")
        #expect(approved.responseCode == .approved && approved.declineReason == nil)
        #expect(try await h.issuer.account(id: "acct-1")?.balance == 1999)
        let replayed = try await authorize(h, card, good, id: "t2")
        #expect(replayed.responseCode == .cryptographicFailure && replayed.declineReason == .atcReplayed)
    }

    @Test("C3: A cryptogram made for merchant A, charged through merchant B, is declined with 03 and stays A's")
    func madeForAChargedThroughB() async throws {
        let (h, card) = try await harness()
        // B submits A's cryptogram and A's transaction data unchanged: the MAC verifies, the merchant does not.
        let forA = try submission(card, atc: 3)
        let throughB = try await authorize(h, card, forA, id: "b", charging: "merchant.dev.elsewhere")
        #expect(throughB.responseCode == .invalidMerchant && throughB.declineReason == .merchantMismatch)
        #expect(throughB.approvalCode == nil)
        // An acquirer that names no merchant ID cannot charge a cryptogram that is bound to one.
        let unnamed = try await authorize(h, card, forA, id: "n", charging: nil)
        #expect(unnamed.responseCode == .invalidMerchant && unnamed.declineReason == .merchantMismatch)
        #expect(try await h.issuer.account(id: "acct-1")?.balance == 0)
        // Nothing was used up: A still charges it.
        let throughA = try await authorize(h, card, forA, id: "a")
        #expect(throughA.responseCode == .approved)
        #expect(try await h.issuer.account(id: "acct-1")?.balance == 1999)
    }

    @Test("Every flipped bit of the cryptogram is declined with 88, and does not use up the ATC")
    func bitFlipped() async throws {
        let (h, card) = try await harness()
        for bit in stride(from: 8, to: 160, by: 7) {
            let response = try await authorize(h, card, try submission(card, atc: 4, flip: bit), id: "f\(bit)")
            #expect(response.responseCode == .cryptographicFailure, "bit \(bit)")
            #expect(response.declineReason != nil && response.approvalCode == nil)
        }
        #expect(try await authorize(h, card, try submission(card, atc: 4), id: "ok").responseCode == .approved)
    }

    @Test("A cryptogram made for another merchant or another amount is declined with 88")
    func wrongMerchantOrAmount() async throws {
        let (h, card) = try await harness()
        let otherMerchant = try submission(card, atc: 5, submittedMerchant: "merchant.dev.elsewhere")
        let declined = try await authorize(h, card, otherMerchant, id: "m")
        #expect(declined.responseCode == .cryptographicFailure && declined.declineReason == .cryptogramInvalid)
        // The acquirer submits another amount than the cryptogram covers.
        let changedData = try submission(card, atc: 6, submittedAmount: 2999)
        let changed = try await authorize(h, card, changedData, amount: 2999, id: "a1")
        #expect(changed.responseCode == .cryptographicFailure && changed.declineReason == .cryptogramInvalid)
        // The transaction data is right but the authorization asks for more.
        let more = try await authorize(h, card, try submission(card, atc: 7), amount: 2999, id: "a2")
        #expect(more.responseCode == .cryptographicFailure && more.declineReason == .cryptogramDataMismatch)
        #expect(try await h.issuer.account(id: "acct-1")?.balance == 0)
    }

    @Test("A stale ATC and an ATC that differs from the cryptogram's are declined")
    func staleAndMismatchedATC() async throws {
        let (h, card) = try await harness()
        #expect(try await authorize(h, card, try submission(card, atc: 100), id: "s1").responseCode == .approved)
        let stale = try await authorize(h, card, try submission(card, atc: 2), id: "s2")
        #expect(stale.responseCode == .cryptographicFailure && stale.declineReason == .atcStale)
        let good = try submission(card, atc: 101)
        let mismatched = CryptogramSubmission(
            kind: .remote, cryptogram: good.cryptogram, applicationTransactionCounter: 102,
            transactionData: good.transactionData)
        let response = try await authorize(h, card, mismatched, id: "s3")
        #expect(response.responseCode == .cryptographicFailure && response.declineReason == .cryptogramInvalid)
    }

    @Test("A remote cryptogram made with the proximity master key does not verify")
    func wrongKey() async throws {
        let (h, card) = try await harness()
        let forged = try RemoteCryptogram.generate(
            masterKey: card.data.proximityMasterKey, atc: 9, amount: 1999, currency: 840,
            nonce: [UInt8](repeating: 1, count: 32), merchantIdentifier: Self.merchant)
        let submission = CryptogramSubmission(
            kind: .remote, cryptogram: forged.bytes, applicationTransactionCounter: 9,
            transactionData: RemoteTransactionData(merchantIdentifier: Self.merchant, amount: 1999, currency: 840)
                .encoded)
        let response = try await authorize(h, card, submission, id: "k")
        #expect(response.responseCode == .cryptographicFailure && response.declineReason == .cryptogramInvalid)
    }
}
