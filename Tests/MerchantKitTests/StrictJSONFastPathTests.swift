import Foundation
import PaymentToken
import Testing

/// Pins the strict parser's fast paths (strings without escapes, duplicate-key scans, literals) and the
/// field checks of the decrypted payment data to the behaviour of the general paths.
@Suite("Strict JSON fast paths and payment-data field checks")
struct StrictJSONFastPathTests {
    static let limits = JSONLimits(maxBytes: 64 * 1024, maxDepth: 16)

    func parse(_ text: String) throws(PaymentTokenError) -> JSONValue {
        try StrictJSONParser.parse(Array(text.utf8), limits: Self.limits)
    }

    func parse(bytes: [UInt8]) throws(PaymentTokenError) -> JSONValue {
        try StrictJSONParser.parse(bytes, limits: Self.limits)
    }

    @Test func stringsWithAndWithoutEscapes() throws {
        #expect(
            try parse(#"["plain","","é€😀","a\"b","\\","\u00e9\n\t","x\/y","\ud83d\ude00"]"#)
                == .array([
                    .string("plain"), .string(""), .string("é€😀"), .string("a\"b"), .string("\\"), .string("é\n\t"),
                    .string("x/y"), .string("😀"),
                ]))
    }

    @Test func keysSpellingApplesNamesParseToThemExactly() throws {
        // Apple's long key names come back as shared strings; near misses and escaped spellings are keys too.
        let object = try parse(
            #"{"applicationPrimaryAccountNumber":1,"applicationPrimaryAccountNumbeR":2,"transactionAmoun\u0074":3,"#
                + #""transactionAmountX":4,"ephemeralPublicKey":5}"#)
        guard case .object(let members) = object else {
            Issue.record("not an object")
            return
        }
        #expect(
            members.map(\.0) == [
                "applicationPrimaryAccountNumber", "applicationPrimaryAccountNumbeR", "transactionAmount",
                "transactionAmountX", "ephemeralPublicKey",
            ])
        #expect(throws: PaymentTokenError(.duplicateKey, "")) {
            try parse(#"{"transactionAmount":1,"transactionAmoun\u0074":2}"#)
        }
    }

