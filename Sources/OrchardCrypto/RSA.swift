internal import COpenSSL
internal import CShims
public import Foundation

/// RSA with keys of 2048 bits or more: OAEP encryption and PKCS#1 v1.5 signatures with SHA-256.
public enum RSA {
    /// The digest used by OAEP or by MGF1. Apple's RSA_v1 uses SHA-256 for both; Java's default for
    /// "OAEPWithSHA256AndMGF1Padding" is MGF1 with SHA-1, hence the explicit choice.
    public enum Digest: Sendable {
        /// SHA-1 (only for interoperating with OAEP peers that use it) or SHA-256.
        case sha1, sha256
        var md: OpaquePointer { self == .sha1 ? Fetched.sha1 : Fetched.sha256 }
    }

    /// The smallest modulus accepted, in bits: smaller keys are refused when parsed or generated.
    public static let minimumKeySize = 2048

    /// An RSA public key.
    public struct PublicKey: Sendable {
        package let key: EVPKey

        package init(key: EVPKey) throws(CryptoError) {
            guard key.isA("RSA") else { throw CryptoError(.invalidKey, "the key is not an RSA key") }
            guard key.bits >= RSA.minimumKeySize else {
                throw CryptoError(.invalidKey, "RSA keys must be at least 2048 bits, this one has \(key.bits)")
            }
            self.key = key
        }

        /// A DER SubjectPublicKeyInfo.
        public init(derRepresentation: some DataProtocol) throws(CryptoError) {
            let der = Array(derRepresentation)
            let pkey = der.withUnsafeBufferPointer { b -> OpaquePointer? in
                var p: UnsafePointer<UInt8>? = b.baseAddress
                return d2i_PUBKEY(nil, &p, b.count)
            }
            guard let pkey else { throw CryptoError(.invalidKey, "not a DER SubjectPublicKeyInfo") }
            try self.init(key: EVPKey(owning: pkey))
        }

        /// A PEM `PUBLIC KEY` block.
        public init(pemRepresentation: String) throws(CryptoError) {
            try self.init(derRepresentation: pemDecode(pemRepresentation, label: "PUBLIC KEY"))
        }

        /// A key from the contents of its modulus and public exponent INTEGERs (big-endian), imported without
        /// OpenSSL 3.0's decoder framework (`d2i_PUBKEY` costs about 250 µs; this, a few µs).
        package init(modulus: some Collection<UInt8>, exponent: some Collection<UInt8>) throws(CryptoError) {
            try self.init(key: SignatureVerificationKey(rsaModulus: modulus, exponent: exponent).key)
        }

        /// The modulus length in bits (2048 or more).
        public var keySizeInBits: Int { key.bits }

        /// The DER SubjectPublicKeyInfo.
        public var derRepresentation: [UInt8] {
            var out: UnsafeMutablePointer<UInt8>?
            let n = i2d_PUBKEY(key.pointer, &out)
            defer { orchard_OPENSSL_free(out) }
            guard n > 0, let out else { return [] }
            return Array(UnsafeBufferPointer(start: out, count: Int(n)))
        }

        /// The SubjectPublicKeyInfo as a PEM `PUBLIC KEY` block.
        public var pemRepresentation: String { pemEncode(derRepresentation, label: "PUBLIC KEY") }

        /// RSAES-OAEP encryption. `label` is OAEP's optional label (empty in Apple's RSA_v1); decryption
        /// must use the same one.
        public func encrypt(
            _ plaintext: some DataProtocol, oaepDigest: Digest = .sha256, mgf1Digest: Digest = .sha256,
            label: some DataProtocol = [UInt8]()
        ) throws(CryptoError) -> [UInt8] {
            let ctx = try RSA.context(key, oaepDigest: oaepDigest, mgf1Digest: mgf1Digest, label: label, encrypt: true)
            defer { EVP_PKEY_CTX_free(ctx) }
            return try withContiguousBytes(plaintext) { (p) throws(CryptoError) -> [UInt8] in
                var length = 0
                try check(
                    EVP_PKEY_encrypt(ctx, nil, &length, p.bytePointer, p.count), .internalFailure, "RSA-OAEP failed")
                var out = [UInt8](repeating: 0, count: length)
                try check(
                    EVP_PKEY_encrypt(ctx, &out, &length, p.bytePointer, p.count), .invalidParameter,
                    "RSA-OAEP encryption failed: the message is too long for this key")
                return Array(out[..<length])
            }
        }

