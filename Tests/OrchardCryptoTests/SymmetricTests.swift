import Foundation
import OrchardCrypto
import Testing

@Suite("AES-GCM, digests, HMAC and KDFs")
struct SymmetricTests {
    /// Apple's EC_v1 / RSA_v1 shape: 16 zero bytes of IV, no AAD, tag appended to the data.
    @Test func gcmWithAppleShapeRoundTrips() throws {
        let iv = [UInt8](repeating: 0, count: 16)
        for bits in [128, 192, 256] {
            let key = SymmetricKey(bitCount: bits)
            for count in [0, 1, 15, 16, 17, 1024] {
                let plaintext = InsecureDeterministicRandom(seed: [UInt8(truncatingIfNeeded: count)]).bytes(count)
                let box = try AES.GCM.seal(plaintext, using: key, iv: iv)
                #expect(box.ciphertext.count == count && box.tag.count == 16)
                #expect(box.combined == box.ciphertext + box.tag)
                let reparsed = try AES.GCM.SealedBox(combined: Data(box.combined))
                #expect(reparsed == box)
                #expect(try AES.GCM.open(reparsed, using: key, iv: iv) == plaintext)
                #expect(
                    try AES.GCM.open(AES.GCM.SealedBox(ciphertext: box.ciphertext, tag: box.tag), using: key, iv: iv)
                        == plaintext)
            }
        }
    }

    /// Every single-bit change of ciphertext, tag, IV, AAD or key is an authentication failure.
    @Test func gcmRejectsEveryBitFlip() throws {
        let key = SymmetricKey(data: hex("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"))
        let iv = [UInt8](repeating: 0, count: 16)
        let aad = Array("header".utf8)
        let box = try AES.GCM.seal(Array("the payment data".utf8), using: key, iv: iv, authenticating: aad)
        let combined = box.combined
        for bit in 0..<(combined.count * 8) {
            expectCryptoError(.authenticationFailure, "data bit \(bit)") {
                _ = try AES.GCM.open(
                    AES.GCM.SealedBox(combined: flipping(combined, bit: bit)), using: key, iv: iv, authenticating: aad)
            }
        }
        for bit in 0..<(iv.count * 8) {
            expectCryptoError(.authenticationFailure) {
                _ = try AES.GCM.open(box, using: key, iv: flipping(iv, bit: bit), authenticating: aad)
            }
        }
        for bit in 0..<(aad.count * 8) {
            expectCryptoError(.authenticationFailure) {
                _ = try AES.GCM.open(box, using: key, iv: iv, authenticating: flipping(aad, bit: bit))
            }
        }
        let keyBytes = key.bytes.unsafeCopyOfBytes()
        for bit in stride(from: 0, to: 256, by: 7) {
            expectCryptoError(.authenticationFailure) {
                _ = try AES.GCM.open(
                    box, using: SymmetricKey(data: flipping(keyBytes, bit: bit)), iv: iv, authenticating: aad)
            }
        }
        expectCryptoError(.authenticationFailure) { _ = try AES.GCM.open(box, using: key, iv: iv) }  // AAD missing
        expectCryptoError(.authenticationFailure) {
            _ = try AES.GCM.open(box, using: SymmetricKey(bitCount: 256), iv: iv, authenticating: aad)
        }
        #expect(try AES.GCM.open(box, using: key, iv: iv, authenticating: aad) == Array("the payment data".utf8))
    }

    @Test func gcmBadSizesAreTypedErrors() throws {
        let key = SymmetricKey(bitCount: 256)
        let iv = [UInt8](repeating: 0, count: 12)
        for size in [0, 8, 15, 17, 31, 33, 64] {
            expectCryptoError(.invalidParameter, "key of \(size) bytes") {
                _ = try AES.GCM.seal([1], using: SymmetricKey(data: [UInt8](repeating: 1, count: size)), iv: iv)
            }
        }
        expectCryptoError(.invalidParameter) { _ = try AES.GCM.seal([1], using: key, iv: [UInt8]()) }
        expectCryptoError(.invalidParameter) {
            _ = try AES.GCM.seal([1], using: key, iv: [UInt8](repeating: 0, count: 129))
        }
        #expect((try? AES.GCM.seal([1], using: key, iv: [UInt8](repeating: 0, count: 128))) != nil)
        expectCryptoError(.invalidParameter) { _ = try AES.GCM.SealedBox(combined: [UInt8](repeating: 0, count: 15)) }
        let box = try AES.GCM.seal([1, 2, 3], using: key, iv: iv)
        expectCryptoError(.authenticationFailure) {
            _ = try AES.GCM.open(
                AES.GCM.SealedBox(ciphertext: box.ciphertext, tag: Array(box.tag.prefix(12))), using: key, iv: iv)
        }
        expectCryptoError(.invalidParameter) { _ = try AES.GCM.open(box, using: key, iv: [UInt8]()) }
    }

    @Test func digestsKnownAnswers() {
        let abc = Array("abc".utf8)
        #expect(SHA1.hash(abc).hexString == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(SHA256.hash(abc).hexString == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(
            SHA384.hash(abc).hexString
                == "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7")
        #expect(SHA256.hash([UInt8]()).hexString == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        // Incremental hashing over several updates equals the one-shot digest.
        let data = InsecureDeterministicRandom(seed: [9]).bytes(1000)
        var hasher = IncrementalHasher<SHA256>()
        hasher.update(data[..<1])
        hasher.update(data[1..<500])
        hasher.update(Data(data[500...]))
        #expect(hasher.finalize() == SHA256.hash(data))
        var hasher384 = IncrementalHasher<SHA384>()
        hasher384.update(abc)
        #expect(hasher384.finalize() == SHA384.hash(abc))
    }

    @Test func hmacKnownAnswersAndTruncation() {
        // RFC 4231 test case 2, an empty key and message (computed with Python's hmac), and a key longer than a block.
        let jefe = HMAC<SHA256>.authenticationCode(
            for: Array("what do ya want for nothing?".utf8), using: SymmetricKey(data: Array("Jefe".utf8)))
        #expect(jefe.hexString == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        let empty = HMAC<SHA256>.authenticationCode(for: [UInt8](), using: SymmetricKey(data: [UInt8]()))
        #expect(empty.hexString == "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
        // RFC 4231 test case 6: a 131-byte key of 0xaa.
        let long = HMAC<SHA256>.authenticationCode(
            for: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
            using: SymmetricKey(data: [UInt8](repeating: 0xAA, count: 131)))
        #expect(long.hexString == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")

        let key = SymmetricKey(data: Array("Jefe".utf8))
        let message = Array("what do ya want for nothing?".utf8)
        #expect(HMAC<SHA256>.isValidAuthenticationCode(jefe, authenticating: message, using: key))
        #expect(HMAC<SHA256>.isValidAuthenticationCode(jefe.prefix(16), authenticating: message, using: key))
        #expect(HMAC<SHA256>.isValidAuthenticationCode(jefe.prefix(10), authenticating: message, using: key))
        #expect(!HMAC<SHA256>.isValidAuthenticationCode(jefe.prefix(9), authenticating: message, using: key))
        #expect(!HMAC<SHA256>.isValidAuthenticationCode(jefe + [0], authenticating: message, using: key))
        for bit in 0..<256 {
            #expect(
                !HMAC<SHA256>.isValidAuthenticationCode(flipping(jefe, bit: bit), authenticating: message, using: key))
        }
        #expect(
            !HMAC<SHA256>.isValidAuthenticationCode(
                jefe, authenticating: message, using: SymmetricKey(data: Array("jefe".utf8))))
    }

    @Test func hkdfKnownAnswerAndLimits() throws {
        // RFC 5869 test case 3: no salt, no info.
        let okm = try HKDF.deriveKey(
            inputKeyMaterial: SymmetricKey(data: [UInt8](repeating: 0x0B, count: 22)), salt: [UInt8](), info: [UInt8](),
            outputByteCount: 42)
        #expect(
            okm.bytes.unsafeCopyOfBytes().hexString
                == "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8")
        let ikm = SymmetricKey(bitCount: 256)
        for bad in [0, -1, 8161] {
            expectCryptoError(.invalidParameter) {
                _ = try HKDF.deriveKey(inputKeyMaterial: ikm, salt: [UInt8](), info: [UInt8](), outputByteCount: bad)
            }
        }
        #expect(
            try HKDF.deriveKey(inputKeyMaterial: ikm, salt: [1], info: [2], outputByteCount: 8160).byteCount == 8160)
        #expect(
            try HKDF.deriveKey(
                inputKeyMaterial: ikm, salt: [1], info: [UInt8](repeating: 2, count: 1024), outputByteCount: 32
            ).byteCount == 32)
        expectCryptoError(.invalidParameter) {
            _ = try HKDF.deriveKey(
                inputKeyMaterial: ikm, salt: [1], info: [UInt8](repeating: 2, count: 1025), outputByteCount: 32)
        }
    }

    /// SP 800-56A single-step KDF against OpenSSL's own "SSKDF" (run through the openssl CLI into
    /// known-answers.json) and against SHA-256(counter ‖ Z ‖ OtherInfo) computed here block by block.
    @Test func singleStepKDFMatchesOpenSSLAndTheDefinition() throws {
        for vector in try CryptoFixtures.knownAnswers().sskdf {
            let z = SecureBytes(hex(vector.z))
            let info = hex(vector.otherInfo)
            let key = try SingleStepKDF.deriveKey(sharedSecret: z, otherInfo: info, outputByteCount: vector.length)
            #expect(key.bytes.unsafeCopyOfBytes().hexString == vector.output, "\(vector.length) bytes")
            var expected: [UInt8] = []
            var counter: UInt32 = 1
            while expected.count < vector.length {
                expected += SHA256.hash(withUnsafeBytes(of: counter.bigEndian, Array.init) + hex(vector.z) + info)
                counter += 1
            }
            #expect(key.bytes.unsafeCopyOfBytes() == Array(expected.prefix(vector.length)))
        }
        // A different Z or OtherInfo changes the key.
        let z = SecureBytes([UInt8](repeating: 1, count: 32))
        let base = try SingleStepKDF.deriveKey(sharedSecret: z, otherInfo: [1], outputByteCount: 32)
        #expect(try SingleStepKDF.deriveKey(sharedSecret: z, otherInfo: [2], outputByteCount: 32) != base)
        #expect(
            try SingleStepKDF.deriveKey(
                sharedSecret: SecureBytes([UInt8](repeating: 2, count: 32)), otherInfo: [1], outputByteCount: 32)
                != base)
        for bad in [0, -5, 65537] {
            expectCryptoError(.invalidParameter) {
                _ = try SingleStepKDF.deriveKey(sharedSecret: z, otherInfo: [1], outputByteCount: bad)
            }
        }
    }
}
