internal import COpenSSL
internal import CShims
public import Foundation

/// NIST P-256 (secp256r1): key agreement and ECDSA with SHA-256, CryptoKit style.
public enum P256 {
    /// ECDH key agreement keys.
    public enum KeyAgreement {}
    /// ECDSA-SHA256 signing keys.
    public enum Signing {}
}

// MARK: - Shared implementation

/// The DER prefix of every P-256 SubjectPublicKeyInfo with an uncompressed point:
/// SEQUENCE { SEQUENCE { id-ecPublicKey, prime256v1 }, BIT STRING (0 unused bits) 04 ‖ X ‖ Y }.
private let spkiPrefix: [UInt8] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x08, 0x2A, 0x86, 0x48,
    0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
]

/// The order n of the P-256 group, big-endian.
private let groupOrder: [UInt8] = [
    0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xBC, 0xE6,
    0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
]

nonisolated(unsafe) private let paramGroup = CString.make("group")
nonisolated(unsafe) private let paramPub = CString.make("pub")
nonisolated(unsafe) private let paramEncodedPub = CString.make("encoded-pub-key")
nonisolated(unsafe) private let paramPriv = CString.make("priv")
nonisolated(unsafe) private let prime256v1 = CString.make("prime256v1")

/// The P-256 group as a parameters-only key, made once: the template every imported public key copies.
private let p256Parameters: EVPKeyTemplate = {
    guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { return EVPKeyTemplate(nil) }
    defer { EVP_PKEY_CTX_free(ctx) }
    guard EVP_PKEY_fromdata_init(ctx) == 1 else { return EVPKeyTemplate(nil) }
    var pkey: OpaquePointer?
    var params = [OSSL_PARAM_construct_utf8_string(paramGroup, prime256v1, 0), OSSL_PARAM_construct_end()]
    // EVP_PKEY_KEY_PARAMETERS is a composite macro Swift cannot import: OSSL_KEYMGMT_SELECT_ALL_PARAMETERS.
    guard EVP_PKEY_fromdata(ctx, &pkey, 0x84, &params) == 1 else { return EVPKeyTemplate(nil) }
    return EVPKeyTemplate(pkey)
}()

/// The P-256 group, made once (building it costs about 24 µs: the Montgomery setup), for the d·G of a key made
/// from a scalar. Only ever read: `EC_POINT_mul` does not modify its group.
private let p256Group = ECGroupTemplate(EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1))

private struct ECGroupTemplate: @unchecked Sendable {
    let pointer: OpaquePointer?
    init(_ pointer: OpaquePointer?) { self.pointer = pointer }
}

/// A process-lifetime EVP_PKEY that is only ever read (OpenSSL 3 keys are safe to share read-only).
private struct EVPKeyTemplate: @unchecked Sendable {
    let pointer: OpaquePointer?
    init(_ pointer: OpaquePointer?) { self.pointer = pointer }
}

