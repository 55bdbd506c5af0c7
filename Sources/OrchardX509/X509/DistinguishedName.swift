/// An X.501 Name (RFC 5280 §4.1.2.4):
///
/// ```
/// Name ::= SEQUENCE OF RelativeDistinguishedName
/// RelativeDistinguishedName ::= SET SIZE (1..MAX) OF AttributeTypeAndValue
/// AttributeTypeAndValue ::= SEQUENCE { type OBJECT IDENTIFIER, value ANY }
/// ```
///
/// Two names are equal when their DER encodings are equal (the comparison CMS signer lookup needs;
/// chain building is left to OpenSSL, which canonicalizes).
public struct DistinguishedName: Hashable, Sendable, CustomStringConvertible {
    /// One attribute of a name, with its value decoded and its encoding kept.
    public struct Attribute: Hashable, Sendable, CustomStringConvertible {
        /// The attribute type (e.g. ``ASN1ObjectIdentifier/commonName``).
        public let type: ASN1ObjectIdentifier
        /// The decoded string, or `#` and the hex of the encoded value for a value that is not a string
        /// (RFC 4514 §2.4).
        public let value: String
        /// The encoded value element (tag, length, contents).
        public let encodedValue: [UInt8]

        /// An attribute with a UTF8String value.
        public init(type: ASN1ObjectIdentifier, utf8String value: String) {
            self.type = type
            self.value = value
            encodedValue = DERWriter.encode { $0.appendUTF8String(value) }
        }

        /// An attribute with a PrintableString value if `value` fits that set, otherwise a UTF8String.
        public init(type: ASN1ObjectIdentifier, printableIfPossible value: String) {
            self.type = type
            self.value = value
            if let printable = try? DERWriter.encode({ (w) throws(X509Error) in try w.appendPrintableString(value) }) {
                encodedValue = printable
            } else {
                encodedValue = DERWriter.encode { $0.appendUTF8String(value) }
            }
        }

        init(type: ASN1ObjectIdentifier, value: String, encodedValue: [UInt8]) {
            self.type = type
            self.value = value
            self.encodedValue = encodedValue
        }

        /// Common name (CN), a UTF8String.
        public static func commonName(_ value: String) -> Attribute { Attribute(type: .commonName, utf8String: value) }
        /// Organization (O), a UTF8String.
        public static func organization(_ value: String) -> Attribute {
            Attribute(type: .organizationName, utf8String: value)
        }
        /// Organizational unit (OU), a UTF8String.
        public static func organizationalUnit(_ value: String) -> Attribute {
            Attribute(type: .organizationalUnitName, utf8String: value)
        }
        /// Country: a PrintableString as RFC 5280 requires.
        public static func country(_ value: String) -> Attribute {
            Attribute(type: .countryName, printableIfPossible: value)
        }
        /// Locality (L), a UTF8String.
        public static func locality(_ value: String) -> Attribute { Attribute(type: .localityName, utf8String: value) }
        /// State or province (ST), a UTF8String.
        public static func stateOrProvince(_ value: String) -> Attribute {
            Attribute(type: .stateOrProvinceName, utf8String: value)
        }
        /// User ID (0.9.2342.19200300.100.1.1): Apple puts the merchant identifier here.
        public static func userID(_ value: String) -> Attribute { Attribute(type: .userID, utf8String: value) }
        /// Serial number attribute, a PrintableString where possible.
        public static func serialNumber(_ value: String) -> Attribute {
            Attribute(type: .serialNumber, printableIfPossible: value)
        }

        /// `CN=value`, with the short names OpenSSL uses where there is one.
        public var description: String {
            let names: [ASN1ObjectIdentifier: String] = [
                .commonName: "CN", .surname: "SN", .serialNumber: "serialNumber", .countryName: "C",
                .localityName: "L", .stateOrProvinceName: "ST", .organizationName: "O",
                .organizationalUnitName: "OU", .userID: "UID", .domainComponent: "DC", .emailAddress: "emailAddress",
            ]
            return "\(names[type] ?? type.description)=\(value)"
        }
    }

