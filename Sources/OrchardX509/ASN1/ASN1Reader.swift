/// Which encoding rules a reader enforces.
public enum ASN1EncodingRules: Sendable, Hashable {
    /// Distinguished Encoding Rules: definite, minimal lengths only. Certificates, CSRs and signed
    /// attributes are DER.
    case der
    /// Basic Encoding Rules: also indefinite lengths (`0x80` … `00 00`), non-minimal lengths and
    /// constructed strings. Apple's CMS signatures are BER.
    case ber
}

/// Explicit bounds on what a reader accepts, so hostile input costs bounded time and memory.
public struct ASN1Limits: Sendable, Hashable {
    /// The deepest nesting accepted; the outermost element is at depth 0.
    public var maximumDepth: Int
    /// The longest content accepted for a single element, in bytes.
    public var maximumLength: Int

    /// 64 levels (certificates need about 8, CMS about 12) and 16 MiB per element.
    public init(maximumDepth: Int = 64, maximumLength: Int = 1 << 24) {
        self.maximumDepth = maximumDepth
        self.maximumLength = maximumLength
    }
}

/// An ASN.1 identifier: class, primitive/constructed, and tag number (high tag numbers included).
public struct ASN1Tag: Hashable, Sendable, CustomStringConvertible {
    /// The two class bits of the identifier octet.
    public enum TagClass: UInt8, Sendable {
        case universal = 0, application = 1, contextSpecific = 2, `private` = 3
    }

    /// Universal, application, context-specific or private.
    public let tagClass: TagClass
    /// Whether the contents are child elements (bit 6 of the identifier octet).
    public let isConstructed: Bool
    /// The tag number; 31 and above use the high-tag-number form.
    public let number: UInt64

    /// Any tag; numbers from 31 encode in the high-tag-number form.
    public init(number: UInt64, tagClass: TagClass, isConstructed: Bool) {
        self.number = number
        self.tagClass = tagClass
        self.isConstructed = isConstructed
    }

    /// A context-specific tag `[n]`.
    public static func contextSpecific(_ number: UInt64, constructed: Bool) -> ASN1Tag {
        ASN1Tag(number: number, tagClass: .contextSpecific, isConstructed: constructed)
    }

    private static func universal(_ number: UInt64, constructed: Bool = false) -> ASN1Tag {
        ASN1Tag(number: number, tagClass: .universal, isConstructed: constructed)
    }

    /// The universal tags Orchard reads and writes.
    public static let boolean = universal(1)
    public static let integer = universal(2)
    public static let bitString = universal(3)
    public static let octetString = universal(4)
    public static let null = universal(5)
    public static let objectIdentifier = universal(6)
    public static let enumerated = universal(10)
    public static let utf8String = universal(12)
    public static let sequence = universal(16, constructed: true)
    public static let set = universal(17, constructed: true)
    public static let numericString = universal(18)
    public static let printableString = universal(19)
    public static let teletexString = universal(20)
    public static let ia5String = universal(22)
    public static let utcTime = universal(23)
    public static let generalizedTime = universal(24)
    public static let visibleString = universal(26)
    public static let universalString = universal(28)
    public static let bmpString = universal(30)

    /// The same class and number with the constructed bit set (BER constructed strings).
    public var constructed: ASN1Tag { ASN1Tag(number: number, tagClass: tagClass, isConstructed: true) }

    /// The identifier octets.
    public var encoded: [UInt8] {
        let first = (tagClass.rawValue << 6) | (isConstructed ? 0x20 : 0)
        if number < 31 { return [first | UInt8(number)] }
        var digits: [UInt8] = []
        var n = number
        repeat {
            digits.append(UInt8(n & 0x7F))
            n >>= 7
        } while n > 0
        var out: [UInt8] = [first | 0x1F]
        for (i, d) in digits.reversed().enumerated() { out.append(i == digits.count - 1 ? d : d | 0x80) }
        return out
    }

    /// The ASN.1 name (`SEQUENCE`, `[0] (constructed)`), for error messages.
    public var description: String {
        if tagClass == .universal {
            let names: [UInt64: String] = [
                1: "BOOLEAN", 2: "INTEGER", 3: "BIT STRING", 4: "OCTET STRING", 5: "NULL", 6: "OBJECT IDENTIFIER",
                10: "ENUMERATED", 12: "UTF8String", 16: "SEQUENCE", 17: "SET", 19: "PrintableString",
                22: "IA5String", 23: "UTCTime", 24: "GeneralizedTime",
            ]
            if let name = names[number] {
                return isConstructed && number != 16 && number != 17 ? name + " (constructed)" : name
            }
            return "UNIVERSAL \(number)"
        }
        let prefix =
            switch tagClass {
            case .contextSpecific: ""
            case .application: "APPLICATION "
            case .private: "PRIVATE "
            case .universal: "UNIVERSAL "
            }
        return "[\(prefix)\(number)]\(isConstructed ? " (constructed)" : "")"
    }
}