/// A validated P-256 public key: the point is on the curve and not the point at infinity.
package struct P256PublicKeyImpl: @unchecked Sendable {
    package let key: EVPKey
    /// 04 ‖ X ‖ Y.
    package let x963: [UInt8]

    package init(x963 bytes: [UInt8]) throws(CryptoError) {
        guard let template = p256Parameters.pointer else {
            throw CryptoError(.internalFailure, "the P-256 group could not be set up")
        }
        try self.init(x963: bytes, template: template)
    }

    /// A point on the group of `key`, a P-256 key: for a peer key used with `key` right away (ECDH), whose
    /// group is then already in the caches.
    package init(x963 bytes: [UInt8], groupOf key: EVPKey) throws(CryptoError) {
        try self.init(x963: bytes, template: key.pointer)
    }

    private init(x963 bytes: [UInt8], template: OpaquePointer) throws(CryptoError) {
        guard bytes.count == 65, bytes[0] == 0x04 else {
            throw CryptoError(.invalidKey, "a P-256 public key is a 65-byte uncompressed point (04 ‖ X ‖ Y)")
        }
        key = try ecPublicKey(point: bytes, groupOf: template, curve: "P-256")
        x963 = bytes
    }

    package init(spki der: [UInt8]) throws(CryptoError) {
        try self.init(x963: Self.point(spki: der))
    }

    /// ``init(spki:)`` on the group of `key` (see ``init(x963:groupOf:)``).
    package init(spki der: [UInt8], groupOf key: EVPKey) throws(CryptoError) {
        try self.init(x963: Self.point(spki: der), groupOf: key)
    }

    private static func point(spki der: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard der.count == 91, der.starts(with: spkiPrefix) else {
            throw CryptoError(
                .invalidKey,
                "not a P-256 SubjectPublicKeyInfo with an uncompressed point (named curve prime256v1 required)")
        }
        return Array(der[26...])
    }

    /// Takes the key of a parsed certificate or PEM, checking that it is P-256.
    package init(evpKey: EVPKey) throws(CryptoError) {
        guard evpKey.isA("EC") else { throw CryptoError(.invalidKey, "the key is not an EC key") }
        try Self.checkGroup(evpKey.pointer)
        var length = 0
        guard EVP_PKEY_get_octet_string_param(evpKey.pointer, paramEncodedPub, nil, 0, &length) == 1, length == 65
        else {
            throw CryptoError(.invalidKey, "cannot read the public point (compressed points are not accepted)")
        }
        var out = [UInt8](repeating: 0, count: 65)
        try check(
            EVP_PKEY_get_octet_string_param(evpKey.pointer, paramEncodedPub, &out, 65, &length), .invalidKey,
            "cannot read the public point")
        key = evpKey
        x963 = out
    }

    package static func checkGroup(_ pkey: OpaquePointer) throws(CryptoError) {
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_utf8_string_param(pkey, paramGroup, &name, name.count, &length) == 1,
            String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self) == "prime256v1"
        else { throw CryptoError(.invalidKey, "the key is not on the P-256 curve") }
    }

    package var spki: [UInt8] { spkiPrefix + x963 }

    package var pem: String { pemEncode(spki, label: "PUBLIC KEY") }

    package func isValidSignature(derSignature: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer) -> Bool {
        guard let ctx = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestVerifyInit(ctx, nil, Fetched.sha256, nil, key.pointer) == 1 else {
            _ = drainOpenSSLErrors()
            return false
        }
        let rc = EVP_DigestVerify(ctx, derSignature.bytePointer, derSignature.count, message.bytePointer, message.count)
        if rc != 1 { _ = drainOpenSSLErrors() }
        return rc == 1
    }
}