        /// Whether `signature` is a valid RSASSA-PKCS1-v1_5 SHA-256 signature of `data`.
        public func isValidPKCS1v15Signature(_ signature: some DataProtocol, for data: some DataProtocol) -> Bool {
            guard let ctx = EVP_MD_CTX_new() else { return false }
            defer { EVP_MD_CTX_free(ctx) }
            guard EVP_DigestVerifyInit(ctx, nil, Fetched.sha256, nil, key.pointer) == 1 else {
                _ = drainOpenSSLErrors()
                return false
            }
            let rc = withContiguousBytes(signature) { s in
                withContiguousBytes(data) { d in EVP_DigestVerify(ctx, s.bytePointer, s.count, d.bytePointer, d.count) }
            }
            _ = drainOpenSSLErrors()
            return rc == 1
        }
    }

    /// An RSA private key. Its descriptions never show the key.
    public struct PrivateKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
        package let key: EVPKey

        /// A fresh key of `keySize` bits (at least 2048; generation takes a fraction of a second).
        public init(keySize: Int = 2048) throws(CryptoError) {
            guard keySize >= RSA.minimumKeySize else {
                throw CryptoError(.invalidParameter, "RSA keys must be at least 2048 bits")
            }
            let pkey = try nonNull(orchard_keygen_rsa(keySize), .internalFailure, "RSA key generation failed")
            key = EVPKey(owning: pkey)
        }

        /// PKCS#1 `RSAPrivateKey` or PKCS#8 DER.
        public init(derRepresentation: some DataProtocol) throws(CryptoError) {
            let der = Array(derRepresentation)
            let pkey = der.withUnsafeBufferPointer { b -> OpaquePointer? in
                var p: UnsafePointer<UInt8>? = b.baseAddress
                return d2i_AutoPrivateKey(nil, &p, b.count)
            }
            guard let pkey else { throw CryptoError(.invalidKey, "not a PKCS#1 or PKCS#8 private key in DER") }
            try self.init(key: EVPKey(owning: pkey))
        }

        /// PEM (`RSA PRIVATE KEY` or `PRIVATE KEY`). Encrypted keys are refused (nothing ever prompts).
        public init(pemRepresentation: String) throws(CryptoError) {
            guard let key = try readPrivateKeyPEM(pemRepresentation) else {
                throw CryptoError(.invalidKey, "no unencrypted RSA PRIVATE KEY or PRIVATE KEY block in the PEM")
            }
            try self.init(key: key)
        }

        package init(key: EVPKey) throws(CryptoError) {
            _ = try PublicKey(key: key)
            self.key = key
        }

        /// The public key of this private key.
        public var publicKey: PublicKey { try! PublicKey(key: key) }  // checked at init
        /// The modulus length in bits (2048 or more).
        public var keySizeInBits: Int { key.bits }

        /// PKCS#8 DER.
        public var derRepresentation: SecureBytes {
            get throws(CryptoError) {
                let bio = try MemoryBIO()
                try check(
                    i2d_PKCS8PrivateKey_bio(bio.pointer, key.pointer, nil, nil, 0, nil, nil), .internalFailure,
                    "PKCS#8 encoding failed")
                var bytes = bio.contents()
                defer { OPENSSL_cleanse(&bytes, bytes.count) }
                return SecureBytes(bytes)
            }
        }

        /// PKCS#8 PEM (`PRIVATE KEY`).
        public var pemRepresentation: String {
            get throws(CryptoError) {
                try derRepresentation.withUnsafeBytes { pemEncode(Array($0), label: "PRIVATE KEY") }
            }
        }

