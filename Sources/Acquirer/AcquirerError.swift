/// Why the acquirer refused a request. One error type for the module, a struct with an extensible code;
/// equality compares the code. Messages never contain a card number.
///
/// A declined authorization is not an error: it is an ``AcquirerAuthorizationResult`` with a decline code.
public struct AcquirerError: Error, Hashable, CustomStringConvertible, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// A field is malformed or does not fit the origin (a terminal asking for an in-app payment).
        public static let invalidRequest = Code("invalidRequest")
        /// No merchant account with this identifier.
        public static let unknownMerchant = Code("unknownMerchant")
        /// The merchant account is suspended.
        public static let merchantNotActive = Code("merchantNotActive")
        /// The terminal is not registered to this merchant.
        public static let unknownTerminal = Code("unknownTerminal")
        /// The merchant's account may not charge for the payment's Apple merchant ID.
        public static let merchantIDNotAllowed = Code("merchantIDNotAllowed")
        /// The idempotency key (or terminal ID + STAN) was used for a different request.
        public static let idempotencyConflict = Code("idempotencyConflict")
        /// The network could not be reached or failed; nothing was recorded, so a retry is safe.
        public static let networkUnavailable = Code("networkUnavailable")
        /// The acquirer's store failed.
        public static let storeFailure = Code("storeFailure")
        /// A merchant with this identifier already exists.
        public static let duplicate = Code("duplicate")

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