/// A P-256 private key.
package struct P256PrivateKeyImpl: @unchecked Sendable {
    package let key: EVPKey
    package let publicKey: P256PublicKeyImpl

    package init() throws(CryptoError) {
        let pkey = try nonNull(orchard_keygen_ec("P-256"), .internalFailure, "P-256 key generation failed")
        try self.init(evpKey: EVPKey(owning: pkey), checkPair: false)
    }

    /// Takes a parsed key. `checkPair` recomputes the public point from the scalar and compares: a SEC1 or
    /// PKCS#8 encoding carries both, and nothing else notices when a damaged file makes them disagree
    /// (every signature would then fail to verify, far from the cause).
    package init(evpKey: EVPKey, checkPair: Bool = true) throws(CryptoError) {
        guard evpKey.isA("EC") else { throw CryptoError(.invalidKey, "the key is not an EC key") }
        try P256PublicKeyImpl.checkGroup(evpKey.pointer)
        if checkPair {
            guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, evpKey.pointer, nil) else {
                throw CryptoError(.internalFailure, "EVP_PKEY_CTX_new_from_pkey failed")
            }
            defer { EVP_PKEY_CTX_free(ctx) }
            try check(
                EVP_PKEY_pairwise_check(ctx), .invalidKey,
                "the P-256 private key does not match the public key stored with it")
        }
        key = evpKey
        publicKey = try P256PublicKeyImpl(evpKey: evpKey)
    }

    /// From SEC1 `ECPrivateKey` or PKCS#8 DER.
    package init(der: [UInt8], checkPair: Bool = true) throws(CryptoError) {
        let pkey = der.withUnsafeBufferPointer { b -> OpaquePointer? in
            var p: UnsafePointer<UInt8>? = b.baseAddress
            return d2i_AutoPrivateKey(nil, &p, b.count)
        }
        guard let pkey else { throw CryptoError(.invalidKey, "not a SEC1 or PKCS#8 private key in DER") }
        try self.init(evpKey: EVPKey(owning: pkey), checkPair: checkPair)
    }

    /// From a PEM that may hold several blocks (e.g. `EC PARAMETERS` before `EC PRIVATE KEY`).
    package init(pem: String) throws(CryptoError) {
        guard let key = try readPrivateKeyPEM(pem) else {
            throw CryptoError(.invalidKey, "no unencrypted EC PRIVATE KEY or PRIVATE KEY block in the PEM")
        }
        try self.init(evpKey: key)
    }

    /// From the 32-byte big-endian scalar, which must be in [1, n-1].
    package init(raw: [UInt8]) throws(CryptoError) {
        guard raw.count == 32, raw.contains(where: { $0 != 0 }), raw.lexicographicallyPrecedes(groupOrder) else {
            throw CryptoError(.invalidKey, "a P-256 private key is a 32-byte scalar in [1, n-1]")
        }
        // Not through the DER decoder (d2i costs about 0.8 ms in OpenSSL 3.0): the public point is computed as
        // scalar · G, and both go to EVP_PKEY_fromdata.
        try self.init(evpKey: try Self.keyPair(fromScalar: raw), checkPair: false)
    }

    /// An EC key pair from a validated scalar: Q = d·G with EC_POINT_mul, then EVP_PKEY_fromdata.
    private static func keyPair(fromScalar raw: [UInt8]) throws(CryptoError) -> EVPKey {
        guard let group = p256Group.pointer else {
            throw CryptoError(.internalFailure, "EC_GROUP_new_by_curve_name failed")
        }
        guard let scalar = BN_secure_new() else { throw CryptoError(.internalFailure, "BN_secure_new failed") }
        defer { BN_clear_free(scalar) }
        guard BN_bin2bn(raw, 32, scalar) != nil, let point = EC_POINT_new(group) else {
            throw CryptoError(.internalFailure, "cannot load the scalar")
        }
        defer { EC_POINT_free(point) }
        try check(EC_POINT_mul(group, point, scalar, nil, nil, nil), .internalFailure, "d·G failed")
        var x963 = [UInt8](repeating: 0, count: 65)
        guard EC_POINT_point2oct(group, point, POINT_CONVERSION_UNCOMPRESSED, &x963, 65, nil) == 65 else {
            throw CryptoError(.internalFailure, "cannot encode the public point")
        }
        guard let builder = OSSL_PARAM_BLD_new() else {
            throw CryptoError(.internalFailure, "OSSL_PARAM_BLD_new failed")
        }
        defer { OSSL_PARAM_BLD_free(builder) }
        try check(
            OSSL_PARAM_BLD_push_utf8_string(builder, paramGroup, prime256v1, 0), .internalFailure, "group parameter")
        try check(OSSL_PARAM_BLD_push_BN(builder, paramPriv, scalar), .internalFailure, "private parameter")
        try check(
            OSSL_PARAM_BLD_push_octet_string(builder, paramPub, &x963, 65), .internalFailure, "public parameter")
        guard let params = OSSL_PARAM_BLD_to_param(builder) else {
            throw CryptoError(.internalFailure, "OSSL_PARAM_BLD_to_param failed")
        }
        defer { OSSL_PARAM_free(params) }  // the secure BN made it allocate the block in secure memory
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
            throw CryptoError(.internalFailure, "EVP_PKEY_CTX_new_from_name failed")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        try check(EVP_PKEY_fromdata_init(ctx), .internalFailure, "EVP_PKEY_fromdata_init failed")
        var pkey: OpaquePointer?
        // OSSL_KEYMGMT_SELECT_ALL_PARAMETERS (0x84) | OSSL_KEYMGMT_SELECT_KEYPAIR (0x03).
        guard EVP_PKEY_fromdata(ctx, &pkey, 0x87, params) == 1, let pkey else {
            throw CryptoError(.invalidKey, "the scalar does not make a P-256 key")
        }
        return EVPKey(owning: pkey)
    }

    package var raw: SecureBytes {
        get throws(CryptoError) {
            var bn: OpaquePointer?
            guard EVP_PKEY_get_bn_param(key.pointer, paramPriv, &bn) == 1, let bn else {
                throw CryptoError(.internalFailure, "cannot read the private scalar")
            }
            defer { BN_clear_free(bn) }
            return try SecureBytes(count: 32) { (buffer) throws(CryptoError) in
                try check(
                    BN_bn2binpad(bn, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), 32), .internalFailure,
                    "cannot encode the private scalar")
            }
        }
    }

    /// PKCS#8 DER.
    package var pkcs8: SecureBytes {
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

    /// ECDH with a validated peer key: always the 32-byte x-coordinate, leading zeros kept.
    package func sharedSecret(with peer: P256PublicKeyImpl) throws(CryptoError) -> SecureBytes {
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(nil, key.pointer, nil) else {
            throw CryptoError(.internalFailure, "EVP_PKEY_CTX_new_from_pkey failed")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        try check(EVP_PKEY_derive_init(ctx), .internalFailure, "ECDH init failed")
        // The peer point was checked on the curve when it was decoded, and P-256 has cofactor 1,
        // so OpenSSL's second full public-key check (an n·Q multiplication) can be skipped.
        try check(EVP_PKEY_derive_set_peer_ex(ctx, peer.key.pointer, 0), .invalidKey, "ECDH rejected the peer key")
        return try SecureBytes(count: 32) { (buffer) throws(CryptoError) in
            var length = 32
            try check(
                EVP_PKEY_derive(ctx, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), &length),
                .internalFailure, "ECDH failed")
            guard length == 32 else { throw CryptoError(.internalFailure, "ECDH returned \(length) bytes, not 32") }
        }
    }

    package func signature(for message: UnsafeRawBufferPointer) throws(CryptoError) -> [UInt8] {
        guard let ctx = EVP_MD_CTX_new() else { throw CryptoError(.internalFailure, "EVP_MD_CTX_new failed") }
        defer { EVP_MD_CTX_free(ctx) }
        try check(EVP_DigestSignInit(ctx, nil, Fetched.sha256, nil, key.pointer), .internalFailure, "ECDSA init failed")
        var length = 0
        try check(
            EVP_DigestSign(ctx, nil, &length, message.bytePointer, message.count), .internalFailure, "ECDSA failed")
        var out = [UInt8](repeating: 0, count: length)
        try check(
            EVP_DigestSign(ctx, &out, &length, message.bytePointer, message.count), .internalFailure, "ECDSA failed")
        out.removeSubrange(length...)
        return out
    }
}

