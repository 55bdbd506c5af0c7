/// The one error type of `PaymentCredential`: a struct with an extensible code. Messages never hold a DPAN,
/// a nonce, a key or a cryptogram.
public struct PaymentCredentialError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, as a value a caller can branch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidArgument, malformed, unsupportedVersion, invalidSignature, notAddressedToRecipient
            case cryptoFailure
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A value given to build a credential or cryptogram is out of range.
        public static let invalidArgument = Code(.invalidArgument)
        /// The bytes are not a credential or cryptogram in the documented layout.
        public static let malformed = Code(.malformed)
        /// A version this code does not know.
        public static let unsupportedVersion = Code(.unsupportedVersion)
        /// The credential's signature does not verify under the given Secure Element key.
        public static let invalidSignature = Code(.invalidSignature)
        /// The envelope does not open with this key and purpose (another recipient, or altered).
        public static let notAddressedToRecipient = Code(.notAddressedToRecipient)
        /// A cryptographic primitive failed in a way the input does not explain.
        public static let cryptoFailure = Code(.cryptoFailure)

        public var description: String { base.rawValue }
    }

    public let code: Code
    /// What happened; never secret data.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