/// One encoded element (tag, length, contents), as slices of the original input: nothing is copied,
/// so ``encodedBytes`` are exactly the bytes a signature covers.
public struct ASN1Element: Sendable {
    /// The element's identifier.
    public let tag: ASN1Tag
    /// Identifier, length and contents (and the end-of-contents octets of an indefinite length).
    public let encodedBytes: ArraySlice<UInt8>
    /// The contents alone.
    public let contentBytes: ArraySlice<UInt8>
    /// Whether the element used the BER indefinite-length form.
    public let isIndefiniteLength: Bool
    /// The rules and limits of the reader that produced it; its children inherit them.
    public let rules: ASN1EncodingRules
    public let limits: ASN1Limits
    /// Nesting level of this element (0 for the outermost).
    public let depth: Int

    /// A reader over the children of a constructed element.
    public func children() throws(X509Error) -> ASN1Reader {
        guard tag.isConstructed else {
            throw X509Error(.unexpectedElement, "\(tag) is primitive and has no child elements")
        }
        return ASN1Reader(contentBytes, rules: rules, limits: limits, depth: depth + 1)
    }

    /// All children of a constructed element, in order.
    public func childElements() throws(X509Error) -> [ASN1Element] {
        var reader = try children()
        var out: [ASN1Element] = []
        while !reader.isAtEnd { out.append(try reader.next()) }
        return out
    }

    /// Throws unless the element has `expected` as its tag.
    public func expect(_ expected: ASN1Tag, _ what: @autoclosure () -> String) throws(X509Error) {
        guard tag == expected else {
            throw X509Error(.unexpectedElement, "\(what()): expected \(expected), found \(tag)")
        }
    }
}

/// A forward-only reader over a sequence of encoded elements.
///
/// It reads one element at a time without recursion: a definite length is skipped in O(1), and the end
/// of an indefinite length is found by an iterative scan that counts open levels against
/// ``ASN1Limits/maximumDepth``. So deeply nested input (10,000 levels) gives
/// ``X509Error/Code/nestingTooDeep`` rather than exhausting the stack.
public struct ASN1Reader: Sendable {
    private var remaining: ArraySlice<UInt8>
    /// The rules and limits every element read here is checked against.
    public let rules: ASN1EncodingRules
    public let limits: ASN1Limits
    /// Depth of the elements this reader returns.
    public let depth: Int

    /// A reader over `bytes` at depth 0; elements keep slices of `bytes`.
    public init(_ bytes: ArraySlice<UInt8>, rules: ASN1EncodingRules = .der, limits: ASN1Limits = ASN1Limits()) {
        self.init(bytes, rules: rules, limits: limits, depth: 0)
    }

    /// A reader over `bytes` at depth 0.
    public init(_ bytes: [UInt8], rules: ASN1EncodingRules = .der, limits: ASN1Limits = ASN1Limits()) {
        self.init(bytes[...], rules: rules, limits: limits, depth: 0)
    }

    init(_ bytes: ArraySlice<UInt8>, rules: ASN1EncodingRules, limits: ASN1Limits, depth: Int) {
        remaining = bytes
        self.rules = rules
        self.limits = limits
        self.depth = depth
    }

    /// Whether every element has been read.
    public var isAtEnd: Bool { remaining.isEmpty }

    /// The tag of the next element, without consuming it; `nil` at the end or if the tag is malformed.
    public func peekTag() -> ASN1Tag? {
        guard !remaining.isEmpty else { return nil }
        var index = remaining.startIndex
        return try? Self.readTag(remaining, &index, end: remaining.endIndex)
    }