/// Runs `body` on an array copy of secret input and wipes the copy afterwards.
private func withWipedCopy<R>(
    _ secret: some DataProtocol, _ body: ([UInt8]) throws(CryptoError) -> R
) throws(CryptoError) -> R {
    var bytes = Array(secret)
    defer { OPENSSL_cleanse(&bytes, bytes.count) }
    return try body(bytes)
}

// MARK: - Public API

extension P256.KeyAgreement {
    /// A P-256 public key for ECDH. Every initializer validates the point.
    public struct PublicKey: Sendable, Equatable {
        package let impl: P256PublicKeyImpl

        /// 65 bytes `04 ‖ X ‖ Y`.
        public init(x963Representation: some DataProtocol) throws(CryptoError) {
            impl = try P256PublicKeyImpl(x963: Array(x963Representation))
        }
        /// A DER SubjectPublicKeyInfo with the named curve prime256v1 and an uncompressed point.
        public init(derRepresentation: some DataProtocol) throws(CryptoError) {
            impl = try P256PublicKeyImpl(spki: Array(derRepresentation))
        }
        /// A PEM `PUBLIC KEY` block.
        public init(pemRepresentation: String) throws(CryptoError) {
            impl = try P256PublicKeyImpl(spki: pemDecode(pemRepresentation, label: "PUBLIC KEY"))
        }
        package init(impl: P256PublicKeyImpl) { self.impl = impl }

