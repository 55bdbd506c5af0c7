internal import COpenSSL
public import Foundation

/// A hash function with a one-shot API and an incremental hasher.
public protocol HashFunction: Sendable {
    /// Output length in bytes.
    static var byteCount: Int { get }
    /// The OpenSSL name (as `EVP_MD_fetch` and KDFs take it).
    static var openSSLName: String { get }
}

extension HashFunction {
    /// The digest of `data`.
    @inlinable
    public static func hash(_ data: some DataProtocol) -> [UInt8] {
        withContiguousBytes(data) { digest($0) }
    }

    @usableFromInline
    package static func digest(_ data: UnsafeRawBufferPointer) -> [UInt8] {
        makeBytes(count: byteCount) { out in
            var length: UInt32 = 0
            // EVP_Digest fails only on allocation failure with a fetched, valid algorithm.
            let rc = EVP_Digest(
                data.baseAddress, data.count, out.bindMemory(to: UInt8.self).baseAddress, &length, md, nil)
            precondition(rc == 1 && Int(length) == byteCount, "EVP_Digest failed")
        }
    }

    /// The fetched algorithm (a metatype comparison, not a string match, on every call).
    package static var md: OpaquePointer {
        if Self.self == SHA256.self { return Fetched.sha256 }
        if Self.self == SHA384.self { return Fetched.sha384 }
        if Self.self == SHA1.self { return Fetched.sha1 }
        preconditionFailure("\(Self.self) is not one of OrchardCrypto's hash functions")
    }

    /// The algorithm name as a C string that outlives any OSSL_PARAM built from it.
    package static var mdName: UnsafeMutablePointer<CChar> {
        if Self.self == SHA256.self { return ParamName.sha256 }
        if Self.self == SHA384.self { return ParamName.sha384 }
        if Self.self == SHA1.self { return ParamName.sha1 }
        preconditionFailure("\(Self.self) is not one of OrchardCrypto's hash functions")
    }
}

/// SHA-1: only where legacy formats demand it (EMV option B, certificate key identifiers).
public enum SHA1: HashFunction {
    public static let byteCount = 20
    public static let openSSLName = "SHA1"
}

/// SHA-256.
public enum SHA256: HashFunction {
    public static let byteCount = 32
    public static let openSSLName = "SHA256"
}

/// SHA-384.
public enum SHA384: HashFunction {
    public static let byteCount = 48
    public static let openSSLName = "SHA384"
}

/// An incremental hasher: `update` any number of times, then `finalize` once.
public struct IncrementalHasher<H: HashFunction>: ~Copyable {
    private let context: OpaquePointer

    /// A hasher with nothing hashed yet.
    public init() {
        context = EVP_MD_CTX_new()!
        precondition(EVP_DigestInit_ex2(context, H.md, nil) == 1, "EVP_DigestInit_ex2 failed")
    }

    /// Adds `data` to what is hashed.
    public mutating func update(_ data: some DataProtocol) {
        withContiguousBytes(data) { b in
            precondition(EVP_DigestUpdate(context, b.baseAddress, b.count) == 1, "EVP_DigestUpdate failed")
        }
    }

    /// The digest of everything added, `H.byteCount` bytes; consumes the hasher, so nothing can be added after it.
    public consuming func finalize() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: H.byteCount)
        var length: UInt32 = 0
        precondition(EVP_DigestFinal_ex(context, &out, &length) == 1, "EVP_DigestFinal_ex failed")
        return out
    }

    deinit { EVP_MD_CTX_free(context) }
}

/// HMAC (RFC 2104) over a hash function, through OpenSSL's `EVP_MAC`.
public enum HMAC<H: HashFunction> {
    /// The full-length MAC of `data` under `key` (any key length, including empty).
    @inlinable
    public static func authenticationCode(for data: some DataProtocol, using key: SymmetricKey) -> [UInt8] {
        withContiguousBytes(data) { d in authenticationCode(d, key: key) }
    }

    @usableFromInline
    package static func authenticationCode(_ d: UnsafeRawBufferPointer, key: SymmetricKey) -> [UInt8] {
        // EVP_MAC with the HMAC algorithm fetched once; EVP_Q_mac would fetch it on every call.
        // Failures here mean allocation failure: the algorithm and digest are known to exist.
        guard let ctx = EVP_MAC_CTX_new(Fetched.hmac) else { preconditionFailure("EVP_MAC_CTX_new failed") }
        defer { EVP_MAC_CTX_free(ctx) }
        var params = [OSSL_PARAM_construct_utf8_string(ParamName.digest, H.mdName, 0), OSSL_PARAM_construct_end()]
        let ok = key.withUnsafeBytes { k in EVP_MAC_init(ctx, k.bytePointer, k.count, &params) }
        precondition(ok == 1 && EVP_MAC_update(ctx, d.bytePointer, d.count) == 1, "HMAC failed")
        return makeBytes(count: H.byteCount) { out in
            var length = 0
            let rc = EVP_MAC_final(ctx, out.bindMemory(to: UInt8.self).baseAddress, &length, H.byteCount)
            precondition(rc == 1 && length == H.byteCount, "HMAC failed")
        }
    }

    /// Checks a MAC in constant time. A truncated `mac` (at least 10 bytes) compares against the prefix.
    public static func isValidAuthenticationCode(
        _ mac: some DataProtocol, authenticating data: some DataProtocol, using key: SymmetricKey
    ) -> Bool {
        guard mac.count >= 10, mac.count <= H.byteCount else { return false }
        let full = authenticationCode(for: data, using: key)
        return constantTimeEquals(full.prefix(mac.count), mac)
    }
}

/// A symmetric key, held in ``SecureBytes``.
public struct SymmetricKey: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The key's bytes, wiped when the last copy is released.
    public let bytes: SecureBytes

    /// A key holding a copy of `data`.
    public init(data: some DataProtocol) { bytes = SecureBytes(data) }
    /// A key holding `bytes`.
    public init(_ bytes: SecureBytes) { self.bytes = bytes }

    /// A fresh random key of `bitCount` bits.
    public init(bitCount: Int, using random: any RandomSource = SystemRandom()) {
        precondition(bitCount > 0 && bitCount % 8 == 0, "key sizes are whole bytes")
        bytes = SecureBytes(randomCount: bitCount / 8, using: random)
    }

    /// The key's length in bits.
    public var bitCount: Int { bytes.count * 8 }
    /// The key's length in bytes.
    public var byteCount: Int { bytes.count }

    /// Calls `body` with the key's bytes; the pointer is valid only inside `body` and must not escape.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try bytes.withUnsafeBytes(body)
    }

    public var description: String { "SymmetricKey(<\(bitCount) bits>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
