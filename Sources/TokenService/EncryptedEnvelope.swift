public import Foundation
public import OrchardCrypto

/// An ``OrchardCrypto/SealedEnvelope`` as a value: the wire bytes, `Codable` as base64, with a label that
/// names the purpose and both parties. Used for SE personalisation (token service → a device's Secure
/// Element) and provisioning card data (wallet → token service).
///
/// The cryptography is OrchardCrypto's (ephemeral P-256 ECDH, HKDF-SHA256 with salt `ephemeral ‖
/// recipient` and the purpose in the info, AES-256-GCM authenticating version, ephemeral key and purpose);
/// this type adds the label discipline and the typed errors of the token service.
public struct EncryptedEnvelope: Hashable, Sendable, Codable {
    /// Who a sealed envelope is for, from whom, and why. Each part is 1–100 printable ASCII characters
    /// without `>` or `:` (the separators of ``purposeString``).
    public struct Label: Hashable, Sendable, CustomStringConvertible {
        public let purpose: String
        public let sender: String
        public let recipient: String

        public init(purpose: String, sender: String, recipient: String) throws(TokenServiceError) {
            for part in [purpose, sender, recipient] {
                let bytes = Array(part.utf8)
                guard (1...100).contains(bytes.count),
                    bytes.allSatisfy({ (0x20...0x7E).contains($0) && $0 != 0x3E && $0 != 0x3A })
                else {
                    throw TokenServiceError(
                        .invalidRequest, "an envelope label part is 1 to 100 printable ASCII characters without > or :")
                }
            }
            self.purpose = purpose
            self.sender = sender
            self.recipient = recipient
        }

        /// The purpose string OrchardCrypto binds into the key derivation and the AAD:
        /// `sender>recipient:purpose`.
        public var purposeString: String { "\(sender)>\(recipient):\(purpose)" }

        public var description: String { purposeString }
    }

    /// `0x01 ‖ ephemeral point (65) ‖ ciphertext ‖ tag (16)`.
    public let serialized: [UInt8]

    /// Encrypts `plaintext` to `recipient` under `label`.
    public static func seal(
        _ plaintext: SecureBytes, to recipient: P256.KeyAgreement.PublicKey, label: Label
    )
        throws(TokenServiceError) -> EncryptedEnvelope
    {
        do {
            let bytes = try plaintext.withUnsafeBytes { (bytes) throws(CryptoError) in
                try SealedEnvelope.seal(bytes, to: recipient, purpose: label.purposeString)
            }
            return EncryptedEnvelope(trusted: bytes)
        } catch {
            throw TokenServiceError(.cryptoFailure, "sealing an envelope failed: \(error.code)")
        }
    }

    /// Decrypts with the recipient's private key. Throws ``TokenServiceError/Code/envelopeRejected`` when
    /// the key or label is not the one the envelope was sealed for, or any byte was altered.
    public func open(
        with privateKey: P256.KeyAgreement.PrivateKey, label: Label
    ) throws(TokenServiceError)
        -> SecureBytes
    {
        do {
            return try SealedEnvelope.open(serialized, with: privateKey, purpose: label.purposeString)
        } catch {
            throw TokenServiceError(
                .envelopeRejected, "the envelope did not open: wrong recipient key, wrong label, or altered bytes")
        }
    }

    /// Parses the wire form: checks the version and the lengths only; ``open(with:label:)`` authenticates.
    public init(serialized: some DataProtocol) throws(TokenServiceError) {
        let bytes = Array(serialized)
        guard bytes.count >= 1 + 65 + 16 else {
            throw TokenServiceError(.envelopeRejected, "an envelope is at least 82 bytes")
        }
        guard bytes[0] == SealedEnvelope.version else {
            throw TokenServiceError(.envelopeRejected, "unknown envelope version \(bytes[0])")
        }
        guard bytes[1] == 0x04 else {
            throw TokenServiceError(.envelopeRejected, "the ephemeral key must be an uncompressed point")
        }
        self.serialized = bytes
    }

    private init(trusted bytes: [UInt8]) { serialized = bytes }

    /// The ephemeral public key, 65 bytes `04 ‖ X ‖ Y`.
    public var ephemeralPublicKey: [UInt8] { Array(serialized[1..<66]) }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let data = Data(base64Encoded: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not base64"))
        }
        do {
            try self.init(serialized: data)
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(Data(serialized).base64EncodedString())
    }
}

/// Overwrites a buffer that held a secret before it is released.
func wipe(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { buffer in
        guard let base = buffer.baseAddress else { return }
        memset(base, 0, buffer.count)
    }
}
