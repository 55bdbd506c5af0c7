import Foundation
public import OrchardCrypto

/// Makes the detached CMS signature over a token's signed bytes. The Pay server's signing key may live
/// behind an HSM, so signing is a protocol; OrchardX509's CMS signer is the usual implementation.
public protocol TokenSigner: Sendable {
    /// A detached CMS SignedData (DER) over `signedBytes`, with contentType, signingTime and messageDigest.
    func detachedSignature(over signedBytes: [UInt8]) throws -> [UInt8]
}

/// The merchant's payment processing public key a token is encrypted to.
public enum MerchantProcessingPublicKey: Sendable {
    /// EC_v1.
    case ec(P256.KeyAgreement.PublicKey, merchantIdentifierHash: [UInt8])
    /// RSA_v1.
    case rsa(RSA.PublicKey)

    /// SHA-256 of the SubjectPublicKeyInfo: the token's `publicKeyHash`.
    public var publicKeyHash: [UInt8] {
        switch self {
        case .ec(let key, _): SHA256.hash(key.derRepresentation)
        case .rsa(let key): SHA256.hash(key.derRepresentation)
        }
    }
}

/// Builds Apple-format payment tokens: the bytes any Apple-format verifier accepts.
public struct PaymentTokenEncoder: Sendable {
    /// Signs each token's signed bytes (a detached CMS signature).
    public let signer: any TokenSigner
    /// Draws ephemeral keys, AES keys and transaction ids.
    public let random: any RandomSource

    /// An encoder signing with `signer`; `random` is the system CSPRNG unless a test fixes it.
    public init(signer: any TokenSigner, random: any RandomSource = SystemRandom()) {
        self.signer = signer
        self.random = random
    }

    /// Encrypts `payment` (the plaintext object, encrypted exactly as given) to `recipient` and signs the result.
    ///
    /// - Parameters:
    ///   - payment: the decrypted payment data object the merchant will read (``DecryptedPaymentData``'s form).
    ///   - recipient: the merchant's processing public key: P-256 gives EC_v1, RSA gives RSA_v1.
    ///   - transactionId: 32 bytes identifying the transaction (random when nil).
    ///   - applicationData: the merchant's raw applicationData; the header then carries its SHA-256 in hex.
    ///   - applicationDataHash: the SHA-256 of applicationData, for a caller that has only the hash (the Pay
    ///     server); takes precedence over `applicationData`.
    public func makePaymentData(
        payment: JSONValue, recipient: MerchantProcessingPublicKey, transactionId: [UInt8]? = nil,
        applicationData: [UInt8]? = nil, applicationDataHash: [UInt8]? = nil
    ) throws(PaymentTokenError) -> PaymentData {
        guard applicationDataHash == nil || applicationDataHash?.count == 32 else {
            throw PaymentTokenError(.encodingFailed, "an applicationData hash is 32 bytes (SHA-256)")
        }
        let plaintext = payment.serializedBytes
        let keyMaterial: Header.KeyMaterial
        let data: [UInt8]
        do {
            switch recipient {
            case .ec(let merchantKey, let merchantIdentifierHash):
                let ephemeral = try ephemeralKey()
                let z = try ephemeral.sharedSecretFromKeyAgreement(with: merchantKey)
                let key = try TokenCrypto.ecV1Key(sharedSecret: z, merchantIdentifierHash: merchantIdentifierHash)
                data = try TokenCrypto.seal(plaintext, key: key)
                keyMaterial = .ephemeralPublicKey(ephemeral.publicKey.derRepresentation)
            case .rsa(let merchantKey):
                let key = SymmetricKey(bitCount: 128, using: random)
                let wrapped = try key.withUnsafeBytes { (k) throws(CryptoError) in
                    try merchantKey.encrypt(Array(k), oaepDigest: .sha256, mgf1Digest: .sha256)
                }
                data = try TokenCrypto.seal(plaintext, key: key)
                keyMaterial = .wrappedKey(wrapped)
            }
        } catch {
            throw PaymentTokenError(.encodingFailed, "encrypting the payment data failed: \(error)")
        }
        let header = Header(
            keyMaterial: keyMaterial, publicKeyHash: recipient.publicKeyHash,
            transactionId: transactionId ?? random.bytes(32),
            applicationData: applicationDataHash ?? applicationData.map { SHA256.hash($0) })
        var paymentData = PaymentData(
            version: header.version, data: data, signature: [], header: header)
        do {
            paymentData.signature = try signer.detachedSignature(over: paymentData.signedBytes)
        } catch {
            throw PaymentTokenError(.encodingFailed, "signing the token failed: \(error)")
        }
        return paymentData
    }

    /// A fresh ephemeral key drawn from the injected randomness (so tests can fix it).
    private func ephemeralKey() throws(CryptoError) -> P256.KeyAgreement.PrivateKey {
        // A 32-byte draw is outside [1, n-1] with probability about 2^-32; draw again then.
        var lastError: CryptoError?
        for _ in 0..<4 {
            var scalar = random.bytes(32)
            defer { for i in scalar.indices { scalar[i] = 0 } }
            do { return try P256.KeyAgreement.PrivateKey(rawRepresentation: scalar) } catch { lastError = error }
        }
        throw lastError!
    }
}
