import Foundation

// The verifier walks every token's SignedData, so this walk allocates nothing but its list of signers and
// takes no reference per element: it reads headers at offsets into a borrowed buffer (`BERScanner`, with the
// rules of `ASN1Reader`, whose header functions it shares), and the views keep one slice of the input and
// the offsets of what they return. What needs rich decoding (times, constructed BER strings, the signer's
// issuer name) goes through `ASN1Element`.

/// A forward reader over `bytes[position..<end]` that returns elements as offsets. Only valid while `bytes`
/// is lent (inside `withUnsafeBufferPointer`); a trivial value, so copies cost nothing.
struct BERScanner {
    /// One element's offsets in the buffer.
    struct Item {
        let tag: ASN1Tag
        let start: Int
        let contentStart: Int
        let contentEnd: Int
        let end: Int
        let depth: Int

        var isIndefiniteLength: Bool { end != contentEnd }
        var encoded: Range<Int> { start..<end }
        var contents: Range<Int> { contentStart..<contentEnd }
    }

    let bytes: UnsafeBufferPointer<UInt8>
    private(set) var position: Int
    let end: Int
    let rules: ASN1EncodingRules
    let limits: ASN1Limits
    let depth: Int

    init(
        _ bytes: UnsafeBufferPointer<UInt8>, range: Range<Int>, rules: ASN1EncodingRules, limits: ASN1Limits,
        depth: Int
    ) {
        self.bytes = bytes
        position = range.lowerBound
        end = range.upperBound
        self.rules = rules
        self.limits = limits
        self.depth = depth
    }

    /// Reads exactly one element spanning `bytes[range]` (as `ASN1.parse` reads it).
    static func root(
        _ bytes: UnsafeBufferPointer<UInt8>, range: Range<Int>, rules: ASN1EncodingRules, limits: ASN1Limits
    ) throws(X509Error) -> (BERScanner, Item) {
        var scanner = BERScanner(bytes, range: range, rules: rules, limits: limits, depth: 0)
        let item = try scanner.next()
        try scanner.finish("the outermost element")
        return (scanner, item)
    }

    var isAtEnd: Bool { position == end }

    func peekTag() -> ASN1Tag? {
        guard position < end else { return nil }
        var index = position
        return try? ASN1Reader.readTag(bytes, &index, end: end)
    }

    mutating func next() throws(X509Error) -> Item {
        guard depth <= limits.maximumDepth else {
            throw X509Error(.nestingTooDeep, "elements are nested deeper than \(limits.maximumDepth) levels")
        }
        guard position < end else { throw X509Error(.truncated, "expected another element, found the end") }
        let start = position
        var index = start
        let tag = try ASN1Reader.readTag(bytes, &index, end: end)
        if tag.tagClass == .universal && tag.number == 0 {
            throw X509Error(.invalidTag, "end-of-contents octets outside an indefinite-length element")
        }
        if let length = try ASN1Reader.readLength(
            bytes, &index, end: end, constructed: tag.isConstructed, rules: rules, limits: limits)
        {
            guard end - index >= length else {
                throw X509Error(.truncated, "\(tag) announces \(length) bytes but only \(end - index) remain")
            }
            position = index + length
            return Item(
                tag: tag, start: start, contentStart: index, contentEnd: position, end: position, depth: depth)
        }
        let contentEnd = try ASN1Reader.endOfContents(
            bytes, from: index, end: end, tag: tag, rules: rules, limits: limits, depth: depth)
        position = contentEnd + 2
        return Item(tag: tag, start: start, contentStart: index, contentEnd: contentEnd, end: position, depth: depth)
    }

    mutating func next(_ expected: ASN1Tag, _ what: @autoclosure () -> String) throws(X509Error) -> Item {
        let item = try next()
        try Self.expect(item, expected, what())
        return item
    }