        /// RSAES-OAEP decryption. Any failure (wrong key, altered ciphertext, wrong digests or label) gives the
        /// same ``CryptoError/Code/decryptionFailure`` so callers cannot become a padding oracle.
        public func decrypt(
            _ ciphertext: some DataProtocol, oaepDigest: Digest = .sha256, mgf1Digest: Digest = .sha256,
            label: some DataProtocol = [UInt8]()
        ) throws(CryptoError) -> SecureBytes {
            let ctx = try RSA.context(key, oaepDigest: oaepDigest, mgf1Digest: mgf1Digest, label: label, encrypt: false)
            defer { EVP_PKEY_CTX_free(ctx) }
            return try withContiguousBytes(ciphertext) { (c) throws(CryptoError) -> SecureBytes in
                // The plaintext is shorter than the modulus; OpenSSL writes it straight into secure storage.
                let capacity = Int(EVP_PKEY_get_size(key.pointer))
                var length = capacity
                let plaintext = try SecureBytes(count: capacity) { (buffer) throws(CryptoError) in
                    let out = buffer.bindMemory(to: UInt8.self).baseAddress
                    guard EVP_PKEY_decrypt(ctx, out, &length, c.bytePointer, c.count) == 1 else {
                        _ = drainOpenSSLErrors()
                        throw CryptoError(
                            .decryptionFailure,
                            "RSA-OAEP decryption failed: wrong key, altered data, or wrong digests or label")
                    }
                }
                return plaintext.withUnsafeBytes { SecureBytes($0[..<length]) }
            }
        }

        /// An RSASSA-PKCS1-v1_5 signature with SHA-256.
        public func pkcs1v15Signature(for data: some DataProtocol) throws(CryptoError) -> [UInt8] {
            guard let ctx = EVP_MD_CTX_new() else { throw CryptoError(.internalFailure, "EVP_MD_CTX_new failed") }
            defer { EVP_MD_CTX_free(ctx) }
            try check(
                EVP_DigestSignInit(ctx, nil, Fetched.sha256, nil, key.pointer), .internalFailure, "RSA sign init failed"
            )
            return try withContiguousBytes(data) { (d) throws(CryptoError) -> [UInt8] in
                var length = 0
                try check(
                    EVP_DigestSign(ctx, nil, &length, d.bytePointer, d.count), .internalFailure, "RSA signing failed")
                var out = [UInt8](repeating: 0, count: length)
                try check(
                    EVP_DigestSign(ctx, &out, &length, d.bytePointer, d.count), .internalFailure, "RSA signing failed")
                return Array(out[..<length])
            }
        }

        public var description: String { "RSA.PrivateKey(<\(keySizeInBits) bits, redacted>)" }
        public var debugDescription: String { description }
        public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
    }

    private static func context(
        _ key: EVPKey, oaepDigest: Digest, mgf1Digest: Digest, label: some DataProtocol, encrypt: Bool
    ) throws(CryptoError) -> OpaquePointer {
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, key.pointer, nil) else {
            throw CryptoError(.internalFailure, "EVP_PKEY_CTX_new_from_pkey failed")
        }
        do {
            // Each call is checked on its own: they return 1 on success and 0, -1 or -2 on failure.
            try check(
                encrypt ? EVP_PKEY_encrypt_init(ctx) : EVP_PKEY_decrypt_init(ctx), .internalFailure, "RSA init failed")
            try check(
                EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_OAEP_PADDING), .internalFailure, "RSA-OAEP setup failed")
            try check(
                EVP_PKEY_CTX_set_rsa_oaep_md(ctx, oaepDigest.md), .internalFailure, "RSA-OAEP digest setup failed")
            try check(EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, mgf1Digest.md), .internalFailure, "RSA-OAEP MGF1 setup failed")
            if !label.isEmpty {
                // As a parameter, which OpenSSL copies (EVP_PKEY_CTX_set0_rsa_oaep_label would take ownership
                // of an OPENSSL_malloc'ed buffer).
                let rc = withContiguousBytes(label) { l in
                    var params = [
                        OSSL_PARAM_construct_octet_string(
                            ParamName.oaepLabel, UnsafeMutableRawPointer(mutating: l.bytePointer), l.count),
                        OSSL_PARAM_construct_end(),
                    ]
                    return EVP_PKEY_CTX_set_params(ctx, &params)
                }
                try check(rc, .internalFailure, "RSA-OAEP label setup failed")
            }
        } catch {
            EVP_PKEY_CTX_free(ctx)
            throw error
        }
        return ctx
    }
}
