import Foundation
import OrchardCrypto
import Testing

@Suite("RSA")
struct RSATests {
    static func key() throws -> RSA.PrivateKey {
        try RSA.PrivateKey(pemRepresentation: CryptoFixtures.string("rsa-2048.pem"))
    }

    /// Ciphertexts made by `openssl pkeyutl` with OAEP-SHA256: MGF1-SHA256 decrypts only with MGF1-SHA256,
    /// MGF1-SHA1 only with MGF1-SHA1 (Java's default for "OAEPWithSHA256AndMGF1Padding").
    @Test func oaepFromOpenSSLCLIAndTheMGF1Digest() throws {
        let key = try Self.key()
        let expected = hex(try CryptoFixtures.knownAnswers().rsaOaepPlaintext)
        let sha256 = try CryptoFixtures.bytes("rsa-oaep-sha256-mgf1sha256.bin")
        let sha1 = try CryptoFixtures.bytes("rsa-oaep-sha256-mgf1sha1.bin")
        #expect(try key.decrypt(sha256).unsafeCopyOfBytes() == expected)
        #expect(try key.decrypt(sha1, mgf1Digest: .sha1).unsafeCopyOfBytes() == expected)
        expectCryptoError(.decryptionFailure) { _ = try key.decrypt(sha256, mgf1Digest: .sha1) }
        expectCryptoError(.decryptionFailure) { _ = try key.decrypt(sha1) }
        expectCryptoError(.decryptionFailure) { _ = try key.decrypt(sha256, oaepDigest: .sha1) }
        expectCryptoError(.decryptionFailure) { _ = try key.decrypt(sha256, label: [1]) }
    }

    @Test func oaepRoundTripsWithLabelsAndKeyForms() throws {
        let key = try Self.key()
        let pkcs1 = try RSA.PrivateKey(pemRepresentation: CryptoFixtures.string("rsa-2048.pkcs1.pem"))
        let publicKey = try RSA.PublicKey(pemRepresentation: CryptoFixtures.string("rsa-2048.pub.pem"))
        #expect(publicKey.derRepresentation == key.publicKey.derRepresentation)
        #expect(pkcs1.publicKey.derRepresentation == key.publicKey.derRepresentation)
        #expect(
            try RSA.PublicKey(derRepresentation: publicKey.derRepresentation).pemRepresentation
                == publicKey.pemRepresentation)
        let reloaded = try RSA.PrivateKey(derRepresentation: key.derRepresentation.unsafeCopyOfBytes())
        #expect(reloaded.publicKey.derRepresentation == key.publicKey.derRepresentation)
        #expect(try RSA.PrivateKey(pemRepresentation: key.pemRepresentation).keySizeInBits == 2048)

