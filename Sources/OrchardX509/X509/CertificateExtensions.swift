import OrchardCrypto

/// `KeyUsage ::= BIT STRING` (RFC 5280 §4.2.1.3); bit n of the list is `1 << n`.
public struct KeyUsage: OptionSet, Hashable, Sendable {
    public let rawValue: UInt16
    /// Bits as in the BIT STRING: bit n is `1 << n`.
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// The RFC 5280 key usages, in bit order.
    public static let digitalSignature = KeyUsage(rawValue: 1 << 0)
    public static let nonRepudiation = KeyUsage(rawValue: 1 << 1)
    public static let keyEncipherment = KeyUsage(rawValue: 1 << 2)
    public static let dataEncipherment = KeyUsage(rawValue: 1 << 3)
    public static let keyAgreement = KeyUsage(rawValue: 1 << 4)
    public static let keyCertSign = KeyUsage(rawValue: 1 << 5)
    public static let cRLSign = KeyUsage(rawValue: 1 << 6)
    public static let encipherOnly = KeyUsage(rawValue: 1 << 7)
    public static let decipherOnly = KeyUsage(rawValue: 1 << 8)
}

/// `BasicConstraints ::= SEQUENCE { cA BOOLEAN DEFAULT FALSE, pathLenConstraint INTEGER (0..MAX) OPTIONAL }`
public struct BasicConstraints: Hashable, Sendable {
    /// Whether the subject is a CA.
    public let isCA: Bool
    /// How many intermediate CAs may follow this one; `nil` for no limit.
    public let pathLength: Int?

    /// Constraints as they appear in the extension.
    public init(isCA: Bool, pathLength: Int? = nil) {
        self.isCA = isCA
        self.pathLength = pathLength
    }
}

/// The DNS names and IP addresses of a SubjectAltName extension (other name forms are skipped).
public struct SubjectAlternativeNames: Hashable, Sendable {
    /// dNSName entries, in order.
    public let dnsNames: [String]
    /// 4 bytes (IPv4) or 16 bytes (IPv6) each.
    public let ipAddresses: [[UInt8]]

    /// A set of names to compare with a parsed extension.
    public init(dnsNames: [String] = [], ipAddresses: [[UInt8]] = []) {
        self.dnsNames = dnsNames
        self.ipAddresses = ipAddresses
    }
}

extension Certificate.Extension {
    /// Basic constraints, critical as RFC 5280 requires for CAs.
    public static func basicConstraints(isCA: Bool, pathLength: Int? = nil) -> Self {
        let value = DERWriter.encode { w in
            w.appendConstructed(.sequence) { w in
                if isCA { w.appendBoolean(true) }
                if let pathLength { w.appendInteger(pathLength) }
            }
        }
        return Self(oid: .basicConstraints, isCritical: true, value: value)
    }

    /// Key usage, critical.
    public static func keyUsage(_ usage: KeyUsage) -> Self {
        Self(oid: .keyUsage, isCritical: true, value: DERWriter.encode { $0.appendNamedBits(UInt64(usage.rawValue)) })
    }

    /// Extended key usage (e.g. ``ASN1ObjectIdentifier/serverAuth``), non-critical.
    public static func extendedKeyUsage(_ purposes: [ASN1ObjectIdentifier]) -> Self {
        let value = DERWriter.encode { w in
            w.appendConstructed(.sequence) { w in for oid in purposes { w.appendObjectIdentifier(oid) } }
        }
        return Self(oid: .extendedKeyUsage, value: value)
    }

    /// Subject key identifier, non-critical.
    public static func subjectKeyIdentifier(_ identifier: [UInt8]) -> Self {
        Self(oid: .subjectKeyIdentifier, value: DERWriter.encode { $0.appendOctetString(identifier) })
    }

