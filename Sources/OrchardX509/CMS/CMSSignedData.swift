public import Foundation

/// How a signer names its certificate (RFC 5652 §5.3 `SignerIdentifier`).
public enum CMSSignerIdentifier: Hashable, Sendable {
    case issuerAndSerialNumber(issuer: DistinguishedName, serialNumber: [UInt8])
    case subjectKeyIdentifier([UInt8])

    /// Whether `certificate` is the one this identifier names.
    public func matches(_ certificate: Certificate) -> Bool {
        switch self {
        case .issuerAndSerialNumber(let issuer, let serial):
            return certificate.issuer == issuer && certificate.serialNumber == serial
        case .subjectKeyIdentifier(let identifier):
            return (try? certificate.subjectKeyIdentifier) == identifier
        }
    }
}

/// One parsed SignerInfo.
public struct CMSSignerInfo: Sendable {
    /// How the signer names its certificate.
    public let identifier: CMSSignerIdentifier
    /// The digest and signature algorithms as written in the SignerInfo.
    public let digestAlgorithm: AlgorithmIdentifier
    public let signatureAlgorithm: AlgorithmIdentifier
    /// The signingTime attribute, if present.
    public let signingTime: Date?
    /// The messageDigest attribute, if present.
    public let messageDigest: [UInt8]?
    /// The contentType attribute, if present.
    public let contentType: ASN1ObjectIdentifier?
    /// The signed attributes as encoded (`[0]` tag), or `nil` when the signature covers the content directly.
    public let signedAttributesBytes: [UInt8]?
    /// The signature value (a DER ECDSA-Sig-Value or an RSA signature).
    public let signature: [UInt8]
}

/// A parsed CMS SignedData (RFC 5652 §5) in BER or DER:
///
/// ```
/// ContentInfo ::= SEQUENCE { contentType OBJECT IDENTIFIER (id-signedData), content [0] EXPLICIT SignedData }
/// SignedData ::= SEQUENCE { version INTEGER, digestAlgorithms SET OF AlgorithmIdentifier,
///     encapContentInfo SEQUENCE { eContentType OID, eContent [0] EXPLICIT OCTET STRING OPTIONAL },
///     certificates [0] IMPLICIT CertificateSet OPTIONAL, crls [1] IMPLICIT OPTIONAL,
///     signerInfos SET OF SignerInfo }
/// SignerInfo ::= SEQUENCE { version INTEGER, sid SignerIdentifier, digestAlgorithm AlgorithmIdentifier,
///     signedAttrs [0] IMPLICIT SET OF Attribute OPTIONAL, signatureAlgorithm AlgorithmIdentifier,
///     signature OCTET STRING, unsignedAttrs [1] IMPLICIT SET OF Attribute OPTIONAL }
/// ```
public struct CMSSignedData: Sendable {
    /// The eContentType (id-data for Apple's tokens).
    public let contentType: ASN1ObjectIdentifier
    /// The encapsulated content, or `nil` for a detached signature.
    public let content: [UInt8]?
    /// The certificates carried in the signature, in order (other certificate choices are skipped).
    public let certificates: [Certificate]
    /// The SignerInfos, in order.
    public let signers: [CMSSignerInfo]

    /// Parses BER (Apple's indefinite-length layout) or DER; certificates and signed attributes must be DER.
    public init(berEncoded: some DataProtocol, limits: ASN1Limits = ASN1Limits()) throws(X509Error) {
        let bytes = Array(berEncoded)
        let view = try SignedDataView(bytes[...], limits: limits)
        contentType = view.contentType
        content = view.content.map { Array($0) }
        certificates = try view.certificates.map { (c) throws(X509Error) in try Certificate(ownedDER: Array(c)) }
        signers = try view.signers.map { (s) throws(X509Error) in
            CMSSignerInfo(
                identifier: try s.identifier(), digestAlgorithm: s.digestAlgorithm,
                signatureAlgorithm: s.signatureAlgorithm,
                signingTime: s.attributes?.signingTime, messageDigest: s.attributes?.messageDigest.map { Array($0) },
                contentType: s.attributes?.contentType, signedAttributesBytes: s.attributes.map { Array($0.encoded) },
                signature: Array(s.signature))
        }
    }
}

/// The parts of a SignedData the verifier needs, as slices of the input (nothing copied, no certificate parsed).
struct SignedDataView {
    let version: Int
    let digestAlgorithms: [AlgorithmIdentifier]
    /// Whether certificates other than X.509 ones, or revocation information, are present.
    let hasOtherChoices: Bool
    let contentType: ASN1ObjectIdentifier
    let content: ArraySlice<UInt8>?
    /// The contents of the `[0]` certificates element: the cache key for the signer's chain.
    let certificateSetBytes: ArraySlice<UInt8>
    let certificates: [ArraySlice<UInt8>]
    let signers: [SignerInfoView]

