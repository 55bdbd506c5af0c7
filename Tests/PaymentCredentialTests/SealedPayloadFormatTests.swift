import Foundation
import OrchardCrypto
import PaymentCredential
import Testing

/// The plaintexts the device and the token service seal to each other, pinned byte for byte: the token service
/// writes and the Secure Element reads ``PersonalisationData``; the wallet writes and the token service reads
/// ``CardDataPayload`` (the two sides' tests in TokenServiceTests bind the parties to these types).
@Suite("Sealed payload formats: personalisation and card data")
struct SealedPayloadFormatTests {
    let proximity = SymmetricKey(data: [UInt8](repeating: 0x11, count: 16))
    let remote = SymmetricKey(data: [UInt8](repeating: 0x22, count: 16))
    let dpan = "4895370012345671"

    func personalisation() throws -> PersonalisationData {
        try PersonalisationData(
            tokenReference: "tok_1", dpan: dpan, panSequenceNumber: 1, expiry: "2903", network: "visa",
            proximityMasterKey: proximity, remoteMasterKey: remote)
    }

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
    static func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            out.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return out
    }

    @Test func personalisationIsPinnedByteForByte() throws {
        let encoded = try personalisation().encoded().unsafeCopyOfBytes()
        let expected =
            "00000101" + "100005" + Self.hex(Array("tok_1".utf8)) + "110010" + Self.hex(Array(dpan.utf8)) + "12000101"
            + "130004" + Self.hex(Array("2903".utf8)) + "140004" + Self.hex(Array("visa".utf8)) + "200010"
            + String(repeating: "11", count: 16) + "210010" + String(repeating: "22", count: 16)
        #expect(Self.hex(encoded) == expected)
        let decoded = try PersonalisationData(decoding: SecureBytes(Self.bytes(expected)))
        #expect(decoded.tokenReference == "tok_1" && decoded.dpan == SecureBytes(Array(dpan.utf8)))
        #expect(decoded.panSequenceNumber == 1 && decoded.expiry == "2903" && decoded.network == "visa")
        #expect(decoded.proximityMasterKey == proximity && decoded.remoteMasterKey == remote)
        #expect(PersonalisationData.envelopePurpose == "token-service>secure-element:personalisation")
    }

    @Test func personalisationNeverPrintsTheDPANOrKeys() throws {
        let data = try personalisation()
        var dumped = ""
        dump(data, to: &dumped)
        for text in ["\(data)", String(reflecting: data), dumped] {
            #expect(!text.contains(dpan) && !text.contains("1111111111"))
        }
        #expect(data.dpanSuffix == "5671")
    }

    @Test func personalisationOutOfFormIsRefusedWithItsCode() throws {
        func refuses(
            _ code: PaymentCredentialError.Code, dpan: String = "4895370012345671", psn: UInt8 = 0,
            expiry: String = "2903", network: String = "visa", reference: String = "tok", keyCount: Int = 16
        ) {
            #expect(throws: PaymentCredentialError(code, "")) {
                try PersonalisationData(
                    tokenReference: reference, dpan: dpan, panSequenceNumber: psn, expiry: expiry, network: network,
                    proximityMasterKey: SymmetricKey(data: [UInt8](repeating: 1, count: keyCount)),
                    remoteMasterKey: proximity)
            }
        }
        refuses(.invalidArgument, dpan: "12345")
        refuses(.invalidArgument, dpan: "48953700123456A1")
        refuses(.invalidArgument, psn: 100)
        refuses(.invalidArgument, expiry: "2913")
        refuses(.invalidArgument, expiry: "29033")
        refuses(.invalidArgument, network: "vi sa")
        refuses(.invalidArgument, reference: "")
        refuses(.invalidArgument, keyCount: 24)
    }

    @Test func malformedPersonalisationPlaintextIsRefused() throws {
        let good = try personalisation().encoded().unsafeCopyOfBytes()
        var badVersion = good
        badVersion[3] = 2
        #expect(throws: PaymentCredentialError(.unsupportedVersion, "")) {
            try PersonalisationData(decoding: SecureBytes(badVersion))
        }
        var badExpiry = good
        // The expiry's month digits ("03" → "13").
        let expiryAt = Self.hex(good).range(of: "130004")!.lowerBound.utf16Offset(in: Self.hex(good)) / 2 + 3
        badExpiry[expiryAt + 2] = UInt8(ascii: "1")
        let cases: [[UInt8]] = [
            Array(good.dropLast()),  // truncated value
            Array(good.prefix(2)),  // ends inside a header
            good + [0x10, 0x00, 0x01, 0x41],  // repeated item
            good + [0x7F, 0x00, 0x00],  // unknown item
            Array(good.dropFirst(4)),  // no version
            badExpiry,
            [],
        ]
        for bad in cases {
            #expect(throws: PaymentCredentialError(.malformed, "")) {
                try PersonalisationData(decoding: SecureBytes(bad))
            }
        }
    }

    @Test func cardDataIsPinnedAndRefusedOutOfForm() throws {
        let payload = try CardDataPayload(
            cardNumber: SecureBytes(Array("4111111111111111".utf8)), expiry: "3412",
            verificationValue: SecureBytes(Array("266".utf8)), cardholderName: "Alice Doe")
        let encoded = try payload.encoded().unsafeCopyOfBytes()
        let expected =
            "00000101" + "300010" + Self.hex(Array("4111111111111111".utf8)) + "310004" + Self.hex(Array("3412".utf8))
            + "320003" + Self.hex(Array("266".utf8)) + "330009" + Self.hex(Array("Alice Doe".utf8))
        #expect(Self.hex(encoded) == expected)
        let decoded = try CardDataPayload(decoding: SecureBytes(encoded))
        #expect(decoded.cardNumber == payload.cardNumber && decoded.verificationValue == payload.verificationValue)
        #expect(decoded.expiry == "3412" && decoded.cardholderName == "Alice Doe" && decoded.suffix == "1111")
        var dumped = ""
        dump(payload, to: &dumped)
        for text in ["\(payload)", String(reflecting: payload), dumped] {
            #expect(!text.contains("4111111111111111") && !text.contains("266"))
        }
        #expect(throws: PaymentCredentialError(.invalidArgument, "")) {
            try CardDataPayload(
                cardNumber: SecureBytes(Array("4111".utf8)), expiry: "3412",
                verificationValue: SecureBytes(Array("266".utf8)), cardholderName: "A")
        }
        #expect(throws: PaymentCredentialError(.invalidArgument, "")) {
            try CardDataPayload(
                cardNumber: payload.cardNumber, expiry: "3412", verificationValue: SecureBytes(Array("26".utf8)),
                cardholderName: "A")
        }
        #expect(throws: PaymentCredentialError(.invalidArgument, "")) {
            try CardDataPayload(
                cardNumber: payload.cardNumber, expiry: "3412", verificationValue: payload.verificationValue,
                cardholderName: "")
        }
        #expect(throws: PaymentCredentialError(.malformed, "")) {
            try CardDataPayload(decoding: SecureBytes(encoded.dropLast()))
        }
        // A personalisation's items are not card data.
        #expect(throws: PaymentCredentialError(.malformed, "")) {
            try CardDataPayload(decoding: try personalisation().encoded())
        }
    }

    @Test func secretTLVRefusesOverlongValuesAndNamesNoValue() throws {
        #expect(throws: PaymentCredentialError(.invalidArgument, "")) {
            try SecretTLV.encode([(0x01, SecureBytes([UInt8](repeating: 0, count: 0x10000)))])
        }
        let items = try SecretTLV.decode(
            SecretTLV.encode([(0x01, SecretTLV.text("4111111111111111"))]), allowedTags: [1])
        #expect(try items.text(0x01, "number") == "4111111111111111")
        #expect(!"\(items)".contains("4111"))
        #expect(throws: PaymentCredentialError(.malformed, "")) { try items.bytes(0x01, "number", count: 4) }
        #expect(throws: PaymentCredentialError(.malformed, "")) { try items.bytes(0x02, "other") }
        #expect(SecretTLV.integer(0x0102_0304, byteCount: 4).unsafeCopyOfBytes() == [1, 2, 3, 4])
    }
}
