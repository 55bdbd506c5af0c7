import Foundation
public import OrchardCrypto

/// A merchant's payment processing identity: the private key Apple encrypts to, the hash Apple puts in
/// `publicKeyHash`, and the merchant identifier hash that enters the EC_v1 key derivation.
public struct MerchantIdentity: Sendable {
    /// The processing private key: P-256 for EC_v1, RSA-2048 or larger for RSA_v1.
    public enum ProcessingKey: Sendable {
        /// A P-256 key: the merchant decrypts EC_v1 tokens.
        case ec(P256.KeyAgreement.PrivateKey)
        /// An RSA key: the merchant decrypts RSA_v1 tokens.
        case rsa(RSA.PrivateKey)
    }

    /// The processing private key tokens are encrypted to; never printed.
    public let key: ProcessingKey
    /// SHA-256 of the processing certificate's SubjectPublicKeyInfo (DER).
    public let publicKeyHash: [UInt8]
    /// SHA-256 of the merchant identifier (the value of extension 1.2.840.113635.100.6.32, hex-decoded).
    public let merchantIdentifierHash: [UInt8]

    /// An identity from its parts. `publicKeyHash` is computed from the key's SubjectPublicKeyInfo, which is
    /// byte-identical to the certificate's for named-curve P-256 and for RSA keys.
    public init(key: ProcessingKey, merchantIdentifierHash: [UInt8]) throws(MerchantKitError) {
        guard merchantIdentifierHash.count == 32 else {
            throw MerchantKitError(.invalidConfiguration, "the merchant identifier hash must be 32 bytes (SHA-256)")
        }
        self.key = key
        self.merchantIdentifierHash = merchantIdentifierHash
        switch key {
        case .ec(let k): publicKeyHash = SHA256.hash(k.publicKey.derRepresentation)
        case .rsa(let k): publicKeyHash = SHA256.hash(k.publicKey.derRepresentation)
        }
    }

    /// An identity for `merchantIdentifier` (e.g. `merchant.com.example`), hashing it as Apple does.
    public init(key: ProcessingKey, merchantIdentifier: String) throws(MerchantKitError) {
        try self.init(key: key, merchantIdentifierHash: SHA256.hash(Array(merchantIdentifier.utf8)))
    }
}

extension MerchantIdentity {
    /// For tests that force a wrong-key decryption: no consistency check between key and hash.
    init(unchecked key: ProcessingKey, publicKeyHash: [UInt8], merchantIdentifierHash: [UInt8]) {
        self.key = key
        self.publicKeyHash = publicKeyHash
        self.merchantIdentifierHash = merchantIdentifierHash
    }
}
