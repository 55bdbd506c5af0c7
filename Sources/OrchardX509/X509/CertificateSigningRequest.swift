import OrchardCrypto

/// A PKCS #10 certificate signing request (RFC 2986):
///
/// ```
/// CertificationRequest ::= SEQUENCE { certificationRequestInfo CertificationRequestInfo,
///     signatureAlgorithm AlgorithmIdentifier, signature BIT STRING }
/// CertificationRequestInfo ::= SEQUENCE { version INTEGER { v1(0) }, subject Name,
///     subjectPKInfo SubjectPublicKeyInfo, attributes [0] IMPLICIT SET OF Attribute }
/// ```
///
/// Requested extensions travel in the PKCS #9 extensionRequest attribute (1.2.840.113549.1.9.14).
/// The key must be P-256 or RSA.
public struct CertificateSigningRequest: Hashable, Sendable {
    /// The whole request in DER.
    public let derRepresentation: [UInt8]
    /// The DER of certificationRequestInfo, exactly as signed.
    public let certificationRequestInfoBytes: ArraySlice<UInt8>
    /// The requested subject name.
    public let subject: DistinguishedName
    /// The key to certify, as encoded.
    public let subjectPublicKeyInfo: SubjectPublicKeyInfo
    /// The key to certify, decoded (P-256 or RSA).
    public let publicKey: CertificatePublicKey
    /// The extensions of the extensionRequest attribute (empty if there is none).
    public let requestedExtensions: [Certificate.Extension]
    /// The algorithm of the self-signature.
    public let signatureAlgorithm: AlgorithmIdentifier
    /// The self-signature over certificationRequestInfo.
    public let signature: [UInt8]

    /// Creates and signs a CSR for `key`.
    public static func create(
        subject: DistinguishedName, key: CertificatePrivateKey, extensions: [Certificate.Extension] = []
    ) throws(X509Error) -> CertificateSigningRequest {
        let info = DERWriter.encode { w in
            w.appendConstructed(.sequence) { w in
                w.appendInteger(0)
                w.appendEncoded(subject.derRepresentation)
                w.appendEncoded(key.publicKey.derRepresentation)
                w.appendConstructed(.contextSpecific(0, constructed: true)) { w in
                    guard !extensions.isEmpty else { return }
                    w.appendConstructed(.sequence) { w in
                        w.appendObjectIdentifier(.extensionRequest)
                        w.appendConstructed(.set) { w in
                            w.appendConstructed(.sequence) { w in for e in extensions { e.write(to: &w) } }
                        }
                    }
                }
            }
        }
        let algorithm = key.signatureAlgorithm
        let signature = try key.signature(for: info)
        let der = DERWriter.encode { w in
            w.appendConstructed(.sequence) { w in
                w.appendEncoded(info)
                algorithm.write(to: &w)
                w.appendBitString(signature)
            }
        }
        return try CertificateSigningRequest(derEncoded: der)
    }

    /// Parses a DER CSR. The signature is not checked here: see ``isSignatureValid``.
    public init(derEncoded: [UInt8]) throws(X509Error) {
        let element = try ASN1.parse(derEncoded, rules: .der)
        try element.expect(.sequence, "CertificationRequest")
        var outer = try element.children()
        let info = try outer.next(.sequence, "certificationRequestInfo")
        signatureAlgorithm = try AlgorithmIdentifier(element: outer.next(), "CertificationRequest: signatureAlgorithm")
        let bits = try outer.next().bitString("CertificationRequest: signature")
        try outer.finish("CertificationRequest")
        guard bits.unusedBits == 0 else { throw X509Error(.invalidValue, "CSR: the signature is not whole bytes") }
        signature = Array(bits.bytes)

        var reader = try info.children()
        guard try reader.next().integerValue("certificationRequestInfo: version") == 0 else {
            throw X509Error(.invalidValue, "certificationRequestInfo: only version 1 (0) exists")
        }
        subject = try DistinguishedName(element: reader.next(), "certificationRequestInfo: subject")
        subjectPublicKeyInfo = try SubjectPublicKeyInfo(
            element: reader.next(), "certificationRequestInfo: subjectPKInfo")
        let attributes = try reader.next(.contextSpecific(0, constructed: true), "certificationRequestInfo: attributes")
        try reader.finish("certificationRequestInfo")
        var extensions: [Certificate.Extension] = []
        var list = try attributes.children()
        while !list.isAtEnd {
            let attribute = try list.next(.sequence, "CSR attribute")
            var fields = try attribute.children()
            let type = try fields.next().objectIdentifier("CSR attribute: type")
            let values = try fields.next(.set, "CSR attribute \(type): values")
            try fields.finish("CSR attribute \(type)")
            guard type == .extensionRequest else { continue }
            var valueReader = try values.children()
            let sequence = try valueReader.next(.sequence, "extensionRequest")
            try valueReader.finish("extensionRequest: exactly one value")
            var items = try sequence.children()
            while !items.isAtEnd { extensions.append(try Certificate.parseExtension(items.next())) }
        }
        guard Set(extensions.map(\.oid)).count == extensions.count else {
            throw X509Error(.invalidValue, "extensionRequest: an extension appears twice")
        }
        requestedExtensions = extensions
        publicKey = try CertificatePublicKey(subjectPublicKeyInfo)
        certificationRequestInfoBytes = info.encodedBytes
        derRepresentation = derEncoded
    }

    /// Parses the first `CERTIFICATE REQUEST` (or `NEW CERTIFICATE REQUEST`) PEM block.
    public init(pemEncoded: String) throws(X509Error) {
        let blocks: [(label: String, der: [UInt8])]
        do {
            blocks = try pemBlocks(pemEncoded)
        } catch {
            throw X509Error(.invalidPEM, error.message)
        }
        guard
            let block = blocks.first(where: {
                $0.label == "CERTIFICATE REQUEST" || $0.label == "NEW CERTIFICATE REQUEST"
            })
        else { throw X509Error(.invalidPEM, "no CERTIFICATE REQUEST block in the PEM") }
        try self.init(derEncoded: block.der)
    }

    /// The PEM `CERTIFICATE REQUEST` block.
    public var pemRepresentation: String { pemEncode(derRepresentation, label: "CERTIFICATE REQUEST") }

    /// Whether the request is signed by the key it carries (proof of possession).
    public var isSignatureValid: Bool {
        publicKey.isValidSignature(
            signature, for: certificationRequestInfoBytes, algorithm: signatureAlgorithm.algorithm)
    }

    public static func == (a: Self, b: Self) -> Bool { a.derRepresentation == b.derRepresentation }
    public func hash(into hasher: inout Hasher) { hasher.combine(derRepresentation) }
}
