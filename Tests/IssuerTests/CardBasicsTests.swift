import Foundation
import OrchardCrypto
import Testing

@testable import Issuer

@Suite("Card basics: PAN, Luhn, expiry, money, CVV")
struct CardBasicsTests {
    @Test func luhnAcceptsTheTestCardsAndRejectsAChangedDigit() throws {
        for pan in ["4111111111111111", "5555555555554444", "4000056655665556", "4000000000003220", "4000000000000002"]
        {
            #expect(throws: Never.self) { try PrimaryAccountNumber(pan) }
        }
        #expect(throws: IssuerError(.invalidInput, "")) { try PrimaryAccountNumber("4111111111111112") }
        #expect(throws: IssuerError(.invalidInput, "")) { try PrimaryAccountNumber("41111111111") }
        #expect(throws: IssuerError(.invalidInput, "")) { try PrimaryAccountNumber("4111 1111 1111 1111") }
        #expect(throws: IssuerError(.invalidInput, "")) { try PrimaryAccountNumber("41111111111111111111") }
        #expect(Luhn.checkDigit(for: [4, 8, 9, 5, 3, 7, 0, 0, 1, 2, 3, 4, 5, 6, 7]) == 1)
    }

    @Test func panTextIsMaskedEverywhereButDigits() throws {
        let pan = try PrimaryAccountNumber("4111111111111111")
        #expect(pan.masked == "411111******1111")
        #expect("\(pan)" == "411111******1111")
        #expect(String(reflecting: pan).contains("411111******1111"))
        var dumped = ""
        dump(pan, to: &dumped)
        #expect(!dumped.contains("4111111111111111"))
        #expect(pan.suffix == "1111" && pan.bin == "411111")
        let json = try JSONEncoder().encode(pan)
        #expect(try JSONDecoder().decode(PrimaryAccountNumber.self, from: json) == pan)
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(PrimaryAccountNumber.self, from: Data("\"4111111111111112\"".utf8))
        }
    }

    @Test func expiryParsesAndExpiresAfterItsMonth() throws {
        let expiry = try CardExpiry(yymm: "3412")
        #expect(expiry.year == 2034 && expiry.month == 12 && expiry.yymm == "3412" && expiry.display == "12/34")
        let endOfMonth = Date(timeIntervalSince1970: 2_051_222_399)  // 2034-12-31 23:59:59 UTC
        #expect(!expiry.isExpired(at: endOfMonth))
        #expect(expiry.isExpired(at: endOfMonth.addingTimeInterval(1)))
        #expect(throws: IssuerError(.invalidInput, "")) { try CardExpiry(yymm: "3413") }
        #expect(throws: IssuerError(.invalidInput, "")) { try CardExpiry(yymm: "34-1") }
        #expect(
            try CardExpiry.months(36, after: Date(timeIntervalSince1970: 1_772_366_400))
                == CardExpiry(year: 2029, month: 3))
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(CardExpiry.self, from: Data("{\"year\":2030,\"month\":13}".utf8))
        }
    }

    @Test func moneyAndCVVRejectMalformedValues() throws {
        #expect(throws: IssuerError(.invalidInput, "")) { try Money(minorUnits: -1, currency: "840") }
        #expect(throws: IssuerError(.invalidInput, "")) { try Money(minorUnits: 1, currency: "USD") }
        #expect(throws: IssuerError(.invalidInput, "")) { try CardVerificationValue("12") }
        #expect(throws: IssuerError(.invalidInput, "")) { try CardVerificationValue("12a") }
        let cvv = try CardVerificationValue("266")
        #expect(cvv.matches("266") && !cvv.matches("267"))
        #expect(!"\(cvv)".contains("266"))
        var dumped = ""
        dump(cvv, to: &dumped)
        #expect(!dumped.contains("266"))
    }

    /// The schemes' published CVV example: PAN 4123456789012345, expiry 8701, service code 101,
    /// CVK A 0123456789ABCDEF, CVK B FEDCBA9876543210 → 561.
    @Test func cvvKnownAnswer() throws {
        let cvk = try CardVerificationKey(SymmetricKey(data: hexBytes("0123456789ABCDEFFEDCBA9876543210")))
        // The example's PAN has no valid Luhn digit, so the raw-digit entry point is used.
        let pan = "4123456789012345"
        #expect(try cvk.cardVerificationValue(panDigits: pan, yymm: "8701", serviceCode: "101", digits: 3) == "561")
        #expect(try cvk.cardVerificationValue(panDigits: pan, yymm: "8701", serviceCode: "000", digits: 3) != "561")
        #expect(try cvk.cardVerificationValue(panDigits: pan, yymm: "8702", serviceCode: "101", digits: 3) != "561")
        let otherKey = try CardVerificationKey(SymmetricKey(data: hexBytes("FEDCBA98765432100123456789ABCDEF")))
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

func hexBytes(_ text: String) -> [UInt8] {
    var out: [UInt8] = []
    let chars = Array(text.utf8)
    for index in stride(from: 0, to: chars.count - 1, by: 2) {
        out.append(UInt8(String(decoding: chars[index...index + 1], as: UTF8.self), radix: 16) ?? 0)
    }
    return out
}