        /// The uncompressed point `04 ‖ X ‖ Y`, 65 bytes.
        public var x963Representation: [UInt8] { impl.x963 }
        /// The DER SubjectPublicKeyInfo (named curve prime256v1, uncompressed point).
        public var derRepresentation: [UInt8] { impl.spki }
        /// The SubjectPublicKeyInfo as a PEM `PUBLIC KEY` block.
        public var pemRepresentation: String { impl.pem }

        public static func == (a: Self, b: Self) -> Bool { a.impl.x963 == b.impl.x963 }
    }

    /// A P-256 private key for ECDH. Its descriptions never show the key.
    public struct PrivateKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
        package let impl: P256PrivateKeyImpl

        /// A fresh key from OpenSSL's generator.
        public init() throws(CryptoError) { impl = try P256PrivateKeyImpl() }
        /// The 32-byte big-endian scalar.
        public init(rawRepresentation: some DataProtocol) throws(CryptoError) {
            impl = try withWipedCopy(rawRepresentation) { (bytes) throws(CryptoError) in
                try P256PrivateKeyImpl(raw: bytes)
            }
        }
        /// SEC1 `ECPrivateKey` or PKCS#8 DER.
        public init(derRepresentation: some DataProtocol) throws(CryptoError) {
            impl = try withWipedCopy(derRepresentation) { (bytes) throws(CryptoError) in
                try P256PrivateKeyImpl(der: bytes)
            }
        }
        /// PEM (`EC PRIVATE KEY` or `PRIVATE KEY`); other blocks such as `EC PARAMETERS` are skipped.
        public init(pemRepresentation: String) throws(CryptoError) {
            impl = try P256PrivateKeyImpl(pem: pemRepresentation)
        }
        package init(impl: P256PrivateKeyImpl) { self.impl = impl }

        /// The public key of this private key.
        public var publicKey: PublicKey { PublicKey(impl: impl.publicKey) }
        /// The private scalar, 32 bytes big-endian, in wiped storage.
        public var rawRepresentation: SecureBytes { get throws(CryptoError) { try impl.raw } }
        /// PKCS#8 DER.
        public var derRepresentation: SecureBytes { get throws(CryptoError) { try impl.pkcs8 } }
        /// PKCS#8 PEM (`PRIVATE KEY`).
        public var pemRepresentation: String {
            get throws(CryptoError) { try impl.pkcs8.withUnsafeBytes { pemEncode(Array($0), label: "PRIVATE KEY") } }
        }

        /// ECDH: the 32-byte shared secret (the x-coordinate, leading zeros kept).
        public func sharedSecretFromKeyAgreement(with peer: PublicKey) throws(CryptoError) -> SecureBytes {
            try impl.sharedSecret(with: peer.impl)
        }

        public var description: String { "P256.KeyAgreement.PrivateKey(<redacted>)" }
        public var debugDescription: String { description }
        public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
    }
}

extension P256.Signing {
    /// A P-256 public key for ECDSA-SHA256 verification.
    public struct PublicKey: Sendable, Equatable {
        package let impl: P256PublicKeyImpl

        /// A key from the uncompressed point `04 ‖ X ‖ Y`; throws when the point is not on the curve.
        public init(x963Representation: some DataProtocol) throws(CryptoError) {
            impl = try P256PublicKeyImpl(x963: Array(x963Representation))
        }
        /// A key from a DER SubjectPublicKeyInfo with the named curve prime256v1; throws for any other key.
        public init(derRepresentation: some DataProtocol) throws(CryptoError) {
            impl = try P256PublicKeyImpl(spki: Array(derRepresentation))
        }
        /// A key from a PEM `PUBLIC KEY` block; throws for any other key.
        public init(pemRepresentation: String) throws(CryptoError) {
            impl = try P256PublicKeyImpl(spki: pemDecode(pemRepresentation, label: "PUBLIC KEY"))
        }
        package init(impl: P256PublicKeyImpl) { self.impl = impl }

        /// The uncompressed point `04 ‖ X ‖ Y`, 65 bytes.
        public var x963Representation: [UInt8] { impl.x963 }
        /// The DER SubjectPublicKeyInfo (named curve prime256v1, uncompressed point).
        public var derRepresentation: [UInt8] { impl.spki }
        /// The SubjectPublicKeyInfo as a PEM `PUBLIC KEY` block.
        public var pemRepresentation: String { impl.pem }