    /// Authority key identifier holding the issuer's key identifier, non-critical.
    public static func authorityKeyIdentifier(_ identifier: [UInt8]) -> Self {
        let value = DERWriter.encode { w in
            w.appendConstructed(.sequence) { w in
                w.appendOctetString(identifier, tag: .contextSpecific(0, constructed: false))
            }
        }
        return Self(oid: .authorityKeyIdentifier, value: value)
    }

    /// Subject alternative names: DNS names (ASCII) and IP addresses (4 or 16 bytes), non-critical.
    public static func subjectAlternativeNames(
        dnsNames: [String] = [], ipAddresses: [[UInt8]] = []
    ) throws(X509Error)
        -> Self
    {
        for ip in ipAddresses where ip.count != 4 && ip.count != 16 {
            throw X509Error(.invalidValue, "an IP address in a SubjectAltName is 4 or 16 bytes, not \(ip.count)")
        }
        let value = try DERWriter.encode { (w) throws(X509Error) in
            try w.appendConstructed(.sequence) { (w) throws(X509Error) in
                for name in dnsNames { try w.appendIA5String(name, tag: .contextSpecific(2, constructed: false)) }
                for ip in ipAddresses { w.appendOctetString(ip, tag: .contextSpecific(7, constructed: false)) }
            }
        }
        return Self(oid: .subjectAlternativeName, value: value)
    }

    /// Apple's marker on payment-token signing leaves (1.2.840.113635.100.6.29): ASN.1 NULL, non-critical
    /// (a critical unknown extension would make chain validation fail).
    public static let appleTokenSigningLeafMarker = Self(oid: .appleTokenSigningLeaf, value: [0x05, 0x00])

    /// Apple's marker on the Application Integration CA (1.2.840.113635.100.6.2.14): ASN.1 NULL, non-critical.
    public static let appleApplicationIntegrationCAMarker = Self(
        oid: .appleApplicationIntegrationCA, value: [0x05, 0x00])

    /// Apple's marker on merchant identity certificates (1.2.840.113635.100.6.46): ASN.1 NULL, non-critical.
    public static let appleMerchantIdentityMarker = Self(oid: .appleMerchantIdentityMarker, value: [0x05, 0x00])

    /// Apple's merchant identifier extension (1.2.840.113635.100.6.32): a UTF8String of the 64
    /// upper-case hex digits of SHA-256(`merchantIdentifier`), non-critical.
    public static func appleMerchantIdentifier(_ merchantIdentifier: String) -> Self {
        let digest = SHA256.hash(Array(merchantIdentifier.utf8))
        let value = DERWriter.encode { $0.appendUTF8String(hexString(digest, uppercase: true)) }
        return Self(oid: .appleMerchantIdentifier, value: value)
    }
}

extension Certificate {
    /// Whether an extension with `oid` is present (Apple's marker checks need presence only).
    public func hasExtension(_ oid: ASN1ObjectIdentifier) -> Bool { self.extension(oid) != nil }

    private func extensionElement(_ oid: ASN1ObjectIdentifier) throws(X509Error) -> ASN1Element? {
        guard let ext = self.extension(oid) else { return nil }
        return try ASN1.parse(ext.value, rules: .der)
    }

    /// The basic constraints, if the extension is present.
    public var basicConstraints: BasicConstraints? {
        get throws(X509Error) {
            guard let element = try extensionElement(.basicConstraints) else { return nil }
            try element.expect(.sequence, "basicConstraints")
            var reader = try element.children()
            var isCA = false
            if let flag = try reader.nextIfPresent(.boolean) {
                isCA = try flag.boolean("basicConstraints: cA")
                guard isCA else { throw X509Error(.invalidValue, "basicConstraints: cA FALSE must be omitted in DER") }
            }
            var pathLength: Int?
            if !reader.isAtEnd {
                let length = try reader.next().integerValue("basicConstraints: pathLenConstraint")
                guard length >= 0 else { throw X509Error(.invalidValue, "basicConstraints: negative path length") }
                pathLength = length
            }
            try reader.finish("basicConstraints")
            return BasicConstraints(isCA: isCA, pathLength: pathLength)
        }
    }

