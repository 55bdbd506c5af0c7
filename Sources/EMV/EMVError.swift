/// The one error type of the `EMV` module: malformed TLV, DOL and APDU bytes, bad arguments, key and
/// cryptogram failures, and protocol violations seen by the terminal kernel.
///
/// A struct with an extensible code; equality compares the code only. Messages say what was wrong and
/// where, never a key, a cryptogram input that holds a card number, or the PAN itself.
public struct EMVError: Error, Hashable, CustomStringConvertible, Sendable {
    /// What kind of failure an `EMVError` is; new codes may be added, so a `switch` over them needs a default.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// BER-TLV bytes are malformed: a truncated tag, length or value, an indefinite or oversized length.
        public static let malformedTLV = Code("malformedTLV")
        /// Input is well formed but beyond a decoder limit (nesting depth, element count).
        public static let limitExceeded = Code("limitExceeded")
        /// A data object list (PDOL, CDOL) is malformed, or data does not match its length.
        public static let malformedDOL = Code("malformedDOL")
        /// A command or response APDU is malformed (too short, Lc or Le inconsistent with its length).
        public static let malformedAPDU = Code("malformedAPDU")
        /// An argument has the wrong form: hex length, digit count, a value out of range.
        public static let invalidArgument = Code("invalidArgument")
        /// A key has the wrong length or a DES operation failed.
        public static let cryptoFailure = Code("cryptoFailure")
        /// The card answered something the kernel cannot use (missing mandatory data, bad format).
        public static let protocolViolation = Code("protocolViolation")
        /// The ATC store failed to read or persist the counter.
        public static let storeFailure = Code("storeFailure")
        /// The link to the card failed.
        public static let transportFailure = Code("transportFailure")
        /// A cryptogram version, format or option Orchard does not implement.
        public static let unsupported = Code("unsupported")

        public var description: String { name }
    }

    /// The kind of failure: what callers branch on.
    public let code: Code
    /// What happened and, where it helps, where in the input.
    public let message: String

    /// An error of kind `code`; `message` must hold no key, PAN or cryptogram input.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
    public static func == (a: Self, b: Self) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