    mutating func nextIfPresent(_ tag: ASN1Tag) throws(X509Error) -> Item? {
        guard peekTag() == tag else { return nil }
        return try next()
    }

    func finish(_ what: @autoclosure () -> String) throws(X509Error) {
        guard position == end else {
            throw X509Error(.trailingData, "\(what()): \(end - position) unexpected bytes after the last element")
        }
    }

    func children(_ item: Item) throws(X509Error) -> BERScanner {
        guard item.tag.isConstructed else {
            throw X509Error(.unexpectedElement, "\(item.tag) is primitive and has no child elements")
        }
        return BERScanner(bytes, range: item.contents, rules: rules, limits: limits, depth: item.depth + 1)
    }

    static func expect(_ item: Item, _ expected: ASN1Tag, _ what: @autoclosure () -> String) throws(X509Error) {
        guard item.tag == expected else {
            throw X509Error(.unexpectedElement, "\(what()): expected \(expected), found \(item.tag)")
        }
    }

    func view(_ range: Range<Int>) -> Slice<UnsafeBufferPointer<UInt8>> { bytes[range] }

    /// A small INTEGER, checked as `ASN1Element.integerValue` checks it.
    func integerValue(_ item: Item, _ what: @autoclosure () -> String) throws(X509Error) -> Int {
        try Self.expect(item, .integer, what())
        let count = item.contentEnd - item.contentStart
        guard count > 0 else { throw X509Error(.invalidValue, "\(what()): an INTEGER has no contents") }
        let first = bytes[item.contentStart]
        if count > 1 {
            let second = bytes[item.contentStart + 1]
            if (first == 0 && second & 0x80 == 0) || (first == 0xFF && second & 0x80 != 0) {
                throw X509Error(.invalidValue, "\(what()): the INTEGER is not minimally encoded")
            }
        }
        guard count <= 8 else { throw X509Error(.invalidValue, "\(what()): the INTEGER does not fit in 64 bits") }
        var value: Int64 = first & 0x80 != 0 ? -1 : 0
        for index in item.contents { value = (value << 8) | Int64(bytes[index]) }
        return Int(value)
    }

    /// The contents range of a well-formed OBJECT IDENTIFIER.
    func objectIdentifier(_ item: Item, _ what: @autoclosure () -> String) throws(X509Error) -> Range<Int> {
        try Self.expect(item, .objectIdentifier, what())
        do {
            try ASN1ObjectIdentifier.validate(contentBytes: bytes[item.contents])
        } catch {
            throw X509Error(.invalidValue, "\(what()): \(error.message)")
        }
        return item.contents
    }

    /// Whether the OID contents at `range` are `oid`'s.
    func bytes(_ range: Range<Int>, equal oid: ASN1ObjectIdentifier) -> Bool {
        bytes[range].elementsEqual(oid.contentBytes)
    }

    /// An AlgorithmIdentifier: SEQUENCE { OID, parameters OPTIONAL }.
    func algorithm(_ item: Item, _ what: String) throws(X509Error) -> (oid: Range<Int>, parameters: Range<Int>?) {
        try Self.expect(item, .sequence, what)
        var fields = try children(item)
        let oid = try objectIdentifier(fields.next(), "\(what): algorithm")
        let parameters = fields.isAtEnd ? nil : try fields.next().encoded
        try fields.finish(what)
        return (oid, parameters)
    }

