public import Foundation
public import OrchardCrypto

/// A ``PaymentCredential`` signed by the Secure Element and sealed to the Pay server's device-to-server key.
///
/// ```
/// signed  = length (2, big-endian) ‖ credential (``PaymentCredential/encoded()``) ‖ DER ECDSA signature
/// signature = ECDSA P-256 / SHA-256 by the Secure Element's key over
///             "orchard-payment-credential-v1" ‖ 00 ‖ credential
/// sealed  = SealedEnvelope(signed, to: the Pay server's pki/pay-credential key,
///           purpose: "secure-element>pay-server:payment-credential")
/// ```
///
/// `SealedEnvelope` is version 1, ephemeral P-256 ECDH, HKDF-SHA256 and AES-256-GCM (see OrchardCrypto). The
/// signing key is the Secure Element's own P-256 key, the key its device certificate certifies; the
/// signature's context string keeps it apart from every other use of that key (see docs/in-app.md).
public enum SealedPaymentCredential {
    /// The ``SealedEnvelope`` purpose.
    public static let purpose = "secure-element>pay-server:payment-credential"
    /// The context the signature covers before the credential bytes.
    public static let signatureContext: [UInt8] = Array("orchard-payment-credential-v1".utf8) + [0]
    /// A sealed credential is never larger than this.
    public static let maximumByteCount = 4096

    /// Signs `credential` with `signingKey` and seals it to `recipient` (the Secure Element's side).
    public static func seal(
        _ credential: PaymentCredential, signingKey: P256.Signing.PrivateKey,
        to recipient: P256.KeyAgreement.PublicKey, random: any RandomSource = SystemRandom()
    ) throws(PaymentCredentialError) -> [UInt8] {
        var plain = credential.encoded().unsafeCopyOfBytes()
        defer { PaymentCredential.wipe(&plain) }
        do {
            let signature = try signingKey.signature(for: signatureContext + plain).derRepresentation
            var signed = [UInt8(plain.count >> 8), UInt8(plain.count & 0xFF)] + plain + signature
            defer { PaymentCredential.wipe(&signed) }
            return try SealedEnvelope.seal(signed, to: recipient, purpose: purpose, random: random)
        } catch {
            throw PaymentCredentialError(.cryptoFailure, "sealing the payment credential failed: \(error.code)")
        }
    }

    /// Opens a sealed credential with the Pay server's key and parses it. The signature is NOT checked here:
    /// check it with ``OpenedPaymentCredential/isSigned(by:)`` against the key of a verified device certificate.
    public static func open(
        _ sealed: some DataProtocol, with key: P256.KeyAgreement.PrivateKey
    ) throws(PaymentCredentialError) -> OpenedPaymentCredential {
        let envelope = Array(sealed)
        guard envelope.count <= maximumByteCount else {
            throw PaymentCredentialError(.malformed, "a sealed credential is at most \(maximumByteCount) bytes")
        }
        let signed: SecureBytes
        do {
            signed = try SealedEnvelope.open(envelope, with: key, purpose: purpose)
        } catch {
            throw PaymentCredentialError(
                .notAddressedToRecipient, "the credential is not sealed to this Pay server key or was altered")
        }
        var bytes = signed.unsafeCopyOfBytes()
        defer { PaymentCredential.wipe(&bytes) }
        guard bytes.count >= 2 else { throw PaymentCredentialError(.malformed, "the signed credential is empty") }
        let length = Int(bytes[0]) << 8 | Int(bytes[1])
        guard bytes.count > 2 + length else {
            throw PaymentCredentialError(.malformed, "the signed credential has no signature")
        }
        let plain = SecureBytes(bytes[2..<(2 + length)])
        let signature: P256.Signing.ECDSASignature
        do {
            signature = try P256.Signing.ECDSASignature(derRepresentation: bytes[(2 + length)...])
        } catch {
            throw PaymentCredentialError(.malformed, "the credential's signature is not a DER ECDSA signature")
        }
        return OpenedPaymentCredential(
            credential: try PaymentCredential(encoded: plain), signedBytes: plain, signature: signature)
    }
}

/// A credential the Pay server opened, with the signature still to check.
public struct OpenedPaymentCredential: Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    public let credential: PaymentCredential
    let signedBytes: SecureBytes
    let signature: P256.Signing.ECDSASignature

    /// Whether the Secure Element key `key` signed this credential.
    public func isSigned(by key: P256.Signing.PublicKey) -> Bool {
        signedBytes.withUnsafeBytes { bytes in
            key.isValidSignature(signature, for: SealedPaymentCredential.signatureContext + Array(bytes))
        }
    }

    public var description: String { "Opened\(credential.description)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
