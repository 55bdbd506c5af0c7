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
                identifier: try s.identifier(), digestAlgorithm: s.digestAlgorithm.identifier,
                signatureAlgorithm: s.signatureAlgorithm.identifier,
                signingTime: s.attributes?.signingTime, messageDigest: s.attributes?.messageDigest.map { Array($0) },
                contentType: try s.attributes?.contentType.map { (c) throws(X509Error) in
                    try ASN1ObjectIdentifier(contentBytes: c)
                },
                signedAttributesBytes: s.attributes.map { Array($0.encoded) }, signature: Array(s.signature))
        }
    }
}
