import Foundation
import OrchardCrypto
import Testing

@Suite("SealedEnvelope")
struct SealedEnvelopeTests {
    let purpose = "token-service>secure-element:personalisation"

    @Test func roundTrip() throws {
        let recipient = try P256.KeyAgreement.PrivateKey()
        let secret = Array("DPAN and keys".utf8)
        let envelope = try SealedEnvelope.seal(secret, to: recipient.publicKey, purpose: purpose)
        #expect(envelope.count == secret.count + 82)
        #expect(try SealedEnvelope.open(envelope, with: recipient, purpose: purpose).unsafeCopyOfBytes() == secret)
    }

    @Test func deterministicWithFixedRandomness() throws {
        let recipient = try P256.KeyAgreement.PrivateKey()
        let a = try SealedEnvelope.seal(
            [1, 2, 3], to: recipient.publicKey, purpose: purpose,
            random: InsecureDeterministicRandom(seed: [9]))
        let b = try SealedEnvelope.seal(
            [1, 2, 3], to: recipient.publicKey, purpose: purpose,
            random: InsecureDeterministicRandom(seed: [9]))
        #expect(a == b)
    }

    @Test func everyBitFlipWrongKeyAndWrongPurposeRefused() throws {
        let recipient = try P256.KeyAgreement.PrivateKey()
        let envelope = try SealedEnvelope.seal(Array("secret".utf8), to: recipient.publicKey, purpose: purpose)
        for bit in 0..<(envelope.count * 8) {
            var flipped = envelope
            flipped[bit / 8] ^= UInt8(1 << (bit % 8))
            #expect(throws: CryptoError.self) { try SealedEnvelope.open(flipped, with: recipient, purpose: purpose) }
        }
        let other = try P256.KeyAgreement.PrivateKey()
        #expect(throws: CryptoError(.authenticationFailure, "")) {
            try SealedEnvelope.open(envelope, with: other, purpose: purpose)
        }
        #expect(throws: CryptoError(.authenticationFailure, "")) {
            try SealedEnvelope.open(envelope, with: recipient, purpose: "wallet>token-service:card-data")
        }
        #expect(throws: CryptoError(.invalidEncoding, "")) {
            try SealedEnvelope.open(Array(envelope.prefix(50)), with: recipient, purpose: purpose)
        }
    }
}
