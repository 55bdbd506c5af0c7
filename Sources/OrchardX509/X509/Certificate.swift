public import Foundation
import OrchardCrypto

/// `AlgorithmIdentifier ::= SEQUENCE { algorithm OBJECT IDENTIFIER, parameters ANY OPTIONAL }`
public struct AlgorithmIdentifier: Hashable, Sendable, CustomStringConvertible {
    /// The algorithm's OID.
    public let algorithm: ASN1ObjectIdentifier
    /// The encoded parameters element, if present.
    public let parameters: [UInt8]?

    /// An identifier with optional, already encoded parameters.
    public init(algorithm: ASN1ObjectIdentifier, parameters: [UInt8]? = nil) {
        self.algorithm = algorithm
        self.parameters = parameters
    }

    init(element: ASN1Element, _ what: String) throws(X509Error) {
        try element.expect(.sequence, what)
        var reader = try element.children()
        algorithm = try reader.next().objectIdentifier("\(what): algorithm")
        parameters = reader.isAtEnd ? nil : Array(try reader.next().encodedBytes)
        try reader.finish(what)
    }

    /// Whether the parameters are absent or an ASN.1 NULL (equivalent for hash and RSA algorithms).
    var hasNoParameters: Bool { parameters == nil || parameters == [0x05, 0x00] }

    /// ecdsa-with-SHA256, parameters absent (RFC 5758).
    public static let ecdsaWithSHA256 = AlgorithmIdentifier(algorithm: .ecdsaWithSHA256)
    /// sha256WithRSAEncryption with NULL parameters (RFC 4055).
    public static let sha256WithRSAEncryption = AlgorithmIdentifier(
        algorithm: .sha256WithRSAEncryption, parameters: [0x05, 0x00])
    /// SHA-256, parameters absent (RFC 5754).
    public static let sha256 = AlgorithmIdentifier(algorithm: .sha256)

    func write(to writer: inout DERWriter) {
        writer.appendConstructed(.sequence) { w in
            w.appendObjectIdentifier(algorithm)
            if let parameters { w.appendEncoded(parameters) }
        }
    }

    /// The dotted OID.
    public var description: String { algorithm.description }
}

/// `SubjectPublicKeyInfo ::= SEQUENCE { algorithm AlgorithmIdentifier, subjectPublicKey BIT STRING }`
public struct SubjectPublicKeyInfo: Hashable, Sendable {
    /// The whole SubjectPublicKeyInfo in DER (what Apple's `publicKeyHash` hashes).
    public let derRepresentation: [UInt8]
    /// The key algorithm and its parameters (e.g. id-ecPublicKey with the named curve).
    public let algorithm: AlgorithmIdentifier
    /// The contents of the subjectPublicKey BIT STRING (an EC point, or an RSAPublicKey).
    public let publicKey: [UInt8]

    /// Parses a DER SubjectPublicKeyInfo.
    public init(derEncoded: [UInt8]) throws(X509Error) {
        try self.init(element: ASN1.parse(derEncoded), "SubjectPublicKeyInfo")
    }

    init(element: ASN1Element, _ what: String) throws(X509Error) {
        try element.expect(.sequence, what)
        var reader = try element.children()
        algorithm = try AlgorithmIdentifier(element: reader.next(), "\(what): algorithm")
        let key = try reader.next().bitString("\(what): subjectPublicKey")
        guard key.unusedBits == 0 else { throw X509Error(.invalidValue, "\(what): the key is not whole bytes") }
        try reader.finish(what)
        publicKey = Array(key.bytes)
        derRepresentation = Array(element.encodedBytes)
    }

    /// RFC 5280 §4.2.1.2 method (1): SHA-1 of the subjectPublicKey bits.
    public var keyIdentifier: [UInt8] { SHA1.hash(publicKey) }
}

/// An X.509 v3 certificate, parsed in Swift (RFC 5280 §4.1):
///
/// ```
/// Certificate ::= SEQUENCE { tbsCertificate TBSCertificate, signatureAlgorithm AlgorithmIdentifier,
///                            signatureValue BIT STRING }
/// TBSCertificate ::= SEQUENCE { version [0] EXPLICIT Version DEFAULT v1, serialNumber INTEGER,
///     signature AlgorithmIdentifier, issuer Name, validity Validity, subject Name,
///     subjectPublicKeyInfo SubjectPublicKeyInfo, issuerUniqueID [1] IMPLICIT BIT STRING OPTIONAL,
///     subjectUniqueID [2] IMPLICIT BIT STRING OPTIONAL, extensions [3] EXPLICIT Extensions OPTIONAL }
/// ```
///
/// Parsing is strict DER and keeps the original bytes: ``tbsCertificateBytes`` is a slice of
/// ``derRepresentation``, exactly what the issuer signed. Two certificates are equal when their DER is.
public struct Certificate: Hashable, Sendable, CustomStringConvertible {
    /// One extension: `Extension ::= SEQUENCE { extnID OID, critical BOOLEAN DEFAULT FALSE, extnValue OCTET STRING }`.
    public struct Extension: Hashable, Sendable, CustomStringConvertible {
        /// extnID.
        public let oid: ASN1ObjectIdentifier
        /// Whether a verifier that does not understand the extension must reject the certificate.
        public let isCritical: Bool
        /// The contents of extnValue: the DER of the extension's own value.
        public let value: [UInt8]

