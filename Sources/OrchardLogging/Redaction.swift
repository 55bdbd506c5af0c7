// Typed redaction: values that must never reach a log print masked or `<redacted>` through every
// path Swift offers for turning a value into text: `description` (print, "\(x)", String(describing:)),
// `debugDescription` (debugPrint, String(reflecting:), and the synthesized description of any struct
// or enum that contains one) and the mirror (`dump`, and anything else that walks children). Card numbers
// have their own type, CardBasics' `PrimaryAccountNumber`, masked the same way.

import CardBasics

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
                if (12...19).contains(positions.count), Luhn.isValid(positions.map { Int(bytes[$0] - 0x30) }) {
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
