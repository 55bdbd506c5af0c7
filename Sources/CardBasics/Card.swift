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

/// A card network (payment scheme): its names in Apple's APIs, the ECIs its e-commerce payments carry, the
/// card number ranges of its cards and of the tokens Orchard issues for it, and the EMV scheme its
/// contactless applications follow.
///
/// A struct of static members, so networks can be added without breaking callers; code reads a network's
/// fields instead of switching on it. A network is identified by its ``name``: two networks are equal when
/// their names are, and a network Orchard has no table entry for (from ``init(_:)`` or decoding) has only
/// its name.
public struct CardNetwork: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The electronic commerce indicators (ECI) of a network's in-app and web payments that carry the
    /// device's cryptogram: the device verified the cardholder, so each is the network's "fully
    /// authenticated" value. A contactless payment has no ECI (its chip data authenticates it).
    public struct ElectronicCommerceIndicators: Hashable, Sendable {
        /// The ECI of an in-app payment, two digits.
        public let inApp: String
        /// The ECI of a web payment, two digits.
        public let web: String

        fileprivate init(inApp: String, web: String) {
            self.inApp = inApp
            self.web = web
        }
    }

    /// Apple Pay JS's name for the network, as `supportedNetworks` spells it (`visa`, `masterCard`,
    /// `amex`, `discover`): the form Orchard stores and sends.
    public let name: String
    /// PassKit's name for the network, the raw value of its `PKPaymentNetwork` (`Visa`, `MasterCard`,
    /// `AmEx`, `Discover`); nil for a network with no table entry.
    public let passKitName: String?
    /// The ECIs of the network's in-app and web payments; nil for a network with no table entry.
    public let electronicCommerceIndicators: ElectronicCommerceIndicators?
    /// The prefixes of the network's card numbers (funding PANs); none overlaps another network's.
    public let cardRanges: [CardNumberRange]
    /// The prefixes Orchard draws the network's device tokens (DPANs) from; each lies within
    /// ``cardRanges``.
    public let tokenRanges: [CardNumberRange]
    /// The name of the EMV payment scheme (`EMV.PaymentScheme.name`) whose kernel and cryptograms the
    /// network's contactless applications follow; nil when Orchard has no contactless applet for it.
    public let paymentSchemeName: String?

    private init(
        name: String, passKitName: String?, eci: ElectronicCommerceIndicators?, cardRanges: [CardNumberRange],
        tokenRanges: [CardNumberRange], paymentSchemeName: String?
    ) {
        self.name = name
        self.passKitName = passKitName
        self.electronicCommerceIndicators = eci
        self.cardRanges = cardRanges
        self.tokenRanges = tokenRanges
        self.paymentSchemeName = paymentSchemeName
    }

    /// The network in ``all`` named `name` (its ``name``, exactly), else a network with only that name.
    public init(_ name: String) {
        self =
            CardNetwork.all.first { $0.name == name }
            ?? CardNetwork(
                name: name, passKitName: nil, eci: nil, cardRanges: [], tokenRanges: [], paymentSchemeName: nil)
    }

    /// The network in ``all`` whose Apple Pay JS or PassKit name is `name`, compared without regard to
    /// case (`visa`, `VISA`, `MasterCard`, `mastercard`), or nil.
    public init?(named name: String) {
        let lowered = name.lowercased()
        guard
            let known = CardNetwork.all.first(where: {
                $0.name.lowercased() == lowered || $0.passKitName?.lowercased() == lowered
            })
        else { return nil }
        self = known
    }

    /// The network in ``all`` one of whose ``cardRanges`` holds `pan`, or nil.
    public init?(pan: String) {
        guard let known = CardNetwork.all.first(where: { $0.cardRanges.contains { $0.contains(pan) } }) else {
            return nil
        }
        self = known
    }

    /// Visa: ECI `05` in app and on the web; cards from 4; tokens from 489537; EMV scheme `visa`.
    public static let visa = CardNetwork(
        name: "visa", passKitName: "Visa", eci: ElectronicCommerceIndicators(inApp: "05", web: "05"),
        cardRanges: [CardNumberRange("4")], tokenRanges: [CardNumberRange("489537")], paymentSchemeName: "visa")
    /// Mastercard: ECI `02` in app and on the web; cards from 51–55 and 2221–2720; tokens from 539990;
    /// EMV scheme `mastercard`.
    public static let mastercard = CardNetwork(
        name: "masterCard", passKitName: "MasterCard", eci: ElectronicCommerceIndicators(inApp: "02", web: "02"),
        cardRanges: [CardNumberRange("51", "55"), CardNumberRange("2221", "2720")],
        tokenRanges: [CardNumberRange("539990")], paymentSchemeName: "mastercard")
    /// American Express: ECI `05` in app and on the web; cards from 34 and 37; no tokens or contactless
    /// applet in Orchard.
    public static let amex = CardNetwork(
        name: "amex", passKitName: "AmEx", eci: ElectronicCommerceIndicators(inApp: "05", web: "05"),
        cardRanges: [CardNumberRange("34"), CardNumberRange("37")], tokenRanges: [], paymentSchemeName: nil)
    /// Discover: ECI `05` in app and on the web; cards from 6011, 644–649 and 65; no tokens or contactless
    /// applet in Orchard.
    public static let discover = CardNetwork(
        name: "discover", passKitName: "Discover", eci: ElectronicCommerceIndicators(inApp: "05", web: "05"),
        cardRanges: [CardNumberRange("6011"), CardNumberRange("644", "649"), CardNumberRange("65")], tokenRanges: [],
        paymentSchemeName: nil)

    /// Every network Orchard has a table entry for.
    public static let all: [CardNetwork] = [.visa, .mastercard, .amex, .discover]

    /// Networks are equal when their names are.
    public static func == (a: Self, b: Self) -> Bool { a.name == b.name }
    /// Hashes the name.
    public func hash(into hasher: inout Hasher) { hasher.combine(name) }

    /// Decodes the network's ``name`` (a JSON string), as ``init(_:)`` does.
    public init(from decoder: any Decoder) throws { self.init(try decoder.singleValueContainer().decode(String.self)) }
    /// Encodes the network's ``name`` as a JSON string.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(name)
    }
    public var description: String { name }
}

