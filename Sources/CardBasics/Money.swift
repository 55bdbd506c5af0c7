/// An amount to pay: a whole number of minor units of a ``Currency``. The one amount type of the project.
///
/// The one rule for its bounds: 1 to 999,999,999,999 minor units (``minimumMinorUnits``…``maximumMinorUnits``).
/// Zero is refused because every amount here is a payment, authorization or refund of something; the maximum is
/// the largest value of ISO 8583's DE 4 and EMV's `n12` amount field (tag 9F02), so any `Money` fits every
/// message that carries it.
public struct Money: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The smallest amount: one minor unit.
    public static let minimumMinorUnits: Int64 = 1
    /// The largest amount: twelve nines, ISO 8583 DE 4 / EMV `n12`.
    public static let maximumMinorUnits: Int64 = 999_999_999_999

    public let minorUnits: Int64
    public let currency: Currency

    /// An amount of ``minimumMinorUnits`` to ``maximumMinorUnits`` minor units.
    public init(minorUnits: Int64, currency: Currency) throws(CardBasicsError) {
        guard (Self.minimumMinorUnits...Self.maximumMinorUnits).contains(minorUnits) else {
            throw CardBasicsError(.invalidAmount, "an amount is 1 to \(Self.maximumMinorUnits) minor units")
        }
        self.minorUnits = minorUnits
        self.currency = currency
    }

    /// The one decimal parser: a string such as `9.99` read with the currency's exponent. Accepts digits,
    /// optionally a point followed by 1 to ``Currency/exponent`` digits (`9.99` and `9.9` USD, `500` JPY,
    /// `1.250` BHD); refuses more decimals than the currency has (`9.999` USD, `5.5` JPY: never rounded), signs,
    /// grouping, spaces, exponents, a bare or trailing point, and amounts outside the bounds.
    public init(parsing text: String, currency: Currency) throws(CardBasicsError) {
        let parts = text.split(separator: ".", maxSplits: 2, omittingEmptySubsequences: false)
        let integral = parts[0]
        let fraction = parts.count > 1 ? parts[1] : ""
        guard parts.count <= 2, isASCIIDigits(integral), parts.count == 1 || isASCIIDigits(fraction) else {
            throw CardBasicsError(.invalidAmount, "an amount is a decimal number such as 9.99 (no sign or grouping)")
        }
        guard fraction.count <= currency.exponent else {
            throw CardBasicsError(.invalidAmount, "\(currency.code) amounts have \(currency.decimalsDescription)")
        }
        let digits =
            String(integral.drop(while: { $0 == "0" })) + String(fraction)
            + String(repeating: "0", count: currency.exponent - fraction.count)
        guard digits.count <= 12, let minorUnits = Int64(digits.isEmpty ? "0" : digits) else {
            throw CardBasicsError(.invalidAmount, "an amount is at most \(Self.maximumMinorUnits) minor units")
        }
        try self.init(minorUnits: minorUnits, currency: currency)
    }

    /// The one decimal formatter, the inverse of ``init(parsing:currency:)``: exactly ``Currency/exponent``
    /// decimals, no code (`9.99`, `500` for JPY, `1.250` for BHD, `0.05` for 5 cents).
    public var decimalString: String {
        let digits = String(minorUnits)
        let exponent = currency.exponent
        guard exponent > 0 else { return digits }
        let padded = String(repeating: "0", count: max(0, exponent + 1 - digits.count)) + digits
        return "\(padded.dropLast(exponent)).\(padded.suffix(exponent))"
    }

    /// `9.99 USD`.
    public var description: String { "\(decimalString) \(currency.code)" }

    private enum CodingKeys: String, CodingKey { case minorUnits, currency }

    /// Reads `{"minorUnits": 999, "currency": "840"}`; the currency in either form ``Currency/init(_:)`` takes.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        do {
            try self.init(
                minorUnits: try container.decode(Int64.self, forKey: .minorUnits),
                currency: try Currency(try container.decode(String.self, forKey: .currency)))
        } catch let error as CardBasicsError {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }

    /// Writes `{"minorUnits": 999, "currency": "840"}`: the numeric code, as ISO 8583 carries it.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(minorUnits, forKey: .minorUnits)
        try container.encode(currency.numericString, forKey: .currency)
    }
}
