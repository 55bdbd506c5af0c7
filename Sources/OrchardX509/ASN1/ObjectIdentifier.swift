/// An ASN.1 OBJECT IDENTIFIER, held as its DER contents so comparisons are byte comparisons.
public struct ASN1ObjectIdentifier: Hashable, Sendable, CustomStringConvertible, Comparable {
    /// The DER contents octets (without tag and length).
    public let contentBytes: [UInt8]

    /// From dotted-decimal text such as `"1.2.840.113635.100.6.29"`; an arc may take up to 128 bits (a UUID
    /// under 2.25, X.667).
    public init(_ dotted: String) throws(X509Error) {
        var arcs: [UInt128] = []
        for part in dotted.split(separator: ".", omittingEmptySubsequences: false) {
            guard !part.isEmpty, part.allSatisfy({ $0.isASCII && $0.isNumber }), let arc = UInt128(part) else {
                throw X509Error(.invalidValue, "\"\(dotted)\" is not a dotted-decimal object identifier")
            }
            arcs.append(arc)
        }
        try self.init(arcs: arcs)
    }

    /// From its arcs; the first is 0, 1 or 2, and the second below 40 unless the first is 2.
    public init(arcs: [UInt128]) throws(X509Error) {
        guard arcs.count >= 2, arcs[0] <= 2, arcs[0] == 2 || arcs[1] < 40, arcs[1] <= UInt128.max - 80 else {
            throw X509Error(.invalidValue, "an object identifier needs at least two arcs, the first 0, 1 or 2")
        }
        var out: [UInt8] = []
        Self.appendBase128(arcs[0] * 40 + arcs[1], to: &out)
        for arc in arcs.dropFirst(2) { Self.appendBase128(arc, to: &out) }
        contentBytes = out
    }

    /// From DER contents octets, checked to be minimal.
    public init(contentBytes bytes: ArraySlice<UInt8>) throws(X509Error) {
        try Self.validate(contentBytes: bytes)
        contentBytes = Array(bytes)
    }

    /// Checks DER contents octets as ``init(contentBytes:)`` does, without keeping them.
    static func validate(contentBytes bytes: some BidirectionalCollection<UInt8>) throws(X509Error) {
        guard let last = bytes.last, last & 0x80 == 0 else {
            throw X509Error(.invalidValue, "an object identifier is empty or ends inside a subidentifier")
        }
        var atStart = true
        var digits = 0
        var leading: UInt8 = 0
        for byte in bytes {
            if atStart {
                if byte == 0x80 {
                    throw X509Error(.invalidValue, "an object identifier subidentifier is not minimally encoded")
                }
                leading = byte & 0x7F
            }
            digits += 1
            // 19 base-128 digits hold 133 bits; an arc of 128 bits leaves 2 for the first (128 = 18 × 7 + 2).
            guard digits < 19 || (digits == 19 && leading <= 0x03) else {
                throw X509Error(.invalidValue, "an object identifier arc exceeds 128 bits")
            }
            atStart = byte & 0x80 == 0
            if atStart { digits = 0 }
        }
    }

    /// For constants written in the source (a malformed literal is a programming error).
    init(constant dotted: String) {
        // Only called with literals in this module; the tests parse every one of them.
        try! self.init(dotted)
    }

    /// The arcs, e.g. `[1, 2, 840, 113549]`.
    public var arcs: [UInt128] {
        var values: [UInt128] = []
        var current: UInt128 = 0
        for byte in contentBytes {
            current = (current << 7) | UInt128(byte & 0x7F)
            if byte & 0x80 == 0 {
                values.append(current)
                current = 0
            }
        }
        guard let first = values.first else { return [] }
        let head: [UInt128] = first < 40 ? [0, first] : first < 80 ? [1, first - 40] : [2, first - 80]
        return head + values.dropFirst()
    }

    /// Dotted-decimal text.
    public var description: String { arcs.map(String.init).joined(separator: ".") }

    /// An arbitrary but stable order (by encoding), for sorting.
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.contentBytes.lexicographicallyPrecedes(rhs.contentBytes) }

    private static func appendBase128(_ value: UInt128, to out: inout [UInt8]) {
        var digits: [UInt8] = [UInt8(value & 0x7F)]
        var v = value >> 7
        while v > 0 {
            digits.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        out.append(contentsOf: digits.reversed())
    }
}