        /// Any extension; `value` is the DER of its value. Non-critical unless asked.
        public init(oid: ASN1ObjectIdentifier, isCritical: Bool = false, value: [UInt8]) {
            self.oid = oid
            self.isCritical = isCritical
            self.value = value
        }

        func write(to writer: inout DERWriter) {
            writer.appendConstructed(.sequence) { w in
                w.appendObjectIdentifier(oid)
                if isCritical { w.appendBoolean(true) }
                w.appendOctetString(value)
            }
        }

        /// OID, criticality and the value in hex.
        public var description: String { "\(oid)\(isCritical ? " (critical)" : ""): \(hexString(value))" }
    }

    /// The whole certificate in DER.
    public let derRepresentation: [UInt8]
    /// The DER of tbsCertificate, exactly as signed.
    public let tbsCertificateBytes: ArraySlice<UInt8>
    /// 1, 2 or 3.
    public let version: Int
    /// The serialNumber INTEGER contents (two's complement, big-endian, minimal).
    public let serialNumber: [UInt8]
    /// The issuer's signature algorithm (the same inside and outside tbsCertificate).
    public let signatureAlgorithm: AlgorithmIdentifier
    /// The issuer's name.
    public let issuer: DistinguishedName
    /// The subject's name.
    public let subject: DistinguishedName
    /// Start of the validity period (inclusive).
    public let notValidBefore: Date
    /// End of the validity period (inclusive).
    public let notValidAfter: Date
    /// The subject's key, as encoded.
    public let subjectPublicKeyInfo: SubjectPublicKeyInfo
    /// The extensions in encoding order (each OID at most once).
    public let extensions: [Extension]
    /// The signatureValue bits (a DER ECDSA-Sig-Value or an RSA signature).
    public let signature: [UInt8]

    /// Parses a DER certificate.
    public init(derEncoded: some DataProtocol) throws(X509Error) {
        try self.init(ownedDER: Array(derEncoded))
    }

    /// Parses the first `CERTIFICATE` block of a PEM text.
    public init(pemEncoded: String) throws(X509Error) {
        let der: [UInt8]
        do {
            der = try pemDecode(pemEncoded, label: "CERTIFICATE")
        } catch {
            throw X509Error(.invalidPEM, error.message)
        }
        try self.init(derEncoded: der)
    }

    /// Every `CERTIFICATE` block of a PEM text, in order.
    public static func certificates(fromPEM text: String) throws(X509Error) -> [Certificate] {
        let blocks: [(label: String, der: [UInt8])]
        do {
            blocks = try pemBlocks(text)
        } catch {
            throw X509Error(.invalidPEM, error.message)
        }
        var out: [Certificate] = []
        for block in blocks where block.label == "CERTIFICATE" { out.append(try Certificate(derEncoded: block.der)) }
        return out
    }

