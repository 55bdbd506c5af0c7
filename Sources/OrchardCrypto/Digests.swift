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
    public static func hash(_ data: some DataProtocol) -> [UInt8] {
        withContiguousBytes(data) { digest($0) }
    }

    package static func digest(_ data: UnsafeRawBufferPointer) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: byteCount)
        var length: UInt32 = 0
        // EVP_Digest fails only on allocation failure with a fetched, valid algorithm.
        let rc = EVP_Digest(data.baseAddress, data.count, &out, &length, md, nil)
        precondition(rc == 1 && Int(length) == byteCount, "EVP_Digest failed")
        return out
    }

    package static var md: OpaquePointer {
        switch openSSLName {
        case "SHA1": Fetched.sha1
        case "SHA384": Fetched.sha384
        default: Fetched.sha256
        }
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

    public init() {
        context = EVP_MD_CTX_new()!
        precondition(EVP_DigestInit_ex2(context, H.md, nil) == 1, "EVP_DigestInit_ex2 failed")
    }

    public mutating func update(_ data: some DataProtocol) {
        withContiguousBytes(data) { b in
            precondition(EVP_DigestUpdate(context, b.baseAddress, b.count) == 1, "EVP_DigestUpdate failed")
        }
    }

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
    /// The full-length MAC of `data` under `key`.
    public static func authenticationCode(for data: some DataProtocol, using key: SymmetricKey) -> [UInt8] {
        key.withUnsafeBytes { k in
            withContiguousBytes(data) { d in
                var out = [UInt8](repeating: 0, count: H.byteCount)
                var length = 0
                let rc = H.openSSLName.withCString { name in
                    EVP_Q_mac(nil, "HMAC", nil, name, nil, k.baseAddress, k.count, d.bytePointer, d.count, &out, out.count, &length)
                }
                precondition(rc != nil && length == H.byteCount, "HMAC failed")
                return out
            }
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
    public let bytes: SecureBytes

    public init(data: some DataProtocol) { bytes = SecureBytes(data) }
    public init(_ bytes: SecureBytes) { self.bytes = bytes }

    /// A fresh random key of `bitCount` bits.
    public init(bitCount: Int, using random: any RandomSource = SystemRandom()) {
        precondition(bitCount > 0 && bitCount % 8 == 0, "key sizes are whole bytes")
        bytes = SecureBytes(randomCount: bitCount / 8, using: random)
    }

    public var bitCount: Int { bytes.count * 8 }
    public var byteCount: Int { bytes.count }

    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try bytes.withUnsafeBytes(body)
    }

    public var description: String { "SymmetricKey(<\(bitCount) bits>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