extension ASN1ObjectIdentifier {
    // Algorithms.
    public static let sha256 = Self(constant: "2.16.840.1.101.3.4.2.1")
    public static let sha384 = Self(constant: "2.16.840.1.101.3.4.2.2")
    public static let ecPublicKey = Self(constant: "1.2.840.10045.2.1")
    public static let prime256v1 = Self(constant: "1.2.840.10045.3.1.7")
    public static let secp384r1 = Self(constant: "1.3.132.0.34")
    public static let ecdsaWithSHA256 = Self(constant: "1.2.840.10045.4.3.2")
    public static let ecdsaWithSHA384 = Self(constant: "1.2.840.10045.4.3.3")
    public static let rsaEncryption = Self(constant: "1.2.840.113549.1.1.1")
    public static let sha256WithRSAEncryption = Self(constant: "1.2.840.113549.1.1.11")

    // Name attributes (RFC 5280, RFC 4519).
    public static let commonName = Self(constant: "2.5.4.3")
    public static let surname = Self(constant: "2.5.4.4")
    public static let serialNumber = Self(constant: "2.5.4.5")
    public static let countryName = Self(constant: "2.5.4.6")
    public static let localityName = Self(constant: "2.5.4.7")
    public static let stateOrProvinceName = Self(constant: "2.5.4.8")
    public static let organizationName = Self(constant: "2.5.4.10")
    public static let organizationalUnitName = Self(constant: "2.5.4.11")
    public static let userID = Self(constant: "0.9.2342.19200300.100.1.1")
    public static let domainComponent = Self(constant: "0.9.2342.19200300.100.1.25")
    public static let emailAddress = Self(constant: "1.2.840.113549.1.9.1")

    // Certificate extensions (RFC 5280).
    public static let subjectKeyIdentifier = Self(constant: "2.5.29.14")
    public static let keyUsage = Self(constant: "2.5.29.15")
    public static let subjectAlternativeName = Self(constant: "2.5.29.17")
    public static let basicConstraints = Self(constant: "2.5.29.19")
    public static let authorityKeyIdentifier = Self(constant: "2.5.29.35")
    public static let extendedKeyUsage = Self(constant: "2.5.29.37")

    // Extended key usages.
    public static let serverAuth = Self(constant: "1.3.6.1.5.5.7.3.1")
    public static let clientAuth = Self(constant: "1.3.6.1.5.5.7.3.2")

    // Apple's marker and merchant extensions.
    /// Present (with an ASN.1 NULL value) on the leaf certificate that signs payment tokens.
    public static let appleTokenSigningLeaf = Self(constant: "1.2.840.113635.100.6.29")
    /// Present (with an ASN.1 NULL value) on Apple Application Integration CA certificates.
    public static let appleApplicationIntegrationCA = Self(constant: "1.2.840.113635.100.6.2.14")
    /// Merchant identity: a UTF8String of the 64 upper-case hex digits of SHA-256(merchant identifier).
    public static let appleMerchantIdentifier = Self(constant: "1.2.840.113635.100.6.32")
    /// Present (with an ASN.1 NULL value) on Apple Pay merchant identity (TLS client) certificates.
    public static let appleMerchantIdentityMarker = Self(constant: "1.2.840.113635.100.6.46")

    // Orchard's arc: 2.25 followed by a UUID as one integer (X.667: unique by construction, registered nowhere),
    // for what Apple has no marker of its own.
    /// Orchard's private arc, 2.25.50593322108839208744426847651566908713 (UUID
    /// 260feb5e-07da-412c-b950-8efbd87af529); `.1` holds the markers of its signing leaves.
    public static let orchard = Self(constant: "2.25.50593322108839208744426847651566908713")
    /// Present (with an ASN.1 NULL value) on the leaf that signs merchant sessions (Orchard arc `.1.1`).
    public static let orchardMerchantSessionSigningLeaf = Self(
        constant: "2.25.50593322108839208744426847651566908713.1.1")
    /// Present (with an ASN.1 NULL value) on the leaf that signs domain-association files (Orchard arc `.1.2`).
    public static let orchardDomainAssociationSigningLeaf = Self(
        constant: "2.25.50593322108839208744426847651566908713.1.2")
    /// Present (with an ASN.1 NULL value) on the leaf that signs capability statements (Orchard arc `.1.3`).
    public static let orchardCapabilityStatementSigningLeaf = Self(
        constant: "2.25.50593322108839208744426847651566908713.1.3")

    // PKCS #9 and CMS (RFC 5652, RFC 6211, RFC 2985).
    public static let cmsData = Self(constant: "1.2.840.113549.1.7.1")
    public static let cmsSignedData = Self(constant: "1.2.840.113549.1.7.2")
    public static let contentTypeAttribute = Self(constant: "1.2.840.113549.1.9.3")
    public static let messageDigestAttribute = Self(constant: "1.2.840.113549.1.9.4")
    public static let signingTimeAttribute = Self(constant: "1.2.840.113549.1.9.5")
    public static let extensionRequest = Self(constant: "1.2.840.113549.1.9.14")
    public static let algorithmProtectionAttribute = Self(constant: "1.2.840.113549.1.9.52")
}
