import Foundation
import OrchardCrypto
import Testing

/// `init(rawRepresentation:)` builds the key pair as d·G and EVP_PKEY_fromdata (not through the DER decoder).
@Suite("P-256 keys from their raw scalar")
struct P256RawKeyTests {
    @Test("The same public key, shared secrets and working signatures as the generated key")
    func roundTrip() throws {
        for _ in 0..<16 {
            let generated = try P256.KeyAgreement.PrivateKey()
            let rebuilt = try P256.KeyAgreement.PrivateKey(
                rawRepresentation: try generated.rawRepresentation.unsafeCopyOfBytes())
            #expect(rebuilt.publicKey == generated.publicKey)
            let peer = try P256.KeyAgreement.PrivateKey()
            #expect(
                try rebuilt.sharedSecretFromKeyAgreement(with: peer.publicKey)
                    == peer.sharedSecretFromKeyAgreement(with: generated.publicKey))
            let signing = try P256.Signing.PrivateKey()
            let signer = try P256.Signing.PrivateKey(
                rawRepresentation: try signing.rawRepresentation.unsafeCopyOfBytes())
            #expect(signer.publicKey == signing.publicKey)
            #expect(signing.publicKey.isValidSignature(try signer.signature(for: [1, 2, 3]), for: [1, 2, 3]))
        }
    }

    @Test("d = 1 gives the generator; 0, n and 31 bytes are refused")
    func edges() throws {
        let one = try P256.KeyAgreement.PrivateKey(rawRepresentation: [UInt8](repeating: 0, count: 31) + [1])
        let generatorX: [UInt8] = [
            0x6B, 0x17, 0xD1, 0xF2, 0xE1, 0x2C, 0x42, 0x47, 0xF8, 0xBC, 0xE6, 0xE5, 0x63, 0xA4, 0x40, 0xF2, 0x77, 0x03,
            0x7D, 0x81, 0x2D, 0xEB, 0x33, 0xA0, 0xF4, 0xA1, 0x39, 0x45, 0xD8, 0x98, 0xC2, 0x96,
        ]
        #expect(Array(one.publicKey.x963Representation[1..<33]) == generatorX)
        let order: [UInt8] = [
            0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xBC, 0xE6,
            0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
        ]
        for bad in [[UInt8](repeating: 0, count: 32), order, [UInt8](repeating: 1, count: 31)] {
            #expect(throws: CryptoError(.invalidKey, "")) { try P256.KeyAgreement.PrivateKey(rawRepresentation: bad) }
        }
    }
}
