/// The ISO 4217 currencies the sandbox knows: alphabetic code, numeric code, minor-unit exponent.
public struct CurrencyCode: Hashable, Sendable, CustomStringConvertible {
    public let alphabetic: String
    public let numeric: UInt16
    public let exponent: Int

    static let known: [String: (UInt16, Int)] = [
        "USD": (840, 2), "EUR": (978, 2), "GBP": (826, 2), "CHF": (756, 2), "CAD": (124, 2), "AUD": (36, 2),
        "JPY": (392, 0), "SEK": (752, 2), "NOK": (578, 2), "DKK": (208, 2),
    ]

    public init(_ alphabetic: String) throws(PaymentSheetError) {
        guard let (numeric, exponent) = Self.known[alphabetic] else {
            throw PaymentSheetError(.invalidRequest, "unknown currency \(alphabetic) (ISO 4217 alphabetic, e.g. USD)")
        }
        self.alphabetic = alphabetic
        self.numeric = numeric
        self.exponent = exponent
    }

    /// A decimal string (`"9.99"`) in minor units; more decimals than the currency has, signs and grouping are
    /// refused.
    public func minorUnits(_ decimal: String) throws(PaymentSheetError) -> Int64 {
        let parts = decimal.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let whole = parts.first, !whole.isEmpty, whole.count <= 12,
            whole.allSatisfy(\.isASCII), whole.allSatisfy(\.isNumber)
        else { throw PaymentSheetError(.invalidRequest, "\"\(decimal)\" is not an amount") }
        let fraction = parts.count == 2 ? String(parts[1]) : ""
        guard fraction.count <= exponent, fraction.allSatisfy({ $0.isASCII && $0.isNumber }),
            parts.count == 1 || !fraction.isEmpty
        else {
            throw PaymentSheetError(.invalidRequest, "\"\(decimal)\" has more decimals than \(alphabetic) has")
        }
        let padded = fraction + String(repeating: "0", count: exponent - fraction.count)
        guard let value = Int64(String(whole) + padded) else {
            throw PaymentSheetError(.invalidRequest, "\"\(decimal)\" is out of range")
        }
        return value
    }

    public var description: String { alphabetic }
}