    /// Checks that every constructed element inside `item` is well formed (as `ASN1.validate` does), without
    /// allocating: the open levels are kept in a stack buffer as deep as the depth limit allows.
    func validateTree(_ item: Item) throws(X509Error) {
        guard item.tag.isConstructed else { return }
        // One scanner per open level: no deeper than the limit allows, nor than the bytes can nest (each level
        // takes at least a 2-byte header), so a caller's huge limit does not become a huge buffer.
        let capacity = min(max(0, limits.maximumDepth - item.depth), (item.end - item.start) / 2) + 2
        try withUnsafeTemporaryAllocation(of: BERScanner.self, capacity: capacity) { (stack) throws(X509Error) in
            stack[0] = try children(item)
            var count = 1
            while count > 0 {
                if stack[count - 1].isAtEnd {
                    count -= 1
                    continue
                }
                let inner = try stack[count - 1].next()
                guard inner.tag.isConstructed else { continue }
                // `next()` refuses an element deeper than the limit, so the stack never fills.
                guard count < capacity else {
                    throw X509Error(.nestingTooDeep, "elements are nested deeper than \(limits.maximumDepth) levels")
                }
                stack[count] = try stack[count - 1].children(inner)
                count += 1
            }
        }
    }
}

/// Slices of the input a view returns, from the scanner's offsets (which index the lent buffer from 0).
struct InputSlicer {
    let input: ArraySlice<UInt8>

    func callAsFunction(_ range: Range<Int>) -> ArraySlice<UInt8> {
        input[(input.startIndex + range.lowerBound)..<(input.startIndex + range.upperBound)]
    }

    /// The item as an `ASN1Element` of the scanner's rules, for the value decoders.
    func element(_ item: BERScanner.Item, of scanner: BERScanner) -> ASN1Element {
        ASN1Element(
            tag: item.tag, encodedBytes: self(item.encoded), contentBytes: self(item.contents),
            isIndefiniteLength: item.isIndefiniteLength, rules: scanner.rules, limits: scanner.limits,
            depth: item.depth)
    }

    /// An OCTET STRING's bytes: the contents of a primitive one, a concatenated copy of a constructed (BER) one.
    func octetString(
        _ item: BERScanner.Item, of scanner: BERScanner, _ what: @autoclosure () -> String
    ) throws(X509Error) -> ArraySlice<UInt8> {
        if item.tag == .octetString { return self(item.contents) }
        return try element(item, of: scanner).octetString(what())
    }

    func algorithm(_ parts: (oid: Range<Int>, parameters: Range<Int>?)) -> AlgorithmView {
        AlgorithmView(algorithm: self(parts.oid), parameters: parts.parameters.map { self($0) })
    }
}

/// An AlgorithmIdentifier as slices of the input.
struct AlgorithmView {
    /// The OID's contents octets.
    let algorithm: ArraySlice<UInt8>
    /// The parameters element as encoded, if present.
    let parameters: ArraySlice<UInt8>?

    /// Absent or an ASN.1 NULL (equivalent for hash and RSA algorithms).
    var hasNoParameters: Bool { parameters.map { $0.elementsEqual([0x05, 0x00]) } ?? true }

    func `is`(_ oid: ASN1ObjectIdentifier) -> Bool { algorithm.elementsEqual(oid.contentBytes) }

    /// The same identifier, or one that differs only by absent versus NULL parameters.
    func isEquivalent(to other: AlgorithmView) -> Bool {
        guard algorithm.elementsEqual(other.algorithm) else { return false }
        switch (parameters, other.parameters) {
        case (nil, nil): return true
        case (let a?, let b?) where a.elementsEqual(b): return true
        default: return hasNoParameters && other.hasNoParameters
        }
    }

    /// The parsed identifier (the OID was validated when it was read).
    var identifier: AlgorithmIdentifier {
        AlgorithmIdentifier(
            algorithm: try! ASN1ObjectIdentifier(contentBytes: algorithm), parameters: parameters.map(Array.init))
    }
}

