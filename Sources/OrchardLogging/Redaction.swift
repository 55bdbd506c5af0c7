// Typed redaction: values that must never reach a log print masked or `<redacted>` through every
// path Swift offers for turning a value into text: `description` (print, "\(x)", String(describing:)),
// `debugDescription` (debugPrint, String(reflecting:), and the synthesized description of any struct
// or enum that contains one) and the mirror (`dump`, and anything else that walks children).

/// The digits of a card number, validated once: 12 to 19 ASCII digits.
struct CardDigits: Hashable, Sendable {
    let digits: String

    init(_ text: String, what: String) throws(LoggingError) {
        let utf8 = text.utf8
        guard (12...19).contains(utf8.count), utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw LoggingError(.invalidCardNumber, "a \(what) is 12 to 19 digits with no spaces or other characters")
        }
        digits = text
    }

    /// The first six and last four digits, every other digit replaced by `*`.
    var masked: String {
        let chars = Array(digits)
        return String(chars.prefix(6)) + String(repeating: "*", count: chars.count - 10) + String(chars.suffix(4))
    }

    var isLuhnValid: Bool { Luhn.isValid(digits.utf8.map { $0 - 0x30 }) }
}

enum Luhn {
    /// The Luhn (mod 10) check over decimal digit values, most significant first.
    static func isValid(_ digits: some BidirectionalCollection<UInt8>) -> Bool {
        var sum = 0
        for (index, digit) in digits.reversed().enumerated() {
            var d = Int(digit)
            if index % 2 == 1 {
                d *= 2
                if d > 9 { d -= 9 }
            }
            sum += d
        }
        return sum % 10 == 0
    }
}

/// A funding card number (FPAN). Prints as its first six and last four digits (`411111******1111`)
/// through `description`, `debugDescription`, interpolation and `dump`, so no log line can carry it.
///
/// The full number leaves the value only through ``unmaskedDigits`` and `Codable` (wire formats);
/// the logger never encodes values with `Codable`.
public struct PrimaryAccountNumber: Hashable, Sendable, Codable, CustomStringConvertible,
    CustomDebugStringConvertible, CustomReflectable
{
    private let value: CardDigits

    /// Accepts 12 to 19 ASCII digits and nothing else. The Luhn check is not enforced here (see
    /// ``isLuhnValid``); the error never repeats the input.
    public init(_ digits: String) throws(LoggingError) {
        value = try CardDigits(digits, what: "card number")
    }

    /// The full number. Only for wire formats and cryptography, never for display or logs.
    public var unmaskedDigits: String { value.digits }
    /// The first six and last four digits with the rest masked, e.g. `411111******1111`.
    public var masked: String { value.masked }
    /// The last four digits (what a wallet shows as the card's suffix).
    public var lastFour: String { String(value.digits.suffix(4)) }
    /// Whether the number passes the Luhn check, as every issued card number does.
    public var isLuhnValid: Bool { value.isLuhnValid }

    public var description: String { value.masked }
    public var debugDescription: String { "PrimaryAccountNumber(\(value.masked))" }
    public var customMirror: Mirror { Mirror(self, children: []) }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do {
            value = try CardDigits(text, what: "card number")
        } catch {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(value.digits)
    }
}

/// A device account number (DPAN, the token the network issues for one card on one device). Masked
/// exactly like ``PrimaryAccountNumber``, and a distinct type so the two can never be confused.
public struct DeviceAccountNumber: Hashable, Sendable, Codable, CustomStringConvertible,
    CustomDebugStringConvertible, CustomReflectable
{
    private let value: CardDigits

    /// Accepts 12 to 19 ASCII digits and nothing else; the error never repeats the input.
    public init(_ digits: String) throws(LoggingError) {
        value = try CardDigits(digits, what: "device account number")
    }

    /// The full number. Only for wire formats and cryptography, never for display or logs.
    public var unmaskedDigits: String { value.digits }
    /// The first six and last four digits with the rest masked.
    public var masked: String { value.masked }
    /// The last four digits.
    public var lastFour: String { String(value.digits.suffix(4)) }
    /// Whether the number passes the Luhn check.
    public var isLuhnValid: Bool { value.isLuhnValid }

    public var description: String { value.masked }
    public var debugDescription: String { "DeviceAccountNumber(\(value.masked))" }
    public var customMirror: Mirror { Mirror(self, children: []) }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        do {
            value = try CardDigits(text, what: "device account number")
        } catch {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(value.digits)
    }
}

/// A value that must never be printed: a key, a cryptogram, a CVV, a one-time code. Prints as
/// `<redacted>` through `description`, `debugDescription`, interpolation and `dump`.
///
/// The value is reached only through ``unredactedValue``. `Codable` (when `Value` is) encodes the
/// value itself, for wire formats; the logger never encodes with `Codable`.
public struct Redacted<Value>: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The protected value. Use it where the value is needed, never to display it.
    public let unredactedValue: Value

    public init(_ value: Value) { unredactedValue = value }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
    public var customMirror: Mirror { Mirror(self, children: []) }
}

