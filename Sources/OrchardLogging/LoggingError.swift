/// The one error type of `OrchardLogging`.
///
/// A struct with an extensible code (see `CryptoError`); equality compares the code only. Messages
/// never repeat the rejected input, because that input may be a card number.
public struct LoggingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What went wrong, as a value a caller can branch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidLevel
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A log level name is not one of trace, debug, info, notice, warning, error, critical.
        public static let invalidLevel = Code(.invalidLevel)

        public var description: String { base.rawValue }
    }

    public let code: Code
    /// What happened, without the input.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }

    public static func == (lhs: LoggingError, rhs: LoggingError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
