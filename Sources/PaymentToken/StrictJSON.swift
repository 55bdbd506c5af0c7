import Foundation
import OrchardCrypto

/// A JSON value parsed strictly: RFC 8259 syntax only, no duplicate keys, explicit size and depth limits.
///
/// Foundation's parsers silently accept duplicate keys (and disagree on which wins), so tokens are
/// parsed here first. Numbers keep their source text so a decrypted `transactionAmount` is printed exactly
/// as Apple wrote it.
// Not `indirect`: objects and arrays already hold their children in array storage, and an indirect enum
// would put every value, strings and numbers included, in a box of its own.
public enum JSONValue: Sendable, Equatable {
    /// An object's members, in source order (keys are unique).
    case object([(String, JSONValue)])
    /// An array's elements, in order.
    case array([JSONValue])
    /// A string, escapes decoded.
    case string(String)
    /// The number's source text (validated JSON number syntax).
    case number(String)
    /// `true` or `false`.
    case bool(Bool)
    /// `null`.
    case null

    public static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.object(let x), .object(let y)):
            x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        case (.array(let x), .array(let y)): x == y
        case (.string(let x), .string(let y)): x == y
        case (.number(let x), .number(let y)): x == y
        case (.bool(let x), .bool(let y)): x == y
        case (.null, .null): true
        default: false
        }
    }

    /// The member `key` of an object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    /// The string, when the value is a string; nil otherwise.
    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// Serializes with the members in their original order, without insignificant whitespace and without
    /// escaping slashes.
    public var serialized: String { String(decoding: serializedBytes, as: UTF8.self) }

    /// ``serialized`` as UTF-8 bytes, for a response body or a file: built as bytes, the strings copied in runs
    /// between the characters that need escaping (a token's base64 fields are kilobytes long).
    public var serializedBytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(1024)
        write(to: &out)
        return out
    }

    private func write(to out: inout [UInt8]) {
        switch self {
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, (key, value)) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.writeString(key, to: &out)
                out.append(UInt8(ascii: ":"))
                value.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .string(let s): JSONValue.writeString(s, to: &out)
        case .number(let n): out.append(contentsOf: n.utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .null: out.append(contentsOf: "null".utf8)
        }
    }

    /// Quotes `s`, escaping `"`, `\` and the control characters (`\n`, `\r`, `\t`, else `\u00xx`).
    private static func writeString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { utf8 in
            var runStart = 0
            for (i, byte) in utf8.enumerated() where byte == 0x22 || byte == 0x5C || byte < 0x20 {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<i]))
                runStart = i + 1
                out.append(UInt8(ascii: "\\"))
                switch byte {
                case 0x22, 0x5C: out.append(byte)
                case 0x0A: out.append(UInt8(ascii: "n"))
                case 0x0D: out.append(UInt8(ascii: "r"))
                case 0x09: out.append(UInt8(ascii: "t"))
                default:
                    out.append(contentsOf: [UInt8(ascii: "u"), 0x30, 0x30])
                    out.append(contentsOf: Hex.encode([byte], lowercase: true).utf8)
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// Limits for ``StrictJSONParser``.
public struct JSONLimits: Sendable {
    /// The most input bytes accepted.
    public var maxBytes: Int
    /// The deepest nesting of objects and arrays accepted.
    public var maxDepth: Int

    /// Limits of `maxBytes` input bytes and `maxDepth` nesting levels.
    public init(maxBytes: Int, maxDepth: Int) {
        self.maxBytes = maxBytes
        self.maxDepth = maxDepth
    }

    /// Apple payment tokens: at most 64 KiB, nesting depth at most 16.
    public static let paymentToken = JSONLimits(maxBytes: 64 * 1024, maxDepth: 16)
}

/// A strict, non-recursive-beyond-the-limit JSON parser.
public enum StrictJSONParser {
    /// Parses `bytes` as one RFC 8259 JSON value; throws for bad syntax, a duplicate key, invalid UTF-8 or input beyond
    /// `limits`.
    public static func parse(_ bytes: some Collection<UInt8>, limits: JSONLimits) throws(PaymentTokenError) -> JSONValue
    {
        try parse(Array(bytes), limits: limits)
    }

    /// ``parse(_:limits:)`` for a byte array, the form tokens and plaintexts have: a concrete body, so callers in
    /// other modules do not run it unspecialized.
    public static func parse(_ bytes: [UInt8], limits: JSONLimits) throws(PaymentTokenError) -> JSONValue {
        guard bytes.count <= limits.maxBytes else {
            throw PaymentTokenError(.malformedJSON, "the JSON is \(bytes.count) bytes; the limit is \(limits.maxBytes)")
        }
        var parser = Parser(bytes: bytes, maxDepth: limits.maxDepth)
        parser.skipWhitespace()
        let value = try parser.parseValue(depth: 1)
        parser.skipWhitespace()
        guard parser.index == parser.bytes.count else {
            throw PaymentTokenError(.malformedJSON, "unexpected data after the JSON value at byte \(parser.index)")
        }
        return value
    }

    /// The key names of Apple's token and payment data longer than a small string holds (15 UTF-8 bytes). A key
    /// spelling one of them is returned as this (immortal) string instead of an allocation of its own.
    private static let longAppleKeys = [
        "transactionIdentifier", "ephemeralPublicKey", "applicationPrimaryAccountNumber", "applicationExpirationDate",
        "transactionAmount", "deviceManufacturerIdentifier", "onlinePaymentCryptogram", "encryptedPINData",
        "authenticationResponses", "merchantTokenIdentifier", "merchantTokenMetadata",
    ]

    static func appleKey(spelledBy run: UnsafeBufferPointer<UInt8>) -> String? {
        guard run.count > 15, let start = run.baseAddress else { return nil }
        for key in longAppleKeys where key.utf8.count == run.count {
            let same = key.utf8.withContiguousStorageIfAvailable { memcmp($0.baseAddress!, start, run.count) == 0 }
            if same == true { return key }
        }
        return nil
    }

    private struct Parser {
        let bytes: [UInt8]
        let maxDepth: Int
        var index = 0

        init(bytes: [UInt8], maxDepth: Int) {
            self.bytes = bytes
            self.maxDepth = maxDepth
        }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        func fail(_ what: String) -> PaymentTokenError {
            PaymentTokenError(.malformedJSON, "\(what) at byte \(index)")
        }

        mutating func expect(_ byte: UInt8) throws(PaymentTokenError) {
            guard index < bytes.count, bytes[index] == byte else {
                throw fail("expected '\(Character(Unicode.Scalar(byte)))'")
            }
            index += 1
        }

        mutating func parseValue(depth: Int) throws(PaymentTokenError) -> JSONValue {
            guard index < bytes.count else { throw fail("unexpected end of JSON") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try parseObject(depth: depth)
            case UInt8(ascii: "["): return try parseArray(depth: depth)
            case UInt8(ascii: "\""): return .string(try parseString())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            default: return .number(try parseNumber())
            }
        }

        mutating func literal(_ word: StaticString) throws(PaymentTokenError) {
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count,
                word.withUTF8Buffer({ bytes[index..<index + count].elementsEqual($0) })
            else {
                throw fail("invalid literal")
            }
            index += count
        }

        mutating func parseObject(depth: Int) throws(PaymentTokenError) -> JSONValue {
            guard depth <= maxDepth else { throw fail("JSON nested deeper than \(maxDepth) levels") }
            index += 1
            var members: [(String, JSONValue)] = []
            // Duplicate keys: a scan of the few members Apple's objects have; a set once an object grows.
            var seen: Set<String>?
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            members.reserveCapacity(8)  // growing from empty would reallocate four times on the way to Apple's 10
            while true {
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a key") }
                let key = try parseString(isKey: true)
                let duplicate: Bool
                if seen == nil, members.count < 16 {
                    // Lengths first (O(1) for native strings): most keys differ in length.
                    let length = key.utf8.count
                    duplicate = members.contains { $0.0.utf8.count == length && $0.0 == key }
                } else {
                    if seen == nil { seen = Set(members.map(\.0)) }
                    duplicate = !seen!.insert(key).inserted
                }
                guard !duplicate else {
                    throw PaymentTokenError(.duplicateKey, "the key \"\(key)\" appears twice in one object")
                }
                skipWhitespace()
                try expect(UInt8(ascii: ":"))
                skipWhitespace()
                members.append((key, try parseValue(depth: depth + 1)))
                skipWhitespace()
                guard index < bytes.count else { throw fail("unterminated object") }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                try expect(UInt8(ascii: "}"))
                return .object(members)
            }
        }

        mutating func parseArray(depth: Int) throws(PaymentTokenError) -> JSONValue {
            guard depth <= maxDepth else { throw fail("JSON nested deeper than \(maxDepth) levels") }
            index += 1
            var items: [JSONValue] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(items)
            }
            while true {
                skipWhitespace()
                items.append(try parseValue(depth: depth + 1))
                skipWhitespace()
                guard index < bytes.count else { throw fail("unterminated array") }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                try expect(UInt8(ascii: "]"))
                return .array(items)
            }
        }

        mutating func parseString(isKey: Bool = false) throws(PaymentTokenError) -> String {
            index += 1  // opening quote
            // Fast path: a string without escapes becomes a String straight from its bytes.
            var end = index
            var ascii = true
            while end < bytes.count {
                let c = bytes[end]
                if c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") || c < 0x20 { break }
                if c >= 0x80 { ascii = false }
                end += 1
            }
            if end < bytes.count, bytes[end] == UInt8(ascii: "\"") {
                let text = bytes.withUnsafeBufferPointer { (b) -> String? in
                    let run = UnsafeBufferPointer(rebasing: b[index..<end])
                    if isKey, ascii, let known = StrictJSONParser.appleKey(spelledBy: run) { return known }
                    // ASCII is valid UTF-8 as it is, so `decoding` (specialized, nothing to repair) gives the
                    // same string as `validating`, which goes through generic metadata on every call.
                    return ascii ? String(decoding: run, as: UTF8.self) : String(validating: run, as: UTF8.self)
                }
                guard let text else { throw PaymentTokenError(.malformedJSON, "invalid UTF-8 in a string") }
                index = end + 1
                return text
            }
            var scalars = String.UnicodeScalarView()
            var runStart = index
            func flush(_ end: Int, into scalars: inout String.UnicodeScalarView) throws(PaymentTokenError) {
                guard runStart < end else { return }
                guard let s = String(validating: bytes[runStart..<end], as: UTF8.self) else {
                    throw PaymentTokenError(.malformedJSON, "invalid UTF-8 in a string")
                }
                scalars.append(contentsOf: s.unicodeScalars)
            }
            while true {
                guard index < bytes.count else { throw fail("unterminated string") }
                let c = bytes[index]
                if c == UInt8(ascii: "\"") {
                    try flush(index, into: &scalars)
                    index += 1
                    return String(scalars)
                }
                if c < 0x20 { throw fail("control character in a string") }
                if c == UInt8(ascii: "\\") {
                    try flush(index, into: &scalars)
                    index += 1
                    guard index < bytes.count else { throw fail("unterminated escape") }
                    let e = bytes[index]
                    index += 1
                    switch e {
                    case UInt8(ascii: "\""): scalars.append("\"")
                    case UInt8(ascii: "\\"): scalars.append("\\")
                    case UInt8(ascii: "/"): scalars.append("/")
                    case UInt8(ascii: "b"): scalars.append("\u{08}")
                    case UInt8(ascii: "f"): scalars.append("\u{0C}")
                    case UInt8(ascii: "n"): scalars.append("\n")
                    case UInt8(ascii: "r"): scalars.append("\r")
                    case UInt8(ascii: "t"): scalars.append("\t")
                    case UInt8(ascii: "u"):
                        var code = try hex4()
                        if (0xD800...0xDBFF).contains(code) {
                            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                                bytes[index + 1] == UInt8(ascii: "u")
                            else { throw fail("unpaired surrogate") }
                            index += 2
                            let low = try hex4()
                            guard (0xDC00...0xDFFF).contains(low) else { throw fail("unpaired surrogate") }
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        }
                        guard let scalar = Unicode.Scalar(code) else { throw fail("invalid \\u escape") }
                        scalars.append(scalar)
                    default: throw fail("invalid escape")
                    }
                    runStart = index
                    continue
                }
                index += 1
            }
        }

        mutating func hex4() throws(PaymentTokenError) -> UInt32 {
            guard index + 4 <= bytes.count else { throw fail("truncated \\u escape") }
            var v: UInt32 = 0
            for _ in 0..<4 {
                let c = bytes[index]
                let d: UInt32
                switch c {
                case 0x30...0x39: d = UInt32(c - 0x30)
                case 0x41...0x46: d = UInt32(c - 0x37)
                case 0x61...0x66: d = UInt32(c - 0x57)
                default: throw fail("invalid \\u escape")
                }
                v = v << 4 | d
                index += 1
            }
            return v
        }

        mutating func parseNumber() throws(PaymentTokenError) -> String {
            let start = index
            func digits(_ p: inout Parser) -> Int {
                let s = p.index
                while p.index < p.bytes.count, (0x30...0x39).contains(p.bytes[p.index]) { p.index += 1 }
                return p.index - s
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count else { throw fail("invalid number") }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else if digits(&self) == 0 {
                throw fail("invalid value")
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                guard digits(&self) > 0 else { throw fail("invalid number") }
            }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                    index += 1
                }
                guard digits(&self) > 0 else { throw fail("invalid number") }
            }
            return String(decoding: bytes[start..<index], as: UTF8.self)
        }
    }
}