extension Redacted: Sendable where Value: Sendable {}
extension Redacted: Equatable where Value: Equatable {}
extension Redacted: Hashable where Value: Hashable {}

extension Redacted: Decodable where Value: Decodable {
    public init(from decoder: any Decoder) throws {
        unredactedValue = try decoder.singleValueContainer().decode(Value.self)
    }
}

extension Redacted: Encodable where Value: Encodable {
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(unredactedValue)
    }
}

/// Masks card numbers that reach text by mistake: the logger's last line of defence behind the
/// typed redaction above.
///
/// A card number here is a run of 12 to 19 digits, optionally in groups separated by single spaces or
/// dashes, that passes the Luhn check and is not part of a longer run of digits (letters around it do
/// not matter for an unbroken run; a grouped run glued to letters is taken for another kind of token).
/// It is rewritten to its first six and last four digits, separators kept. UUIDs are skipped, and
/// numbers that fail the Luhn check are left alone, so dates, amounts and most identifiers are
/// untouched; about one in ten long numeric identifiers passes by chance and is masked too, which errs
/// on the safe side.
public enum CardNumberScrubber {
    /// `text` with every card-number-like run masked; `text` itself when there is none.
    public static func scrub(_ text: String) -> String {
        var digitCount = 0
        for byte in text.utf8 where byte >= 0x30 && byte <= 0x39 {
            digitCount += 1
        }
        if digitCount < 12 { return text }

        var bytes = Array(text.utf8)
        var changed = false
        var index = 0
        while index < bytes.count {
            // UUIDs (request ids, everywhere in logs) are never card numbers, even when a run of their
            // digit-only groups happens to pass the Luhn check.
            if index == 0 || !isAlphanumeric(bytes[index - 1]), isUUID(bytes, at: index) {
                index += 36
                continue
            }
            guard isDigit(bytes[index]), index == 0 || !isDigit(bytes[index - 1]) else {
                index += 1
                continue
            }
            // One run: groups of digits separated by single spaces or dashes.
            var groups: [[Int]] = [[]]
            var cursor = index
            while cursor < bytes.count {
                if isDigit(bytes[cursor]) {
                    groups[groups.count - 1].append(cursor)
                    cursor += 1
                } else if bytes[cursor] == 0x20 || bytes[cursor] == 0x2D, cursor + 1 < bytes.count,
                    isDigit(bytes[cursor + 1])
                {
                    groups.append([])
                    cursor += 1
                } else {
                    break
                }
            }
            // A grouped run glued to letters is part of some other token (a hex identifier, a version).
            let glued = (index > 0 && isLetter(bytes[index - 1])) || (cursor < bytes.count && isLetter(bytes[cursor]))
            if cursor == bytes.count || !isDigit(bytes[cursor]), groups.count == 1 || !glued {
                changed = maskCardNumbers(in: groups, of: &bytes) || changed
            }
            index = cursor
        }
        return changed ? String(decoding: bytes, as: UTF8.self) : text
    }

    /// Masks, from the left, the longest spans of whole groups that form a card number.
    private static func maskCardNumbers(in groups: [[Int]], of bytes: inout [UInt8]) -> Bool {
        var changed = false
        var first = 0
        while first < groups.count {
            var matched: Int?
            for last in stride(from: groups.count - 1, through: first, by: -1) {
                let positions = groups[first...last].flatMap { $0 }
                if (12...19).contains(positions.count), Luhn.isValid(positions.map { bytes[$0] - 0x30 }) {
                    for position in positions.dropFirst(6).dropLast(4) { bytes[position] = 0x2A }
                    matched = last
                    break
                }
            }
            if let matched {
                changed = true
                first = matched + 1
            } else {
                first += 1
            }
        }
        return changed
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }
    private static func isLetter(_ byte: UInt8) -> Bool { (byte | 0x20) >= 0x61 && (byte | 0x20) <= 0x7A }
    private static func isAlphanumeric(_ byte: UInt8) -> Bool { isDigit(byte) || isLetter(byte) }
    private static func isHex(_ byte: UInt8) -> Bool {
        isDigit(byte) || ((byte | 0x20) >= 0x61 && (byte | 0x20) <= 0x66)
    }

    /// 8-4-4-4-12 hex digits with dashes, not followed by another letter or digit.
    private static func isUUID(_ bytes: [UInt8], at start: Int) -> Bool {
        guard start + 36 <= bytes.count else { return false }
        for offset in 0..<36 {
            let byte = bytes[start + offset]
            if offset == 8 || offset == 13 || offset == 18 || offset == 23 {
                if byte != 0x2D { return false }
            } else if !isHex(byte) {
                return false
            }
        }
        return start + 36 == bytes.count || !isAlphanumeric(bytes[start + 36])
    }
}
