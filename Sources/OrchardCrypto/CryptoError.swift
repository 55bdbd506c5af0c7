internal import COpenSSL

/// The one error type of `OrchardCrypto`.
///
/// A struct with an extensible code rather than an enum, so new failure kinds are not breaking changes
/// (the swift-asn1 `ASN1Error` pattern). Equality compares the code only. Messages never contain key
/// material or plaintext; OpenSSL's error queue is drained into ``openSSLErrors`` so the queue is left
/// empty on every exit path.
public struct CryptoError: Error, Hashable, CustomStringConvertible, Sendable {
    /// What went wrong, as a value a caller can branch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidKey, invalidSignature, authenticationFailure, invalidParameter, invalidEncoding
            case decryptionFailure, unsupported, internalFailure
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A key could not be parsed or is not acceptable (wrong curve, point not on the curve, too short).
        public static let invalidKey = Code(.invalidKey)
        /// A signature did not verify or is malformed.
        public static let invalidSignature = Code(.invalidSignature)
        /// An AEAD tag or MAC did not match: the data was altered or the key is wrong.
        public static let authenticationFailure = Code(.authenticationFailure)
        /// A parameter has the wrong size or value (key length, IV length, data not block-aligned).
        public static let invalidParameter = Code(.invalidParameter)
        /// PEM, DER or another encoding is malformed.
        public static let invalidEncoding = Code(.invalidEncoding)
        /// A decryption (RSA-OAEP) failed: wrong key, altered ciphertext or wrong parameters.
        public static let decryptionFailure = Code(.decryptionFailure)
        /// The algorithm or option is not supported.
        public static let unsupported = Code(.unsupported)
        /// OpenSSL failed in a way the input does not explain.
        public static let internalFailure = Code(.internalFailure)

        public var description: String { base.rawValue }
    }

    /// The kind of failure: what callers branch on.
    public let code: Code
    /// What happened and, where it helps, what to do about it.
    public let message: String
    /// OpenSSL's error strings, drained from its per-thread queue when this error was made.
    public let openSSLErrors: [String]

    /// An error of kind `code`, with OpenSSL's pending error strings drained into `openSSLErrors`; `message` must hold
    /// no key material.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
        self.openSSLErrors = drainOpenSSLErrors()
    }

    public var description: String {
        if openSSLErrors.isEmpty { return "\(code): \(message)" }
        return "\(code): \(message) (\(openSSLErrors.joined(separator: "; ")))"
    }

    public static func == (lhs: CryptoError, rhs: CryptoError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}

/// Empties OpenSSL's error queue for this thread and returns its entries as strings.
package func drainOpenSSLErrors() -> [String] {
    var errors: [String] = []
    while true {
        let code = ERR_get_error()
        if code == 0 { break }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        if errors.count < 8 {
            errors.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
    }
    return errors
}

/// Throws `code` unless an OpenSSL return value signals success (1, or positive where documented).
@inline(__always)
package func check(_ rc: Int32, _ code: CryptoError.Code, _ message: @autoclosure () -> String) throws(CryptoError) {
    if rc <= 0 { throw CryptoError(code, message()) }
}

/// Unwraps a pointer an OpenSSL constructor returned, or throws.
@inline(__always)
package func nonNull<T>(
    _ pointer: T?, _ code: CryptoError.Code = .internalFailure, _ message: @autoclosure () -> String
) throws(CryptoError) -> T {
    guard let pointer else { throw CryptoError(code, message()) }
    return pointer
}
