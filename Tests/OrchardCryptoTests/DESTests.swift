import Foundation
import OrchardCrypto
import Testing

/// Triple DES, single DES and ISO/IEC 9797-1 MAC algorithm 3, against values the openssl CLI computed
/// (`Tests/Fixtures/crypto/known-answers.json`): two-key TDES through OpenSSL's own DES-EDE (so Orchard's
/// K1‖K2‖K1 expansion is checked independently) and single DES through the legacy provider.
@Suite("Triple DES and the retail MAC")
struct DESTests {
    static func des() throws -> [String: String] { try CryptoFixtures.knownAnswers().des }
    static func value(_ name: String) throws -> [UInt8] {
        hex(try #require(try des()[name], "known-answers.json has no des.\(name)"))
    }

    @Test func tripleDESKnownAnswersAndRoundTrips() throws {
        let data = try Self.value("data")
        let iv = try Self.value("iv")
        for (keyName, prefix) in [("twoKey", "twoKey"), ("threeKey", "threeKey")] {
            let key = SymmetricKey(data: try Self.value(keyName))
            let ecb = try TripleDES.encryptECB(data, key: key)
            let cbc = try TripleDES.encryptCBC(data, key: key, iv: iv)
            #expect(ecb == (try Self.value(prefix + "ECB")))
            #expect(cbc == (try Self.value(prefix + "CBC")))
            #expect(try TripleDES.decryptECB(ecb, key: key) == data)
            #expect(try TripleDES.decryptCBC(cbc, key: key, iv: iv) == data)
            #expect(try TripleDES.keyCheckValue(key) == (try Self.value(prefix + "KCV")))
            #expect(
                try TripleDES.keyCheckValue(key, length: 8)
                    == Array(try TripleDES.encryptECB([UInt8](repeating: 0, count: 8), key: key)))
            // CBC with the default zero IV differs from CBC with another IV, and chains (ECB does not).
            #expect(try TripleDES.encryptCBC(data, key: key) != cbc)
            #expect(Array(ecb[0..<8]) != Array(cbc[0..<8]))
            #expect(try TripleDES.encryptECB([UInt8](), key: key).isEmpty)
        }
        // Two-key TDES is three-key TDES with K3 = K1.
        let k2 = try Self.value("twoKey")
        #expect(
            try TripleDES.encryptECB(data, key: SymmetricKey(data: k2))
                == TripleDES.encryptECB(data, key: SymmetricKey(data: k2 + k2[0..<8])))
    }

    @Test func singleDESKnownAnswer() throws {
        let key = SymmetricKey(data: try Self.value("singleKey"))
        let ciphertext = try InsecureSingleDES.encryptECB(try Self.value("singlePlaintext"), key: key)
        #expect(ciphertext == (try Self.value("singleCiphertext")))
        #expect(try InsecureSingleDES.decryptECB(ciphertext, key: key) == (try Self.value("singlePlaintext")))
    }

    @Test func isoPaddingMethods() {
        #expect(RetailMAC.pad([], .method1) == [UInt8](repeating: 0, count: 8))
        #expect(RetailMAC.pad([1, 2, 3], .method1) == [1, 2, 3, 0, 0, 0, 0, 0])
        #expect(RetailMAC.pad([UInt8](repeating: 7, count: 8), .method1) == [UInt8](repeating: 7, count: 8))
        #expect(RetailMAC.pad([UInt8](repeating: 7, count: 9), .method1).count == 16)
        #expect(RetailMAC.pad([], .method2) == [0x80, 0, 0, 0, 0, 0, 0, 0])
        #expect(RetailMAC.pad([1, 2, 3], .method2) == [1, 2, 3, 0x80, 0, 0, 0, 0])
        #expect(RetailMAC.pad([UInt8](repeating: 7, count: 7), .method2) == [UInt8](repeating: 7, count: 7) + [0x80])
        #expect(
            RetailMAC.pad([UInt8](repeating: 7, count: 8), .method2) == [UInt8](repeating: 7, count: 8) + [0x80]
                + [UInt8](repeating: 0, count: 7))
    }

    /// MAC algorithm 3 with padding methods 1 and 2, for whole-block data ("Now is the time for all ", the
    /// ISO/IEC 9797-1 Annex B example) and for short data.
    @Test func retailMACKnownAnswers() throws {
        let key = SymmetricKey(data: try Self.value("macKey"))
        let data = try Self.value("data")
        let short = try Self.value("macShortData")
        #expect(try RetailMAC.mac(data, key: key, padding: .method1) == (try Self.value("macMethod1")))
        #expect(try RetailMAC.mac(data, key: key, padding: .method2) == (try Self.value("macMethod2")))
        #expect(try RetailMAC.mac(short, key: key, padding: .method1) == (try Self.value("macShortMethod1")))
        #expect(try RetailMAC.mac(short, key: key, padding: .method2) == (try Self.value("macShortMethod2")))
        // Method 1 cannot tell trailing zeros from padding; method 2 can.
        #expect(try RetailMAC.mac(short + [0], key: key, padding: .method1) == (try Self.value("macShortMethod1")))
        #expect(try RetailMAC.mac(short + [0], key: key, padding: .method2) != (try Self.value("macShortMethod2")))
        // Any changed data bit or key bit changes the MAC.
        let mac = try RetailMAC.mac(data, key: key, padding: .method2)
        for bit in stride(from: 0, to: data.count * 8, by: 5) {
            #expect(try RetailMAC.mac(flipping(data, bit: bit), key: key, padding: .method2) != mac)
        }
        let keyBytes = try Self.value("macKey")
        // The low bit of each DES key byte is parity, which DES ignores: flip the high bit instead.
        for byte in 0..<16 {
            let changed = flipping(keyBytes, bit: byte * 8)
            #expect(
                try RetailMAC.mac(data, key: SymmetricKey(data: changed), padding: .method2) != mac, "key byte \(byte)")
        }
    }

    @Test func badSizesAreTypedErrors() throws {
        let two = SymmetricKey(data: try Self.value("twoKey"))
        for size in [0, 7, 8, 9, 15, 17, 23, 25, 32] {
            let key = SymmetricKey(data: [UInt8](repeating: 0x01, count: size))
            expectCryptoError(.invalidParameter, "TDES key of \(size) bytes") {
                _ = try TripleDES.encryptECB([UInt8](repeating: 0, count: 8), key: key)
            }
        }
        for size in [0, 7, 9, 16] {
            let key = SymmetricKey(data: [UInt8](repeating: 0x01, count: size))
            expectCryptoError(.invalidParameter, "DES key of \(size) bytes") {
                _ = try InsecureSingleDES.encryptECB([UInt8](repeating: 0, count: 8), key: key)
            }
        }
        for count in [1, 7, 9, 15] {
            expectCryptoError(.invalidParameter) {
                _ = try TripleDES.encryptECB([UInt8](repeating: 0, count: count), key: two)
            }
            expectCryptoError(.invalidParameter) {
                _ = try TripleDES.decryptCBC([UInt8](repeating: 0, count: count), key: two)
            }
        }
        expectCryptoError(.invalidParameter) {
            _ = try TripleDES.encryptCBC([UInt8](repeating: 0, count: 8), key: two, iv: [0, 0, 0, 0, 0, 0, 0])
        }
        expectCryptoError(.invalidParameter) {
            _ = try TripleDES.encryptCBC(
                [UInt8](repeating: 0, count: 8), key: two, iv: [UInt8](repeating: 0, count: 16))
        }
        for length in [0, 9, -1] {
            expectCryptoError(.invalidParameter) { _ = try TripleDES.keyCheckValue(two, length: length) }
        }
        for size in [8, 24, 0] {
            expectCryptoError(.invalidParameter) {
                _ = try RetailMAC.mac(
                    [1], key: SymmetricKey(data: [UInt8](repeating: 1, count: size)), padding: .method2)
            }
        }
    }
}