/// The parts of a SignedData the verifier needs, as slices of the input (nothing copied, no certificate parsed):
///
/// ```
/// ContentInfo ::= SEQUENCE { contentType OBJECT IDENTIFIER (id-signedData), content [0] EXPLICIT SignedData }
/// SignedData ::= SEQUENCE { version INTEGER, digestAlgorithms SET OF AlgorithmIdentifier,
///     encapContentInfo SEQUENCE { eContentType OID, eContent [0] EXPLICIT OCTET STRING OPTIONAL },
///     certificates [0] IMPLICIT CertificateSet OPTIONAL, crls [1] IMPLICIT OPTIONAL,
///     signerInfos SET OF SignerInfo }
/// ```
struct SignedDataView {
    let version: Int
    private let input: ArraySlice<UInt8>
    private let limits: ASN1Limits
    /// The contents of the digestAlgorithms SET (each entry checked to be an AlgorithmIdentifier).
    private let digestAlgorithmSet: Range<Int>
    /// Whether certificates other than X.509 ones, or revocation information, are present.
    let hasOtherChoices: Bool
    /// The eContentType's contents octets.
    let contentTypeBytes: ArraySlice<UInt8>
    let content: ArraySlice<UInt8>?
    /// The contents of the `[0]` certificates element: the cache key for the signer's chain.
    let certificateSetBytes: ArraySlice<UInt8>
    private let certificateSet: Range<Int>?
    let signers: [SignerInfoView]

    init(_ bytes: ArraySlice<UInt8>, limits: ASN1Limits) throws(X509Error) {
        input = bytes
        self.limits = limits
        let slice = InputSlicer(input: bytes)
        let parsed = try bytes.withUnsafeBufferPointer { (buffer) throws(X509Error) in
            try Self.parse(buffer, slice, limits: limits)
        }
        (version, digestAlgorithmSet, hasOtherChoices, contentTypeBytes, content, certificateSet, signers) = parsed
        certificateSetBytes = certificateSet.map { slice($0) } ?? []
    }

    private static func parse(
        _ buffer: UnsafeBufferPointer<UInt8>, _ slice: InputSlicer, limits: ASN1Limits
    ) throws(X509Error) -> (
        Int, Range<Int>, Bool, ArraySlice<UInt8>, ArraySlice<UInt8>?, Range<Int>?, [SignerInfoView]
    ) {
        let (top, contentInfo) = try BERScanner.root(buffer, range: 0..<buffer.count, rules: .ber, limits: limits)
        try BERScanner.expect(contentInfo, .sequence, "CMS ContentInfo")
        var outer = try top.children(contentInfo)
        let contentInfoType = try outer.objectIdentifier(outer.next(), "CMS ContentInfo: contentType")
        guard outer.bytes(contentInfoType, equal: .cmsSignedData) else {
            throw X509Error(.unexpectedElement, "CMS ContentInfo: the content is not SignedData")
        }
        let explicit = try outer.next(.contextSpecific(0, constructed: true), "CMS ContentInfo: content")
        try outer.finish("CMS ContentInfo")
        var wrapper = try outer.children(explicit)
        let signedData = try wrapper.next(.sequence, "SignedData")
        try wrapper.finish("CMS ContentInfo: content")

        var reader = try wrapper.children(signedData)
        let version = try reader.integerValue(reader.next(), "SignedData: version")
        guard (1...5).contains(version) else { throw X509Error(.invalidValue, "SignedData: version \(version)") }
        let digestSet = try reader.next(.set, "SignedData: digestAlgorithms")
        var digests = try reader.children(digestSet)
        while !digests.isAtEnd { _ = try digests.algorithm(digests.next(), "SignedData: digestAlgorithms") }

        let encap = try reader.next(.sequence, "SignedData: encapContentInfo")
        var encapReader = try reader.children(encap)
        let contentType = try encapReader.objectIdentifier(encapReader.next(), "encapContentInfo: eContentType")
        var content: ArraySlice<UInt8>?
        if let explicitContent = try encapReader.nextIfPresent(.contextSpecific(0, constructed: true)) {
            var inner = try encapReader.children(explicitContent)
            content = try slice.octetString(inner.next(), of: inner, "encapContentInfo: eContent")
            try inner.finish("encapContentInfo: eContent")
        }
        try encapReader.finish("encapContentInfo")

        var others = false
        var certificateSet: Range<Int>?
        if let set = try reader.nextIfPresent(.contextSpecific(0, constructed: true)) {
            certificateSet = set.contents
            var items = try reader.children(set)
            while !items.isAtEnd {
                if try items.next().tag != .sequence { others = true }
            }
        }
        if try reader.nextIfPresent(.contextSpecific(1, constructed: true)) != nil { others = true }  // CRLs: not used
        let signerSet = try reader.next(.set, "SignedData: signerInfos")
        try reader.finish("SignedData")
        var signerReader = try reader.children(signerSet)
        var signers: [SignerInfoView] = []
        while !signerReader.isAtEnd {
            signers.append(try SignerInfoView(signerReader.next(), in: signerReader, slice))
        }
        return (version, digestSet.contents, others, slice(contentType), content, certificateSet, signers)
    }

