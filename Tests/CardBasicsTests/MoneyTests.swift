import CardBasics
import Foundation
import Testing

@Suite("Card basics: ISO 4217 currencies, amounts, decimal strings")
struct MoneyTests {
    @Test func currencyParserAcceptsBothFormsAndRefusesEverythingElse() throws {
        let usd = try Currency("USD")
        #expect(usd.code == "USD" && usd.numericCode == 840 && usd.exponent == 2)
        #expect(try Currency("usd") == usd)
        #expect(try Currency("Usd") == usd)
        #expect(try Currency("840") == usd)
        #expect(try Currency("036").code == "AUD")
        #expect(try Currency("048").code == "BHD")
        let unknown = CardBasicsError(.unknownCurrency, "")
        for text in ["36", "0036", "XXX", "US", "USDD", " USD", "999", "", "8 4", "U$D"] {
            #expect(throws: unknown, "\(text)") { try Currency(text) }
        }
        #expect(Currency(numericCode: 392)?.code == "JPY")
        #expect(Currency(numericCode: 999) == nil)
    }

    @Test func numericCodeIsAlwaysThreeDigits() throws {
        #expect(try Currency("AUD").numericString == "036")
        #expect(try Currency("BHD").numericString == "048")
        #expect(try Currency("CLP").numericString == "152")
        #expect(try Currency("USD").numericString == "840")
        #expect(Currency.all.allSatisfy { $0.numericString.utf8.count == 3 })
        #expect(Set(Currency.all.map(\.code)).count == Currency.all.count)
        #expect(Set(Currency.all.map(\.numericCode)).count == Currency.all.count)
    }

    @Test func amountBoundsAtEachEdge() throws {
        let usd = try Currency("USD")
        let invalid = CardBasicsError(.invalidAmount, "")
        #expect(throws: invalid) { try Money(minorUnits: 0, currency: usd) }
        #expect(throws: invalid) { try Money(minorUnits: -1, currency: usd) }
        #expect(throws: invalid) { try Money(minorUnits: Int64.min, currency: usd) }
        #expect(try Money(minorUnits: 1, currency: usd).minorUnits == Money.minimumMinorUnits)
        #expect(try Money(minorUnits: 999_999_999_999, currency: usd).minorUnits == Money.maximumMinorUnits)
        #expect(throws: invalid) { try Money(minorUnits: 1_000_000_000_000, currency: usd) }
        #expect(throws: invalid) { try Money(minorUnits: Int64.max, currency: usd) }
    }

    @Test func decimalParsingUsesEachCurrencysExponent() throws {
        let cases: [(String, String, Int64)] = [
            ("USD", "9.99", 999), ("USD", "9.9", 990), ("USD", "9", 900), ("USD", "0.01", 1), ("USD", "007.50", 750),
            ("JPY", "500", 500), ("ISK", "1200", 1200), ("CLP", "15000", 15000),
            ("BHD", "1.250", 1250), ("BHD", "1.25", 1250), ("BHD", "0.001", 1),
            ("USD", "9999999999.99", 999_999_999_999), ("JPY", "999999999999", 999_999_999_999),
        ]
        for (code, text, minorUnits) in cases {
            #expect(try Money(parsing: text, currency: Currency(code)).minorUnits == minorUnits, "\(text) \(code)")
        }
    }

    @Test func decimalParsingRefusesMoreDecimalsThanTheExponentAndMalformedText() throws {
        let invalid = CardBasicsError(.invalidAmount, "")
        let refused: [(String, String)] = [
            ("USD", "9.999"), ("JPY", "5.5"), ("ISK", "1.0"), ("CLP", "100.00"), ("BHD", "1.2500"),
            ("USD", ""), ("USD", "."), ("USD", "9."), ("USD", ".99"), ("USD", "-1.00"), ("USD", "+1"),
            ("USD", "1,000.00"), ("USD", "1 000"), ("USD", "1e3"), ("USD", "1.2.3"), ("USD", "٣"),
            ("USD", "0"), ("USD", "0.00"), ("JPY", "0"),  // below the minimum
            ("USD", "10000000000.00"), ("JPY", "1000000000000"), ("USD", "99999999999999999999999"),  // above
        ]
        for (code, text) in refused {
            #expect(throws: invalid, "\(text) \(code)") { try Money(parsing: text, currency: Currency(code)) }
        }
    }

    @Test func decimalFormattingIsTheParsersInverse() throws {
        let cases: [(String, Int64, String)] = [
            ("USD", 999, "9.99"), ("USD", 5, "0.05"), ("USD", 100, "1.00"), ("JPY", 500, "500"),
            ("ISK", 7, "7"), ("CLP", 15000, "15000"), ("BHD", 1250, "1.250"), ("BHD", 1, "0.001"),
        ]
        for (code, minorUnits, text) in cases {
            let money = try Money(minorUnits: minorUnits, currency: Currency(code))
            #expect(money.decimalString == text)
            #expect(money.description == "\(text) \(code)")
            #expect(try Money(parsing: money.decimalString, currency: money.currency) == money)
        }
    }

    @Test func codableWritesTheNumericCodeAndValidatesOnRead() throws {
        let money = try Money(minorUnits: 999, currency: Currency("AUD"))
        let json = try JSONEncoder().encode(money)
        let object = try JSONSerialization.jsonObject(with: json) as? [String: Any]
        #expect(object?["currency"] as? String == "036" && object?["minorUnits"] as? Int == 999)
        #expect(try JSONDecoder().decode(Money.self, from: json) == money)
        for body in [
            #"{"minorUnits":0,"currency":"840"}"#, #"{"minorUnits":1,"currency":"999"}"#,
            #"{"minorUnits":1000000000000,"currency":"840"}"#,
        ] {
            #expect(throws: DecodingError.self, "\(body)") {
                try JSONDecoder().decode(Money.self, from: Data(body.utf8))
            }
        }
    }
}