    /// Reads the next element.
    public mutating func next() throws(X509Error) -> ASN1Element {
        guard depth <= limits.maximumDepth else {
            throw X509Error(.nestingTooDeep, "elements are nested deeper than \(limits.maximumDepth) levels")
        }
        guard !remaining.isEmpty else { throw X509Error(.truncated, "expected another element, found the end") }
        let start = remaining.startIndex
        var index = start
        let tag = try Self.readTag(remaining, &index, end: remaining.endIndex)
        if tag.tagClass == .universal && tag.number == 0 {
            throw X509Error(.invalidTag, "end-of-contents octets outside an indefinite-length element")
        }
        let length = try readLength(&index, constructed: tag.isConstructed)
        let element: ASN1Element
        if let length {
            guard remaining.endIndex - index >= length else {
                throw X509Error(
                    .truncated, "\(tag) announces \(length) bytes but only \(remaining.endIndex - index) remain")
            }
            element = ASN1Element(
                tag: tag, encodedBytes: remaining[start..<index + length],
                contentBytes: remaining[index..<index + length],
                isIndefiniteLength: false, rules: rules, limits: limits, depth: depth)
            remaining = remaining[(index + length)...]
        } else {
            let contentEnd = try Self.endOfContents(
                remaining, from: index, end: remaining.endIndex, tag: tag, rules: rules, limits: limits, depth: depth)
            element = ASN1Element(
                tag: tag, encodedBytes: remaining[start..<contentEnd + 2], contentBytes: remaining[index..<contentEnd],
                isIndefiniteLength: true, rules: rules, limits: limits, depth: depth)
            remaining = remaining[(contentEnd + 2)...]
        }
        return element
    }

    /// Reads the next element and checks its tag.
    public mutating func next(_ expected: ASN1Tag, _ what: @autoclosure () -> String) throws(X509Error) -> ASN1Element {
        let element = try next()
        try element.expect(expected, what())
        return element
    }

    /// Reads the next element if it has tag `tag`.
    public mutating func nextIfPresent(_ tag: ASN1Tag) throws(X509Error) -> ASN1Element? {
        guard peekTag() == tag else { return nil }
        return try next()
    }

    /// Throws unless every element has been read.
    public func finish(_ what: @autoclosure () -> String) throws(X509Error) {
        guard remaining.isEmpty else {
            throw X509Error(.trailingData, "\(what()): \(remaining.count) unexpected bytes after the last element")
        }
    }

    // MARK: - Headers

    // The header functions are shared with the verifier's borrowed-bytes scanner (`BERScanner`), so both
    // readers apply one set of rules; `end` bounds the bytes they may read.

    /// Reads the identifier octets at `index`.
    static func readTag<Bytes: RandomAccessCollection<UInt8>>(
        _ bytes: Bytes, _ index: inout Int, end: Int
    ) throws(X509Error) -> ASN1Tag where Bytes.Index == Int {
        guard index < end else { throw X509Error(.truncated, "the input ends inside a tag") }
        let first = bytes[index]
        index += 1
        let tagClass = ASN1Tag.TagClass(rawValue: first >> 6) ?? .universal
        let constructed = first & 0x20 != 0
        var number = UInt64(first & 0x1F)
        if number == 0x1F {
            number = 0
            var count = 0
            while true {
                guard index < end else { throw X509Error(.truncated, "the input ends inside a tag") }
                let byte = bytes[index]
                index += 1
                if count == 0 && byte == 0x80 {
                    throw X509Error(.invalidTag, "a high tag number is not minimally encoded (leading 0x80)")
                }
                count += 1
                guard count <= 8 else { throw X509Error(.invalidTag, "a tag number is longer than 8 bytes") }
                number = (number << 7) | UInt64(byte & 0x7F)
                if byte & 0x80 == 0 { break }
            }
            guard number >= 31 else {
                throw X509Error(.invalidTag, "tag number \(number) uses the high-tag form but is below 31")
            }
        }
        return ASN1Tag(number: number, tagClass: tagClass, isConstructed: constructed)
    }

    /// The content length, or `nil` for an indefinite length.
    private func readLength(_ index: inout Int, constructed: Bool) throws(X509Error) -> Int? {
        try Self.readLength(
            remaining, &index, end: remaining.endIndex, constructed: constructed, rules: rules, limits: limits)
    }