    /// The eContentType (id-data for Apple's tokens).
    var contentType: ASN1ObjectIdentifier {
        try! ASN1ObjectIdentifier(contentBytes: contentTypeBytes)  // validated when read
    }

    /// The embedded X.509 certificates, in order, as encoded (other certificate choices are skipped).
    var certificates: [ArraySlice<UInt8>] {
        guard let certificateSet else { return [] }
        let slice = InputSlicer(input: input)
        return input.withUnsafeBufferPointer { buffer in
            var items = BERScanner(buffer, range: certificateSet, rules: .ber, limits: limits, depth: 0)
            var out: [ArraySlice<UInt8>] = []
            // Every item was read once already, so reading them again cannot fail.
            while !items.isAtEnd, let item = try? items.next() {
                if item.tag == .sequence { out.append(slice(item.encoded)) }
            }
            return out
        }
    }

    /// Checks the fields no signature covers against RFC 5652 §5.1, so altering them is noticed: the
    /// version the content requires, and every signer's digest algorithm listed in digestAlgorithms.
    func checkConsistency() throws(X509Error) {
        let isData = contentTypeBytes.elementsEqual(ASN1ObjectIdentifier.cmsData.contentBytes)
        let needsVersion3 = !isData || signers.contains { $0.version == 3 }
        let expected = needsVersion3 ? 3 : 1
        guard version == expected || (hasOtherChoices && version >= 4) else {
            throw X509Error(.invalidValue, "SignedData: version \(version) where RFC 5652 requires \(expected)")
        }
        let slice = InputSlicer(input: input)
        for signer in signers {
            let listed = try input.withUnsafeBufferPointer { (buffer) throws(X509Error) -> Bool in
                var digests = BERScanner(buffer, range: digestAlgorithmSet, rules: .ber, limits: limits, depth: 0)
                while !digests.isAtEnd {
                    let entry = try digests.algorithm(digests.next(), "SignedData: digestAlgorithms")
                    if slice.algorithm(entry).isEquivalent(to: signer.digestAlgorithm) { return true }
                }
                return false
            }
            guard listed else {
                throw X509Error(
                    .invalidValue, "SignedData: digestAlgorithms does not list \(signer.digestAlgorithm.identifier)")
            }
        }
    }
}

/// One SignerInfo as slices of the input:
///
/// ```
/// SignerInfo ::= SEQUENCE { version INTEGER, sid SignerIdentifier, digestAlgorithm AlgorithmIdentifier,
///     signedAttrs [0] IMPLICIT SET OF Attribute OPTIONAL, signatureAlgorithm AlgorithmIdentifier,
///     signature OCTET STRING, unsignedAttrs [1] IMPLICIT SET OF Attribute OPTIONAL }
/// ```
struct SignerInfoView {
    let version: Int
    /// The encoded sid element (part of the cache key); its shape and the version it requires are checked
    /// here, its content by ``identifier()``.
    let identifierBytes: ArraySlice<UInt8>
    private let identifierIsSequence: Bool
    private let limits: ASN1Limits
    let digestAlgorithm: AlgorithmView
    let attributes: SignedAttributesView?
    let signatureAlgorithm: AlgorithmView
    let signature: ArraySlice<UInt8>

