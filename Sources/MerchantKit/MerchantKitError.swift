/// Why a payment token was refused. One error type for MerchantKit, a struct with an extensible code;
/// equality compares the code. Messages say what failed and what to check, never a key or card number.
public struct MerchantKitError: Error, Hashable, CustomStringConvertible, Sendable {
    /// What kind of refusal a `MerchantKitError` is; new codes may be added, so a `switch` over them needs a default.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// The token's JSON or fields are malformed (see ``underlying``).
        public static let malformedToken = Code("malformedToken")
        /// The CMS signature is malformed or does not verify over the token's signed bytes.
        public static let signatureInvalid = Code("signatureInvalid")
        /// The certificates do not form a valid chain to a trusted root at the signing time.
        public static let chainUntrusted = Code("chainUntrusted")
        /// The leaf or intermediate certificate lacks Apple's marker extension, or certificates are missing/extra.
        public static let markerMissing = Code("markerMissing")
        /// The CMS signing time is older than the freshness window allows.
        public static let signingTimeTooOld = Code("signingTimeTooOld")
        /// The CMS signing time is later than the freshness window allows (clock skew or forgery).
        public static let signingTimeTooNew = Code("signingTimeTooNew")
        /// No configured processing key matches `publicKeyHash`: the token was made for another merchant or key.
        public static let unknownPublicKeyHash = Code("unknownPublicKeyHash")
        /// The ephemeral public key is not a valid P-256 point.
        public static let invalidEphemeralKey = Code("invalidEphemeralKey")
        /// Unwrapping the key or the AES-GCM authentication failed.
        public static let decryptionFailed = Code("decryptionFailed")
        /// The decrypted payment data is not the documented object.
        public static let malformedPaymentData = Code("malformedPaymentData")
        /// The transactionId was already seen within the replay window.
        public static let replayed = Code("replayed")
        /// The decrypted amount, currency or applicationData hash does not match the merchant's order.
        public static let orderMismatch = Code("orderMismatch")
        /// The merchant identity (certificate or key) is unusable.
        public static let invalidConfiguration = Code("invalidConfiguration")
        /// A merchant-session validation URL that is not Apple's gateway (or the configured sandbox gateway):
        /// refused before the identity certificate is sent anywhere.
        public static let validationURLRefused = Code("validationURLRefused")
        /// The gateway refused the merchant-session request or could not be reached.
        public static let sessionRequestFailed = Code("sessionRequestFailed")

        public var description: String { name }
    }

    /// Why the token was refused: what callers branch on.
    public let code: Code
    /// What failed and what to check, without keys, card numbers or cryptograms.
    public let message: String
    /// The lower-level error (token parsing, crypto), if any.
    public let underlying: (any Error & Sendable)?

    /// An error of kind `code`; `message` must hold no key or card number.
    public init(_ code: Code, _ message: String, underlying: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    public var description: String { "\(code): \(message)" }
    public static func == (a: Self, b: Self) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