        let secret = Array("sixteen byte key".utf8)
        for (oaep, mgf1) in [(RSA.Digest.sha256, RSA.Digest.sha256), (.sha256, .sha1), (.sha1, .sha1)] {
            let ciphertext = try publicKey.encrypt(secret, oaepDigest: oaep, mgf1Digest: mgf1)
            #expect(ciphertext.count == 256)
            #expect(try pkcs1.decrypt(ciphertext, oaepDigest: oaep, mgf1Digest: mgf1).unsafeCopyOfBytes() == secret)
        }
        let labelled = try publicKey.encrypt(secret, label: Array("label".utf8))
        #expect(try key.decrypt(labelled, label: Array("label".utf8)).unsafeCopyOfBytes() == secret)
        expectCryptoError(.decryptionFailure) { _ = try key.decrypt(labelled) }
        // OAEP with SHA-256 carries at most 256 - 2·32 - 2 = 190 bytes.
        #expect(try key.decrypt(publicKey.encrypt([UInt8](repeating: 7, count: 190))).count == 190)
        expectCryptoError(.invalidParameter) { _ = try publicKey.encrypt([UInt8](repeating: 7, count: 191)) }
    }

    /// Single-bit changes of the ciphertext and a different key are all the same decryption failure.
    @Test func alteredCiphertextsAndWrongKeysFail() throws {
        let key = try Self.key()
        let ciphertext = try CryptoFixtures.bytes("rsa-oaep-sha256-mgf1sha256.bin")
        // A spread of bits across the whole ciphertext (all 2048 would take seconds: each is a private-key operation).
        for bit in stride(from: 0, to: ciphertext.count * 8, by: 53) {
            expectCryptoError(.decryptionFailure, "bit \(bit)") { _ = try key.decrypt(flipping(ciphertext, bit: bit)) }
        }
        expectCryptoError(.decryptionFailure) { _ = try key.decrypt(ciphertext.dropLast()) }
        expectCryptoError(.decryptionFailure) { _ = try key.decrypt(ciphertext + [0]) }
        expectCryptoError(.decryptionFailure) { _ = try key.decrypt([UInt8]()) }
        let other = try RSA.PrivateKey(keySize: 2048)
        expectCryptoError(.decryptionFailure) { _ = try other.decrypt(ciphertext) }
    }

    @Test func keysShorterThan2048BitsAreRejected() throws {
        expectCryptoError(.invalidParameter) { _ = try RSA.PrivateKey(keySize: 1024) }
        expectCryptoError(.invalidParameter) { _ = try RSA.PrivateKey(keySize: 2047) }
        expectCryptoError(.invalidKey) {
            _ = try RSA.PrivateKey(pemRepresentation: CryptoFixtures.string("rsa-1024.pem"))
        }
        expectCryptoError(.invalidKey) {
            _ = try RSA.PublicKey(pemRepresentation: CryptoFixtures.string("rsa-1024.pub.pem"))
        }
        let der = try pemDecode(CryptoFixtures.string("rsa-1024.pem"), label: "PRIVATE KEY")
        expectCryptoError(.invalidKey) { _ = try RSA.PrivateKey(derRepresentation: der) }
        // Not RSA at all.
        expectCryptoError(.invalidKey) {
            _ = try RSA.PrivateKey(pemRepresentation: CryptoFixtures.string("p256-peer.pkcs8.pem"))
        }
        expectCryptoError(.invalidKey) {
            _ = try RSA.PublicKey(derRepresentation: CryptoFixtures.bytes("p256-peer.pub.der"))
        }
        expectCryptoError(.invalidKey) { _ = try RSA.PublicKey(derRepresentation: [0x30, 0x00]) }
    }

    /// PKCS#1 v1.5 signatures: one made by `openssl dgst -sha256 -sign` verifies, altered ones do not.
    @Test func pkcs1v15Signatures() throws {
        let key = try Self.key()
        let message = try CryptoFixtures.bytes("message.txt")
        let signature = try CryptoFixtures.bytes("message.rsa-pkcs1.sig")
        #expect(key.publicKey.isValidPKCS1v15Signature(signature, for: message))
        // PKCS#1 v1.5 is deterministic: OrchardCrypto makes the same bytes.
        #expect(try key.pkcs1v15Signature(for: message) == signature)
        for bit in stride(from: 0, to: signature.count * 8, by: 37) {
            #expect(!key.publicKey.isValidPKCS1v15Signature(flipping(signature, bit: bit), for: message), "bit \(bit)")
        }
        #expect(!key.publicKey.isValidPKCS1v15Signature(signature, for: message + [0]))
        #expect(!key.publicKey.isValidPKCS1v15Signature(signature.dropLast(), for: message))
    }

    @Test func privateKeyDescriptionsAreRedacted() throws {
        let key = try Self.key()
        var dumped = ""
        dump(key, to: &dumped)
        let modulusStart = Array(key.publicKey.derRepresentation[33..<41]).hexString
        for text in ["\(key)", String(reflecting: key), dumped] {
            #expect(text.contains("redacted") || text.contains("RSA.PrivateKey"))
            #expect(!text.lowercased().contains(modulusStart))
        }
    }
}
