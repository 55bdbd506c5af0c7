/// An ISO 4217 currency the store sells in: alphabetic code, numeric code (what the token's `currencyCode` and
/// the acquirer carry) and minor-unit exponent. The same table as the terminal's `Currency`, which this module
/// does not link.
public struct OrderCurrency: Sendable, Hashable, CustomStringConvertible {
    /// `USD`.
    public let code: String
    /// 840.
    public let numericCode: UInt16
    /// Decimals: 2 for USD, 0 for JPY, 3 for BHD.
    public let exponent: Int

    private init(_ code: String, _ numericCode: UInt16, _ exponent: Int) {
        self.code = code
        self.numericCode = numericCode
        self.exponent = exponent
    }

    /// The numeric code as three digits (`"840"`, `"036"`), as in the decrypted payment data.
    public var numericString: String {
        let digits = String(numericCode)
        return String(repeating: "0", count: max(0, 3 - digits.count)) + digits
    }

    public var description: String { code }

    /// The currency with alphabetic code `code` (upper case, as ISO 4217 writes it).
    public init(code: String) throws(MerchantServerError) {
        guard let found = Self.all.first(where: { $0.code == code }) else {
            throw MerchantServerError(
                .malformedRequest, "\"\(code.prefix(8))\" is not a currency this store sells in (ISO 4217, e.g. USD)")
        }
        self = found
    }

    public static let all: [OrderCurrency] = [
        OrderCurrency("USD", 840, 2), OrderCurrency("EUR", 978, 2), OrderCurrency("GBP", 826, 2),
        OrderCurrency("JPY", 392, 0), OrderCurrency("CHF", 756, 2), OrderCurrency("CAD", 124, 2),
        OrderCurrency("AUD", 36, 2), OrderCurrency("NZD", 554, 2), OrderCurrency("SEK", 752, 2),
        OrderCurrency("NOK", 578, 2), OrderCurrency("DKK", 208, 2), OrderCurrency("PLN", 985, 2),
        OrderCurrency("CZK", 203, 2), OrderCurrency("HUF", 348, 2), OrderCurrency("CNY", 156, 2),
        OrderCurrency("HKD", 344, 2), OrderCurrency("SGD", 702, 2), OrderCurrency("INR", 356, 2),
        OrderCurrency("BRL", 986, 2), OrderCurrency("MXN", 484, 2), OrderCurrency("ZAR", 710, 2),
        OrderCurrency("KRW", 410, 0), OrderCurrency("ISK", 352, 0), OrderCurrency("CLP", 152, 0),
        OrderCurrency("BHD", 48, 3), OrderCurrency("KWD", 414, 3), OrderCurrency("JOD", 400, 3),
        OrderCurrency("OMR", 512, 3), OrderCurrency("TND", 788, 3),
    ]
}

/// An order total: a positive integer number of minor units of a currency, at most what a payment credential
/// carries (999,999,999,999).
public struct OrderAmount: Sendable, Hashable, CustomStringConvertible {
    public static let maximumMinorUnits: Int64 = 999_999_999_999

    public let minorUnits: Int64
    public let currency: OrderCurrency

    /// An amount of 1 to ``maximumMinorUnits`` minor units.
    public init(minorUnits: Int64, currency: OrderCurrency) throws(MerchantServerError) {
        guard (1...Self.maximumMinorUnits).contains(minorUnits) else {
            throw MerchantServerError(.malformedRequest, "an amount is 1 to \(Self.maximumMinorUnits) minor units")
        }
        self.minorUnits = minorUnits
        self.currency = currency
    }

    /// Parses a decimal string such as `9.99`: digits, optionally a point and at most as many decimals as the
    /// currency has (`9.999 USD` and `5.5 JPY` are refused, never rounded). No sign, grouping or exponent.
    public init(parsing text: String, currency: OrderCurrency) throws(MerchantServerError) {
        let parts = text.split(separator: ".", maxSplits: 2, omittingEmptySubsequences: false)
        let integral = parts[0]
        let fraction = parts.count > 1 ? parts[1] : ""
        let isDigits = { (part: Substring) in part.utf8.allSatisfy { (0x30...0x39).contains($0) } }
        guard parts.count <= 2, !integral.isEmpty, isDigits(integral), isDigits(fraction),
            parts.count == 1 || !fraction.isEmpty
        else {
            throw MerchantServerError(
                .malformedRequest, "an amount is a decimal string such as \"9.99\" (no sign or grouping)")
        }
        guard fraction.count <= currency.exponent else {
            let decimals = currency.exponent == 0 ? "no decimals" : "at most \(currency.exponent) decimals"
            throw MerchantServerError(.malformedRequest, "\(currency.code) amounts have \(decimals)")
        }
        let digits =
            String(integral.drop(while: { $0 == "0" })) + String(fraction)
            + String(repeating: "0", count: currency.exponent - fraction.count)
        guard digits.count <= 12, let minorUnits = Int64(digits.isEmpty ? "0" : digits) else {
            throw MerchantServerError(.malformedRequest, "the amount is above what a payment can carry")
        }
        try self.init(minorUnits: minorUnits, currency: currency)
    }

    /// The decimal form without the currency: `9.99`, `500` (JPY), `1.250` (BHD).
    public var decimalString: String {
        let digits = String(minorUnits)
        guard currency.exponent > 0 else { return digits }
        let padded = String(repeating: "0", count: max(0, currency.exponent + 1 - digits.count)) + digits
        return "\(padded.dropLast(currency.exponent)).\(padded.suffix(currency.exponent))"
    }

    /// `9.99 USD`.
    public var description: String { "\(decimalString) \(currency.code)" }
}
