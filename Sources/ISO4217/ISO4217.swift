/// An ISO 4217 currency: its alphabetic code, its numeric code (what EMV's tag 5F2A, ISO 8583 and Apple Pay's
/// `currencyCode` carry) and its minor-unit exponent (2 for USD: cents; 0 for JPY; 3 for BHD).
///
/// One table for every party (terminal, merchant server, the app-side payment API); each wraps it in its own
/// types and errors.
public struct ISO4217Currency: Sendable, Hashable, CustomStringConvertible {
    /// `USD`.
    public let code: String
    /// 840.
    public let numericCode: UInt16
    /// How many decimals the currency has.
    public let exponent: Int

    private init(_ code: String, _ numericCode: UInt16, _ exponent: Int) {
        self.code = code
        self.numericCode = numericCode
        self.exponent = exponent
    }

    /// The currency with alphabetic code `code` (upper case, as ISO 4217 writes it), if known.
    public init?(code: String) {
        guard let found = Self.all.first(where: { $0.code == code }) else { return nil }
        self = found
    }

    /// The currency with numeric code `numericCode`, if known.
    public init?(numericCode: Int) {
        guard let found = Self.all.first(where: { Int($0.numericCode) == numericCode }) else { return nil }
        self = found
    }

    /// The numeric code as three digits (`"840"`, `"036"`).
    public var numericString: String {
        let digits = String(numericCode)
        return String(repeating: "0", count: max(0, 3 - digits.count)) + digits
    }

    public var description: String { code }

    /// The currencies Orchard knows.
    public static let all: [ISO4217Currency] = [
        .init("USD", 840, 2), .init("EUR", 978, 2), .init("GBP", 826, 2), .init("JPY", 392, 0),
        .init("CHF", 756, 2), .init("CAD", 124, 2), .init("AUD", 36, 2), .init("NZD", 554, 2),
        .init("SEK", 752, 2), .init("NOK", 578, 2), .init("DKK", 208, 2), .init("PLN", 985, 2),
        .init("CZK", 203, 2), .init("HUF", 348, 2), .init("CNY", 156, 2), .init("HKD", 344, 2),
        .init("SGD", 702, 2), .init("INR", 356, 2), .init("BRL", 986, 2), .init("MXN", 484, 2),
        .init("ZAR", 710, 2), .init("KRW", 410, 0), .init("ISK", 352, 0), .init("CLP", 152, 0),
        .init("BHD", 48, 3), .init("KWD", 414, 3), .init("JOD", 400, 3), .init("OMR", 512, 3),
        .init("TND", 788, 3), .init("IQD", 368, 3), .init("LYD", 434, 3),
    ]

    /// Why a decimal string is not an amount of this currency.
    public enum ParseFailure: Error, Sendable, Hashable {
        /// Not digits with at most one point and digits after it (no sign, grouping or exponent).
        case notADecimal
        /// More decimals than the currency has (never rounded).
        case tooManyDecimals
        /// More than 12 significant digits (EMV's `n12`).
        case tooLarge
    }

    /// Minor units of a decimal string such as `12.34`: digits, optionally a point and at most ``exponent``
    /// decimals. Zero is returned as 0; callers decide whether it is an amount.
    public func minorUnits(parsing text: String) throws(ParseFailure) -> Int64 {
        let parts = text.split(separator: ".", maxSplits: 2, omittingEmptySubsequences: false)
        let integral = parts[0]
        let fraction = parts.count > 1 ? parts[1] : ""
        let isDigits = { (part: Substring) in part.utf8.allSatisfy { (0x30...0x39).contains($0) } }
        guard parts.count <= 2, !integral.isEmpty, isDigits(integral), isDigits(fraction),
            parts.count == 1 || !fraction.isEmpty
        else { throw .notADecimal }
        guard fraction.count <= exponent else { throw .tooManyDecimals }
        let digits =
            String(integral.drop(while: { $0 == "0" })) + String(fraction)
            + String(repeating: "0", count: exponent - fraction.count)
        guard digits.count <= 12, let minorUnits = Int64(digits.isEmpty ? "0" : digits) else { throw .tooLarge }
        return minorUnits
    }

    /// The decimal form of `minorUnits` without the code: `9.99`, `500` (JPY), `1.250` (BHD).
    public func decimalString(minorUnits: Int64) -> String {
        let digits = String(minorUnits)
        guard exponent > 0 else { return digits }
        let padded = String(repeating: "0", count: max(0, exponent + 1 - digits.count)) + digits
        return "\(padded.dropLast(exponent)).\(padded.suffix(exponent))"
    }

    /// "no decimals" or "at most N decimals", for error messages.
    public var decimalsDescription: String { exponent == 0 ? "no decimals" : "at most \(exponent) decimals" }
}
