public import Foundation
import OrchardCrypto

/// A BIT STRING: its bytes and the number of unused bits in the last byte.
public struct ASN1BitString: Hashable, Sendable {
    /// The bit string's bytes (after the unused-bits octet), a slice of the input.
    public let bytes: ArraySlice<UInt8>
    /// How many low bits of the last byte are not part of the value (0–7).
    public let unusedBits: Int
}

extension ASN1Element {
    /// The contents of an INTEGER (two's complement, big-endian), checked to be minimal as X.690
    /// requires in both BER and DER.
    public func integerBytes(
        tag expected: ASN1Tag = .integer, _ what: @autoclosure () -> String
    ) throws(X509Error)
        -> ArraySlice<UInt8>
    {
        try expect(expected, what())
        let c = contentBytes
        guard let first = c.first else { throw X509Error(.invalidValue, "\(what()): an INTEGER has no contents") }
        if c.count > 1 {
            let second = c[c.startIndex + 1]
            if (first == 0 && second & 0x80 == 0) || (first == 0xFF && second & 0x80 != 0) {
                throw X509Error(.invalidValue, "\(what()): the INTEGER is not minimally encoded")
            }
        }
        return c
    }

    /// A small INTEGER as an `Int`.
    public func integerValue(
        tag expected: ASN1Tag = .integer, _ what: @autoclosure () -> String
    ) throws(X509Error) -> Int {
        let c = try integerBytes(tag: expected, what())
        guard c.count <= 8 else { throw X509Error(.invalidValue, "\(what()): the INTEGER does not fit in 64 bits") }
        var value: Int64 = (c.first ?? 0) & 0x80 != 0 ? -1 : 0
        for byte in c { value = (value << 8) | Int64(byte) }
        return Int(value)
    }

    /// A BOOLEAN. DER requires `0xFF` for true.
    public func boolean(_ what: @autoclosure () -> String) throws(X509Error) -> Bool {
        try expect(.boolean, what())
        guard contentBytes.count == 1, let byte = contentBytes.first else {
            throw X509Error(.invalidValue, "\(what()): a BOOLEAN has exactly one content byte")
        }
        if rules == .der && byte != 0 && byte != 0xFF {
            throw X509Error(.invalidValue, "\(what()): DER encodes TRUE as 0xFF")
        }
        return byte != 0
    }

    /// Checks that the element is an ASN.1 NULL.
    public func null(_ what: @autoclosure () -> String) throws(X509Error) {
        try expect(.null, what())
        guard contentBytes.isEmpty else { throw X509Error(.invalidValue, "\(what()): NULL has contents") }
    }

    /// An OBJECT IDENTIFIER.
    public func objectIdentifier(_ what: @autoclosure () -> String) throws(X509Error) -> ASN1ObjectIdentifier {
        try expect(.objectIdentifier, what())
        do {
            return try ASN1ObjectIdentifier(contentBytes: contentBytes)
        } catch {
            throw X509Error(.invalidValue, "\(what()): \(error.message)")
        }
    }

    /// The bytes of an OCTET STRING. In BER, a constructed OCTET STRING is concatenated (iteratively,
    /// within the depth limit).
    public func octetString(
        tag expected: ASN1Tag = .octetString, _ what: @autoclosure () -> String
    ) throws(X509Error)
        -> ArraySlice<UInt8>
    {
        if tag == expected && !tag.isConstructed { return contentBytes }
        guard rules == .ber, tag == expected.constructed else {
            throw X509Error(.unexpectedElement, "\(what()): expected \(expected), found \(tag)")
        }
        var out: [UInt8] = []
        var stack = [try children()]
        while !stack.isEmpty {
            if stack[stack.count - 1].isAtEnd {
                stack.removeLast()
                continue
            }
            let segment = try stack[stack.count - 1].next()
            if segment.tag == .octetString {
                out.append(contentsOf: segment.contentBytes)
            } else if segment.tag == ASN1Tag.octetString.constructed {
                stack.append(try segment.children())
            } else {
                throw X509Error(.unexpectedElement, "\(what()): a constructed OCTET STRING holds \(segment.tag)")
            }
        }
        return out[...]
    }

    /// A BIT STRING. DER requires unused bits to be zero.
    public func bitString(
        tag expected: ASN1Tag = .bitString, _ what: @autoclosure () -> String
    ) throws(X509Error)
        -> ASN1BitString
    {
        try expect(expected, what())
        guard let first = contentBytes.first else {
            throw X509Error(.invalidValue, "\(what()): a BIT STRING has no contents")
        }
        let unused = Int(first)
        let bytes = contentBytes.dropFirst()
        guard unused <= 7, !(bytes.isEmpty && unused != 0) else {
            throw X509Error(.invalidValue, "\(what()): a BIT STRING has \(unused) unused bits")
        }
        if rules == .der, let last = bytes.last, last & UInt8((1 << unused) - 1) != 0 {
            throw X509Error(.invalidValue, "\(what()): the unused bits of a BIT STRING must be zero in DER")
        }
        return ASN1BitString(bytes: bytes, unusedBits: unused)
    }

