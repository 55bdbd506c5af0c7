/// Why a card or money value was refused. One error type for the kernel, a struct with an extensible code;
/// equality compares the code. Messages say what is wrong with the input, never repeat a card number or CVV.
public struct CardBasicsError: Error, Hashable, CustomStringConvertible, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// Not 12 to 19 digits, or a wrong Luhn check digit.
        public static let invalidCardNumber = Code("invalidCardNumber")
        /// An impossible expiry (month outside 1–12, year outside 2000–2099, not `YYMM`).
        public static let invalidExpiry = Code("invalidExpiry")
        /// A card verification value that is not 3 or 4 digits.
        public static let invalidVerificationValue = Code("invalidVerificationValue")
        /// Not a currency of the ISO 4217 table (``Currency/all``) in either of its accepted forms.
        public static let unknownCurrency = Code("unknownCurrency")
        /// An amount outside ``Money/minimumMinorUnits``…``Money/maximumMinorUnits``, or a decimal string that
        /// is not one.
        public static let invalidAmount = Code("invalidAmount")

        public var description: String { name }
    }

    public let code: Code
    /// What is wrong and what a valid value looks like.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
    public static func == (a: Self, b: Self) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}

/// Whether every byte of `text` is an ASCII decimal digit (and there is at least one).
func isASCIIDigits(_ text: some StringProtocol) -> Bool {
    !text.utf8.isEmpty && text.utf8.allSatisfy { (0x30...0x39).contains($0) }
}