    init(_ item: BERScanner.Item, in scanner: BERScanner, _ slice: InputSlicer) throws(X509Error) {
        try BERScanner.expect(item, .sequence, "SignerInfo")
        var reader = try scanner.children(item)
        version = try reader.integerValue(reader.next(), "SignerInfo: version")
        let sid = try reader.next()
        if sid.tag == .sequence {
            guard version == 1 else {
                throw X509Error(.invalidValue, "SignerInfo: issuerAndSerialNumber needs version 1")
            }
        } else if sid.tag == .contextSpecific(0, constructed: false)
            || sid.tag == .contextSpecific(0, constructed: true)
        {
            guard version == 3 else {
                throw X509Error(.invalidValue, "SignerInfo: subjectKeyIdentifier needs version 3")
            }
        } else {
            throw X509Error(
                .unexpectedElement, "SignerInfo: sid is neither issuerAndSerialNumber nor subjectKeyIdentifier")
        }
        identifierBytes = slice(sid.encoded)
        identifierIsSequence = sid.tag == .sequence
        limits = scanner.limits
        digestAlgorithm = slice.algorithm(try reader.algorithm(reader.next(), "SignerInfo: digestAlgorithm"))
        if let attrs = try reader.nextIfPresent(.contextSpecific(0, constructed: true)) {
            attributes = try SignedAttributesView(attrs, in: reader, slice)
        } else {
            attributes = nil
        }
        signatureAlgorithm = slice.algorithm(try reader.algorithm(reader.next(), "SignerInfo: signatureAlgorithm"))
        signature = try slice.octetString(reader.next(), of: reader, "SignerInfo: signature")
        _ = try reader.nextIfPresent(.contextSpecific(1, constructed: true))  // unsignedAttrs: not used
        try reader.finish("SignerInfo")
    }

    /// The parsed sid. Decoded on demand: the verifier needs it only when its cache (keyed by the exact sid
    /// bytes, which decoded before) has no entry, and the issuer name is the costliest part of a SignerInfo.
    func identifier() throws(X509Error) -> CMSSignerIdentifier {
        let sid = try ASN1.parse(identifierBytes, rules: .ber, limits: limits)
        guard identifierIsSequence else {
            return .subjectKeyIdentifier(
                Array(try sid.octetString(tag: .contextSpecific(0, constructed: false), "SignerInfo: sid")))
        }
        var fields = try sid.children()
        let issuerElement = try fields.next(.sequence, "SignerInfo: issuer")
        let issuer = try DistinguishedName(derEncoded: Array(issuerElement.encodedBytes))
        let serial = try fields.next().integerBytes("SignerInfo: serialNumber")
        try fields.finish("SignerInfo: issuerAndSerialNumber")
        return .issuerAndSerialNumber(issuer: issuer, serialNumber: Array(serial))
    }
}

/// The signed attributes, which RFC 5652 §5.3 requires in DER (the signature covers their DER with
/// the `[0]` tag replaced by SET). Parsed in DER mode from the original bytes, which are kept.
struct SignedAttributesView {
    /// The element as encoded, `[0]` tag included.
    let encoded: ArraySlice<UInt8>
    /// The contentType attribute's OID contents.
    let contentType: ArraySlice<UInt8>?
    let messageDigest: ArraySlice<UInt8>?
    let signingTime: Date?
    /// CMSAlgorithmProtection (RFC 6211): the contents of the digest and signature algorithm OIDs it binds.
    let protectedAlgorithms: (digest: ArraySlice<UInt8>, signature: ArraySlice<UInt8>?)?

