public import Foundation
package import OrchardCrypto

/// A primary account number (a card's FPAN or a token's DPAN): 12 to 19 decimal digits with a valid Luhn
/// check digit.
///
/// Every textual form a log or a failure message could pick up (`description`, `debugDescription`, the
/// mirror) shows only the masked form, first six and last four digits. The full number is available as
/// ``digits`` for the few places that must hold it (the issuer's card records, the token vault's DPAN index,
/// a network message) and is what `Codable` writes.
public struct PrimaryAccountNumber: Hashable, Sendable, Codable, CustomStringConvertible,
    CustomDebugStringConvertible, CustomReflectable
{
    /// The full number, digits only.
    public let digits: String

    /// Validates length (12–19), characters (ASCII digits only) and the Luhn check digit.
    public init(_ digits: String) throws(IssuerError) {
        let bytes = Array(digits.utf8)
        guard (12...19).contains(bytes.count), bytes.allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw IssuerError(.invalidInput, "a card number must be 12 to 19 digits")
        }
        guard Luhn.isValid(bytes.map { Int($0 - 0x30) }) else {
            throw IssuerError(.invalidInput, "the card number's check digit is wrong (Luhn)")
        }
        self.digits = digits
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do {
            try self.init(text)
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(digits)
    }

    /// The first six digits (the BIN / IIN).
    public var bin: String { String(digits.prefix(6)) }
    /// The last four digits, safe to show a user.
    public var suffix: String { String(digits.suffix(4)) }
    /// First six and last four digits, the rest as `*` (PCI DSS 3.4's maximum displayable form).
    public var masked: String {
        String(digits.prefix(6)) + String(repeating: "*", count: digits.count - 10) + String(digits.suffix(4))
    }

    public var description: String { masked }
    public var debugDescription: String { "PrimaryAccountNumber(\(masked))" }
    public var customMirror: Mirror { Mirror(self, children: ["masked": masked], displayStyle: .struct) }
}

/// The Luhn (mod 10) check digit of ISO/IEC 7812-1.
public enum Luhn {
    /// Whether the digits (most significant first) end in a correct check digit.
    public static func isValid(_ digits: [Int]) -> Bool {
        guard !digits.isEmpty else { return false }
        return checkDigit(for: digits.dropLast()) == digits.last
    }

    /// The check digit to append to `payload` (most significant digit first).
    public static func checkDigit(for payload: some Collection<Int>) -> Int {
        var sum = 0
        // Doubling starts with the rightmost payload digit (it becomes second from the right).
        for (index, digit) in payload.reversed().enumerated() {
            if index % 2 == 0 {
                let doubled = digit * 2
                sum += doubled > 9 ? doubled - 9 : doubled
            } else {
                sum += digit
            }
        }
        return (10 - sum % 10) % 10
    }
}

/// A card's or a token's expiry: valid through the last day of `month` (UTC).
public struct CardExpiry: Hashable, Sendable, Codable, Comparable, CustomStringConvertible {
    /// Four-digit year.
    public let year: Int
    /// 1 to 12.
    public let month: Int

    public init(year: Int, month: Int) throws(IssuerError) {
        guard (2000...2099).contains(year), (1...12).contains(month) else {
            throw IssuerError(.invalidInput, "an expiry needs a year 2000–2099 and a month 1–12")
        }
        self.year = year
        self.month = month
    }

    /// From `YYMM` (EMV tag 5F24's first four digits, ISO 8583 DE 14).
    public init(yymm: String) throws(IssuerError) {
        let bytes = Array(yymm.utf8)
        guard bytes.count == 4, bytes.allSatisfy({ (0x30...0x39).contains($0) }),
            let yy = Int(yymm.prefix(2)), let mm = Int(yymm.suffix(2))
        else { throw IssuerError(.invalidInput, "an expiry in YYMM form must be four digits") }
        try self.init(year: 2000 + yy, month: mm)
    }

    /// `YYMM`.
    public var yymm: String {
        let yy = year % 100
        return (yy < 10 ? "0" : "") + String(yy) + (month < 10 ? "0" : "") + String(month)
    }