    /// Any of the character string types, checked against its character set.
    public func string(_ what: @autoclosure () -> String) throws(X509Error) -> String {
        guard let decoded = ASN1StringDecoding.decode(tag: tag, contents: contentBytes) else {
            if ASN1StringDecoding.isStringTag(tag) {
                throw X509Error(.invalidValue, "\(what()): the \(tag) holds characters outside its character set")
            }
            throw X509Error(.unexpectedElement, "\(what()): expected a character string, found \(tag)")
        }
        return decoded
    }

    /// A UTCTime (`YYMMDDHHMMSSZ`, years 1950–2049) or GeneralizedTime (`YYYYMMDDHHMMSSZ`), the forms
    /// RFC 5280 and RFC 5652 allow.
    public func time(_ what: @autoclosure () -> String) throws(X509Error) -> Date {
        let c = Array(contentBytes)
        let isUTC: Bool
        switch tag {
        case .utcTime: isUTC = true
        case .generalizedTime: isUTC = false
        default: throw X509Error(.unexpectedElement, "\(what()): expected UTCTime or GeneralizedTime, found \(tag)")
        }
        let digits = isUTC ? 12 : 14
        guard c.count == digits + 1, c.last == UInt8(ascii: "Z"),
            c.dropLast().allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
        else {
            throw X509Error(
                .invalidValue,
                "\(what()): the time is not in the form \(isUTC ? "YYMMDDHHMMSSZ" : "YYYYMMDDHHMMSSZ")")
        }
        func number(_ offset: Int, _ count: Int) -> Int {
            c[offset..<offset + count].reduce(0) { $0 * 10 + Int($1 - 0x30) }
        }
        var year: Int
        var offset: Int
        if isUTC {
            year = number(0, 2)
            year += year >= 50 ? 1900 : 2000
            offset = 2
        } else {
            year = number(0, 4)
            offset = 4
        }
        let month = number(offset, 2)
        let day = number(offset + 2, 2)
        let hour = number(offset + 4, 2)
        let minute = number(offset + 6, 2)
        let second = number(offset + 8, 2)
        guard let date = CivilTime.date(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
        else { throw X509Error(.invalidValue, "\(what()): the time is not a valid calendar date and time") }
        return date
    }
}

/// Character-string decoding with character-set checks.
enum ASN1StringDecoding {
    static func isStringTag(_ tag: ASN1Tag) -> Bool {
        tag.tagClass == .universal && !tag.isConstructed && [12, 18, 19, 20, 22, 26, 28, 30].contains(tag.number)
    }

    static func decode(tag: ASN1Tag, contents: ArraySlice<UInt8>) -> String? {
        guard isStringTag(tag) else { return nil }
        switch tag.number {
        case 12: return utf8(contents)
        case 18: return ascii(contents) { ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x20 }
        case 19: return ascii(contents, allowed: isPrintable)
        case 20: return String(contents.map { Character(Unicode.Scalar($0)) })  // T.61 as Latin-1, as OpenSSL does
        case 22: return ascii(contents) { $0 < 0x80 }
        case 26: return ascii(contents) { $0 >= 0x20 && $0 < 0x7F }
        case 28: return utf32(contents)
        case 30: return utf16(contents)
        default: return nil
        }
    }

    static func isPrintable(_ b: UInt8) -> Bool {
        switch b {
        case 0x41...0x5A, 0x61...0x7A, 0x30...0x39, 0x20, 0x27, 0x28, 0x29, 0x2B, 0x2C, 0x2D, 0x2E, 0x2F, 0x3A, 0x3D,
            0x3F:
            return true
        default: return false
        }
    }

    private static func ascii(_ c: ArraySlice<UInt8>, allowed: (UInt8) -> Bool) -> String? {
        guard c.allSatisfy(allowed) else { return nil }
        return String(decoding: c, as: UTF8.self)
    }

    static func utf8(_ c: ArraySlice<UInt8>) -> String? {
        if c.allSatisfy({ $0 < 0x80 }) { return String(decoding: c, as: UTF8.self) }
        var iterator = c.makeIterator()
        var decoder = UTF8()
        var scalars = String.UnicodeScalarView()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let s): scalars.append(s)
            case .emptyInput: return String(scalars)
            case .error: return nil
            }
        }
    }

    private static func utf16(_ c: ArraySlice<UInt8>) -> String? {
        guard c.count % 2 == 0 else { return nil }
        let units = stride(from: c.startIndex, to: c.endIndex, by: 2).map { UInt16(c[$0]) << 8 | UInt16(c[$0 + 1]) }
        var iterator = units.makeIterator()
        var decoder = UTF16()
        var scalars = String.UnicodeScalarView()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let s): scalars.append(s)
            case .emptyInput: return String(scalars)
            case .error: return nil
            }
        }
    }

    private static func utf32(_ c: ArraySlice<UInt8>) -> String? {
        guard c.count % 4 == 0 else { return nil }
        var scalars = String.UnicodeScalarView()
        for i in stride(from: c.startIndex, to: c.endIndex, by: 4) {
            let v = UInt32(c[i]) << 24 | UInt32(c[i + 1]) << 16 | UInt32(c[i + 2]) << 8 | UInt32(c[i + 3])
            guard let scalar = Unicode.Scalar(v) else { return nil }
            scalars.append(scalar)
        }
        return String(scalars)
    }
}
