import OrchardCrypto

/// The one error type of `OrchardX509`: malformed DER/BER, certificates, CSRs and CMS structures, and
/// failures of the cryptography underneath.
///
/// A struct with an extensible code rather than an enum, so new failure kinds are not breaking changes
/// (the swift-asn1 `ASN1Error` pattern). Equality compares the code only. Thrown errors are for input
/// that cannot be parsed or used at all; verification outcomes (a bad signature, an untrusted or expired
/// chain) are returned as values (``CMSVerificationResult``, ``ChainVerificationResult``).
public struct X509Error: Error, Hashable, CustomStringConvertible, Sendable {
    /// What went wrong, as a value a caller can branch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case truncated, invalidLength, indefiniteLengthNotAllowed, nestingTooDeep, lengthLimitExceeded
            case invalidTag, unexpectedElement, invalidValue, trailingData
            case unsupportedAlgorithm, invalidKey, invalidSignature, invalidPEM, cryptoFailure
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The input ends before the element it announces.
        public static let truncated = Code(.truncated)
        /// A length field is malformed: non-minimal in DER, longer than the limit of length bytes, or inconsistent.
        public static let invalidLength = Code(.invalidLength)
        /// An indefinite length (`0x80`) appeared where DER is required, or on a primitive element.
        public static let indefiniteLengthNotAllowed = Code(.indefiniteLengthNotAllowed)
        /// Elements are nested deeper than ``ASN1Limits/maximumDepth``.
        public static let nestingTooDeep = Code(.nestingTooDeep)
        /// An element is longer than ``ASN1Limits/maximumLength``.
        public static let lengthLimitExceeded = Code(.lengthLimitExceeded)
        /// A tag is malformed (non-minimal high tag number, tag number too large).
        public static let invalidTag = Code(.invalidTag)
        /// A well-formed element is not the one the structure requires here.
        public static let unexpectedElement = Code(.unexpectedElement)
        /// A primitive value is malformed (INTEGER, OBJECT IDENTIFIER, time, BOOLEAN, string, BIT STRING).
        public static let invalidValue = Code(.invalidValue)
        /// Bytes follow the end of a complete structure.
        public static let trailingData = Code(.trailingData)
        /// The algorithm (signature, digest, key type) is not one Orchard supports.
        public static let unsupportedAlgorithm = Code(.unsupportedAlgorithm)
        /// A public or private key is malformed or not acceptable.
        public static let invalidKey = Code(.invalidKey)
        /// A self-signature (of a CSR) does not verify.
        public static let invalidSignature = Code(.invalidSignature)
        /// A PEM block is missing or malformed.
        public static let invalidPEM = Code(.invalidPEM)
        /// OpenSSL or OrchardCrypto failed in a way the input does not explain.
        public static let cryptoFailure = Code(.cryptoFailure)

        public var description: String { base.rawValue }
    }

    /// The kind of failure.
    public let code: Code
    /// What happened, where, and what was expected. Never contains key material.
    public let message: String

    /// An error with a message saying what was wrong and where.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// Wraps an error of OrchardCrypto, keeping its message.
    package init(_ error: CryptoError, _ context: String) {
        let code: Code =
            switch error.code {
            case .invalidKey: .invalidKey
            case .invalidSignature: .invalidSignature
            case .invalidEncoding: .invalidPEM
            case .unsupported: .unsupportedAlgorithm
            default: .cryptoFailure
            }
        self.init(code, "\(context): \(error.description)")
    }

    public var description: String { "\(code): \(message)" }

    public static func == (lhs: X509Error, rhs: X509Error) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