        /// Whether `signature` is a valid ECDSA-SHA256 signature of `data` under this key.
        public func isValidSignature(_ signature: ECDSASignature, for data: some DataProtocol) -> Bool {
            signature.der.withUnsafeBytes { s in
                withContiguousBytes(data) { impl.isValidSignature(derSignature: s, message: $0) }
            }
        }

        public static func == (a: Self, b: Self) -> Bool { a.impl.x963 == b.impl.x963 }
    }

    /// A P-256 private key for ECDSA-SHA256 signing.
    public struct PrivateKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
        package let impl: P256PrivateKeyImpl

        /// A fresh random key from OpenSSL's CSPRNG.
        public init() throws(CryptoError) { impl = try P256PrivateKeyImpl() }
        /// A key from the 32-byte big-endian scalar; throws when it is zero or not below the group order. The input
        /// copy is wiped.
        public init(rawRepresentation: some DataProtocol) throws(CryptoError) {
            impl = try withWipedCopy(rawRepresentation) { (bytes) throws(CryptoError) in
                try P256PrivateKeyImpl(raw: bytes)
            }
        }
        /// A key from PKCS#8 or SEC 1 DER; throws for another curve or algorithm. The input copy is wiped.
        public init(derRepresentation: some DataProtocol) throws(CryptoError) {
            impl = try withWipedCopy(derRepresentation) { (bytes) throws(CryptoError) in
                try P256PrivateKeyImpl(der: bytes)
            }
        }
        /// A key from PEM (`EC PRIVATE KEY` or `PRIVATE KEY`); throws for another curve or algorithm.
        public init(pemRepresentation: String) throws(CryptoError) {
            impl = try P256PrivateKeyImpl(pem: pemRepresentation)
        }
        package init(impl: P256PrivateKeyImpl) { self.impl = impl }

        /// The public key to verify this key's signatures with.
        public var publicKey: PublicKey { PublicKey(impl: impl.publicKey) }
        /// The private scalar, 32 bytes big-endian, in wiped storage.
        public var rawRepresentation: SecureBytes { get throws(CryptoError) { try impl.raw } }
        /// PKCS#8 DER, in wiped storage.
        public var derRepresentation: SecureBytes { get throws(CryptoError) { try impl.pkcs8 } }
        /// PKCS#8 PEM (`PRIVATE KEY`).
        public var pemRepresentation: String {
            get throws(CryptoError) { try impl.pkcs8.withUnsafeBytes { pemEncode(Array($0), label: "PRIVATE KEY") } }
        }

        /// An ECDSA-SHA256 signature of `data` (randomized k from OpenSSL's generator).
        public func signature(for data: some DataProtocol) throws(CryptoError) -> ECDSASignature {
            let der = try withContiguousBytes(data) { (m) throws(CryptoError) in try impl.signature(for: m) }
            return ECDSASignature(trustedDER: der)
        }

