/// An ISO 4217 currency: its alphabetic code, its numeric code (what EMV's tag 5F2A and ISO 8583 carry) and
/// its minor-unit exponent (2 for USD: cents; 0 for JPY; 3 for BHD).
public struct Currency: Sendable, Hashable, CustomStringConvertible {
    /// `USD`.
    public let code: String
    /// 840.
    public let numericCode: Int
    /// How many decimals the currency has.
    public let exponent: Int

    private init(_ code: String, _ numericCode: Int, _ exponent: Int) {
        self.code = code
        self.numericCode = numericCode
        self.exponent = exponent
    }

    /// The numeric code as three digits (`"840"`, `"036"`).
    public var numericString: String {
        let digits = String(numericCode)
        return String(repeating: "0", count: max(0, 3 - digits.count)) + digits
    }

    public var description: String { code }

    /// The currency with alphabetic code `code` (case-insensitive) or numeric code `code` (three digits).
    public init(_ code: String) throws(TerminalError) {
        let upper = code.uppercased()
        if let found = Self.all.first(where: { $0.code == upper || $0.numericString == code }) {
            self = found
            return
        }
        throw TerminalError(
            .unknownCurrency, "\(code.prefix(8)) is not a currency this terminal knows (ISO 4217, e.g. USD, EUR)")
    }

    /// The currency with numeric code `numericCode`, if known.
    public init?(numericCode: Int) {
        guard let found = Self.all.first(where: { $0.numericCode == numericCode }) else { return nil }
        self = found
    }

    /// The currencies the terminal knows (ISO 4217, with their exponents).
    public static let all: [Currency] = [
        Currency("USD", 840, 2), Currency("EUR", 978, 2), Currency("GBP", 826, 2), Currency("JPY", 392, 0),
        Currency("CHF", 756, 2), Currency("CAD", 124, 2), Currency("AUD", 36, 2), Currency("NZD", 554, 2),
        Currency("SEK", 752, 2), Currency("NOK", 578, 2), Currency("DKK", 208, 2), Currency("PLN", 985, 2),
        Currency("CZK", 203, 2), Currency("HUF", 348, 2), Currency("CNY", 156, 2), Currency("HKD", 344, 2),
        Currency("SGD", 702, 2), Currency("INR", 356, 2), Currency("BRL", 986, 2), Currency("MXN", 484, 2),
        Currency("ZAR", 710, 2), Currency("KRW", 410, 0), Currency("ISK", 352, 0), Currency("CLP", 152, 0),
        Currency("BHD", 48, 3), Currency("KWD", 414, 3), Currency("JOD", 400, 3), Currency("OMR", 512, 3),
        Currency("TND", 788, 3),
    ]
}

/// An amount of money as the terminal handles it: an integer number of minor units of a currency.
public struct Amount: Sendable, Hashable, CustomStringConvertible {
    /// The largest amount EMV's `n12` amount field holds.
    public static let maximumMinorUnits: Int64 = 999_999_999_999

    public let minorUnits: Int64
    public let currency: Currency

    /// An amount of 1 to ``maximumMinorUnits`` minor units.
    public init(minorUnits: Int64, currency: Currency) throws(TerminalError) {
        guard (1...Self.maximumMinorUnits).contains(minorUnits) else {
            throw TerminalError(.invalidAmount, "an amount is 1 to \(Self.maximumMinorUnits) minor units")
        }
        self.minorUnits = minorUnits
        self.currency = currency
    }

    /// Parses a decimal string such as `12.34` with the currency's exponent: digits, optionally a point and
    /// at most as many decimals as the currency has (`12.345 USD` and `12.5 JPY` are refused, never rounded).
    /// No sign, no grouping, no exponent.
    public init(parsing text: String, currency: Currency) throws(TerminalError) {
        let parts = text.split(separator: ".", maxSplits: 2, omittingEmptySubsequences: false)
        let integral = parts[0]
        let fraction = parts.count > 1 ? parts[1] : ""
        let isDigits = { (part: Substring) in part.utf8.allSatisfy { (0x30...0x39).contains($0) } }
        guard parts.count <= 2, !integral.isEmpty, isDigits(integral), isDigits(fraction),
            parts.count == 1 || !fraction.isEmpty
        else {
            throw TerminalError(.invalidAmount, "an amount is a decimal number such as 12.34 (no sign or grouping)")
        }
        guard fraction.count <= currency.exponent else {
            let decimals = currency.exponent == 0 ? "no decimals" : "at most \(currency.exponent) decimals"
            throw TerminalError(.invalidAmount, "\(currency.code) amounts have \(decimals)")
        }
        let digits =
            String(integral.drop(while: { $0 == "0" })) + String(fraction)
            + String(repeating: "0", count: currency.exponent - fraction.count)
        guard digits.count <= 12, let minorUnits = Int64(digits.isEmpty ? "0" : digits) else {
            throw TerminalError(.invalidAmount, "the amount is above what a terminal can charge")
        }
        try self.init(minorUnits: minorUnits, currency: currency)
    }

    /// `12.34 USD`.
    public var description: String {
        let digits = String(minorUnits)
        guard currency.exponent > 0 else { return "\(digits) \(currency.code)" }
        let padded = String(repeating: "0", count: max(0, currency.exponent + 1 - digits.count)) + digits
        return "\(padded.dropLast(currency.exponent)).\(padded.suffix(currency.exponent)) \(currency.code)"
    }
}