    /// The key usage bits, if the extension is present.
    public var keyUsage: KeyUsage? {
        get throws(X509Error) {
            guard let element = try extensionElement(.keyUsage) else { return nil }
            let bits = try element.bitString("keyUsage")
            guard bits.bytes.count <= 2 else { throw X509Error(.invalidValue, "keyUsage: more than 9 bits") }
            var raw: UInt16 = 0
            for (byteIndex, byte) in bits.bytes.enumerated() {
                for bit in 0..<8 where byte & (0x80 >> UInt8(bit)) != 0 { raw |= 1 << UInt16(byteIndex * 8 + bit) }
            }
            return KeyUsage(rawValue: raw)
        }
    }

    /// The extended key usage purposes, if the extension is present.
    public var extendedKeyUsage: [ASN1ObjectIdentifier]? {
        get throws(X509Error) {
            guard let element = try extensionElement(.extendedKeyUsage) else { return nil }
            try element.expect(.sequence, "extendedKeyUsage")
            var reader = try element.children()
            var out: [ASN1ObjectIdentifier] = []
            while !reader.isAtEnd { out.append(try reader.next().objectIdentifier("extendedKeyUsage")) }
            return out
        }
    }

    /// The subject key identifier, if the extension is present.
    public var subjectKeyIdentifier: [UInt8]? {
        get throws(X509Error) {
            guard let element = try extensionElement(.subjectKeyIdentifier) else { return nil }
            return Array(try element.octetString("subjectKeyIdentifier"))
        }
    }

    /// The keyIdentifier of the authority key identifier, if present.
    public var authorityKeyIdentifier: [UInt8]? {
        get throws(X509Error) {
            guard let element = try extensionElement(.authorityKeyIdentifier) else { return nil }
            try element.expect(.sequence, "authorityKeyIdentifier")
            var reader = try element.children()
            guard let id = try reader.nextIfPresent(.contextSpecific(0, constructed: false)) else { return nil }
            return Array(try id.octetString(tag: .contextSpecific(0, constructed: false), "authorityKeyIdentifier"))
        }
    }

    /// The DNS names and IP addresses of the subject alternative names, if the extension is present.
    public var subjectAlternativeNames: SubjectAlternativeNames? {
        get throws(X509Error) {
            guard let element = try extensionElement(.subjectAlternativeName) else { return nil }
            try element.expect(.sequence, "subjectAltName")
            var reader = try element.children()
            var dns: [String] = []
            var ips: [[UInt8]] = []
            while !reader.isAtEnd {
                let name = try reader.next()
                if name.tag == .contextSpecific(2, constructed: false) {
                    guard name.contentBytes.allSatisfy({ $0 < 0x80 }) else {
                        throw X509Error(.invalidValue, "subjectAltName: a dNSName is not ASCII")
                    }
                    dns.append(String(decoding: name.contentBytes, as: UTF8.self))
                } else if name.tag == .contextSpecific(7, constructed: false) {
                    ips.append(Array(name.contentBytes))
                }
            }
            return SubjectAlternativeNames(dnsNames: dns, ipAddresses: ips)
        }
    }

    /// The 32 bytes of SHA-256(merchant identifier) from Apple's extension 1.2.840.113635.100.6.32,
    /// if present (the payment token key derivation's "party V" info).
    public var appleMerchantIdentifierHash: [UInt8]? {
        get throws(X509Error) {
            guard let element = try extensionElement(.appleMerchantIdentifier) else { return nil }
            let text = try element.string("merchant identifier extension")
            guard text.utf8.count == 64, let bytes = bytesFromHex(text) else {
                throw X509Error(.invalidValue, "the merchant identifier extension is not 64 hex digits")
            }
            return bytes
        }
    }
}
