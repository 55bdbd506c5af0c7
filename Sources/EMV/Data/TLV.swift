/// One BER-TLV data object: a tag and either a primitive value or, for a constructed tag decoded from
/// bytes, the objects inside it, in their original order (repeated tags included).
public struct TLV: Hashable, Sendable {
    /// What a data object holds.
    public enum Content: Hashable, Sendable {
        /// Opaque value bytes.
        case primitive([UInt8])
        /// Nested data objects, in order.
        case constructed([TLV])
    }

    /// The data object's tag.
    public let tag: TLVTag
    /// The value bytes or, for a constructed object decoded from bytes, the objects inside it.
    public let content: Content

    /// A primitive object (the bytes are kept as given, even under a constructed tag).
    public init(_ tag: TLVTag, _ value: [UInt8]) {
        self.tag = tag
        self.content = .primitive(value)
    }

    /// A constructed object (template) holding `children` in order.
    public init(_ tag: TLVTag, children: [TLV]) {
        self.tag = tag
        self.content = .constructed(children)
    }

    /// The value field: the bytes of a primitive object, the encoding of the children of a constructed one.
    public var value: [UInt8] {
        switch content {
        case .primitive(let bytes): bytes
        case .constructed(let children): children.flatMap(\.encoded)
        }
    }

    /// The objects inside a constructed object (empty for a primitive one).
    public var children: [TLV] {
        if case .constructed(let children) = content { return children }
        return []
    }

    /// Tag, length and value as BER-TLV bytes (short length form below 128 bytes, else `81`, `82` or `83`).
    public var encoded: [UInt8] {
        let v = value
        return tag.bytes + TLV.encodeLength(v.count) + v
    }

    /// The definite-length encoding of `count` (minimal form).
    public static func encodeLength(_ count: Int) -> [UInt8] {
        switch count {
        case ..<0x80: [UInt8(count)]
        case ..<0x100: [0x81, UInt8(count)]
        case ..<0x1_0000: [0x82, UInt8(count >> 8), UInt8(count & 0xFF)]
        default: [0x83, UInt8((count >> 16) & 0xFF), UInt8((count >> 8) & 0xFF), UInt8(count & 0xFF)]
        }
    }

    /// Decodes a sequence of data objects with the default ``TLVDecoder`` limits.
    public static func decode(_ bytes: some Collection<UInt8>) throws(EMVError) -> [TLV] {
        try TLVDecoder().decode(bytes)
    }

    /// Decodes exactly one data object (padding `00` bytes around it allowed).
    public static func decodeSingle(_ bytes: some Collection<UInt8>) throws(EMVError) -> TLV {
        let all = try TLVDecoder().decode(bytes)
        guard all.count == 1 else {
            throw EMVError(.malformedTLV, "expected one data object, found \(all.count)")
        }
        return all[0]
    }

    /// The first object with `tag` in depth-first order, this object included.
    public func first(_ tag: TLVTag) -> TLV? {
        if self.tag == tag { return self }
        return children.first(tag)
    }

    /// An indented tree, one object per line: tag, name, and the value in hex for primitive objects.
    public func treeDescription(indent: Int = 0) -> String {
        var lines: [String] = []
        appendTree(to: &lines, level: indent)
        return lines.joined(separator: "\n")
    }

    func appendTree(to lines: inout [String], level: Int) {
        let pad = String(repeating: "  ", count: level)
        let name = tag.name.map { " (\($0))" } ?? ""
        switch content {
        case .primitive(let bytes):
            // Text fields (and printable DF names such as the PPSE's) also shown as text.
            let textual: Set<UInt32> = [0x50, 0x84, 0x5F20, 0x5F2D, 0x9F12]
            let text =
                textual.contains(tag.rawValue) && !bytes.isEmpty && bytes.allSatisfy { (0x20...0x7E).contains($0) }
                ? " \"\(String(decoding: bytes, as: UTF8.self))\"" : ""
            lines.append("\(pad)\(tag)\(name) [\(bytes.count)]: \(bytes.hexString)\(text)")
        case .constructed(let children):
            lines.append("\(pad)\(tag)\(name) [\(value.count)]")
            for child in children { child.appendTree(to: &lines, level: level + 1) }
        }
    }
}

extension Array where Element == TLV {
    /// The first object with `tag`, searching depth-first through templates.
    public func first(_ tag: TLVTag) -> TLV? {
        for element in self {
            if let found = element.first(tag) { return found }
        }
        return nil
    }

    /// Every object with `tag`, depth-first, in order of appearance.
    public func all(_ tag: TLVTag) -> [TLV] {
        var out: [TLV] = []
        func visit(_ list: [TLV]) {
            for element in list {
                if element.tag == tag { out.append(element) }
                visit(element.children)
            }
        }
        visit(self)
        return out
    }

