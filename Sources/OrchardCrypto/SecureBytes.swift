internal import COpenSSL
public import Foundation

/// Bytes that hold a secret: zeroized (`OPENSSL_cleanse`) when the last copy is released, compared in
/// constant time (`CRYPTO_memcmp`), and never printed: `description`, `debugDescription` and the mirror
/// show only the length.
public struct SecureBytes: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    private final class Storage: @unchecked Sendable {
        // Immutable after init; the buffer is only read through withUnsafeBytes.
        let buffer: UnsafeMutableRawBufferPointer

        init(count: Int) {
            buffer = .allocate(byteCount: max(count, 1), alignment: 16)
            if count == 0 { buffer.initializeMemory(as: UInt8.self, repeating: 0) }
            self.count = count
        }
        let count: Int

        deinit {
            OPENSSL_cleanse(buffer.baseAddress, buffer.count)
            buffer.deallocate()
        }
    }

    private let storage: Storage

    /// Copies `bytes`; the caller should drop its own copy as soon as it can.
    public init(_ bytes: some DataProtocol) {
        storage = Storage(count: bytes.count)
        if !bytes.isEmpty {
            _ = bytes.copyBytes(to: UnsafeMutableRawBufferPointer(rebasing: storage.buffer[0..<bytes.count]))
        }
    }

    /// Fills `count` bytes with output of `random`.
    public init(randomCount count: Int, using random: any RandomSource = SystemRandom()) {
        storage = Storage(count: count)
        random.fill(UnsafeMutableRawBufferPointer(rebasing: storage.buffer[0..<count]))
    }

    /// Makes `count` bytes and lets `body` write them (used to receive secrets straight from OpenSSL).
    package init(
        count: Int, initializingWith body: (UnsafeMutableRawBufferPointer) throws(CryptoError) -> Void
    )
        throws(CryptoError)
    {
        storage = Storage(count: count)
        try body(UnsafeMutableRawBufferPointer(rebasing: storage.buffer[0..<count]))
    }

    /// The number of bytes held.
    public var count: Int { storage.count }

    /// Lends the bytes for the duration of `body`; do not let the pointer escape.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(rebasing: storage.buffer[0..<storage.count]))
    }

    /// Constant-time comparison (the time depends on the lengths only).
    public static func == (lhs: SecureBytes, rhs: SecureBytes) -> Bool {
        guard lhs.count == rhs.count else { return false }
        if lhs.count == 0 { return true }
        return lhs.withUnsafeBytes { a in
            rhs.withUnsafeBytes { b in CRYPTO_memcmp(a.baseAddress, b.baseAddress, a.count) == 0 }
        }
    }

    /// Copies the secret out. Use only where a secret must leave its protection (tests, wire formats).
    public func unsafeCopyOfBytes() -> [UInt8] { withUnsafeBytes { Array($0) } }

    public var description: String { "SecureBytes(<\(count) bytes>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

/// Constant-time equality of two byte sequences (for MACs, tags and hashes).
public func constantTimeEquals(_ a: some DataProtocol, _ b: some DataProtocol) -> Bool {
    let x = Array(a)
    let y = Array(b)
    guard x.count == y.count else { return false }
    if x.isEmpty { return true }
    return CRYPTO_memcmp(x, y, x.count) == 0
}
