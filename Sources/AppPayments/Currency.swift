import ISO4217

/// The request's ISO 4217 currency (the shared table of ``ISO4217Currency``).
public struct CurrencyCode: Hashable, Sendable, CustomStringConvertible {
    let iso: ISO4217Currency

    public var alphabetic: String { iso.code }
    public var numeric: UInt16 { iso.numericCode }
    public var exponent: Int { iso.exponent }

    public init(_ alphabetic: String) throws(PaymentSheetError) {
        guard let found = ISO4217Currency(code: alphabetic) else {
            throw PaymentSheetError(.invalidRequest, "unknown currency \(alphabetic) (ISO 4217 alphabetic, e.g. USD)")
        }
        iso = found
    }

    /// A decimal string (`"9.99"`) in minor units; more decimals than the currency has, signs and grouping are
    /// refused.
    public func minorUnits(_ decimal: String) throws(PaymentSheetError) -> Int64 {
        do {
            return try iso.minorUnits(parsing: decimal)
        } catch .tooManyDecimals {
            throw PaymentSheetError(.invalidRequest, "\"\(decimal)\" has more decimals than \(alphabetic) has")
        } catch .tooLarge {
            throw PaymentSheetError(.invalidRequest, "\"\(decimal)\" is out of range")
        } catch {
            throw PaymentSheetError(.invalidRequest, "\"\(decimal)\" is not an amount")
        }
    }

    public var description: String { alphabetic }
}