    /// The value of the first object with `tag` (depth-first).
    public func value(_ tag: TLVTag) -> [UInt8]? { first(tag)?.value }

    /// The concatenated encodings.
    public var encoded: [UInt8] { flatMap(\.encoded) }

    /// Every primitive object in depth-first order (templates flattened away), for building a data store.
    public var primitives: [TLV] {
        var out: [TLV] = []
        func visit(_ list: [TLV]) {
            for element in list {
                if case .constructed(let children) = element.content { visit(children) } else { out.append(element) }
            }
        }
        visit(self)
        return out
    }

    /// The tree descriptions of all objects.
    public func treeDescription() -> String { map { $0.treeDescription() }.joined(separator: "\n") }
}

/// A BER-TLV decoder with limits, so hostile input (a card, a terminal, an acquirer message) cannot make it
/// recurse without bound or allocate without bound.
///
/// Definite lengths only (`80` indefinite and lengths over three bytes are refused), tags up to four bytes.
/// Objects with a constructed tag are decoded recursively. `00` bytes between objects are skipped, as EMV
/// Book 3 Annex B allows.
public struct TLVDecoder: Sendable {
    /// The deepest nesting accepted (EMV templates nest four or five deep).
    public var maximumDepth: Int
    /// The most data objects accepted in one input, all levels together.
    public var maximumElementCount: Int

    /// A decoder with these limits; input beyond them throws `limitExceeded` and returns nothing.
    public init(maximumDepth: Int = 16, maximumElementCount: Int = 4096) {
        self.maximumDepth = maximumDepth
        self.maximumElementCount = maximumElementCount
    }

    /// Decodes `bytes` as a sequence of data objects.
    public func decode(_ bytes: some Collection<UInt8>) throws(EMVError) -> [TLV] {
        let buffer = Array(bytes)
        var state = State(buffer: buffer)
        return try decodeList(&state, from: 0, to: buffer.count, depth: 0)
    }

    struct State {
        let buffer: [UInt8]
        var elements = 0
    }

    func decodeList(_ state: inout State, from start: Int, to end: Int, depth: Int) throws(EMVError) -> [TLV] {
        guard depth < maximumDepth else {
            throw EMVError(.limitExceeded, "TLV nesting deeper than \(maximumDepth) levels")
        }
        var objects: [TLV] = []
        var index = start
        while index < end {
            if state.buffer[index] == 0x00 {
                index += 1
                continue
            }
            state.elements += 1
            guard state.elements <= maximumElementCount else {
                throw EMVError(.limitExceeded, "more than \(maximumElementCount) TLV objects")
            }
            let tagStart = index
            let tag = try readTag(state.buffer, &index, end: end)
            let length = try readLength(state.buffer, &index, end: end, tagOffset: tagStart)
            guard length <= end - index else {
                throw EMVError(
                    .malformedTLV,
                    "tag \(tag) at offset \(tagStart) announces \(length) bytes but only \(end - index) remain")
            }
            if tag.isConstructed {
                let children = try decodeList(&state, from: index, to: index + length, depth: depth + 1)
                objects.append(TLV(tag, children: children))
            } else {
                objects.append(TLV(tag, Array(state.buffer[index..<index + length])))
            }
            index += length
        }
        return objects
    }

    func readTag(_ buffer: [UInt8], _ index: inout Int, end: Int) throws(EMVError) -> TLVTag {
        let start = index
        let first = buffer[index]
        index += 1
        if first & 0x1F == 0x1F {
            while true {
                guard index < end else { throw EMVError(.malformedTLV, "truncated tag at offset \(start)") }
                let byte = buffer[index]
                index += 1
                guard index - start <= 4 else {
                    throw EMVError(.malformedTLV, "tag at offset \(start) is longer than 4 bytes")
                }
                if byte & 0x80 == 0 { break }
            }
        }
        return try TLVTag(bytes: buffer[start..<index])
    }

    func readLength(_ buffer: [UInt8], _ index: inout Int, end: Int, tagOffset: Int) throws(EMVError) -> Int {
        guard index < end else { throw EMVError(.malformedTLV, "missing length after the tag at offset \(tagOffset)") }
        let first = buffer[index]
        index += 1
        if first < 0x80 { return Int(first) }
        let count = Int(first & 0x7F)
        guard count != 0 else {
            throw EMVError(.malformedTLV, "indefinite length at offset \(index - 1) is not allowed in EMV")
        }
        guard count <= 3 else {
            throw EMVError(.malformedTLV, "length at offset \(index - 1) uses \(count) bytes (at most 3)")
        }
        guard end - index >= count else { throw EMVError(.malformedTLV, "truncated length at offset \(index - 1)") }
        var length = 0
        for _ in 0..<count {
            length = length << 8 | Int(buffer[index])
            index += 1
        }
        return length
    }
}
