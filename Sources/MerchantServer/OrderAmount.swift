import ISO4217

/// An ISO 4217 currency the store sells in (the shared table of ``ISO4217Currency``).
public struct OrderCurrency: Sendable, Hashable, CustomStringConvertible {
    let iso: ISO4217Currency

    /// `USD`.
    public var code: String { iso.code }
    /// 840.
    public var numericCode: UInt16 { iso.numericCode }
    /// Decimals: 2 for USD, 0 for JPY, 3 for BHD.
    public var exponent: Int { iso.exponent }
    /// The numeric code as three digits (`"840"`, `"036"`), as in the decrypted payment data.
    public var numericString: String { iso.numericString }
    public var description: String { code }

    /// The currency with alphabetic code `code` (upper case, as ISO 4217 writes it).
    public init(code: String) throws(MerchantServerError) {
        guard let found = ISO4217Currency(code: code) else {
            throw MerchantServerError(
                .malformedRequest, "\"\(code.prefix(8))\" is not a currency this store sells in (ISO 4217, e.g. USD)")
        }
        iso = found
    }
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
        let minorUnits: Int64
        do {
            minorUnits = try currency.iso.minorUnits(parsing: text)
        } catch .notADecimal {
            throw MerchantServerError(
                .malformedRequest, "an amount is a decimal string such as \"9.99\" (no sign or grouping)")
        } catch .tooManyDecimals {
            throw MerchantServerError(
                .malformedRequest, "\(currency.code) amounts have \(currency.iso.decimalsDescription)")
        } catch {
            throw MerchantServerError(.malformedRequest, "the amount is above what a payment can carry")
        }
        try self.init(minorUnits: minorUnits, currency: currency)
    }

    /// The decimal form without the currency: `9.99`, `500` (JPY), `1.250` (BHD).
    public var decimalString: String { currency.iso.decimalString(minorUnits: minorUnits) }

    /// `9.99 USD`.
    public var description: String { "\(decimalString) \(currency.code)" }
}