    /// Parses `bytes`, which the certificate keeps (``tbsCertificateBytes`` is a slice of them).
    init(ownedDER bytes: [UInt8]) throws(X509Error) {
        let element = try ASN1.parse(bytes, rules: .der)
        try element.expect(.sequence, "Certificate")
        var outer = try element.children()
        let tbs = try outer.next(.sequence, "tbsCertificate")
        signatureAlgorithm = try AlgorithmIdentifier(element: outer.next(), "Certificate: signatureAlgorithm")
        let signatureBits = try outer.next().bitString("Certificate: signatureValue")
        try outer.finish("Certificate")
        guard signatureBits.unusedBits == 0 else {
            throw X509Error(.invalidValue, "Certificate: the signature is not whole bytes")
        }
        signature = Array(signatureBits.bytes)

        var reader = try tbs.children()
        if let explicitVersion = try reader.nextIfPresent(.contextSpecific(0, constructed: true)) {
            var inner = try explicitVersion.children()
            let v = try inner.next().integerValue("tbsCertificate: version")
            try inner.finish("tbsCertificate: version")
            guard v == 1 || v == 2 else {
                throw X509Error(.invalidValue, "tbsCertificate: version \(v) is not v2 or v3")
            }
            version = v + 1
        } else {
            version = 1
        }
        serialNumber = Array(try reader.next().integerBytes("tbsCertificate: serialNumber"))
        let innerAlgorithm = try AlgorithmIdentifier(element: reader.next(), "tbsCertificate: signature")
        guard innerAlgorithm == signatureAlgorithm else {
            throw X509Error(
                .invalidValue,
                "tbsCertificate: signature algorithm \(innerAlgorithm) differs from the outer \(signatureAlgorithm)")
        }
        issuer = try DistinguishedName(element: reader.next(), "tbsCertificate: issuer")
        let validity = try reader.next(.sequence, "tbsCertificate: validity")
        var times = try validity.children()
        notValidBefore = try times.next().time("tbsCertificate: notBefore")
        notValidAfter = try times.next().time("tbsCertificate: notAfter")
        try times.finish("tbsCertificate: validity")
        subject = try DistinguishedName(element: reader.next(), "tbsCertificate: subject")
        subjectPublicKeyInfo = try SubjectPublicKeyInfo(element: reader.next(), "tbsCertificate: subjectPublicKeyInfo")
        for number: UInt64 in [1, 2] {
            if let unique = try reader.nextIfPresent(.contextSpecific(number, constructed: false)) {
                guard version >= 2 else {
                    throw X509Error(.unexpectedElement, "tbsCertificate: unique identifiers need version 2 or 3")
                }
                _ = try unique.bitString(tag: .contextSpecific(number, constructed: false), "tbsCertificate: uniqueID")
            }
        }
        var parsed: [Extension] = []
        if let wrapper = try reader.nextIfPresent(.contextSpecific(3, constructed: true)) {
            guard version == 3 else { throw X509Error(.unexpectedElement, "tbsCertificate: extensions need version 3") }
            var inner = try wrapper.children()
            let list = try inner.next(.sequence, "tbsCertificate: extensions")
            try inner.finish("tbsCertificate: extensions")
            var items = try list.children()
            guard !items.isAtEnd else { throw X509Error(.invalidValue, "tbsCertificate: the extension list is empty") }
            var seen = Set<ASN1ObjectIdentifier>()
            while !items.isAtEnd {
                let ext = try Self.parseExtension(items.next())
                guard seen.insert(ext.oid).inserted else {
                    throw X509Error(.invalidValue, "tbsCertificate: extension \(ext.oid) appears twice")
                }
                parsed.append(ext)
            }
        }
        try reader.finish("tbsCertificate")
        extensions = parsed
        tbsCertificateBytes = tbs.encodedBytes
        derRepresentation = bytes
    }

    static func parseExtension(_ element: ASN1Element) throws(X509Error) -> Extension {
        try element.expect(.sequence, "Extension")
        var fields = try element.children()
        let oid = try fields.next().objectIdentifier("Extension: extnID")
        var critical = false
        if let flag = try fields.nextIfPresent(.boolean) {
            critical = try flag.boolean("Extension \(oid): critical")
            // DER omits a DEFAULT value.
            guard critical else {
                throw X509Error(.invalidValue, "Extension \(oid): critical FALSE must be omitted in DER")
            }
        }
        let value = try fields.next().octetString("Extension \(oid): extnValue")
        try fields.finish("Extension \(oid)")
        return Extension(oid: oid, isCritical: critical, value: Array(value))
    }

    /// The PEM `CERTIFICATE` block.
    public var pemRepresentation: String { pemEncode(derRepresentation, label: "CERTIFICATE") }

    /// The extension with `oid`, if present.
    public func `extension`(_ oid: ASN1ObjectIdentifier) -> Extension? {
        extensions.first { $0.oid == oid }
    }

    /// Whether `date` lies within notBefore…notAfter (inclusive, as RFC 5280 says).
    public func isValid(at date: Date) -> Bool { date >= notValidBefore && date <= notValidAfter }

    /// Whether the issuer and subject names are the same.
    public var isSelfIssued: Bool { issuer == subject }

    /// `subject (serial …, valid … – …)`.
    public var description: String {
        "Certificate(\(subject), serial \(hexString(serialNumber)), \(notValidBefore) – \(notValidAfter))"
    }

    public static func == (a: Self, b: Self) -> Bool { a.derRepresentation == b.derRepresentation }
    public func hash(into hasher: inout Hasher) { hasher.combine(derRepresentation) }
}
