import Foundation
public import OrchardCrypto

/// A card install as the token service sends it to a Secure Element: the personalisation envelope (sealed to the
/// Secure Element's key, ``PersonalisationData/envelopePurpose``), bound to that Secure Element's certificate and
/// a one-time install identifier, and signed by the token service's personalisation key.
///
/// Sealing alone proves nothing about the sender: anyone holding the Secure Element's certificate (the Pay server
/// that relays it included) can seal an envelope to its key. The signature can only come from the token service:
/// its key is certified by the Orchard root and pinned in the Secure Element at manufacture, and the Secure
/// Element installs nothing else.
///
/// ```
/// serialized = "OPI1" ‖ installID (16) ‖ certificateDigest (32) ‖ length (4, big-endian) ‖ envelope
///              ‖ DER ECDSA signature
/// signature  = ECDSA P-256 / SHA-256 by the token service's personalisation key over
///              "orchard-personalisation-install-v1" ‖ 00 ‖ installID ‖ certificateDigest ‖ envelope
/// ```
///
/// `certificateDigest` is SHA-256 of the DER of the Secure Element's device certificate. Holds no secret in
/// clear (the envelope is encrypted); its description shows the install identifier only.
public struct SignedPersonalisation: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The first bytes of every serialized install.
    public static let magic: [UInt8] = Array("OPI1".utf8)
    /// The context the signature covers before the fields.
    public static let signatureContext: [UInt8] = Array("orchard-personalisation-install-v1".utf8) + [0]
    /// The subject organizational unit of the certificate of the key that signs installs.
    public static let signerOrganizationalUnit = "token-service-personalisation"
    /// A serialized install is never larger than this.
    public static let maximumByteCount = 8192

    /// Random, 16 bytes; a Secure Element installs each identifier once.
    public let installID: [UInt8]
    /// SHA-256 of the DER of the device certificate of the Secure Element the install is for.
    public let certificateDigest: [UInt8]
    /// The ``PersonalisationData`` sealed to that Secure Element's key.
    public let envelope: [UInt8]
    /// The token service's signature over ``signedContent``: strict DER ECDSA.
    public let signature: [UInt8]

    /// What the signature covers.
    public var signedContent: [UInt8] {
        Self.signedContent(installID: installID, certificateDigest: certificateDigest, envelope: envelope)
    }

    static func signedContent(installID: [UInt8], certificateDigest: [UInt8], envelope: [UInt8]) -> [UInt8] {
        signatureContext + installID + certificateDigest + envelope
    }

    /// Signs an install with `sign` (the token service's HSM holds the key).
    /// - Throws: ``PaymentCredentialError/Code/invalidArgument`` for an identifier, digest or envelope out of form.
    public init(
        installID: [UInt8], certificateDigest: [UInt8], envelope: [UInt8],
        sign: (_ content: [UInt8]) throws -> P256.Signing.ECDSASignature
    ) throws(PaymentCredentialError) {
        guard installID.count == 16, certificateDigest.count == 32 else {
            throw PaymentCredentialError(.invalidArgument, "an install ID is 16 bytes and a certificate digest 32")
        }
        guard !envelope.isEmpty, envelope.count <= Self.maximumByteCount - 256 else {
            throw PaymentCredentialError(.invalidArgument, "a personalisation envelope is 1 to 7936 bytes")
        }
        self.installID = installID
        self.certificateDigest = certificateDigest
        self.envelope = envelope
        do {
            signature = try sign(
                Self.signedContent(installID: installID, certificateDigest: certificateDigest, envelope: envelope)
            ).derRepresentation
        } catch {
            throw PaymentCredentialError(.cryptoFailure, "the install could not be signed")
        }
    }

    /// Parses a serialized install; does not check the signature (``isSigned(by:)`` does).
    /// - Throws: ``PaymentCredentialError/Code/malformed`` for anything out of layout.
    public init(serialized bytes: [UInt8]) throws(PaymentCredentialError) {
        guard bytes.count <= Self.maximumByteCount, bytes.count > 4 + 16 + 32 + 4,
            Array(bytes.prefix(4)) == Self.magic
        else { throw PaymentCredentialError(.malformed, "not a signed personalisation (OPI1)") }
        var offset = 4
        installID = Array(bytes[offset..<offset + 16])
        offset += 16
        certificateDigest = Array(bytes[offset..<offset + 32])
        offset += 32
        let length = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
        offset += 4
        guard length > 0, length <= bytes.count - offset else {
            throw PaymentCredentialError(.malformed, "the signed personalisation's envelope length is out of range")
        }
        envelope = Array(bytes[offset..<offset + length])
        offset += length
        signature = Array(bytes[offset...])
        do {
            _ = try P256.Signing.ECDSASignature(derRepresentation: signature)
        } catch {
            throw PaymentCredentialError(.malformed, "the signed personalisation's signature is not DER ECDSA")
        }
    }

    /// The wire form.
    public var serialized: [UInt8] {
        let length = envelope.count
        return Self.magic + installID + certificateDigest
            + [UInt8(length >> 24 & 0xFF), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
            + envelope + signature
    }

    /// Whether `key` signed this install.
    public func isSigned(by key: P256.Signing.PublicKey) -> Bool {
        guard let signature = try? P256.Signing.ECDSASignature(derRepresentation: signature) else { return false }
        return key.isValidSignature(signature, for: signedContent)
    }

    /// The install identifier, hex.
    public var installIDHex: String { Hex.encode(installID, lowercase: true) }

    public var description: String { "SignedPersonalisation(install \(installIDHex))" }

    /// Encodes as the base64 of ``serialized``.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(Data(serialized))
    }

    /// Decodes the base64 of ``serialized``, strictly.
    public init(from decoder: any Decoder) throws {
        let bytes = try decoder.singleValueContainer().decode(Data.self)
        do {
            try self.init(serialized: Array(bytes))
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }
}
