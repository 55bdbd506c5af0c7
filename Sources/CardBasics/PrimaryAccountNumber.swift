/// A primary account number (a card's FPAN or a token's DPAN): 12 to 19 decimal digits with a valid Luhn
/// check digit. The one card-number type of the project.
///
/// Every textual form a log or a failure message could pick up (`description`, `debugDescription`,
/// interpolation, the mirror that `dump` walks) shows only the masked form, first six and last four digits.
/// The full number is available as ``digits`` for the few places that must hold it (the issuer's card
/// records, the token vault's DPAN index, a network message) and is what `Codable` writes.
public struct PrimaryAccountNumber: Hashable, Sendable, Codable, CustomStringConvertible,
    CustomDebugStringConvertible, CustomReflectable
{
    /// The full number, digits only. For wire formats, stores and cryptography, never for display or logs.
    public let digits: String

    /// Validates length (12–19), characters (ASCII digits only) and the Luhn check digit. The error never
    /// repeats the input.
    public init(_ digits: String) throws(CardBasicsError) {
        let bytes = Array(digits.utf8)
        guard (12...19).contains(bytes.count), isASCIIDigits(digits) else {
            throw CardBasicsError(.invalidCardNumber, "a card number must be 12 to 19 digits")
        }
        guard Luhn.isValid(bytes.map { Int($0 - 0x30) }) else {
            throw CardBasicsError(.invalidCardNumber, "the card number's check digit is wrong (Luhn)")
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
    /// The last four digits, safe to show a user (what a wallet shows as the card's suffix).
    public var suffix: String { String(digits.suffix(4)) }
    /// First six and last four digits, the rest as `*` (PCI DSS 3.4's maximum displayable form), e.g.
    /// `411111******1111`.
    public var masked: String { Self.mask(digits) }

    /// The masked form of a card number held as text (a DPAN read from a decrypted token before it is checked as
    /// a ``PrimaryAccountNumber``): first six and last four characters, the rest as `*`; text shorter than 12
    /// characters is all `*`, as it is no card number to show part of.
    public static func mask(_ text: String) -> String {
        let characters = Array(text)
        guard characters.count >= 12 else { return String(repeating: "*", count: characters.count) }
        return String(characters.prefix(6)) + String(repeating: "*", count: characters.count - 10)
            + String(characters.suffix(4))
    }

    public var description: String { masked }
    public var debugDescription: String { "PrimaryAccountNumber(\(masked))" }
    public var customMirror: Mirror { Mirror(self, children: ["masked": masked], displayStyle: .struct) }
}

/// The Luhn (mod 10) check digit of ISO/IEC 7812-1.
public enum Luhn {
    /// Whether the digit values (0–9, most significant first) end in a correct check digit; false when empty.
    public static func isValid(_ digits: some BidirectionalCollection<Int>) -> Bool {
        guard let last = digits.last else { return false }
        return checkDigit(for: digits.dropLast()) == last
    }

    /// The check digit to append to `payload` (digit values, most significant first).
    public static func checkDigit(for payload: some BidirectionalCollection<Int>) -> Int {
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