    /// `MM/YY`, as printed on a card.
    public var display: String {
        let yy = year % 100
        return (month < 10 ? "0" : "") + String(month) + "/" + (yy < 10 ? "0" : "") + String(yy)
    }

    /// Whether the card can no longer be used at `date`: true from the first instant of the next month (UTC).
    public func isExpired(at date: Date) -> Bool {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        let parts = calendar.dateComponents([.year, .month], from: date)
        guard let y = parts.year, let m = parts.month else { return true }
        return (y, m) > (year, month)
    }

    /// The expiry `years` years after the month of `date` (UTC).
    public static func months(_ months: Int, after date: Date) throws(IssuerError) -> CardExpiry {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        let parts = calendar.dateComponents([.year, .month], from: date)
        let total = (parts.year ?? 2000) * 12 + (parts.month ?? 1) - 1 + months
        return try CardExpiry(year: total / 12, month: total % 12 + 1)
    }

    private enum CodingKeys: String, CodingKey { case year, month }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        do {
            try self.init(
                year: try container.decode(Int.self, forKey: .year),
                month: try container.decode(Int.self, forKey: .month))
        } catch let error as IssuerError {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }

    public static func < (a: Self, b: Self) -> Bool { (a.year, a.month) < (b.year, b.month) }
    public var description: String { display }
}

/// A card network (payment scheme). A struct so networks can be added without breaking callers.
public struct CardNetwork: Hashable, Sendable, Codable, CustomStringConvertible {
    /// Lower-case name as Apple Pay's `supportedNetworks` spells it (`visa`, `masterCard`, ...).
    public let name: String
    public init(_ name: String) { self.name = name }

    public static let visa = CardNetwork("visa")
    public static let mastercard = CardNetwork("masterCard")
    public static let amex = CardNetwork("amex")
    public static let discover = CardNetwork("discover")

    public init(from decoder: any Decoder) throws { name = try decoder.singleValueContainer().decode(String.self) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(name)
    }
    public var description: String { name }
}

/// How a card is funded.
public enum CardType: String, Hashable, Sendable, Codable, CaseIterable {
    case credit, debit, prepaid
}

/// A card verification value (CVV2 / CVC2 / CID) as the cardholder typed it: 3 or 4 digits.
///
/// Deliberately not `Codable`, so it cannot end up in a store or a JSON record by accident, and redacted
/// in every textual form. It lives only as long as the Check Card request that carries it.
public struct CardVerificationValue: Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    package let value: SecureBytes

    public init(_ digits: String) throws(IssuerError) {
        let bytes = Array(digits.utf8)
        guard (3...4).contains(bytes.count), bytes.allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw IssuerError(.invalidInput, "a card verification value must be 3 or 4 digits")
        }
        value = SecureBytes(bytes)
    }

    /// Constant-time comparison with the expected digits.
    public func matches(_ expected: String) -> Bool {
        value == SecureBytes(Array(expected.utf8))
    }

    public var description: String { "CardVerificationValue(<redacted>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

/// An amount of money in minor units of an ISO 4217 currency (numeric code, e.g. `"840"` for USD).
public struct Money: Hashable, Sendable, Codable, CustomStringConvertible {
    public let minorUnits: Int64
    /// ISO 4217 numeric code, three digits.
    public let currency: String

    public init(minorUnits: Int64, currency: String) throws(IssuerError) {
        let bytes = Array(currency.utf8)
        guard bytes.count == 3, bytes.allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw IssuerError(.invalidInput, "a currency is a three-digit ISO 4217 numeric code")
        }
        guard minorUnits >= 0 else { throw IssuerError(.invalidInput, "an amount cannot be negative") }
        self.minorUnits = minorUnits
        self.currency = currency
    }

    private enum CodingKeys: String, CodingKey { case minorUnits, currency }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        do {
            try self.init(
                minorUnits: try container.decode(Int64.self, forKey: .minorUnits),
                currency: try container.decode(String.self, forKey: .currency))
        } catch let error as IssuerError {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }

    public var description: String { "\(minorUnits) (\(currency))" }
}
