import Foundation
import OrchardCrypto
import OrchardFixtures
import Testing

/// Bytes from a hex string; a malformed string is a test failure, not a crash.
func hex(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> [UInt8] {
    guard let bytes = [UInt8](hexString: text) else {
        Issue.record("malformed hex in the test data: \(text.prefix(40))", sourceLocation: sourceLocation)
        return []
    }
    return bytes
}

extension Array where Element == UInt8 {
    init?(hexString text: String) {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        for i in stride(from: 0, to: digits.count, by: 2) {
            guard let high = hexValue(digits[i]), let low = hexValue(digits[i + 1]) else { return nil }
            out.append(high << 4 | low)
        }
        self = out
    }

    var hexString: String { map { String(format: "%02x", $0) }.joined() }
}

private func hexValue(_ c: UInt8) -> UInt8? {
    switch c {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
    default: nil
    }
}

/// Expects `body` to throw a ``CryptoError`` with `code`.
func expectCryptoError(
    _ code: CryptoError.Code, _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () throws -> Void
) {
    let error = #expect(throws: CryptoError.self, comment, sourceLocation: sourceLocation) { try body() }
    if let error {
        #expect(error.code == code, "got \(error)", sourceLocation: sourceLocation)
    }
}

/// `bytes` with bit `bit` (0 = the most significant bit of the first byte) inverted.
func flipping(_ bytes: [UInt8], bit: Int) -> [UInt8] {
    var out = bytes
    out[bit / 8] ^= 0x80 >> UInt8(bit % 8)
    return out
}

/// The test-only material in `Tests/Fixtures/crypto` (written by its `generate.sh` with the openssl CLI).
enum CryptoFixtures {
    static func string(_ name: String) throws -> String { try Fixtures.string("crypto/" + name) }
    static func bytes(_ name: String) throws -> [UInt8] { Array(try Fixtures.data("crypto/" + name)) }

    struct KnownAnswers: Decodable {
        struct P256: Decodable {
            let ecparamGenkeyScalar: String
            let ecparamGenkeyPoint: String
            let ecdhWithPeer: String
        }
        struct SSKDF: Decodable {
            let z: String
            let otherInfo: String
            let length: Int
            let output: String
        }
        let p256: P256
        let rsaOaepPlaintext: String
        let sskdf: [SSKDF]
        let des: [String: String]
    }

    static func knownAnswers() throws -> KnownAnswers {
        try JSONDecoder().decode(KnownAnswers.self, from: Fixtures.data("crypto/known-answers.json"))
    }
}
