/// An ISO 4217 currency: its alphabetic code, its numeric code (what EMV's tag 5F2A, ISO 8583 and Apple Pay's
/// payment data carry) and its minor-unit exponent (2 for USD: cents; 0 for JPY, ISK, CLP; 3 for BHD).
///
/// Only currencies of the table (``all``) exist, so holding a `Currency` means the exponent is known.
public struct Currency: Sendable, Hashable, CustomStringConvertible {
    /// `USD`, upper case as ISO 4217 writes it.
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

    /// The one currency parser. Accepts the alphabetic code in either letter case (`USD`, `usd`) or the numeric
    /// code as exactly three digits (`840`, `036`), and nothing else (no spaces, no `36`, no unknown code).
    public init(_ text: String) throws(CardBasicsError) {
        let found: Currency?
        if text.utf8.count == 3, isASCIIDigits(text) {
            found = Int(text).flatMap { Self(numericCode: $0) }
        } else {
            let upper = text.uppercased()
            found = Self.all.first { $0.code == upper }
        }
        guard let found else {
            throw CardBasicsError(
                .unknownCurrency,
                "\"\(text.prefix(8))\" is not an ISO 4217 currency code known here (alphabetic such as USD, or "
                    + "three digits such as 840)")
        }
        self = found
    }

    /// The currency with numeric code `numericCode`, if the table has it.
    public init?(numericCode: Int) {
        guard let found = Self.all.first(where: { Int($0.numericCode) == numericCode }) else { return nil }
        self = found
    }

    /// The numeric code as three digits (`"840"`, `"036"`): the form ISO 8583 and Apple Pay's payment data use.
    public var numericString: String {
        let digits = String(numericCode)
        return String(repeating: "0", count: 3 - digits.count) + digits
    }

    /// "no decimals" or "at most N decimals", for error messages.
    public var decimalsDescription: String { exponent == 0 ? "no decimals" : "at most \(exponent) decimals" }

    public var description: String { code }

    /// The currencies Orchard knows.
    public static let all: [Currency] = [
        .init("USD", 840, 2), .init("EUR", 978, 2), .init("GBP", 826, 2), .init("JPY", 392, 0),
        .init("CHF", 756, 2), .init("CAD", 124, 2), .init("AUD", 36, 2), .init("NZD", 554, 2),
        .init("SEK", 752, 2), .init("NOK", 578, 2), .init("DKK", 208, 2), .init("PLN", 985, 2),
        .init("CZK", 203, 2), .init("HUF", 348, 2), .init("CNY", 156, 2), .init("HKD", 344, 2),
        .init("SGD", 702, 2), .init("INR", 356, 2), .init("BRL", 986, 2), .init("MXN", 484, 2),
        .init("ZAR", 710, 2), .init("KRW", 410, 0), .init("ISK", 352, 0), .init("CLP", 152, 0),
        .init("BHD", 48, 3), .init("KWD", 414, 3), .init("JOD", 400, 3), .init("OMR", 512, 3),
        .init("TND", 788, 3), .init("IQD", 368, 3), .init("LYD", 434, 3),
    ]
}
