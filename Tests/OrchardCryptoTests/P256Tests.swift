import Foundation
import OrchardCrypto
import Testing

@Suite("P-256 keys, ECDH and ECDSA")
struct P256Tests {
    /// The PEM `openssl ecparam -genkey` writes: an `EC PARAMETERS` block, then `EC PRIVATE KEY`.
    @Test func multiBlockPEMFromOpenSSL() throws {
        let pem = try CryptoFixtures.string("p256-ecparam-genkey.pem")
        #expect(try pemBlocks(pem).map(\.label) == ["EC PARAMETERS", "EC PRIVATE KEY"])
        let answers = try CryptoFixtures.knownAnswers().p256
        let key = try P256.KeyAgreement.PrivateKey(pemRepresentation: pem)
        #expect(try key.rawRepresentation.unsafeCopyOfBytes() == hex(answers.ecparamGenkeyScalar))
        #expect(key.publicKey.x963Representation == hex(answers.ecparamGenkeyPoint))
        let publicPEM = try CryptoFixtures.string("p256-ecparam-genkey.pub.pem")
        #expect(try P256.KeyAgreement.PublicKey(pemRepresentation: publicPEM) == key.publicKey)
        // The same file as a signing key.
        let signing = try P256.Signing.PrivateKey(pemRepresentation: pem)
        #expect(signing.publicKey.x963Representation == hex(answers.ecparamGenkeyPoint))
        // Blocks in the other order, and the key block alone, load too; the parameters alone do not.
        let blocks = try pemBlocks(pem)
        let reversed =
            pemEncode(blocks[1].der, label: blocks[1].label) + pemEncode(blocks[0].der, label: blocks[0].label)
        #expect(try P256.KeyAgreement.PrivateKey(pemRepresentation: reversed).publicKey == key.publicKey)
        #expect(
            try P256.KeyAgreement.PrivateKey(pemRepresentation: pemEncode(blocks[1].der, label: "EC PRIVATE KEY"))
                .publicKey == key.publicKey)
        expectCryptoError(.invalidKey) {
            _ = try P256.KeyAgreement.PrivateKey(pemRepresentation: pemEncode(blocks[0].der, label: "EC PARAMETERS"))
        }
    }

    /// ECDH against the secret `openssl pkeyutl -derive` computed for the two fixture keys, both directions.
    @Test func ecdhMatchesOpenSSLCLI() throws {
        let answers = try CryptoFixtures.knownAnswers().p256
        let mine = try P256.KeyAgreement.PrivateKey(pemRepresentation: CryptoFixtures.string("p256-ecparam-genkey.pem"))
        let peer = try P256.KeyAgreement.PrivateKey(pemRepresentation: CryptoFixtures.string("p256-peer.pkcs8.pem"))
        let peerPublic = try P256.KeyAgreement.PublicKey(derRepresentation: CryptoFixtures.bytes("p256-peer.pub.der"))
        #expect(peerPublic == peer.publicKey)
        let secret = try mine.sharedSecretFromKeyAgreement(with: peerPublic)
        #expect(secret.unsafeCopyOfBytes() == hex(answers.ecdhWithPeer))
        #expect(try peer.sharedSecretFromKeyAgreement(with: mine.publicKey) == secret)
        // A different key agrees on something else.
        let other = try P256.KeyAgreement.PrivateKey()
        #expect(try other.sharedSecretFromKeyAgreement(with: peerPublic) != secret)
    }

    /// Every encoding of a private key gives back the same key: SEC1 DER, PKCS#8 DER and PEM, raw.
    @Test func privateKeyEncodingsRoundTrip() throws {
        let fromPEM = try P256.Signing.PrivateKey(pemRepresentation: CryptoFixtures.string("p256-peer.pkcs8.pem"))
        let fromSEC1 = try P256.Signing.PrivateKey(derRepresentation: CryptoFixtures.bytes("p256-peer.sec1.der"))
        let pkcs8 = try CryptoFixtures.bytes("p256-peer.pkcs8.der")
        let fromPKCS8 = try P256.Signing.PrivateKey(derRepresentation: pkcs8)
        let raw = try fromPEM.rawRepresentation
        #expect(raw.count == 32)
        for key in [fromSEC1, fromPKCS8] {
            #expect(try key.rawRepresentation == raw)
            #expect(key.publicKey == fromPEM.publicKey)
        }
        // OrchardCrypto writes PKCS#8, byte for byte what openssl wrote.
        #expect(try fromPEM.derRepresentation.unsafeCopyOfBytes() == pkcs8)
        #expect(try fromPEM.pemRepresentation == CryptoFixtures.string("p256-peer.pkcs8.pem"))
        let fromRaw = try P256.Signing.PrivateKey(rawRepresentation: raw.unsafeCopyOfBytes())
        #expect(fromRaw.publicKey == fromPEM.publicKey)
        let generated = try P256.KeyAgreement.PrivateKey()
        let again = try P256.KeyAgreement.PrivateKey(derRepresentation: generated.derRepresentation.unsafeCopyOfBytes())
        #expect(again.publicKey == generated.publicKey)
        #expect(
            try P256.KeyAgreement.PrivateKey(pemRepresentation: generated.pemRepresentation).publicKey
                == generated.publicKey)
        #expect(
            try P256.KeyAgreement.PrivateKey(rawRepresentation: generated.rawRepresentation.unsafeCopyOfBytes())
                .publicKey == generated.publicKey)
    }

    @Test func publicKeyEncodingsRoundTrip() throws {
        let der = try CryptoFixtures.bytes("p256-peer.pub.der")
        let key = try P256.Signing.PublicKey(derRepresentation: der)
        #expect(key.derRepresentation == der)
        #expect(key.x963Representation.count == 65 && key.x963Representation.first == 0x04)
        #expect(Array(der.suffix(65)) == key.x963Representation)
        #expect(try P256.Signing.PublicKey(x963Representation: key.x963Representation) == key)
        #expect(try P256.Signing.PublicKey(pemRepresentation: key.pemRepresentation) == key)
        #expect(try pemDecode(key.pemRepresentation, label: "PUBLIC KEY") == der)
        // Data and ArraySlice inputs work like arrays.
        #expect(try P256.Signing.PublicKey(derRepresentation: Data(der)) == key)
        #expect(
            try P256.KeyAgreement.PublicKey(x963Representation: key.x963Representation[...]).x963Representation
                == key.x963Representation)
    }

    /// X9.63 points must be 65 bytes, uncompressed, on the curve.
    @Test func offCurveAndMalformedPointsAreRejected() throws {
        let point = try P256.KeyAgreement.PrivateKey().publicKey.x963Representation
        var offCurve = point
        offCurve[64] ^= 0x01  // y changed by one bit: no longer on the curve
        var compressed = [0x02 | (point[64] & 1)] + point[1...32]
        compressed[0] = 0x02 | (point[64] & 1)
        let p: [UInt8] = hex("ffffffff00000001000000000000000000000000ffffffffffffffffffffffff")
        for bad in [
            offCurve, [UInt8](repeating: 0, count: 65), [0x04] + [UInt8](repeating: 0, count: 64),
            [0x04] + p + Array(point[33...]),  // x = p is out of range
            Array(point.dropLast()), point + [0], Array(compressed), [0x00], [], [0x05] + Array(point.dropFirst()),
        ] {
            expectCryptoError(.invalidKey, "\(bad.count) bytes") {
                _ = try P256.KeyAgreement.PublicKey(x963Representation: bad)
            }
            expectCryptoError(.invalidKey) { _ = try P256.Signing.PublicKey(x963Representation: bad) }
        }
        // The SPKI form of the off-curve point, and an SPKI of another curve or with extra bytes.
        let spki = try P256.KeyAgreement.PublicKey(x963Representation: point).derRepresentation
        expectCryptoError(.invalidKey) {
            _ = try P256.KeyAgreement.PublicKey(derRepresentation: Array(spki.prefix(26)) + offCurve)
        }
        expectCryptoError(.invalidKey) { _ = try P256.KeyAgreement.PublicKey(derRepresentation: spki + [0]) }
        var otherCurve = spki
        otherCurve[21] ^= 0x01  // the curve OID's last byte
        expectCryptoError(.invalidKey) { _ = try P256.KeyAgreement.PublicKey(derRepresentation: otherCurve) }
    }

    /// The shared secret is always 32 bytes, leading zero bytes kept. The scalar is searched
    /// deterministically until the x-coordinate starts with 0x00 (1 in 256 on average).
    @Test func ecdhKeepsLeadingZeros() throws {
        let peer = try P256.KeyAgreement.PrivateKey(rawRepresentation: hex(String(repeating: "11", count: 32)))
        let random = InsecureDeterministicRandom(seed: Array("leading zero".utf8))
        var found = 0
        for _ in 0..<4096 where found < 2 {
            let key = try P256.KeyAgreement.PrivateKey(rawRepresentation: random.bytes(32))
            let secret = try key.sharedSecretFromKeyAgreement(with: peer.publicKey)
            #expect(secret.count == 32)
            guard secret.unsafeCopyOfBytes().first == 0 else { continue }
            found += 1
            // The other side computes the same 32 bytes.
            #expect(try peer.sharedSecretFromKeyAgreement(with: key.publicKey) == secret)
        }
        #expect(found == 2)
    }

    @Test func rawPrivateKeysOutOfRangeAreRejected() {
        let order = hex("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551")
        var orderMinusOne = order
        orderMinusOne[31] -= 1
        for bad in [
            [UInt8](repeating: 0, count: 32), order, [UInt8](repeating: 0xFF, count: 32),
            [UInt8](repeating: 1, count: 31), [UInt8](repeating: 1, count: 33), [],
        ] {
            expectCryptoError(.invalidKey) { _ = try P256.KeyAgreement.PrivateKey(rawRepresentation: bad) }
        }
        #expect((try? P256.KeyAgreement.PrivateKey(rawRepresentation: orderMinusOne)) != nil)
        #expect((try? P256.Signing.PrivateKey(rawRepresentation: [UInt8](repeating: 0, count: 31) + [1])) != nil)
    }

    /// Keys Orchard must refuse: another curve, RSA, an encrypted PEM (which must fail, not prompt),
    /// garbage, and a SEC1 key whose stored public point does not belong to its scalar.
    @Test func unacceptablePrivateKeysAreRejected() throws {
        expectCryptoError(.invalidKey) {
            _ = try P256.Signing.PrivateKey(pemRepresentation: CryptoFixtures.string("p384.pem"))
        }
        expectCryptoError(.invalidKey) {
            _ = try P256.Signing.PrivateKey(pemRepresentation: CryptoFixtures.string("rsa-2048.pem"))
        }
        expectCryptoError(.invalidKey) {
            _ = try P256.Signing.PrivateKey(pemRepresentation: CryptoFixtures.string("p256-encrypted.pkcs8.pem"))
        }
        expectCryptoError(.invalidKey) {
            _ = try P256.Signing.PrivateKey(pemRepresentation: CryptoFixtures.string("p256-encrypted.sec1.pem"))
        }
        expectCryptoError(.invalidKey) { _ = try P256.Signing.PrivateKey(pemRepresentation: "not a PEM") }
        expectCryptoError(.invalidKey) {
            _ = try P256.Signing.PrivateKey(derRepresentation: [0x30, 0x03, 0x02, 0x01, 0x01])
        }
        expectCryptoError(.invalidKey) {
            _ = try P256.Signing.PrivateKey(derRepresentation: CryptoFixtures.bytes("p256-peer.pub.der"))
        }

        // SEC1 ends with [1] { BIT STRING 04 ‖ X ‖ Y }: put the other fixture key's point there.
        let sec1 = try CryptoFixtures.bytes("p256-peer.sec1.der")
        let otherPoint = try P256.Signing.PrivateKey(
            pemRepresentation: CryptoFixtures.string("p256-ecparam-genkey.pem")
        )
        .publicKey.x963Representation
        #expect(sec1.count == 121)
        let mismatched = Array(sec1.dropLast(65)) + otherPoint
        expectCryptoError(.invalidKey) { _ = try P256.Signing.PrivateKey(derRepresentation: mismatched) }
    }

    /// A signature made by `openssl dgst -sha256 -sign` verifies; altered signatures, messages and keys do not.
    @Test func ecdsaAgainstOpenSSLCLIAndBitFlips() throws {
        let key = try P256.Signing.PrivateKey(pemRepresentation: CryptoFixtures.string("p256-ecparam-genkey.pem"))
        let message = try CryptoFixtures.bytes("message.txt")
        let der = try CryptoFixtures.bytes("message.p256.sig.der")
        let signature = try P256.Signing.ECDSASignature(derRepresentation: der)
        #expect(key.publicKey.isValidSignature(signature, for: message))
        #expect(key.publicKey.isValidSignature(signature, for: Data(message)))
        // Every single-bit change of the DER signature is rejected (at parsing or at verification).
        for bit in 0..<(der.count * 8) {
            let flipped = flipping(der, bit: bit)
            if let parsed = try? P256.Signing.ECDSASignature(derRepresentation: flipped) {
                #expect(!key.publicKey.isValidSignature(parsed, for: message), "bit \(bit)")
            }
        }
        // Every single-bit change of the message.
        for bit in stride(from: 0, to: message.count * 8, by: 1) {
            #expect(!key.publicKey.isValidSignature(signature, for: flipping(message, bit: bit)), "message bit \(bit)")
        }
        // Every single-bit change of the public key: it no longer parses, or the signature does not verify.
        let point = key.publicKey.x963Representation
        for bit in 8..<(point.count * 8) {
            if let flipped = try? P256.Signing.PublicKey(x963Representation: flipping(point, bit: bit)) {
                #expect(!flipped.isValidSignature(signature, for: message), "key bit \(bit)")
            }
        }
        // A changed private scalar signs for a different public key.
        var raw = try key.rawRepresentation.unsafeCopyOfBytes()
        raw[31] ^= 0x01
        let wrong = try P256.Signing.PrivateKey(rawRepresentation: raw)
        #expect(!key.publicKey.isValidSignature(try wrong.signature(for: message), for: message))
        // The wrong key.
        let stranger = try P256.Signing.PrivateKey()
        #expect(!stranger.publicKey.isValidSignature(signature, for: message))
    }

    @Test func signatureFormsRoundTrip() throws {
        let key = try P256.Signing.PrivateKey()
        let message = Array("round trip".utf8)
        let signature = try key.signature(for: message)
        #expect(key.publicKey.isValidSignature(signature, for: message))
        let raw = signature.rawRepresentation
        #expect(raw.count == 64)
        let fromRaw = try P256.Signing.ECDSASignature(rawRepresentation: raw)
        #expect(fromRaw == signature)
        #expect(try P256.Signing.ECDSASignature(derRepresentation: signature.derRepresentation) == signature)
        #expect(key.publicKey.isValidSignature(fromRaw, for: message))
        // ECDSA is randomized: two signatures differ and both verify.
        let second = try key.signature(for: message)
        #expect(second != signature && key.publicKey.isValidSignature(second, for: message))
        // Malformed signatures are typed errors.
        expectCryptoError(.invalidSignature) {
            _ = try P256.Signing.ECDSASignature(rawRepresentation: Array(raw.dropLast()))
        }
        expectCryptoError(.invalidSignature) {
            _ = try P256.Signing.ECDSASignature(derRepresentation: signature.derRepresentation + [0])
        }
        expectCryptoError(.invalidSignature) { _ = try P256.Signing.ECDSASignature(derRepresentation: []) }
        expectCryptoError(.invalidSignature) {
            _ = try P256.Signing.ECDSASignature(rawRepresentation: [UInt8](repeating: 0, count: 32) + raw[32...])
        }
        expectCryptoError(.invalidSignature) {
            _ = try P256.Signing.ECDSASignature(rawRepresentation: raw[..<32] + [UInt8](repeating: 0, count: 32))
        }
        // r = 0 or r ≥ 2^256 can never verify and is refused at parsing.
        expectCryptoError(.invalidSignature) {
            _ = try P256.Signing.ECDSASignature(derRepresentation: [0x30, 0x06, 0x02, 0x01, 0x00, 0x02, 0x01, 0x01])
        }
        let big = [0x02, 0x21, 0x01] + [UInt8](repeating: 0, count: 32)
        expectCryptoError(.invalidSignature) {
            _ = try P256.Signing.ECDSASignature(
                derRepresentation: [0x30, UInt8(big.count + 3)] + big + [0x02, 0x01, 0x01])
        }
    }
}