    /// Reads the length octets at `index`: the content length, or `nil` for an indefinite length.
    static func readLength<Bytes: RandomAccessCollection<UInt8>>(
        _ bytes: Bytes, _ index: inout Int, end: Int, constructed: Bool, rules: ASN1EncodingRules,
        limits: ASN1Limits
    ) throws(X509Error) -> Int? where Bytes.Index == Int {
        guard index < end else { throw X509Error(.truncated, "the input ends before a length") }
        let first = bytes[index]
        index += 1
        if first < 0x80 {
            guard Int(first) <= limits.maximumLength else {
                throw X509Error(
                    .lengthLimitExceeded, "an element of \(first) bytes exceeds the \(limits.maximumLength)-byte limit")
            }
            return Int(first)
        }
        if first == 0x80 {
            guard rules == .ber else {
                throw X509Error(.indefiniteLengthNotAllowed, "an indefinite length is not allowed in DER")
            }
            guard constructed else {
                throw X509Error(.indefiniteLengthNotAllowed, "a primitive element cannot have an indefinite length")
            }
            return nil
        }
        let count = Int(first & 0x7F)
        guard count <= 4 else {
            throw X509Error(.invalidLength, "a length field of \(count) bytes is longer than the 4 bytes accepted")
        }
        guard end - index >= count else { throw X509Error(.truncated, "the input ends inside a length") }
        var length = 0
        for _ in 0..<count {
            length = (length << 8) | Int(bytes[index])
            index += 1
        }
        if rules == .der {
            guard length >= 0x80 else {
                throw X509Error(.invalidLength, "length \(length) uses the long form; DER requires the short form")
            }
            guard bytes[index - count] != 0 else {
                throw X509Error(
                    .invalidLength, "a long-form length has a leading zero byte; DER requires minimal lengths")
            }
        }
        guard length <= limits.maximumLength else {
            throw X509Error(
                .lengthLimitExceeded, "an element of \(length) bytes exceeds the \(limits.maximumLength)-byte limit")
        }
        return length
    }

    /// Finds where the contents of an indefinite-length element that start at `start` end (the index of
    /// its end-of-contents octets). Iterative: nested indefinite elements only increase a counter.
    static func endOfContents<Bytes: RandomAccessCollection<UInt8>>(
        _ bytes: Bytes, from start: Int, end: Int, tag: ASN1Tag, rules: ASN1EncodingRules, limits: ASN1Limits,
        depth: Int
    ) throws(X509Error) -> Int where Bytes.Index == Int {
        var index = start
        var open = 1
        while true {
            guard end - index >= 2 else {
                throw X509Error(.truncated, "\(tag) with an indefinite length has no end-of-contents octets")
            }
            if bytes[index] == 0 {
                guard bytes[index + 1] == 0 else {
                    throw X509Error(.invalidLength, "end-of-contents octets must have length zero")
                }
                open -= 1
                if open == 0 { return index }
                index += 2
                continue
            }
            let innerTag = try readTag(bytes, &index, end: end)
            guard
                let length = try readLength(
                    bytes, &index, end: end, constructed: innerTag.isConstructed, rules: rules, limits: limits)
            else {
                open += 1
                guard depth + open - 1 <= limits.maximumDepth else {
                    throw X509Error(.nestingTooDeep, "elements are nested deeper than \(limits.maximumDepth) levels")
                }
                continue
            }
            guard end - index >= length else {
                throw X509Error(
                    .truncated, "\(innerTag) announces \(length) bytes but only \(end - index) remain")
            }
            index += length
        }
    }
}

/// Whole-input helpers.
public enum ASN1 {
    /// Reads exactly one element spanning all of `bytes`.
    public static func parse(
        _ bytes: [UInt8], rules: ASN1EncodingRules = .der, limits: ASN1Limits = ASN1Limits()
    ) throws(X509Error) -> ASN1Element {
        try parse(bytes[...], rules: rules, limits: limits)
    }

    /// Reads exactly one element spanning all of `bytes`.
    public static func parse(
        _ bytes: ArraySlice<UInt8>, rules: ASN1EncodingRules = .der, limits: ASN1Limits = ASN1Limits()
    ) throws(X509Error) -> ASN1Element {
        var reader = ASN1Reader(bytes, rules: rules, limits: limits)
        let element = try reader.next()
        try reader.finish("the outermost element")
        return element
    }

    /// Checks that `bytes` is one well-formed element and that every constructed element inside it is
    /// well-formed too (tags, lengths, nesting within the limits). Iterative: the depth of the input
    /// does not touch the call stack. Primitive contents (INTEGER, OID, ...) are not interpreted.
    /// Returns the element, as `parse` would.
    @discardableResult
    public static func validate(
        _ bytes: ArraySlice<UInt8>, rules: ASN1EncodingRules = .der, limits: ASN1Limits = ASN1Limits()
    ) throws(X509Error) -> ASN1Element {
        let root = try parse(bytes, rules: rules, limits: limits)
        guard root.tag.isConstructed else { return root }
        var stack = [try root.children()]
        while !stack.isEmpty {
            if stack[stack.count - 1].isAtEnd {
                stack.removeLast()
                continue
            }
            let element = try stack[stack.count - 1].next()
            if element.tag.isConstructed { stack.append(try element.children()) }
        }
        return root
    }
}
