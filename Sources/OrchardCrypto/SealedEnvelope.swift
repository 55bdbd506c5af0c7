internal import COpenSSL
public import Foundation

/// Public-key encryption to a P-256 key, used wherever one party sends another a secret through a relay
/// that must not read it (card data to the token service, personalisation to a Secure Element).
///
/// Format (version 1): `01 ‖ ephemeral public key (X9.63, 65 bytes) ‖ AES-256-GCM ciphertext ‖ tag (16)`.
/// Z = ECDH(ephemeral, recipient); key ‖ IV = HKDF-SHA256(Z, salt = ephemeral ‖ recipient, info =
/// "orchard-envelope-v1|" ‖ purpose, 44 bytes); AAD = the version byte, the ephemeral key and the purpose.
/// The purpose names both parties and the use (e.g. `"token-service>secure-element:personalisation"`), so an
/// envelope made for one use cannot be opened as another.
public enum SealedEnvelope {
    /// The format version, the envelope's first byte; `open` refuses any other.
    public static let version: UInt8 = 1
    static let overhead = 1 + 65 + 16

    /// Encrypts `plaintext` to `recipient` for `purpose`.
    public static func seal(
        _ plaintext: some DataProtocol, to recipient: P256.KeyAgreement.PublicKey, purpose: String,
        random: any RandomSource = SystemRandom()
    ) throws(CryptoError) -> [UInt8] {
        let ephemeral = try freshKey(random)
        let ephemeralPoint = ephemeral.publicKey.x963Representation
        let (key, iv) = try derive(
            z: try ephemeral.sharedSecretFromKeyAgreement(with: recipient), ephemeral: ephemeralPoint,
            recipient: recipient.x963Representation, purpose: purpose)
        let box = try AES.GCM.seal(plaintext, using: key, iv: iv, authenticating: aad(ephemeralPoint, purpose))
        return [version] + ephemeralPoint + box.combined
    }

    /// Decrypts an envelope made for `recipientKey` and `purpose`. Any change to the envelope, another key or
    /// another purpose gives ``CryptoError/Code/authenticationFailure`` (or `invalidKey` for a bad point).
    public static func open(
        _ envelope: some DataProtocol, with recipientKey: P256.KeyAgreement.PrivateKey, purpose: String
    ) throws(CryptoError) -> SecureBytes {
        let bytes = Array(envelope)
        guard bytes.count >= overhead else {
            throw CryptoError(.invalidEncoding, "an envelope is at least \(overhead) bytes")
        }
        guard bytes[0] == version else {
            throw CryptoError(.unsupported, "envelope version \(bytes[0]) is not supported (expected \(version))")
        }
        let ephemeralPoint = Array(bytes[1..<66])
        let ephemeral = try P256.KeyAgreement.PublicKey(x963Representation: ephemeralPoint)
        let (key, iv) = try derive(
            z: try recipientKey.sharedSecretFromKeyAgreement(with: ephemeral), ephemeral: ephemeralPoint,
            recipient: recipientKey.publicKey.x963Representation, purpose: purpose)
        let box = try AES.GCM.SealedBox(combined: bytes[66...])
        var plaintext = try AES.GCM.open(box, using: key, iv: iv, authenticating: aad(ephemeralPoint, purpose))
        // OPENSSL_cleanse, not a loop of zero stores, which the optimizer may drop before the array is freed.
        defer { OPENSSL_cleanse(&plaintext, plaintext.count) }
        return SecureBytes(plaintext)
    }

    private static func aad(_ ephemeral: [UInt8], _ purpose: String) -> [UInt8] {
        [version] + ephemeral + Array(purpose.utf8)
    }

    private static func derive(
        z: SecureBytes, ephemeral: [UInt8], recipient: [UInt8], purpose: String
    )
        throws(CryptoError) -> (SymmetricKey, [UInt8])
    {
        let okm = try HKDF.deriveKey(
            inputKeyMaterial: SymmetricKey(z), salt: ephemeral + recipient,
            info: Array("orchard-envelope-v1|\(purpose)".utf8), outputByteCount: 44)
        return okm.withUnsafeBytes { b in (SymmetricKey(data: b[0..<32]), Array(b[32..<44])) }
    }

    private static func freshKey(_ random: any RandomSource) throws(CryptoError) -> P256.KeyAgreement.PrivateKey {
        var lastError = CryptoError(.internalFailure, "no valid P-256 scalar drawn")
        for _ in 0..<4 {
            var scalar = random.bytes(32)
            defer { OPENSSL_cleanse(&scalar, scalar.count) }
            do { return try P256.KeyAgreement.PrivateKey(rawRepresentation: scalar) } catch { lastError = error }
        }
        throw lastError
    }
}