        public var description: String { "P256.Signing.PrivateKey(<redacted>)" }
        public var debugDescription: String { description }
        public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
    }

    /// An ECDSA signature, kept in DER; convertible to and from raw `r ‖ s` (64 bytes).
    public struct ECDSASignature: Sendable, Equatable {
        package let der: [UInt8]

        package init(trustedDER: [UInt8]) { der = trustedDER }

        /// A DER `ECDSA-Sig-Value`. Only strict DER is accepted (no BER, no trailing bytes).
        public init(derRepresentation: some DataProtocol) throws(CryptoError) {
            let bytes = Array(derRepresentation)
            let sig = bytes.withUnsafeBufferPointer { b -> OpaquePointer? in
                var p: UnsafePointer<UInt8>? = b.baseAddress
                return d2i_ECDSA_SIG(nil, &p, b.count)
            }
            guard let sig else { throw CryptoError(.invalidSignature, "not a DER ECDSA signature") }
            defer { ECDSA_SIG_free(sig) }
            // r and s must fit the 32-byte halves of the raw form; larger, zero or negative values can never
            // verify, and would make ``rawRepresentation`` ambiguous.
            for n in [ECDSA_SIG_get0_r(sig), ECDSA_SIG_get0_s(sig)] {
                guard BN_is_zero(n) == 0, BN_is_negative(n) == 0, BN_num_bits(n) <= 256 else {
                    throw CryptoError(.invalidSignature, "the ECDSA signature's r or s is out of range for P-256")
                }
            }
            var out: UnsafeMutablePointer<UInt8>?
            let n = i2d_ECDSA_SIG(sig, &out)
            defer { orchard_OPENSSL_free(out) }
            guard n > 0, let out, Array(UnsafeBufferPointer(start: out, count: Int(n))) == bytes else {
                _ = drainOpenSSLErrors()
                throw CryptoError(.invalidSignature, "the ECDSA signature is not in strict DER")
            }
            der = bytes
        }

        /// 64 bytes `r ‖ s`, each 32 bytes big-endian.
        public init(rawRepresentation: some DataProtocol) throws(CryptoError) {
            let raw = Array(rawRepresentation)
            guard raw.count == 64 else { throw CryptoError(.invalidSignature, "a raw P-256 signature is 64 bytes") }
            // As for DER: r = 0 or s = 0 never verifies.
            guard raw[..<32].contains(where: { $0 != 0 }), raw[32...].contains(where: { $0 != 0 }) else {
                throw CryptoError(.invalidSignature, "the ECDSA signature's r or s is zero")
            }
            guard let sig = ECDSA_SIG_new() else { throw CryptoError(.internalFailure, "ECDSA_SIG_new failed") }
            defer { ECDSA_SIG_free(sig) }
            let r = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
            let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
            guard let r, let s, ECDSA_SIG_set0(sig, r, s) == 1 else {
                BN_free(r)
                BN_free(s)
                throw CryptoError(.internalFailure, "ECDSA_SIG_set0 failed")
            }
            var out: UnsafeMutablePointer<UInt8>?
            let n = i2d_ECDSA_SIG(sig, &out)
            defer { orchard_OPENSSL_free(out) }
            guard n > 0, let out else { throw CryptoError(.internalFailure, "i2d_ECDSA_SIG failed") }
            der = Array(UnsafeBufferPointer(start: out, count: Int(n)))
        }

        /// The DER `ECDSA-Sig-Value` (SEQUENCE of r and s).
        public var derRepresentation: [UInt8] { der }

        /// `r ‖ s`, 32 bytes each, big-endian.
        public var rawRepresentation: [UInt8] {
            let sig = der.withUnsafeBufferPointer { b -> OpaquePointer? in
                var p: UnsafePointer<UInt8>? = b.baseAddress
                return d2i_ECDSA_SIG(nil, &p, b.count)
            }
            guard let sig else { return [] }
            defer { ECDSA_SIG_free(sig) }
            var out = [UInt8](repeating: 0, count: 64)
            out.withUnsafeMutableBufferPointer { o in
                _ = BN_bn2binpad(ECDSA_SIG_get0_r(sig), o.baseAddress, 32)
                _ = BN_bn2binpad(ECDSA_SIG_get0_s(sig), o.baseAddress! + 32, 32)
            }
            return out
        }
    }
}

/// An EC public key from an uncompressed point on the group of `template` (a key of that curve): a copy of the
/// cached group and the point set on it. The same validation as EVP_PKEY_fromdata (EC_POINT_oct2point rejects
/// coordinates ≥ p and points not on the curve), without building the group from its name for every key (about
/// 33 µs with fromdata, 9 µs this way).
func ecPublicKey(point: [UInt8], groupOf template: OpaquePointer, curve: String) throws(CryptoError) -> EVPKey {
    guard let pkey = EVP_PKEY_new() else { throw CryptoError(.internalFailure, "EVP_PKEY_new failed") }
    let key = EVPKey(owning: pkey)
    try check(EVP_PKEY_copy_parameters(pkey, template), .internalFailure, "copying the \(curve) group failed")
    let rc = point.withUnsafeBufferPointer { EVP_PKEY_set1_encoded_public_key(pkey, $0.baseAddress, $0.count) }
    guard rc == 1 else {
        _ = drainOpenSSLErrors()
        throw CryptoError(.invalidKey, "the point is not on the \(curve) curve")
    }
    return key
}
