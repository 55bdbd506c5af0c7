import ISO4217

/// An ISO 4217 currency as the terminal takes it (the shared table of ``ISO4217Currency``).
public struct Currency: Sendable, Hashable, CustomStringConvertible {
    let iso: ISO4217Currency

    /// `USD`.
    public var code: String { iso.code }
    /// 840.
    public var numericCode: Int { Int(iso.numericCode) }
    /// How many decimals the currency has.
    public var exponent: Int { iso.exponent }
    /// The numeric code as three digits (`"840"`, `"036"`).
    public var numericString: String { iso.numericString }
    public var description: String { code }

    /// The currency with alphabetic code `code` (case-insensitive) or numeric code `code` (three digits).
    public init(_ code: String) throws(TerminalError) {
        let upper = code.uppercased()
        if let found = ISO4217Currency(code: upper) ?? ISO4217Currency.all.first(where: { $0.numericString == code }) {
            iso = found
            return
        }
        throw TerminalError(
            .unknownCurrency, "\(code.prefix(8)) is not a currency this terminal knows (ISO 4217, e.g. USD, EUR)")
    }

    /// The currency with numeric code `numericCode`, if known.
    public init?(numericCode: Int) {
        guard let found = ISO4217Currency(numericCode: numericCode) else { return nil }
        iso = found
    }
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
        let minorUnits: Int64
        do {
            minorUnits = try currency.iso.minorUnits(parsing: text)
        } catch .notADecimal {
            throw TerminalError(.invalidAmount, "an amount is a decimal number such as 12.34 (no sign or grouping)")
        } catch .tooManyDecimals {
            throw TerminalError(.invalidAmount, "\(currency.code) amounts have \(currency.iso.decimalsDescription)")
        } catch {
            throw TerminalError(.invalidAmount, "the amount is above what a terminal can charge")
        }
        try self.init(minorUnits: minorUnits, currency: currency)
    }

    /// `12.34 USD`.
    public var description: String { "\(currency.iso.decimalString(minorUnits: minorUnits)) \(currency.code)" }
}
