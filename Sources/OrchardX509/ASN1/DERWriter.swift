public import Foundation
import OrchardCrypto

/// Builds DER: definite, minimal lengths; `SET OF` sorted; BOOLEAN true as `0xFF`; minimal INTEGERs.
///
/// ``appendIndefiniteLength(_:_:)`` is the one BER construct it can write, for producing CMS in the
/// indefinite-length layout Apple's servers use.
public struct DERWriter: Sendable {
    public private(set) var bytes: [UInt8] = []

    /// An empty writer.
    public init() {}

    /// A primitive element with the given contents.
    public mutating func appendPrimitive(_ tag: ASN1Tag, contents: some Collection<UInt8>) {
        bytes.append(contentsOf: tag.encoded)
        appendLength(contents.count)
        bytes.append(contentsOf: contents)
    }

    /// A constructed element whose children `body` writes.
    public mutating func appendConstructed<E: Error>(
        _ tag: ASN1Tag, _ body: (inout DERWriter) throws(E) -> Void
    ) throws(E) {
        bytes.append(contentsOf: tag.encoded)
        let lengthIndex = bytes.count
        bytes.append(0)
        try body(&self)
        let length = bytes.count - lengthIndex - 1
        if length < 0x80 {
            bytes[lengthIndex] = UInt8(length)
        } else {
            bytes.replaceSubrange(lengthIndex...lengthIndex, with: Self.longLength(length))
        }
    }

    /// A constructed element with a BER indefinite length (`0x80`, children, `00 00`). Not DER.
    public mutating func appendIndefiniteLength<E: Error>(
        _ tag: ASN1Tag, _ body: (inout DERWriter) throws(E) -> Void
    ) throws(E) {
        bytes.append(contentsOf: tag.encoded)
        bytes.append(0x80)
        try body(&self)
        bytes.append(contentsOf: [0, 0])
    }

    /// An element that is already encoded, copied as it is.
    public mutating func appendEncoded(_ encoded: some Collection<UInt8>) {
        bytes.append(contentsOf: encoded)
    }

    /// A `SET OF`: the encoded elements, sorted as DER requires (X.690 §11.6).
    public mutating func appendSetOf(_ tag: ASN1Tag = .set, elements: [[UInt8]]) {
        appendConstructed(tag) { w in
            for element in elements.sorted(by: { $0.lexicographicallyPrecedes($1) }) { w.appendEncoded(element) }
        }
    }

    /// A minimal two's-complement INTEGER.
    public mutating func appendInteger(_ value: Int, tag: ASN1Tag = .integer) {
        var big: [UInt8] = withUnsafeBytes(of: Int64(value).bigEndian) { Array($0) }
        while big.count > 1 && ((big[0] == 0 && big[1] & 0x80 == 0) || (big[0] == 0xFF && big[1] & 0x80 != 0)) {
            big.removeFirst()
        }
        appendPrimitive(tag, contents: big)
    }

    /// A non-negative INTEGER from its unsigned big-endian magnitude (a serial number).
    public mutating func appendUnsignedInteger(_ magnitude: some Collection<UInt8>, tag: ASN1Tag = .integer) {
        var big = Array(magnitude.drop(while: { $0 == 0 }))
        if big.isEmpty || big[0] & 0x80 != 0 { big.insert(0, at: 0) }
        appendPrimitive(tag, contents: big)
    }

    /// An INTEGER from contents that are already two's complement and minimal (copied from a parse).
    public mutating func appendIntegerContents(_ contents: some Collection<UInt8>, tag: ASN1Tag = .integer) {
        appendPrimitive(tag, contents: contents)
    }

    /// A BOOLEAN; true is `0xFF` as DER requires.
    public mutating func appendBoolean(_ value: Bool) {
        appendPrimitive(.boolean, contents: [value ? 0xFF : 0x00])
    }

    /// An ASN.1 NULL (`05 00`).
    public mutating func appendNull() { appendPrimitive(.null, contents: EmptyCollection()) }

    /// An OBJECT IDENTIFIER.
    public mutating func appendObjectIdentifier(_ oid: ASN1ObjectIdentifier) {
        appendPrimitive(.objectIdentifier, contents: oid.contentBytes)
    }

    /// A primitive OCTET STRING (or `tag`, for implicit tagging).
    public mutating func appendOctetString(_ value: some Collection<UInt8>, tag: ASN1Tag = .octetString) {
        appendPrimitive(tag, contents: value)
    }

