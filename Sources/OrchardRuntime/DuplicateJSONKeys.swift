public import Foundation

/// Finds a key given twice in one JSON object, which Foundation's `JSONDecoder` accepts silently (one of the
/// values wins). Two readers of the same bytes (a relay and the party behind it, a log and the service) could
/// then act on different values; every service refuses such a body before decoding it.
///
/// Keys are compared after unescaping (`"a"` and `"\u0061"` are the same key) with Swift's string equality, which
/// is the equality the decoder's dictionary uses. The scan reads only the structure: malformed JSON is left for the
/// decoder to refuse with its own message.
public enum DuplicateJSONKeys {
    /// The deepest nesting the scan follows; deeper documents are left to the decoder, which refuses them too.
    static let maximumDepth = 512

    /// The path of the first key that appears twice in one object (`"order.item"`, `"lines[2].amount"`), or nil
    /// when there is none (or the JSON is malformed, which the decoder reports).
    public static func first(in data: Data) -> String? {
        var scanner = Scanner(bytes: Array(data))
        return scanner.document()
    }

    private struct Scanner {
        let bytes: [UInt8]
        var index = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        /// The duplicate's path, or nil; a malformed document also ends in nil.
        mutating func document() -> String? {
            var found: String?
            _ = value(path: "", depth: 0, found: &found)
            return found
        }

        /// Skips one value. False when the document is malformed or a duplicate was found (in `found`).
        mutating func value(path: String, depth: Int, found: inout String?) -> Bool {
            guard depth < DuplicateJSONKeys.maximumDepth else { return false }
            skipWhitespace()
            guard index < bytes.count else { return false }
            switch bytes[index] {
            case UInt8(ascii: "{"):
                index += 1
                var keys = Set<String>()
                skipWhitespace()
                if peek(UInt8(ascii: "}")) { return true }
                while true {
                    skipWhitespace()
                    guard let key = string() else { return false }
                    let keyPath = path.isEmpty ? key : path + "." + key
                    guard keys.insert(key).inserted else {
                        found = keyPath
                        return false
                    }
                    skipWhitespace()
                    guard peek(UInt8(ascii: ":")) else { return false }
                    guard value(path: keyPath, depth: depth + 1, found: &found) else { return false }
                    skipWhitespace()
                    if peek(UInt8(ascii: ",")) { continue }
                    return peek(UInt8(ascii: "}"))
                }
            case UInt8(ascii: "["):
                index += 1
                skipWhitespace()
                if peek(UInt8(ascii: "]")) { return true }
                var element = 0
                while true {
                    guard value(path: "\(path)[\(element)]", depth: depth + 1, found: &found) else { return false }
                    element += 1
                    skipWhitespace()
                    if peek(UInt8(ascii: ",")) { continue }
                    return peek(UInt8(ascii: "]"))
                }
            case UInt8(ascii: "\""):
                return skipString()
            default:
                // A number, true, false or null: the decoder checks its spelling.
                let start = index
                while index < bytes.count, !Self.ends(bytes[index]) { index += 1 }
                return index > start
            }
        }

        /// Consumes `byte` if it is next.
        mutating func peek(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        static func ends(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: ","), UInt8(ascii: "]"), UInt8(ascii: "}"), 0x20, 0x09, 0x0A, 0x0D: true
            default: false
            }
        }

        /// Skips a string value at `index` (only keys are compared, so a value is never built): false exactly when
        /// ``string()`` would return nil.
        mutating func skipString() -> Bool {
            guard peek(UInt8(ascii: "\"")) else { return false }
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""): return true
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { return false }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): continue
                    case UInt8(ascii: "b"), UInt8(ascii: "f"), UInt8(ascii: "n"): continue
                    case UInt8(ascii: "r"), UInt8(ascii: "t"): continue
                    case UInt8(ascii: "u"):
                        guard index + 4 <= bytes.count,
                            UInt16(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16) != nil
                        else { return false }
                        index += 4
                    default: return false
                    }
                default: continue
                }
            }
            return false
        }

        /// A string at `index`, unescaped; nil when malformed.
        mutating func string() -> String? {
            // Without escapes (every key in practice) the string is its bytes, decoded as UTF-8 (ill-formed bytes
            // repaired as below).
            if index < bytes.count, bytes[index] == UInt8(ascii: "\"") {
                var end = index + 1
                while end < bytes.count, bytes[end] != UInt8(ascii: "\""), bytes[end] != UInt8(ascii: "\\") { end += 1 }
                if end < bytes.count, bytes[end] == UInt8(ascii: "\"") {
                    let key = String(decoding: bytes[(index + 1)..<end], as: UTF8.self)
                    index = end + 1
                    return key
                }
            }
            guard peek(UInt8(ascii: "\"")) else { return nil }
            var units: [UInt16] = []
            var plain: [UInt8] = []
            func flushPlain() {
                units.append(contentsOf: String(decoding: plain, as: UTF8.self).utf16)
                plain.removeAll()
            }
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    flushPlain()
                    return String(decoding: units, as: UTF16.self)
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { return nil }
                    let escape = bytes[index]
                    index += 1
                    flushPlain()
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): units.append(UInt16(escape))
                    case UInt8(ascii: "b"): units.append(0x08)
                    case UInt8(ascii: "f"): units.append(0x0C)
                    case UInt8(ascii: "n"): units.append(0x0A)
                    case UInt8(ascii: "r"): units.append(0x0D)
                    case UInt8(ascii: "t"): units.append(0x09)
                    case UInt8(ascii: "u"):
                        guard index + 4 <= bytes.count,
                            let unit = UInt16(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16)
                        else { return nil }
                        index += 4
                        units.append(unit)
                    default: return nil
                    }
                default:
                    plain.append(byte)
                }
            }
            return nil
        }
    }
}
