/// Why a token service operation failed. One error type for the module, a struct with an extensible code;
/// equality compares the code. Messages never contain a PAN, DPAN, CVV or key.
///
/// Business outcomes are values, not errors: a declined authorization is a
/// ``NetworkAuthorizationResponse`` with a decline code, a declined provisioning check a decision.
public struct TokenServiceError: Error, Hashable, CustomStringConvertible, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// A field is malformed or missing.
        public static let invalidRequest = Code("invalidRequest")
        /// An envelope could not be opened: wrong recipient key, wrong label, or altered bytes.
        public static let envelopeRejected = Code("envelopeRejected")
        /// A key handle was used for an operation its usage does not allow (proximity key for remote, ...).
        public static let keyUsageViolation = Code("keyUsageViolation")
        /// A key handle is malformed or was not made by this HSM (its wrapping does not authenticate).
        public static let invalidKeyHandle = Code("invalidKeyHandle")
        /// The HSM's known-answer self-test failed: the HSM refuses to start.
        public static let selfTestFailed = Code("selfTestFailed")
        /// A cryptographic primitive failed for a reason the input does not explain.
        public static let cryptoFailure = Code("cryptoFailure")
        /// No such token, card, session or range.
        public static let notFound = Code("notFound")
        /// The lifecycle change is not allowed: a deleted token, or an actor resuming what another suspended.
        public static let lifecycleNotPermitted = Code("lifecycleNotPermitted")
        /// The caller acts for another token requestor than the one its client certificate names (or names none).
        public static let requestorNotPermitted = Code("requestorNotPermitted")
        /// An idempotency key was reused with a different request.
        public static let idempotencyConflict = Code("idempotencyConflict")
        /// The provisioning session is in the wrong state (expired, declined, already linked, another device).
        public static let sessionState = Code("sessionState")
        /// The device's SE certificate did not verify.
        public static let deviceNotTrusted = Code("deviceNotTrusted")
        /// Configuration is inconsistent: overlapping ranges, an unknown issuer or token requestor.
        public static let configuration = Code("configuration")
        /// No free DPAN could be drawn in the token range.
        public static let rangeExhausted = Code("rangeExhausted")
        /// The vault store failed.
        public static let storeFailure = Code("storeFailure")
        /// The issuer could not be reached or answered with an error.
        public static let issuerUnavailable = Code("issuerUnavailable")

        public var description: String { name }
    }

    public let code: Code
    /// What happened and, where it helps, what to do about it.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
    public static func == (a: Self, b: Self) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
