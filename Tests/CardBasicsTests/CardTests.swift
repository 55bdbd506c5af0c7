import CardBasics
import Foundation
import Testing

@Suite("Card basics: card number, Luhn, expiry, CVV")
struct CardTests {
    @Test func cardNumberAcceptsTheTestCardsAndRefusesBadLengthDigitsAndCheckDigit() throws {
        // 16, 16, 15 digits, then the shortest (12) and longest (19) lengths.
        for pan in ["4111111111111111", "5555555555554444", "378282246310005", "500000000009", "4111111111111111110"] {
            #expect(try PrimaryAccountNumber(pan).digits == pan)
        }
        let invalid = CardBasicsError(.invalidCardNumber, "")
        #expect(throws: invalid) { try PrimaryAccountNumber("4111111111111112") }  // check digit
        #expect(throws: invalid) { try PrimaryAccountNumber("41111111117") }  // 11 digits
        #expect(throws: invalid) { try PrimaryAccountNumber("41111111111111111113") }  // 20 digits
        #expect(throws: invalid) { try PrimaryAccountNumber("4111 1111 1111 1111") }
        #expect(throws: invalid) { try PrimaryAccountNumber("411111111111111a") }
        #expect(throws: invalid) { try PrimaryAccountNumber("４１１１１１１１１１１１１１１１") }  // full-width digits
        #expect(throws: invalid) { try PrimaryAccountNumber("") }
    }

    @Test func luhnCheckDigitAndValidity() {
        #expect(Luhn.checkDigit(for: [4, 8, 9, 5, 3, 7, 0, 0, 1, 2, 3, 4, 5, 6, 7]) == 1)
        #expect(Luhn.isValid([7, 9, 9, 2, 7, 3, 9, 8, 7, 1, 3]))
        #expect(!Luhn.isValid([7, 9, 9, 2, 7, 3, 9, 8, 7, 1, 4]))
        #expect(!Luhn.isValid([Int]()))
    }

    @Test func cardNumberIsMaskedInEveryTextualForm() throws {
        let pan = try PrimaryAccountNumber("4111111111111111")
        #expect(pan.masked == "411111******1111")
        #expect(pan.suffix == "1111" && pan.bin == "411111")
        #expect("\(pan)" == "411111******1111")
        #expect(String(describing: pan) == "411111******1111")
        #expect(String(reflecting: pan) == "PrimaryAccountNumber(411111******1111)")
        struct Holder { let pan: PrimaryAccountNumber }
        #expect(!String(describing: Holder(pan: pan)).contains("4111111111111111"))
        var dumped = ""
        dump(Holder(pan: pan), to: &dumped)
        #expect(!dumped.contains("4111111111111111") && dumped.contains("411111******1111"))
        #expect(Mirror(reflecting: pan).children.map { "\($0.value)" } == ["411111******1111"])
        #expect(try PrimaryAccountNumber("378282246310005").masked == "378282*****0005")
    }

    @Test func cardNumberCodableWritesDigitsAndRefusesInvalidOnes() throws {
        let pan = try PrimaryAccountNumber("5555555555554444")
        let json = try JSONEncoder().encode(pan)
        #expect(String(decoding: json, as: UTF8.self) == "\"5555555555554444\"")
        #expect(try JSONDecoder().decode(PrimaryAccountNumber.self, from: json) == pan)
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(PrimaryAccountNumber.self, from: Data("\"5555555555554445\"".utf8))
        }
    }

    @Test func errorsNeverRepeatTheCardNumber() {
        do {
            _ = try PrimaryAccountNumber("4111111111111112")
            Issue.record("accepted a wrong check digit")
        } catch {
            #expect(!error.description.contains("4111111111111112"))
        }
    }

    @Test func expiryParsesFormatsAndExpiresAfterItsMonth() throws {
        let expiry = try CardExpiry(yymm: "3412")
        #expect(expiry.year == 2034 && expiry.month == 12 && expiry.yymm == "3412" && expiry.display == "12/34")
        #expect(try CardExpiry(year: 2005, month: 3).yymm == "0503")
        #expect(try CardExpiry(year: 2005, month: 3).description == "03/05")
        let endOfMonth = Date(timeIntervalSince1970: 2_051_222_399)  // 2034-12-31 23:59:59 UTC
        #expect(!expiry.isExpired(at: endOfMonth))
        #expect(expiry.isExpired(at: endOfMonth.addingTimeInterval(1)))
        #expect(try CardExpiry(year: 2034, month: 11) < expiry)
        let invalid = CardBasicsError(.invalidExpiry, "")
        #expect(throws: invalid) { try CardExpiry(yymm: "3413") }
        #expect(throws: invalid) { try CardExpiry(yymm: "3400") }
        #expect(throws: invalid) { try CardExpiry(yymm: "34-1") }
        #expect(throws: invalid) { try CardExpiry(yymm: "341") }
        #expect(throws: invalid) { try CardExpiry(year: 1999, month: 12) }
        #expect(throws: invalid) { try CardExpiry(year: 2100, month: 1) }
        #expect(
            try CardExpiry.months(36, after: Date(timeIntervalSince1970: 1_772_366_400))
                == CardExpiry(year: 2029, month: 3))
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(CardExpiry.self, from: Data("{\"year\":2030,\"month\":13}".utf8))
        }
    }

    @Test func cvvIsThreeOrFourDigitsComparedAndNeverPrinted() throws {
        let invalid = CardBasicsError(.invalidVerificationValue, "")
        #expect(throws: invalid) { try CardVerificationValue("12") }
        #expect(throws: invalid) { try CardVerificationValue("12345") }
        #expect(throws: invalid) { try CardVerificationValue("12a") }
        #expect(try CardVerificationValue("1234").matches("1234"))
        let cvv = try CardVerificationValue("266")
        #expect(cvv.matches("266") && !cvv.matches("267") && !cvv.matches("2660"))
        #expect(!"\(cvv)".contains("266") && !String(reflecting: cvv).contains("266"))
        var dumped = ""
        dump(cvv, to: &dumped)
        #expect(!dumped.contains("266"))
    }
}