    /// A BIT STRING of whole bytes (keys, signatures).
    public mutating func appendBitString(_ value: some Collection<UInt8>) {
        bytes.append(contentsOf: ASN1Tag.bitString.encoded)
        appendLength(value.count + 1)
        bytes.append(0)
        bytes.append(contentsOf: value)
    }

    /// A named-bit-list BIT STRING (KeyUsage): bit 0 is the most significant bit of the first byte;
    /// trailing zero bits are dropped as DER requires.
    public mutating func appendNamedBits(_ bits: UInt64) {
        guard bits != 0 else {
            appendPrimitive(.bitString, contents: [0])
            return
        }
        let highest = 63 - bits.leadingZeroBitCount  // index of the last set bit, counted from bit 0
        let byteCount = highest / 8 + 1
        var out = [UInt8](repeating: 0, count: byteCount)
        for i in 0...highest where bits & (1 << UInt64(i)) != 0 { out[i / 8] |= 0x80 >> UInt8(i % 8) }
        appendPrimitive(.bitString, contents: [UInt8(7 - highest % 8)] + out)
    }

    /// A UTF8String.
    public mutating func appendUTF8String(_ value: String) { appendPrimitive(.utf8String, contents: Array(value.utf8)) }

    /// A PrintableString; throws if `value` has characters outside its set.
    public mutating func appendPrintableString(_ value: String) throws(X509Error) {
        let utf8 = Array(value.utf8)
        guard utf8.allSatisfy(ASN1StringDecoding.isPrintable) else {
            throw X509Error(.invalidValue, "\"\(value)\" has characters a PrintableString cannot hold")
        }
        appendPrimitive(.printableString, contents: utf8)
    }

    /// An IA5String; throws if `value` is not ASCII.
    public mutating func appendIA5String(_ value: String, tag: ASN1Tag = .ia5String) throws(X509Error) {
        let utf8 = Array(value.utf8)
        guard utf8.allSatisfy({ $0 < 0x80 }) else {
            throw X509Error(.invalidValue, "\"\(value)\" has characters an IA5String cannot hold")
        }
        appendPrimitive(tag, contents: utf8)
    }

    /// A time as RFC 5280 §4.1.2.5 requires: UTCTime for 1950–2049, GeneralizedTime otherwise (whole seconds).
    public mutating func appendTime(_ date: Date) throws(X509Error) {
        let c = try Self.components(date)
        if (1950...2049).contains(c.year) {
            appendUTCTime(c)
        } else {
            try appendGeneralizedTime(date)
        }
    }

    /// A GeneralizedTime `YYYYMMDDHHMMSSZ`.
    public mutating func appendGeneralizedTime(_ date: Date) throws(X509Error) {
        let c = try Self.components(date)
        let text =
            Self.pad(c.year, 4) + Self.pad(c.month) + Self.pad(c.day) + Self.pad(c.hour) + Self.pad(c.minute)
            + Self.pad(c.second) + "Z"
        appendPrimitive(.generalizedTime, contents: Array(text.utf8))
    }

    private mutating func appendUTCTime(_ c: CivilTime.Components) {
        let text =
            Self.pad(c.year % 100) + Self.pad(c.month) + Self.pad(c.day) + Self.pad(c.hour) + Self.pad(c.minute)
            + Self.pad(c.second) + "Z"
        appendPrimitive(.utcTime, contents: Array(text.utf8))
    }

    private static func components(_ date: Date) throws(X509Error) -> CivilTime.Components {
        guard let c = CivilTime.components(date), (0...9999).contains(c.year) else {
            throw X509Error(.invalidValue, "\(date) is outside the years 0–9999 a GeneralizedTime can hold")
        }
        return c
    }

    private static func pad(_ value: Int, _ width: Int = 2) -> String {
        let s = String(value)
        return String(repeating: "0", count: max(0, width - s.count)) + s
    }

    private mutating func appendLength(_ length: Int) {
        if length < 0x80 {
            bytes.append(UInt8(length))
        } else {
            bytes.append(contentsOf: Self.longLength(length))
        }
    }

    private static func longLength(_ length: Int) -> [UInt8] {
        var digits: [UInt8] = []
        var n = length
        while n > 0 {
            digits.append(UInt8(n & 0xFF))
            n >>= 8
        }
        return [0x80 | UInt8(digits.count)] + digits.reversed()
    }

    /// The encoding of one element written by `body`.
    public static func encode<E: Error>(_ body: (inout DERWriter) throws(E) -> Void) throws(E) -> [UInt8] {
        var writer = DERWriter()
        try body(&writer)
        return writer.bytes
    }
}