    /// The relative distinguished names in encoding order; most have one attribute each.
    public let relativeNames: [[Attribute]]
    /// The DER encoding of the whole Name.
    public let derRepresentation: [UInt8]

    /// A name with one attribute per RDN, in the given order (most significant first, as in certificates).
    public init(_ attributes: [Attribute]) {
        self.init(relativeNames: attributes.map { [$0] })
    }

    /// A name from its RDNs; attributes within one RDN are sorted as DER requires.
    public init(relativeNames: [[Attribute]]) {
        self.relativeNames = relativeNames
        derRepresentation = DERWriter.encode { w in
            w.appendConstructed(.sequence) { w in
                for rdn in relativeNames {
                    let encoded = rdn.map { attribute in
                        DERWriter.encode { w in
                            w.appendConstructed(.sequence) { w in
                                w.appendObjectIdentifier(attribute.type)
                                w.appendEncoded(attribute.encodedValue)
                            }
                        }
                    }
                    w.appendSetOf(elements: encoded)
                }
            }
        }
    }

    /// Parses a DER Name.
    public init(derEncoded: [UInt8]) throws(X509Error) {
        try self.init(element: ASN1.parse(derEncoded), "Name")
    }

    init(element: ASN1Element, _ what: String) throws(X509Error) {
        try element.expect(.sequence, what)
        var rdns: [[Attribute]] = []
        var reader = try element.children()
        while !reader.isAtEnd {
            let set = try reader.next(.set, "\(what): RelativeDistinguishedName")
            var attributes: [Attribute] = []
            var inner = try set.children()
            while !inner.isAtEnd {
                let pair = try inner.next(.sequence, "\(what): AttributeTypeAndValue")
                var fields = try pair.children()
                let type = try fields.next().objectIdentifier("\(what): attribute type")
                let value = try fields.next()
                try fields.finish("\(what): AttributeTypeAndValue")
                let text: String
                if ASN1StringDecoding.isStringTag(value.tag) {
                    text = try value.string("\(what): \(type)")
                } else {
                    text = "#" + hexString(value.encodedBytes)
                }
                attributes.append(Attribute(type: type, value: text, encodedValue: Array(value.encodedBytes)))
            }
            guard !attributes.isEmpty else {
                throw X509Error(.invalidValue, "\(what): a RelativeDistinguishedName is empty")
            }
            rdns.append(attributes)
        }
        relativeNames = rdns
        derRepresentation = Array(element.encodedBytes)
    }

    /// Every value of attribute `type`, in order.
    public func values(of type: ASN1ObjectIdentifier) -> [String] {
        relativeNames.flatMap { $0 }.filter { $0.type == type }.map(\.value)
    }

    /// The first value of attribute `type`.
    public func value(of type: ASN1ObjectIdentifier) -> String? {
        for rdn in relativeNames { for a in rdn where a.type == type { return a.value } }
        return nil
    }

    /// The first value of the common name, organization, unit or country attribute.
    public var commonName: String? { value(of: .commonName) }
    public var organization: String? { value(of: .organizationName) }
    public var organizationalUnit: String? { value(of: .organizationalUnitName) }
    public var country: String? { value(of: .countryName) }
    /// The User ID (UID) attribute; Apple's merchant certificates carry the merchant identifier here.
    public var userID: String? { value(of: .userID) }

    /// `UID=..., CN=..., O=...` in encoding order.
    public var description: String {
        relativeNames.map { $0.map(\.description).joined(separator: " + ") }.joined(separator: ", ")
    }

    public static func == (a: Self, b: Self) -> Bool { a.derRepresentation == b.derRepresentation }
    public func hash(into hasher: inout Hasher) { hasher.combine(derRepresentation) }
}
