import Foundation
import OrchardCrypto

/// The one envelope format for data encrypted to a single recipient's P-256 key: SE personalisation
/// (token service → a device's Secure Element) and provisioning card data (wallet → token service).
///
/// Construction (ECIES-style, one-shot):
/// 1. a fresh ephemeral P-256 key pair; `Z` = ECDH(ephemeral private, recipient public);
/// 2. HKDF-SHA256 with IKM `Z`, salt `ephemeral point ‖ recipient point` (both 65-byte X9.63), and info
///    `"orchard-envelope/v1" 0x00 purpose 0x00 sender 0x00 recipient` → 44 bytes: AES-256 key ‖ 12-byte IV;
/// 3. AES-256-GCM over the plaintext, authenticating `version ‖ ephemeral point ‖ info`.
///
/// The label names the purpose and both parties, so an envelope made for one purpose or recipient does
/// not open under another label even with the right key. Wire form: `0x01 ‖ ephemeral point (65) ‖
/// ciphertext ‖ tag (16)`; `Codable` writes it as base64. Self-contained (OrchardCrypto only) so it can
/// move to a shared module when the device side needs it.
public struct SealedEnvelope: Hashable, Sendable, Codable {
    public static let formatVersion: UInt8 = 1
    static let infoPrefix = Array("orchard-envelope/v1".utf8)

    /// Who a sealed envelope is for, from whom, and why. Each part is 1–200 printable ASCII characters.
    public struct Label: Hashable, Sendable, CustomStringConvertible {
        public let purpose: String
        public let sender: String
        public let recipient: String

        public init(purpose: String, sender: String, recipient: String) throws(TokenServiceError) {
            for part in [purpose, sender, recipient] {
                let bytes = Array(part.utf8)
                guard (1...200).contains(bytes.count), bytes.allSatisfy({ (0x20...0x7E).contains($0) }) else {
                    throw TokenServiceError(
                        .invalidRequest, "an envelope label part must be 1 to 200 printable ASCII characters")
                }
            }
            self.purpose = purpose
            self.sender = sender
            self.recipient = recipient
        }

        /// The HKDF info: prefix, purpose, sender and recipient separated by NUL bytes.
        var info: [UInt8] {
            SealedEnvelope.infoPrefix + [0] + Array(purpose.utf8) + [0] + Array(sender.utf8) + [0]
                + Array(recipient.utf8)
        }

        public var description: String { "\(purpose): \(sender) → \(recipient)" }
    }

    /// The ephemeral public key, 65 bytes `04 ‖ X ‖ Y`.
    public let ephemeralPublicKey: [UInt8]
    public let ciphertext: [UInt8]
    public let tag: [UInt8]

    /// Encrypts `plaintext` to `recipient` under `label`.
    public static func seal(
        _ plaintext: SecureBytes, to recipient: P256.KeyAgreement.PublicKey, label: Label
    ) throws(TokenServiceError) -> SealedEnvelope {
        do {
            let ephemeral = try P256.KeyAgreement.PrivateKey()
            let ephemeralPoint = ephemeral.publicKey.x963Representation
            let shared = try ephemeral.sharedSecretFromKeyAgreement(with: recipient)
            let (key, iv) = try keySchedule(
                shared: shared, ephemeralPoint: ephemeralPoint, recipientPoint: recipient.x963Representation,
                label: label)
            let aad = [formatVersion] + ephemeralPoint + label.info
            let box = try plaintext.withUnsafeBytes { (bytes) throws(CryptoError) in
                try AES.GCM.seal(bytes, using: key, iv: iv, authenticating: aad)
            }
            return SealedEnvelope(ephemeralPublicKey: ephemeralPoint, ciphertext: box.ciphertext, tag: box.tag)
        } catch {
            throw TokenServiceError(.cryptoFailure, "sealing an envelope failed: \(error.code)")
        }
    }

    /// Decrypts with the recipient's private key. Throws ``TokenServiceError/Code/envelopeRejected`` when
    /// the key or label is not the one the envelope was sealed for, or any byte was altered.
    public func open(with privateKey: P256.KeyAgreement.PrivateKey, label: Label) throws(TokenServiceError)
        -> SecureBytes
    {
        let ephemeral: P256.KeyAgreement.PublicKey
        do {
            ephemeral = try P256.KeyAgreement.PublicKey(x963Representation: ephemeralPublicKey)
        } catch {
            throw TokenServiceError(.envelopeRejected, "the envelope's ephemeral key is not a valid P-256 point")
        }
        do {
            let shared = try privateKey.sharedSecretFromKeyAgreement(with: ephemeral)
            let (key, iv) = try Self.keySchedule(
                shared: shared, ephemeralPoint: ephemeralPublicKey,
                recipientPoint: privateKey.publicKey.x963Representation, label: label)
            let aad = [Self.formatVersion] + ephemeralPublicKey + label.info
            var plain = try AES.GCM.open(
                AES.GCM.SealedBox(ciphertext: ciphertext, tag: tag), using: key, iv: iv, authenticating: aad)
            defer { wipe(&plain) }
            return SecureBytes(plain)
        } catch {
            throw TokenServiceError(
                .envelopeRejected, "the envelope did not authenticate: wrong recipient key, wrong label, or altered bytes")
        }
    }

    /// `0x01 ‖ ephemeral point ‖ ciphertext ‖ tag`.
    public var serialized: [UInt8] { [Self.formatVersion] + ephemeralPublicKey + ciphertext + tag }

    /// Parses the wire form. Checks the version and the lengths only; ``open(with:label:)`` authenticates.
    public init(serialized: some DataProtocol) throws(TokenServiceError) {
        let bytes = Array(serialized)
        guard bytes.count >= 1 + 65 + AES.GCM.tagByteCount else {
            throw TokenServiceError(.envelopeRejected, "an envelope is at least 82 bytes")
        }
        guard bytes[0] == Self.formatVersion else {
            throw TokenServiceError(.envelopeRejected, "unknown envelope version \(bytes[0])")
        }
        guard bytes[1] == 0x04 else {
            throw TokenServiceError(.envelopeRejected, "the ephemeral key must be an uncompressed point")
        }
        ephemeralPublicKey = Array(bytes[1..<66])
        ciphertext = Array(bytes[66..<(bytes.count - 16)])
        tag = Array(bytes[(bytes.count - 16)...])
    }

    init(ephemeralPublicKey: [UInt8], ciphertext: [UInt8], tag: [UInt8]) {
        self.ephemeralPublicKey = ephemeralPublicKey
        self.ciphertext = ciphertext
        self.tag = tag
    }

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

    private static func keySchedule(
        shared: SecureBytes, ephemeralPoint: [UInt8], recipientPoint: [UInt8], label: Label
    ) throws(CryptoError) -> (SymmetricKey, [UInt8]) {
        let okm = try HKDF.deriveKey(
            inputKeyMaterial: SymmetricKey(shared), salt: ephemeralPoint + recipientPoint, info: label.info,
            outputByteCount: 44)
        return okm.withUnsafeBytes { bytes in
            (SymmetricKey(data: UnsafeRawBufferPointer(rebasing: bytes[0..<32])), Array(bytes[32..<44]))
        }
    }
}

/// Overwrites a buffer that held a secret before it is released.
func wipe(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { buffer in
        guard let base = buffer.baseAddress else { return }
        memset(base, 0, buffer.count)
    }
}
