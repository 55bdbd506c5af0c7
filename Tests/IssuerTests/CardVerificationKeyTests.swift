import OrchardCrypto
import Testing

@testable import Issuer

@Suite("Card verification key: the CVV algorithm and the demo cards' values")
struct CardVerificationKeyTests {
    /// The schemes' published CVV example: PAN 4123456789012345, expiry 8701, service code 101,
    /// CVK A 0123456789ABCDEF, CVK B FEDCBA9876543210 → 561.
    @Test func cvvKnownAnswer() throws {
        let cvk = try CardVerificationKey(SymmetricKey(data: Hex.decode("0123456789ABCDEFFEDCBA9876543210") ?? []))
        // The example's PAN has no valid Luhn digit, so the raw-digit entry point is used.
        let pan = "4123456789012345"
        #expect(try cvk.cardVerificationValue(panDigits: pan, yymm: "8701", serviceCode: "101", digits: 3) == "561")
        #expect(try cvk.cardVerificationValue(panDigits: pan, yymm: "8701", serviceCode: "000", digits: 3) != "561")
        #expect(try cvk.cardVerificationValue(panDigits: pan, yymm: "8702", serviceCode: "101", digits: 3) != "561")
        let otherKey = try CardVerificationKey(SymmetricKey(data: Hex.decode("FEDCBA98765432100123456789ABCDEF") ?? []))
        #expect(
            try otherKey.cardVerificationValue(panDigits: pan, yymm: "8701", serviceCode: "101", digits: 3) != "561")
        #expect(throws: IssuerError(.invalidInput, "")) {
            try CardVerificationKey(SymmetricKey(data: [UInt8](repeating: 1, count: 8)))
        }
        #expect(!"\(cvk)".contains("0123"))
    }

    /// The demo cards' CVV2s, cross-checked with an independent implementation (Python `cryptography`).
    @Test func demoCardCVVs() throws {
        let expected = [
            "4111111111111111": "266", "5555555555554444": "667", "4000056655665556": "772",
            "4000000000003220": "641", "4000000000000002": "346",
        ]
        let values = try TestCards.cardVerificationValues()
        #expect(values.count == 5)
        for (pan, cvv) in values { #expect(expected[pan] == cvv, "\(pan)") }
    }
}
