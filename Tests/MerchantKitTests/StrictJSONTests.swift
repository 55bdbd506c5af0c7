import Foundation
import OrchardFixtures
import PaymentToken
import Testing

@Suite("Strict token parsing")
struct StrictJSONTests {
    @Test(arguments: ["gala-2015", "gala-2023", "basis-rsa"])
    func realTokensParse(name: String) throws {
        let token = try PaymentToken(jsonBytes: Fixtures.data("apple-pay/\(name)/token.json"))
        #expect(token.paymentData.header.transactionId.count == 32)
        #expect(token.paymentData.signature.starts(with: [0x30, 0x80]))  // BER, indefinite length
        #expect(token.paymentData.version == (name == "basis-rsa" ? .rsaV1 : .ecV1))
        // Re-encoding and parsing again gives the same token.
        let again = try PaymentToken(jsonBytes: Array(token.json.serialized.utf8))
        #expect(again == token)
    }

    /// The writer escapes exactly what JSON requires, copies everything else (non-ASCII included) as is, and
    /// its output parses back to the same value.
    @Test("F2: JSON serialization escapes and round-trips")
    func serializationEscapesAndRoundTrips() throws {
        let value = JSONValue.object([
            ("plain", .string("AgAAAAAABk4DWZ4C28yUQAAAAAA=")),
            ("escapes", .string("a\"b\\c\nd\re\tf\u{01}g\u{1F}h/")),
            ("unicode", .string("Zoë 🍏")),
            ("list", .array([.number("-1.5e3"), .bool(true), .bool(false), .null, .object([])])),
        ])
        let expected =
            #"{"plain":"AgAAAAAABk4DWZ4C28yUQAAAAAA=","escapes":"a\"b\\c\nd\re\tf\u0001g\u001fh/","#
            + #""unicode":"Zoë 🍏","list":[-1.5e3,true,false,null,{}]}"#
        #expect(value.serialized == expected)
        #expect(value.serializedBytes == Array(expected.utf8))
        #expect(try StrictJSONParser.parse(value.serializedBytes, limits: .paymentToken) == value)
    }

    @Test("A9: duplicate keys are rejected anywhere")
    func duplicateKeysAreRejectedAnywhere() throws {
        let text = try Fixtures.string("apple-pay/gala-2015/token.json")
        let duplicatedVersion = text.replacingOccurrences(
            of: "\"version\"", with: "\"version\": \"EC_v1\", \"version\"")
        #expect(throws: PaymentTokenError(.duplicateKey, "")) {
            try PaymentToken(jsonBytes: Array(duplicatedVersion.utf8))
        }
        let duplicatedHeaderKey = text.replacingOccurrences(
            of: "\"transactionId\"", with: "\"transactionId\": \"00\", \"transactionId\"")
        #expect(throws: PaymentTokenError(.duplicateKey, "")) {
            try PaymentToken(jsonBytes: Array(duplicatedHeaderKey.utf8))
        }
    }

    @Test("A9: exact field sets and the version")
    func exactFieldSets() throws {
        let text = try Fixtures.string("apple-pay/gala-2015/token.json")
        let unknown = text.replacingOccurrences(of: "\"version\"", with: "\"extra\": 1, \"version\"")
        #expect(throws: PaymentTokenError(.unknownField, "")) { try PaymentToken(jsonBytes: Array(unknown.utf8)) }
        let wrongVersion = text.replacingOccurrences(of: "EC_v1", with: "EC_v2")
        #expect(throws: PaymentTokenError(.unsupportedVersion, "")) {
            try PaymentToken(jsonBytes: Array(wrongVersion.utf8))
        }
        let rsaWithEphemeral = text.replacingOccurrences(of: "EC_v1", with: "RSA_v1")
        #expect(throws: PaymentTokenError(.unknownField, "")) {
            try PaymentToken(jsonBytes: Array(rsaWithEphemeral.utf8))
        }
        let missing = text.replacingOccurrences(of: "\"publicKeyHash\"", with: "\"publicKeyHashX\"")
        #expect(throws: PaymentTokenError.self) { try PaymentToken(jsonBytes: Array(missing.utf8)) }
    }

    @Test(arguments: [
        "", "{", "[]", "{\"a\":}", "{\"a\":1,}", "{\"a\":01}", "{\"a\":\"\\x\"}", "nul", "{\"a\":1} x",
        String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000),
        String(repeating: "{\"a\":", count: 10_000) + "1" + String(repeating: "}", count: 10_000),
    ])
    func malformedJSON(text: String) {
        #expect(throws: PaymentTokenError.self) { try PaymentToken(jsonBytes: Array(text.utf8)) }
    }

    @Test func sizeLimit() {
        let huge = "{\"data\":\"" + String(repeating: "A", count: 70_000) + "\"}"
        #expect(throws: PaymentTokenError(.malformedJSON, "")) { try PaymentToken(jsonBytes: Array(huge.utf8)) }
    }

    @Test func strictBase64() {
        #expect(StrictEncoding.base64Decode("AAAA") == [0, 0, 0])
        #expect(StrictEncoding.base64Decode("AA==") == [0])
        #expect(StrictEncoding.base64Decode("AB==") == nil)  // non-zero unused bits
        #expect(StrictEncoding.base64Decode("AA=") == nil)
        #expect(StrictEncoding.base64Decode("AA==AAAA") == nil)
        #expect(StrictEncoding.base64Decode("AA AA") == nil)
        #expect(StrictEncoding.base64Decode("AA-_") == nil)  // URL alphabet
        #expect(StrictEncoding.hexDecode("0aFF") == [0x0A, 0xFF])
        #expect(StrictEncoding.hexDecode("0g") == nil)
        #expect(StrictEncoding.hexDecode("abc") == nil)
    }
}