/// Strict encodings used by the token format.
public enum StrictEncoding {
    private static let alphabet: [UInt8] = Array(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let reverse: [Int16] = {
        var table = [Int16](repeating: -1, count: 256)
        for (i, c) in alphabet.enumerated() { table[Int(c)] = Int16(i) }
        return table
    }()

    /// Standard base64 (RFC 4648 §4) with padding, no whitespace, no non-zero unused bits; nil otherwise.
    public static func base64Decode(_ text: String) -> [UInt8]? {
        // Native strings lend their UTF-8 in place; others are copied once.
        if let decoded = text.utf8.withContiguousStorageIfAvailable({ base64Decode(utf8: $0) }) { return decoded }
        return Array(text.utf8).withUnsafeBufferPointer { base64Decode(utf8: $0) }
    }

    private static func base64Decode(utf8 chars: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        guard chars.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 4 * 3)
        var i = 0
        while i < chars.count {
            let last = i + 4 == chars.count
            var v: UInt32 = 0
            var padding = 0
            for j in 0..<4 {
                let c = chars[i + j]
                if c == UInt8(ascii: "=") {
                    guard last, j >= 2 else { return nil }
                    padding += 1
                    v <<= 6
                } else {
                    guard padding == 0 else { return nil }
                    let d = reverse[Int(c)]
                    guard d >= 0 else { return nil }
                    v = v << 6 | UInt32(d)
                }
            }
            if padding == 1, v & 0xFF != 0 { return nil }
            if padding == 2, v & 0xFFFF != 0 { return nil }
            out.append(UInt8(v >> 16))
            if padding < 2 { out.append(UInt8((v >> 8) & 0xFF)) }
            if padding < 1 { out.append(UInt8(v & 0xFF)) }
            i += 4
        }
        return out
    }

    /// Standard base64 with padding.
    public static func base64Encode(_ bytes: some Collection<UInt8>) -> String {
        Data(bytes).base64EncodedString()
    }

    /// Hex of even length, either case; nil otherwise.
    public static func hexDecode(_ text: String) -> [UInt8]? { Hex.decode(text) }

    /// Lower-case hex.
    public static func hexEncode(_ bytes: some Collection<UInt8>) -> String { Hex.encode(bytes, lowercase: true) }
}
