import CardBasics
import Foundation
import Issuer
import OrchardCrypto
import PaymentCredential
import Testing
import TokenService

@Suite("Sealed envelope (P-256 ECDH + HKDF-SHA256 + AES-256-GCM)")
struct EnvelopeTests {
    let recipient: P256.KeyAgreement.PrivateKey
    let label: EncryptedEnvelope.Label
    let secret = SecureBytes(Array("DPAN 4895370012345671 and two master keys".utf8))

    init() throws {
        recipient = try P256.KeyAgreement.PrivateKey()
        label = try EncryptedEnvelope.Label(purpose: "se-personalisation", sender: "orchard-tsp", recipient: "se/abc")
    }

    @Test func roundTripAndFreshEphemeralKeys() throws {
        let one = try EncryptedEnvelope.seal(secret, to: recipient.publicKey, label: label)
        let two = try EncryptedEnvelope.seal(secret, to: recipient.publicKey, label: label)
        #expect(try one.open(with: recipient, label: label) == secret)
        #expect(
            one.ephemeralPublicKey != two.ephemeralPublicKey && one.serialized.suffix(20) != two.serialized.suffix(20))
        #expect(one.serialized.count == 1 + 65 + secret.count + 16 && one.serialized[0] == 1)
        // The plaintext is nowhere in the wire form.
        #expect(!String(decoding: one.serialized, as: UTF8.self).contains("4895370012345671"))
    }

    @Test func wrongKeyIsRefused() throws {
        let envelope = try EncryptedEnvelope.seal(secret, to: recipient.publicKey, label: label)
        let other = try P256.KeyAgreement.PrivateKey()
        #expect(throws: TokenServiceError(.envelopeRejected, "")) { try envelope.open(with: other, label: label) }
    }

    @Test func everyFlippedBitIsRefused() throws {
        let wire = try EncryptedEnvelope.seal(secret, to: recipient.publicKey, label: label).serialized
        // Every bit after the version byte: ephemeral point, ciphertext and tag.
        for index in 1..<wire.count {
            for bit in [0, 3, 7] {
                var changed = wire
                changed[index] ^= UInt8(1 << bit)
                #expect(throws: TokenServiceError(.envelopeRejected, "")) {
                    try EncryptedEnvelope(serialized: changed).open(with: recipient, label: label)
                }
            }
        }
    }

    @Test func anyOtherLabelIsRefused() throws {
        let envelope = try EncryptedEnvelope.seal(secret, to: recipient.publicKey, label: label)
        let others = [
            try EncryptedEnvelope.Label(purpose: "card-data", sender: "orchard-tsp", recipient: "se/abc"),
            try EncryptedEnvelope.Label(purpose: "se-personalisation", sender: "orchard-pay", recipient: "se/abc"),
            try EncryptedEnvelope.Label(purpose: "se-personalisation", sender: "orchard-tsp", recipient: "se/abd"),
        ]
        for other in others {
            #expect(throws: TokenServiceError(.envelopeRejected, "")) {
                try envelope.open(with: recipient, label: other)
            }
        }
        #expect(throws: TokenServiceError(.invalidRequest, "")) {
            try EncryptedEnvelope.Label(purpose: "a\u{0}b", sender: "x", recipient: "y")
        }
        #expect(throws: TokenServiceError(.invalidRequest, "")) {
            try EncryptedEnvelope.Label(purpose: "", sender: "x", recipient: "y")
        }
        // The separators cannot be smuggled in to make two labels collide.
        #expect(throws: TokenServiceError(.invalidRequest, "")) {
            try EncryptedEnvelope.Label(purpose: "p", sender: "a>b", recipient: "c")
        }
        #expect(throws: TokenServiceError(.invalidRequest, "")) {
            try EncryptedEnvelope.Label(purpose: "p", sender: "a", recipient: "b:c")
        }
        #expect(label.purposeString == "orchard-tsp>se/abc:se-personalisation")
    }

    @Test func malformedWireFormsAreRefused() throws {
        let wire = try EncryptedEnvelope.seal(secret, to: recipient.publicKey, label: label).serialized
        #expect(throws: TokenServiceError(.envelopeRejected, "")) { try EncryptedEnvelope(serialized: wire.prefix(81)) }
        var version = wire
        version[0] = 2
        #expect(throws: TokenServiceError(.envelopeRejected, "")) { try EncryptedEnvelope(serialized: version) }
        var compressed = wire
        compressed[1] = 0x02
        #expect(throws: TokenServiceError(.envelopeRejected, "")) { try EncryptedEnvelope(serialized: compressed) }
        // An empty plaintext still has a tag and round-trips.
        let empty = try EncryptedEnvelope.seal(SecureBytes([UInt8]()), to: recipient.publicKey, label: label)
        #expect(try EncryptedEnvelope(serialized: empty.serialized).open(with: recipient, label: label).count == 0)
    }

    @Test func codableIsBase64OfTheWireForm() throws {
        let envelope = try EncryptedEnvelope.seal(secret, to: recipient.publicKey, label: label)
        let json = try JSONEncoder().encode([envelope])
        let text = String(decoding: json, as: UTF8.self)
        #expect(
            text
                == "[\"\(Data(envelope.serialized).base64EncodedString())\"]".replacingOccurrences(of: "/", with: "\\/")
        )
        #expect(try JSONDecoder().decode([EncryptedEnvelope].self, from: json) == [envelope])
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode([EncryptedEnvelope].self, from: Data("[\"!!\"]".utf8))
        }
    }

    @Test func cardDataIsReadIntoTheNetworksCardTypes() throws {
        let payload = try CardDataPayload(
            pan: try PrimaryAccountNumber("4111111111111111"), expiry: try CardExpiry(year: 2034, month: 12),
            cardVerificationValue: try CardVerificationValue("266"), cardholderName: "Orchard Tester")
        let card = try CardDataPayload.open(try payload.encoded())
        #expect(card.pan.digits == "4111111111111111" && card.expiry.yymm == "3412")
        #expect(card.cardholderName == "Orchard Tester" && card.cardVerificationValue.matches("266"))
        #expect(!"\(payload)".contains("266") && !"\(payload)".contains("4111111111111111"))
        // A PAN with a wrong check digit inside the envelope is refused.
        var bytes = try payload.encoded().unsafeCopyOfBytes()
        let panStart = 4 + 3
        bytes[panStart + 15] = 0x32
        #expect(throws: TokenServiceError(.invalidRequest, "")) { try CardDataPayload.open(SecureBytes(bytes)) }
        // So is anything out of the layout.
        #expect(throws: TokenServiceError(.invalidRequest, "")) {
            try CardDataPayload.open(SecureBytes(bytes.dropLast()))
        }
    }
}