/// A range of card number prefixes whose two ends have the same number of digits (`4`…`4`, `2221`…`2720`):
/// a card number is in it when its first digits, read as a number, lie between the ends.
public struct CardNumberRange: Hashable, Sendable, CustomStringConvertible {
    /// The lowest prefix, 1 to 12 digits.
    public let lowerPrefix: String
    /// The highest prefix, as many digits as ``lowerPrefix``.
    public let upperPrefix: String

    fileprivate init(_ lowerPrefix: String, _ upperPrefix: String? = nil) {
        self.lowerPrefix = lowerPrefix
        self.upperPrefix = upperPrefix ?? lowerPrefix
    }

    /// Whether `pan`'s first digits lie in the range.
    public func contains(_ pan: String) -> Bool {
        let prefix = String(pan.prefix(lowerPrefix.count))
        return prefix.count == lowerPrefix.count && isASCIIDigits(prefix) && lowerPrefix <= prefix
            && prefix <= upperPrefix
    }

    /// Whether a card number can lie in both ranges.
    public func overlaps(_ other: CardNumberRange) -> Bool {
        let digits = max(lowerPrefix.count, other.lowerPrefix.count)
        func low(_ range: CardNumberRange) -> String {
            range.lowerPrefix + String(repeating: "0", count: digits - range.lowerPrefix.count)
        }
        func high(_ range: CardNumberRange) -> String {
            range.upperPrefix + String(repeating: "9", count: digits - range.upperPrefix.count)
        }
        return low(self) <= high(other) && low(other) <= high(self)
    }

    /// Whether every card number in `other` lies in this range.
    public func contains(_ other: CardNumberRange) -> Bool {
        other.lowerPrefix.count >= lowerPrefix.count && contains(other.lowerPrefix) && contains(other.upperPrefix)
    }

    public var description: String { lowerPrefix == upperPrefix ? lowerPrefix : "\(lowerPrefix)…\(upperPrefix)" }
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
