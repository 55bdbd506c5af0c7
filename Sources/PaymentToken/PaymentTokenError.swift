/// The one error type of `PaymentToken`: malformed tokens and encoding failures.
///
/// A struct with an extensible code; equality compares the code. Messages name the offending field,
/// never its value when the value could be secret.
public struct PaymentTokenError: Error, Hashable, CustomStringConvertible, Sendable {
    /// What kind of failure a `PaymentTokenError` is; new codes may be added, so a `switch` over them needs a default.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// Not valid JSON, or beyond the size and depth limits.
        public static let malformedJSON = Code("malformedJSON")
        /// An object repeats a key (parsers disagree on which wins, so Orchard refuses).
        public static let duplicateKey = Code("duplicateKey")
        /// A key outside the documented field set.
        public static let unknownField = Code("unknownField")
        /// A required key is absent.
        public static let missingField = Code("missingField")
        /// A value has the wrong JSON type or format (base64, hex, sizes).
        public static let invalidField = Code("invalidField")
        /// `version` is neither EC_v1 nor RSA_v1, or does not match the header.
        public static let unsupportedVersion = Code("unsupportedVersion")
        /// The token could not be built (encoder).
        public static let encodingFailed = Code("encodingFailed")

        public var description: String { name }
    }

    /// The kind of failure: what callers branch on.
    public let code: Code
    /// Names the offending field, never a secret value.
    public let message: String

    /// An error of kind `code`; `message` must hold no secret value.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
    public static func == (a: Self, b: Self) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