    @Test func badStringsAreRejected() {
        let cases: [[UInt8]] = [
            Array(#"["abc"#.utf8),  // unterminated
            [0x5B, 0x22, 0x61, 0x01, 0x22, 0x5D],  // control character
            [0x5B, 0x22, 0xFF, 0x22, 0x5D],  // invalid UTF-8
            [0x5B, 0x22, 0xC3, 0x22, 0x5D],  // truncated UTF-8 sequence
            [0x5B, 0x22, 0x5C, 0x61, 0xFF, 0x22, 0x5D],  // invalid UTF-8 after an escape
            Array(#"["\ud83d"]"#.utf8),  // unpaired surrogate
        ]
        for bytes in cases {
            #expect(throws: PaymentTokenError(.malformedJSON, "")) { try parse(bytes: bytes) }
        }
    }

    @Test func literals() throws {
        #expect(try parse("[true,false,null]") == .array([.bool(true), .bool(false), .null]))
        for text in ["[tru]", "[fals]", "[nul]", "[nulll]", "[True]", "t", "nu"] {
            #expect(throws: PaymentTokenError(.malformedJSON, "")) { try parse(text) }
        }
    }

    @Test func duplicateKeysInSmallAndLargeObjects() throws {
        for count in [1, 15, 16, 17, 40] {
            let members = (0..<count).map { "\"k\($0)\":\($0)" }
            let object = try parse("{" + members.joined(separator: ",") + "}")
            guard case .object(let parsed) = object else {
                Issue.record("not an object")
                continue
            }
            #expect(parsed.map(\.0) == (0..<count).map { "k\($0)" })
            for duplicate in Set([0, count / 2, count - 1]) {
                let text = "{" + (members + ["\"k\(duplicate)\":0"]).joined(separator: ",") + "}"
                #expect(throws: PaymentTokenError(.duplicateKey, ""), "\(count) members") { try parse(text) }
            }
        }
    }

    static let payment: [(String, JSONValue)] = [
        ("applicationPrimaryAccountNumber", .string("4895370012345671")),
        ("applicationExpirationDate", .string("291231")), ("currencyCode", .string("840")),
        ("transactionAmount", .number("1999")), ("deviceManufacturerIdentifier", .string("040010030273")),
        ("paymentDataType", .string("3DSecure")),
        ("paymentData", .object([("onlinePaymentCryptogram", .string("AgAAAAAABk4DWZ4C28yUQAAAAAA="))])),
    ]

    func replacing(_ key: String, with value: JSONValue) -> JSONValue {
        .object(Self.payment.map { $0.0 == key ? ($0.0, value) : $0 })
    }

    @Test func paymentDataFieldChecks() throws {
        let data = try DecryptedPaymentData(json: .object(Self.payment))
        #expect(data.applicationPrimaryAccountNumber == "4895370012345671")
        #expect(data.transactionAmount == 1999)

        // A missing required key; a repeated key in a value built by hand (the parser refuses one in JSON) is
        // refused too, so it can neither stand in for a missing key nor override the first value.
        let withoutCurrency = Self.payment.filter { $0.0 != "currencyCode" }
        #expect(throws: PaymentTokenError(.missingField, "")) {
            try DecryptedPaymentData(json: .object(withoutCurrency))
        }
        #expect(throws: PaymentTokenError(.duplicateKey, "")) {
            try DecryptedPaymentData(
                json: .object(withoutCurrency + [("applicationExpirationDate", .string("291231"))]))
        }
        #expect(throws: PaymentTokenError(.duplicateKey, "")) {
            try DecryptedPaymentData(json: .object(Self.payment + [("transactionAmount", .number("1"))]))
        }
        let twoCryptograms = JSONValue.object([
            ("onlinePaymentCryptogram", .string("AgAAAAAABk4DWZ4C28yUQAAAAAA=")),
            ("onlinePaymentCryptogram", .string("AgAAAAAABk4DWZ4C28yUQAAAAAA=")),
        ])
        #expect(throws: PaymentTokenError(.duplicateKey, "")) {
            try DecryptedPaymentData(json: replacing("paymentData", with: twoCryptograms))
        }
        #expect(throws: PaymentTokenError(.unknownField, "")) {
            try DecryptedPaymentData(
                json: replacing("paymentData", with: .object([("emvData", .string("AAAA"))])))
        }
        #expect(throws: PaymentTokenError(.missingField, "")) {
            try DecryptedPaymentData(json: replacing("paymentData", with: .object([("eciIndicator", .string("7"))])))
        }
        #expect(throws: PaymentTokenError(.unknownField, "")) {
            try DecryptedPaymentData(json: .object(Self.payment + [("extra", .null)]))
        }

        // Digits are ASCII digits only: other scripts' digits, letters and wrong lengths are refused.
        let badValues: [(String, String)] = [
            ("applicationPrimaryAccountNumber", "٤٨٩٥٣٧٠٠١٢٣٤٥٦٧١"),
            ("applicationPrimaryAccountNumber", "４８９５３７００１２３４"),
            ("applicationPrimaryAccountNumber", "48953700123"),
            ("applicationPrimaryAccountNumber", "48953700123456789012"),
            ("applicationPrimaryAccountNumber", "489537001234567X"), ("applicationExpirationDate", "29123"),
            ("applicationExpirationDate", "２９１２３１"), ("currencyCode", "84O"), ("currencyCode", "٨٤٠"),
        ]
        for (key, value) in badValues {
            #expect(throws: PaymentTokenError(.invalidField, ""), "\(key) = \(value)") {
                try DecryptedPaymentData(json: replacing(key, with: .string(value)))
            }
        }
        for pan in ["489537001234", "4895370012345678901"] {
            #expect(
                try DecryptedPaymentData(json: replacing("applicationPrimaryAccountNumber", with: .string(pan)))
                    .applicationPrimaryAccountNumber == pan)
        }
    }
}
