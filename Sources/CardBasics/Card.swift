public import Foundation
package import OrchardCrypto

/// A card's or a token's expiry: valid through the last day of `month` (UTC).
public struct CardExpiry: Hashable, Sendable, Codable, Comparable, CustomStringConvertible {
    /// Four-digit year, 2000 to 2099.
    public let year: Int
    /// 1 to 12.
    public let month: Int

    public init(year: Int, month: Int) throws(CardBasicsError) {
        guard (2000...2099).contains(year), (1...12).contains(month) else {
            throw CardBasicsError(.invalidExpiry, "an expiry needs a year 2000–2099 and a month 1–12")
        }
        self.year = year
        self.month = month
    }

    /// From `YYMM` (EMV tag 5F24's first four digits, ISO 8583 DE 14): exactly four ASCII digits.
    public init(yymm: String) throws(CardBasicsError) {
        guard yymm.utf8.count == 4, isASCIIDigits(yymm), let yy = Int(yymm.prefix(2)), let mm = Int(yymm.suffix(2))
        else { throw CardBasicsError(.invalidExpiry, "an expiry in YYMM form must be four digits") }
        try self.init(year: 2000 + yy, month: mm)
    }

    /// `YYMM`.
    public var yymm: String { twoDigits(year % 100) + twoDigits(month) }

    /// `MM/YY`, as printed on a card.
    public var display: String { twoDigits(month) + "/" + twoDigits(year % 100) }

    /// Whether the card can no longer be used at `date`: true from the first instant of the next month (UTC).
    public func isExpired(at date: Date) -> Bool {
        let parts = Self.utcCalendar.dateComponents([.year, .month], from: date)
        guard let y = parts.year, let m = parts.month else { return true }
        return (y, m) > (year, month)
    }

    /// The expiry `months` months after the month of `date` (UTC).
    public static func months(_ months: Int, after date: Date) throws(CardBasicsError) -> CardExpiry {
        let parts = utcCalendar.dateComponents([.year, .month], from: date)
        let total = (parts.year ?? 2000) * 12 + (parts.month ?? 1) - 1 + months
        return try CardExpiry(year: total / 12, month: total % 12 + 1)
    }

    private static var utcCalendar: Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        return calendar
    }

    private enum CodingKeys: String, CodingKey { case year, month }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        do {
            try self.init(
                year: try container.decode(Int.self, forKey: .year),
                month: try container.decode(Int.self, forKey: .month))
        } catch let error as CardBasicsError {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }

    public static func < (a: Self, b: Self) -> Bool { (a.year, a.month) < (b.year, b.month) }
    public var description: String { display }
}

/// `value` (0–99) as two digits.
private func twoDigits(_ value: Int) -> String { (value < 10 ? "0" : "") + String(value) }

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

/// How a card is funded: what the issuer records and the wallet shows.
public enum CardType: String, Hashable, Sendable, Codable, CaseIterable, CustomStringConvertible {
    case credit, debit, prepaid

    public var description: String { rawValue }
}

/// A card verification value (CVV2 / CVC2 / CID) as the cardholder typed it: 3 or 4 digits.
///
/// Deliberately not `Codable`, so it cannot end up in a store or a JSON record by accident, and redacted
/// in every textual form. It lives only as long as the request that carries it.
public struct CardVerificationValue: Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    package let value: SecureBytes

    public init(_ digits: String) throws(CardBasicsError) {
        guard (3...4).contains(digits.utf8.count), isASCIIDigits(digits) else {
            throw CardBasicsError(.invalidVerificationValue, "a card verification value must be 3 or 4 digits")
        }
        value = SecureBytes(Array(digits.utf8))
    }

    /// Constant-time comparison with the expected digits.
    public func matches(_ expected: String) -> Bool {
        value == SecureBytes(Array(expected.utf8))
    }

    public var description: String { "CardVerificationValue(<redacted>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
