import Foundation
import OrchardCrypto
import PaymentToken

/// Steps 2–4 of Apple's reference (pick the key by publicKeyHash, restore the symmetric key, decrypt),
/// with every intermediate value available for tests and tracing.
struct PayloadDecryption: Sendable {
    /// What decryption produced; `sharedSecret` is nil for RSA_v1.
    struct Output {
        let identity: MerchantIdentity
        let sharedSecret: SecureBytes?
        let symmetricKey: SymmetricKey
        let plaintext: [UInt8]
    }

    let identities: [MerchantIdentity]

    func identity(for header: Header) throws(MerchantKitError) -> MerchantIdentity {
        // publicKeyHash is public, so a plain comparison leaks nothing.
        guard let identity = identities.first(where: { $0.publicKeyHash == header.publicKeyHash }) else {
            throw MerchantKitError(
                .unknownPublicKeyHash,
                "no processing key for this publicKeyHash: the token was encrypted for another merchant or certificate")
        }
        return identity
    }

    func decrypt(_ paymentData: PaymentData) throws(MerchantKitError) -> Output {
        let identity = try identity(for: paymentData.header)
        let sharedSecret: SecureBytes?
        let key: SymmetricKey
        switch (paymentData.header.keyMaterial, identity.key) {
        case (.ephemeralPublicKey(let spki), .ec(let privateKey)):
            let ephemeral: P256.KeyAgreement.PublicKey
            do {
                // On the merchant key's own group, which the ECDH that follows reads anyway.
                ephemeral = P256.KeyAgreement.PublicKey(
                    impl: try P256PublicKeyImpl(spki: spki, groupOf: privateKey.impl.key))
            } catch {
                throw MerchantKitError(
                    .invalidEphemeralKey, "the ephemeral public key is not a valid P-256 point", underlying: error)
            }
            do {
                let z = try privateKey.sharedSecretFromKeyAgreement(with: ephemeral)
                sharedSecret = z
                key = try TokenCrypto.ecV1Key(sharedSecret: z, merchantIdentifierHash: identity.merchantIdentifierHash)
            } catch {
                throw MerchantKitError(.decryptionFailed, "ECDH with the ephemeral key failed", underlying: error)
            }
        case (.wrappedKey(let wrapped), .rsa(let privateKey)):
            sharedSecret = nil
            do {
                let unwrapped = try privateKey.decrypt(wrapped, oaepDigest: .sha256, mgf1Digest: .sha256)
                guard unwrapped.count == 16 else {
                    throw MerchantKitError(.decryptionFailed, "the unwrapped RSA_v1 key is not 16 bytes")
                }
                key = SymmetricKey(unwrapped)
            } catch let error as MerchantKitError {
                throw error
            } catch {
                throw MerchantKitError(.decryptionFailed, "RSA-OAEP unwrapping of wrappedKey failed", underlying: error)
            }
        default:
            throw MerchantKitError(
                .decryptionFailed,
                "the token is \(paymentData.version.rawValue) but the processing key for its publicKeyHash is not")
        }
        do {
            let plaintext = try TokenCrypto.open(paymentData.data, key: key)
            return Output(identity: identity, sharedSecret: sharedSecret, symmetricKey: key, plaintext: plaintext)
        } catch {
            throw MerchantKitError(
                .decryptionFailed,
                "AES-GCM authentication failed: the data was altered or the processing key does not match",
                underlying: error)
        }
    }
}