    init(_ bytes: ArraySlice<UInt8>, limits: ASN1Limits) throws(X509Error) {
        let contentInfo = try ASN1.parse(bytes, rules: .ber, limits: limits)
        try contentInfo.expect(.sequence, "CMS ContentInfo")
        var outer = try contentInfo.children()
        guard try outer.next().objectIdentifier("CMS ContentInfo: contentType") == .cmsSignedData else {
            throw X509Error(.unexpectedElement, "CMS ContentInfo: the content is not SignedData")
        }
        let explicit = try outer.next(.contextSpecific(0, constructed: true), "CMS ContentInfo: content")
        try outer.finish("CMS ContentInfo")
        var wrapper = try explicit.children()
        let signedData = try wrapper.next(.sequence, "SignedData")
        try wrapper.finish("CMS ContentInfo: content")

        var reader = try signedData.children()
        version = try reader.next().integerValue("SignedData: version")
        guard (1...5).contains(version) else { throw X509Error(.invalidValue, "SignedData: version \(version)") }
        var digestReader = try reader.next(.set, "SignedData: digestAlgorithms").children()
        var digests: [AlgorithmIdentifier] = []
        while !digestReader.isAtEnd {
            digests.append(try AlgorithmIdentifier(element: digestReader.next(), "SignedData: digestAlgorithms"))
        }
        digestAlgorithms = digests
        let encap = try reader.next(.sequence, "SignedData: encapContentInfo")
        var encapReader = try encap.children()
        contentType = try encapReader.next().objectIdentifier("encapContentInfo: eContentType")
        if let explicitContent = try encapReader.nextIfPresent(.contextSpecific(0, constructed: true)) {
            var inner = try explicitContent.children()
            content = try inner.next().octetString("encapContentInfo: eContent")
            try inner.finish("encapContentInfo: eContent")
        } else {
            content = nil
        }
        try encapReader.finish("encapContentInfo")

        var certs: [ArraySlice<UInt8>] = []
        var others = false
        if let set = try reader.nextIfPresent(.contextSpecific(0, constructed: true)) {
            certificateSetBytes = set.contentBytes
            var items = try set.children()
            while !items.isAtEnd {
                let item = try items.next()
                if item.tag == .sequence { certs.append(item.encodedBytes) } else { others = true }
            }
        } else {
            certificateSetBytes = []
        }
        certificates = certs
        if try reader.nextIfPresent(.contextSpecific(1, constructed: true)) != nil { others = true }  // CRLs: not used
        hasOtherChoices = others
        let signerSet = try reader.next(.set, "SignedData: signerInfos")
        try reader.finish("SignedData")
        var signerReader = try signerSet.children()
        var parsed: [SignerInfoView] = []
        while !signerReader.isAtEnd { parsed.append(try SignerInfoView(signerReader.next(), limits: limits)) }
        signers = parsed
    }

    /// Checks the fields no signature covers against RFC 5652 §5.1, so altering them is noticed: the
    /// version the content requires, and every signer's digest algorithm listed in digestAlgorithms.
    func checkConsistency() throws(X509Error) {
        let needsVersion3 = contentType != .cmsData || signers.contains { $0.version == 3 }
        let expected = needsVersion3 ? 3 : 1
        guard version == expected || (hasOtherChoices && version >= 4) else {
            throw X509Error(.invalidValue, "SignedData: version \(version) where RFC 5652 requires \(expected)")
        }
        for signer in signers {
            let listed = digestAlgorithms.contains {
                $0 == signer.digestAlgorithm
                    || ($0.algorithm == signer.digestAlgorithm.algorithm && $0.hasNoParameters
                        && signer.digestAlgorithm.hasNoParameters)
            }
            guard listed else {
                throw X509Error(.invalidValue, "SignedData: digestAlgorithms does not list \(signer.digestAlgorithm)")
            }
        }
    }
}

/// One SignerInfo as slices of the input.
struct SignerInfoView {
    let version: Int
    /// The sid element; its shape and the version it requires are checked here, its content by ``identifier()``.
    private let sid: ASN1Element
    /// The encoded sid element (part of the cache key).
    var identifierBytes: ArraySlice<UInt8> { sid.encodedBytes }
    let digestAlgorithm: AlgorithmIdentifier
    let attributes: SignedAttributesView?
    let signatureAlgorithm: AlgorithmIdentifier
    let signature: ArraySlice<UInt8>

