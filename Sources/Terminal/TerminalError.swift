/// The one error type of `Terminal` (the point-of-sale terminal): bad settings, its store, and
/// the acquirer connection.
///
/// A struct with an extensible code; equality compares the code only. Messages never hold a card number
/// (the terminal only ever has a DPAN, and shows it masked).
public struct TerminalError: Error, Hashable, CustomStringConvertible, Sendable {
    /// What went wrong, as a value a caller can branch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidArgument, unknownCurrency, currencyNotAccepted, notConfigured, alreadyExists, storeFailure
            case gatewayTimedOut, gatewayUnreachable, gatewayRefused, protocolViolation
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A setting or option has the wrong form.
        public static let invalidArgument = Code(.invalidArgument)
        /// A currency code that is not in the terminal's ISO 4217 table.
        public static let unknownCurrency = Code(.unknownCurrency)
        /// A charge in a currency the terminal does not charge in (its limits are in its own currency).
        public static let currencyNotAccepted = Code(.currencyNotAccepted)
        /// No terminal with this ID is set up (run `orchard terminal setup`).
        public static let notConfigured = Code(.notConfigured)
        /// A terminal with this ID already exists.
        public static let alreadyExists = Code(.alreadyExists)
        /// The terminal's store could not be read or written.
        public static let storeFailure = Code(.storeFailure)
        /// The acquirer did not answer in time: the outcome of the request is unknown.
        public static let gatewayTimedOut = Code(.gatewayTimedOut)
        /// The acquirer could not be reached: the request was not delivered.
        public static let gatewayUnreachable = Code(.gatewayUnreachable)
        /// The acquirer refused the request itself (unknown terminal, malformed request, ...).
        public static let gatewayRefused = Code(.gatewayRefused)
        /// The acquirer answered something the terminal cannot use.
        public static let protocolViolation = Code(.protocolViolation)

        public var description: String { base.rawValue }
    }

    public let code: Code
    /// What happened and, where it helps, what to do about it.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }

    public static func == (lhs: TerminalError, rhs: TerminalError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
