import CardBasics
import Foundation
import OrchardLogging
import Testing

/// A domain value with no description of its own: Swift's synthesized description and `dump` walk it.
private struct Card: Codable {
    let pan: PrimaryAccountNumber
    let holder: String
    let cvv: Redacted<String>
}

private struct Provisioned {
    let dpan: PrimaryAccountNumber
    let key: Redacted<[UInt8]>
}

private func dumped(_ value: some Any) -> String {
    var out = ""
    dump(value, to: &out)
    return out
}

@Suite("Typed redaction")
struct RedactionTests {
    static let pan = "4111111111111111"

    @Test func primaryAccountNumberPrintsMaskedEverywhere() throws {
        let pan = try PrimaryAccountNumber(Self.pan)
        #expect(pan.description == "411111******1111")
        #expect("\(pan)" == "411111******1111")
        #expect(String(describing: pan) == "411111******1111")
        #expect(String(reflecting: pan) == "PrimaryAccountNumber(411111******1111)")
        #expect(!dumped(pan).contains(Self.pan))
        #expect(!dumped(pan).contains("1111111111"))
        #expect(pan.suffix == "1111")
        #expect(pan.digits == Self.pan)
    }

    @Test func containersOfRedactedValuesStayRedacted() throws {
        let card = Card(pan: try PrimaryAccountNumber(Self.pan), holder: "A. Holder", cvv: Redacted("123"))
        for text in [
            "\(card)", String(describing: card), String(reflecting: card), dumped(card), "\([card])",
            "\(Optional(card) as Any)",
        ] {
            #expect(!text.contains(Self.pan), "leaked in: \(text)")
            #expect(!text.contains("123\""), "CVV leaked in: \(text)")
            #expect(text.contains("411111******1111") || text.contains("PrimaryAccountNumber"))
        }
        #expect(String(describing: card).contains("<redacted>"))
    }

    @Test func deviceAccountNumberAndKeysStayRedacted() throws {
        let dpan = "5204731600014792"
        let value = Provisioned(dpan: try PrimaryAccountNumber(dpan), key: Redacted([0xDE, 0xAD, 0xBE, 0xEF]))
        for text in [String(describing: value), String(reflecting: value), dumped(value)] {
            #expect(!text.contains(dpan))
            #expect(!text.contains("222"), "key bytes (0xDE = 222) leaked in: \(text)")
            #expect(!text.contains("173"))
        }
        #expect(String(describing: value.dpan) == "520473******4792")
    }

    @Test func codableCarriesTheFullNumberForWireFormats() throws {
        let card = Card(pan: try PrimaryAccountNumber(Self.pan), holder: "A", cvv: Redacted("123"))
        let json = String(decoding: try JSONEncoder().encode(card), as: UTF8.self)
        #expect(json.contains("\"\(Self.pan)\""))
        let back = try JSONDecoder().decode(Card.self, from: Data(json.utf8))
        #expect(back.pan == card.pan)
        #expect(back.cvv.unredactedValue == "123")
    }

    @Test(arguments: [
        "", "41111111111", "41111111111111111111", "4111 1111 1111 1111", "411111111111111a",
        "٤١١١١١١١١١١١١١١١",
    ])
    func invalidCardNumbersAreRejectedWithoutEchoingThem(text: String) {
        do {
            _ = try PrimaryAccountNumber(text)
            Issue.record("accepted \(text.count) characters")
        } catch {
            #expect(error.code == .invalidCardNumber)
            #expect(text.isEmpty || !error.message.contains(text))
        }
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(PrimaryAccountNumber.self, from: Data("\"\(text)\"".utf8))
        }
    }
}

@Suite("Card number scrubber")
struct ScrubberTests {
    @Test(arguments: [
        ("pan=4111111111111111 ok", "pan=411111******1111 ok"),
        ("4111 1111 1111 1111", "4111 11** **** 1111"),
        ("4111-1111-1111-1111", "4111-11**-****-1111"),
        ("card 4111 1111 1111 1111 2031", "card 4111 11** **** 1111 2031"),
        ("PAN4111111111111111", "PAN411111******1111"),
        ("amex 378282246310005.", "amex 378282*****0005."),
        ("[\"5555555555554444\"]", "[\"555555******4444\"]"),
    ])
    func masksCardNumbers(input: String, expected: String) {
        #expect(CardNumberScrubber.scrub(input) == expected)
    }

    @Test(arguments: [
        "4111111111111112",  // fails Luhn
        "41111111111111110000",  // 20 digits: not a card number
        "2026-11-29T18:04:24.123Z",
        "7d444840-9dc0-11d1-b245-5ffdce74fad2",
        "request 0cc6a28e-3737-4543-8318-82a76a8c522e failed",  // 3737-4543-8318-82 passes Luhn
        "12345678-1234-4234-8234-123456789012",
        "id a3737-4543-8318-82b",
        "amount 123456 EUR, order 42",
        "",
    ])
    func leavesOtherTextAlone(input: String) {
        #expect(CardNumberScrubber.scrub(input) == input)
    }
}