    init(_ item: BERScanner.Item, in scanner: BERScanner, _ slice: InputSlicer) throws(X509Error) {
        guard !item.isIndefiniteLength else {
            throw X509Error(.indefiniteLengthNotAllowed, "signedAttrs must be DER (RFC 5652 §5.3)")
        }
        encoded = slice(item.encoded)
        // Re-read in DER mode: BER forms inside the signed attributes are rejected.
        let (top, der) = try BERScanner.root(scanner.bytes, range: item.encoded, rules: .der, limits: scanner.limits)
        try top.validateTree(der)
        var reader = try top.children(der)
        var previous: Range<Int>?
        var seen = 0  // bit i: Self.known[i] was read
        var contentType: ArraySlice<UInt8>?
        var messageDigest: ArraySlice<UInt8>?
        var signingTime: Date?
        var protection: (ArraySlice<UInt8>, ArraySlice<UInt8>?)?
        guard !reader.isAtEnd else { throw X509Error(.invalidValue, "signedAttrs is empty") }
        while !reader.isAtEnd {
            let attribute = try reader.next(.sequence, "signed attribute")
            if let previous, reader.view(attribute.encoded).lexicographicallyPrecedes(reader.view(previous)) {
                throw X509Error(.invalidValue, "signedAttrs is not sorted as a DER SET OF requires")
            }
            previous = attribute.encoded
            var fields = try reader.children(attribute)
            let type = try fields.objectIdentifier(fields.next(), "signed attribute: type")
            let name = { Self.describe(slice(type)) }
            let values = try fields.next(.set, "signed attribute \(name()): values")
            try fields.finish("signed attribute \(name())")
            guard let known = Self.known.firstIndex(where: { fields.bytes(type, equal: $0) }) else { continue }
            guard seen & (1 << known) == 0 else {
                throw X509Error(.invalidValue, "signed attribute \(name()) appears more than once")
            }
            seen |= 1 << known
            var valueReader = try fields.children(values)
            let value = try valueReader.next()
            try valueReader.finish("signed attribute \(name()): exactly one value")
            switch known {
            case 0:
                contentType = slice(try valueReader.objectIdentifier(value, "contentType attribute"))
            case 1:
                messageDigest = try slice.octetString(value, of: valueReader, "messageDigest attribute")
            case 2:
                signingTime = try slice.element(value, of: valueReader).time("signingTime attribute")
            default:
                try BERScanner.expect(value, .sequence, "CMSAlgorithmProtection")
                var p = try valueReader.children(value)
                let digest = try p.algorithm(p.next(), "CMSAlgorithmProtection: digestAlgorithm")
                var signature: ArraySlice<UInt8>?
                if let s = try p.nextIfPresent(.contextSpecific(1, constructed: true)) {
                    var inner = try p.children(s)
                    signature = slice(
                        try inner.objectIdentifier(inner.next(), "CMSAlgorithmProtection: signatureAlgorithm"))
                    if !inner.isAtEnd { _ = try inner.next() }
                    try inner.finish("CMSAlgorithmProtection: signatureAlgorithm")
                }
                _ = try p.nextIfPresent(.contextSpecific(2, constructed: true))
                try p.finish("CMSAlgorithmProtection")
                protection = (slice(digest.oid), signature)
            }
        }
        self.contentType = contentType
        self.messageDigest = messageDigest
        self.signingTime = signingTime
        protectedAlgorithms = protection
    }

    /// The attributes read, in this order; others are skipped.
    private static let known: [ASN1ObjectIdentifier] = [
        .contentTypeAttribute, .messageDigestAttribute, .signingTimeAttribute, .algorithmProtectionAttribute,
    ]

    /// Dotted text of validated OID contents, for error messages.
    private static func describe(_ oid: ArraySlice<UInt8>) -> String {
        (try? ASN1ObjectIdentifier(contentBytes: oid).description) ?? "?"
    }

    /// What the signature covers: the DER of the attributes with the `[0]` tag replaced by SET (0x31).
    var signedBytes: [UInt8] {
        var out = Array(encoded)
        out[0] = 0x31
        return out
    }
}
