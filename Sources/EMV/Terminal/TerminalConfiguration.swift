/// A contactless reader's configuration: where it is, what it accepts, and its limits.
public struct TerminalConfiguration: Sendable, Hashable {
    /// An application the reader accepts, and which kernel processes it.
    public struct SupportedApplication: Sendable, Hashable {
        /// The application identifier the reader selects (5 to 16 bytes).
        public let aid: [UInt8]
        /// The scheme whose kernel processes the application.
        public let scheme: PaymentScheme

        /// An accepted application: `aid` processed by `scheme`'s kernel.
        public init(aid: [UInt8], scheme: PaymentScheme) {
            self.aid = aid
            self.scheme = scheme
        }
    }

    /// ISO 3166 numeric country code of the terminal (tag 9F1A), e.g. 840.
    public var countryCode: Int
    /// ISO 4217 numeric currency code of the transaction (tag 5F2A), e.g. 840 or 978.
    public var currencyCode: Int
    /// The Terminal Transaction Qualifiers (tag 9F66) before per-transaction bits are added.
    public var terminalTransactionQualifiers: [UInt8]
    /// The terminal type (tag 9F35): `22` attended, online with offline capability, merchant.
    public var terminalType: UInt8
    /// Accepted applications, matched against the PPSE by AID prefix.
    public var supportedApplications: [SupportedApplication]
    /// An AID to choose when the card offers it, whatever the card's priorities (e.g. a merchant's choice).
    public var preferredAID: [UInt8]?
    /// Amounts above this (minor units) are not accepted contactless: the outcome is "try another interface".
    public var contactlessTransactionLimit: UInt64?
    /// Amounts at or above this (minor units) require a cardholder verification (TTQ byte 2 b7).
    public var cvmRequiredLimit: UInt64?

    /// A reader accepting the credit/debit AID of every scheme in ``PaymentScheme/all`` (Visa, Mastercard),
    /// with the TTQ of vector V9 (`36C04000`: qVSDC, contact chip, online PIN and signature, online cryptogram
    /// and CVM required, CDCVM supported).
    public init(
        countryCode: Int, currencyCode: Int, terminalTransactionQualifiers: [UInt8] = [0x36, 0xC0, 0x40, 0x00],
        terminalType: UInt8 = 0x22,
        supportedApplications: [SupportedApplication] = PaymentScheme.all.map { .init(aid: $0.aid, scheme: $0) },
        preferredAID: [UInt8]? = nil, contactlessTransactionLimit: UInt64? = nil, cvmRequiredLimit: UInt64? = nil
    ) {
        self.countryCode = countryCode
        self.currencyCode = currencyCode
        self.terminalTransactionQualifiers = terminalTransactionQualifiers
        self.terminalType = terminalType
        self.supportedApplications = supportedApplications
        self.preferredAID = preferredAID
        self.contactlessTransactionLimit = contactlessTransactionLimit
        self.cvmRequiredLimit = cvmRequiredLimit
    }
}

/// The date of a transaction as EMV carries it (tag 9A, `YYMMDD`).
public struct TransactionDate: Hashable, Sendable, CustomStringConvertible {
    /// The year within the century, 0 to 99.
    public let year: Int
    /// The month, 1 to 12.
    public let month: Int
    /// The day of the month, valid for `month` and `year`.
    public let day: Int

    /// Parses `YYMMDD`, checking the month and the day for that month.
    public init(yymmdd: String) throws(EMVError) {
        let digits = Array(yymmdd.utf8)
        guard digits.count == 6, digits.allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw EMVError(.invalidArgument, "a transaction date is YYMMDD (6 digits)")
        }
        func pair(_ i: Int) -> Int { Int(digits[i] - 0x30) * 10 + Int(digits[i + 1] - 0x30) }
        let (y, m, d) = (pair(0), pair(2), pair(4))
        guard (1...12).contains(m) else { throw EMVError(.invalidArgument, "month \(m) is not 01 to 12") }
        let days = [31, y % 4 == 0 ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][m - 1]
        guard (1...days).contains(d) else { throw EMVError(.invalidArgument, "day \(d) is not in month \(m)") }
        year = y
        month = m
        day = d
    }

    /// The 3-byte `n6` encoding.
    public var bytes: [UInt8] { [year, month, day].map { UInt8($0 / 10) << 4 | UInt8($0 % 10) } }

    public var description: String { bytes.hexString }
}

/// What the merchant's till asks the reader for: one purchase.
public struct TransactionParameters: Sendable, Hashable {
    /// Amount, authorised, in minor units (tag 9F02).
    public var amount: UInt64
    /// Amount, other (cashback), in minor units (tag 9F03).
    public var otherAmount: UInt64
    /// The transaction date (tag 9A).
    public var date: TransactionDate
    /// Transaction type (tag 9C): `00` purchase.
    public var type: UInt8
    /// The terminal's unpredictable number (tag 9F37); nil to draw it from the kernel's random source.
    public var unpredictableNumber: [UInt8]?

    /// A purchase of `amount` (and `otherAmount` cashback) on `date`; the kernel checks the amounts against its limits.
    public init(
        amount: UInt64, otherAmount: UInt64 = 0, date: TransactionDate, type: UInt8 = 0x00,
        unpredictableNumber: [UInt8]? = nil
    ) {
        self.amount = amount
        self.otherAmount = otherAmount
        self.date = date
        self.type = type
        self.unpredictableNumber = unpredictableNumber
    }
}