    init(_ element: ASN1Element, limits: ASN1Limits) throws(X509Error) {
        try element.expect(.sequence, "SignerInfo")
        var reader = try element.children()
        version = try reader.next().integerValue("SignerInfo: version")
        sid = try reader.next()
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
        digestAlgorithm = try AlgorithmIdentifier(element: reader.next(), "SignerInfo: digestAlgorithm")
        if let attrs = try reader.nextIfPresent(.contextSpecific(0, constructed: true)) {
            attributes = try SignedAttributesView(attrs, limits: limits)
        } else {
            attributes = nil
        }
        signatureAlgorithm = try AlgorithmIdentifier(element: reader.next(), "SignerInfo: signatureAlgorithm")
        signature = try reader.next().octetString("SignerInfo: signature")
        _ = try reader.nextIfPresent(.contextSpecific(1, constructed: true))  // unsignedAttrs: not used
        try reader.finish("SignerInfo")
    }

    /// The parsed sid. Decoded on demand: the verifier needs it only when its cache (keyed by the exact sid
    /// bytes, which decoded before) has no entry, and the issuer name is the costliest part of a SignerInfo.
    func identifier() throws(X509Error) -> CMSSignerIdentifier {
        guard sid.tag == .sequence else {
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
    let contentType: ASN1ObjectIdentifier?
    let messageDigest: ArraySlice<UInt8>?
    let signingTime: Date?
    /// CMSAlgorithmProtection (RFC 6211): the digest and signature algorithm OIDs it binds.
    let protectedAlgorithms: (digest: ASN1ObjectIdentifier, signature: ASN1ObjectIdentifier?)?

    init(_ element: ASN1Element, limits: ASN1Limits) throws(X509Error) {
        guard !element.isIndefiniteLength else {
            throw X509Error(.indefiniteLengthNotAllowed, "signedAttrs must be DER (RFC 5652 §5.3)")
        }
        encoded = element.encodedBytes
        // Re-read in DER mode: BER forms inside the signed attributes are rejected.
        let der = try ASN1.validate(encoded, rules: .der, limits: limits)
        var reader = try der.children()
        var previous: ArraySlice<UInt8>?
        var seen: [ASN1ObjectIdentifier] = []
        var contentType: ASN1ObjectIdentifier?
        var messageDigest: ArraySlice<UInt8>?
        var signingTime: Date?
        var protection: (ASN1ObjectIdentifier, ASN1ObjectIdentifier?)?
        guard !reader.isAtEnd else { throw X509Error(.invalidValue, "signedAttrs is empty") }
        while !reader.isAtEnd {
            let attribute = try reader.next(.sequence, "signed attribute")
            if let previous, attribute.encodedBytes.lexicographicallyPrecedes(previous) {
                throw X509Error(.invalidValue, "signedAttrs is not sorted as a DER SET OF requires")
            }
            previous = attribute.encodedBytes
            var fields = try attribute.children()
            let type = try fields.next().objectIdentifier("signed attribute: type")
            let values = try fields.next(.set, "signed attribute \(type): values")
            try fields.finish("signed attribute \(type)")
            guard Self.known.contains(type) else { continue }
            guard !seen.contains(type) else {
                throw X509Error(.invalidValue, "signed attribute \(type) appears more than once")
            }
            seen.append(type)
            var valueReader = try values.children()
            let value = try valueReader.next()
            try valueReader.finish("signed attribute \(type): exactly one value")
            switch type {
            case .contentTypeAttribute:
                contentType = try value.objectIdentifier("contentType attribute")
            case .messageDigestAttribute:
                messageDigest = try value.octetString("messageDigest attribute")
            case .signingTimeAttribute:
                signingTime = try value.time("signingTime attribute")
            default:
                try value.expect(.sequence, "CMSAlgorithmProtection")
                var p = try value.children()
                let digest = try AlgorithmIdentifier(element: p.next(), "CMSAlgorithmProtection: digestAlgorithm")
                var signature: ASN1ObjectIdentifier?
                if let s = try p.nextIfPresent(.contextSpecific(1, constructed: true)) {
                    var inner = try s.children()
                    signature = try inner.next().objectIdentifier("CMSAlgorithmProtection: signatureAlgorithm")
                    if !inner.isAtEnd { _ = try inner.next() }
                    try inner.finish("CMSAlgorithmProtection: signatureAlgorithm")
                }
                _ = try p.nextIfPresent(.contextSpecific(2, constructed: true))
                try p.finish("CMSAlgorithmProtection")
                protection = (digest.algorithm, signature)
            }
        }
        self.contentType = contentType
        self.messageDigest = messageDigest
        self.signingTime = signingTime
        protectedAlgorithms = protection
    }

    /// The attributes read; others are skipped.
    private static let known: [ASN1ObjectIdentifier] = [
        .contentTypeAttribute, .messageDigestAttribute, .signingTimeAttribute, .algorithmProtectionAttribute,
    ]

    /// What the signature covers: the DER of the attributes with the `[0]` tag replaced by SET (0x31).
    var signedBytes: [UInt8] {
        var out = Array(encoded)
        out[0] = 0x31
        return out
    }
}
