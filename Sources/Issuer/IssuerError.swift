/// Why an issuer operation failed. One error type for the Issuer module, a struct with an extensible code;
/// equality compares the code. Messages say what failed, never a card number, CVV or code.
///
/// Business outcomes (a declined authorization, a declined provisioning check) are values, not errors:
/// see ``IssuerAuthorizationResponse`` and ``CardCheckDecision``.
public struct IssuerError: Error, Hashable, CustomStringConvertible, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// A field is malformed: a service code or CVV length, a reversal that names another amount.
        public static let invalidInput = Code("invalidInput")
        /// The card, account or step-up reference is not known to this issuer.
        public static let notFound = Code("notFound")
        /// A record with this identifier or PAN already exists.
        public static let duplicate = Code("duplicate")
        /// The issuer's store failed.
        public static let storeFailure = Code("storeFailure")
        /// A key or cryptographic operation failed (CVV computation).
        public static let cryptoFailure = Code("cryptoFailure")
        /// The request is well formed but not allowed in the current state.
        public static let notPermitted = Code("notPermitted")

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
