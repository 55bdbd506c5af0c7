/// A data object list (PDOL, CDOL1, CDOL2): the tags and lengths a card asks the terminal to supply, in
/// order. The terminal answers with the values concatenated, without tags or lengths.
public struct DataObjectList: Hashable, Sendable, CustomStringConvertible {
    /// One requested data object: its tag and the length the card wants.
    public struct Entry: Hashable, Sendable {
        /// The tag of the requested data object.
        public let tag: TLVTag
        /// The number of bytes the card wants for it (values are padded or truncated to it).
        public let length: Int

        /// An entry made in code; `length` is 0 to 127 (one DOL length byte).
        public init(_ tag: TLVTag, _ length: Int) {
            precondition((0..<0x80).contains(length), "a DOL entry length is 0 to 127")
            self.tag = tag
            self.length = length
        }
    }

    /// The requested data objects, in the order their values must be concatenated.
    public let entries: [Entry]

    /// A list of the given entries, in order.
    public init(_ entries: [Entry]) { self.entries = entries }

    /// Parses the value of a DOL tag (`9F38`, `8C`, `8D`): tag, one-byte length, repeated.
    public init(bytes: some Collection<UInt8>) throws(EMVError) {
        let b = Array(bytes)
        var entries: [Entry] = []
        var index = 0
        while index < b.count {
            let start = index
            index += 1
            if b[start] & 0x1F == 0x1F {
                while true {
                    guard index < b.count else { throw EMVError(.malformedDOL, "truncated tag at offset \(start)") }
                    index += 1
                    guard index - start <= 4 else {
                        throw EMVError(.malformedDOL, "tag at offset \(start) is longer than 4 bytes")
                    }
                    if b[index - 1] & 0x80 == 0 { break }
                }
            }
            let tag: TLVTag
            do { tag = try TLVTag(bytes: b[start..<index]) } catch {
                throw EMVError(.malformedDOL, "bad tag at offset \(start): \(error.message)")
            }
            guard index < b.count else { throw EMVError(.malformedDOL, "tag \(tag) has no length") }
            let length = Int(b[index])
            guard length < 0x80 else {
                throw EMVError(.malformedDOL, "tag \(tag) asks for \(length) bytes; DOL lengths are one byte below 128")
            }
            index += 1
            entries.append(Entry(tag, length))
        }
        self.entries = entries
    }

    /// The DOL as the card stores it (tag, one-byte length, ...).
    public var encoded: [UInt8] { entries.flatMap { $0.tag.bytes + [UInt8($0.length)] } }

    /// The length of the data the terminal must send.
    public var dataLength: Int { entries.reduce(0) { $0 + $1.length } }

    /// The concatenated values for this list (EMV Book 3 §5.4): each value from `values`, padded or truncated
    /// to its entry's length by its format (`n` on the left with zeros, `cn` on the right with `FF`, other
    /// formats on the right with zeros); unknown tags and constructed tags give zeros.
    public func build(_ values: (TLVTag) -> [UInt8]?) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(dataLength)
        for entry in entries {
            guard !entry.tag.isConstructed, let value = values(entry.tag) else {
                out += [UInt8](repeating: 0, count: entry.length)
                continue
            }
            out += DataObjectList.fit(value, length: entry.length, format: entry.tag.format)
        }
        return out
    }

    /// ``build(_:)`` from a dictionary.
    public func build(from values: [TLVTag: [UInt8]]) -> [UInt8] { build { values[$0] } }

    /// Splits DOL-built data back into values, in list order (tags may repeat).
    public func split(_ data: some Collection<UInt8>) throws(EMVError) -> [TLV] {
        let b = Array(data)
        guard b.count == dataLength else {
            throw EMVError(.malformedDOL, "the data is \(b.count) bytes; the list asks for \(dataLength)")
        }
        var out: [TLV] = []
        var index = 0
        for entry in entries {
            out.append(TLV(entry.tag, Array(b[index..<index + entry.length])))
            index += entry.length
        }
        return out
    }

    static func fit(_ value: [UInt8], length: Int, format: TLVTag.Format) -> [UInt8] {
        if value.count == length { return value }
        switch format {
        case .numeric:
            if value.count > length { return Array(value.suffix(length)) }
            return [UInt8](repeating: 0, count: length - value.count) + value
        case .compressedNumeric:
            if value.count > length { return Array(value.prefix(length)) }
            return value + [UInt8](repeating: 0xFF, count: length - value.count)
        case .other:
            if value.count > length { return Array(value.prefix(length)) }
            return value + [UInt8](repeating: 0, count: length - value.count)
        }
    }

    public var description: String {
        entries.map { "\($0.tag) \([UInt8($0.length)].hexString)" }.joined(separator: " ")
    }
}
