public import Foundation
import OrchardCrypto

/// Creating CMS signatures.
public enum CMS {
    /// The outer encoding of a new signature.
    public enum Encoding: Sendable {
        /// Definite lengths throughout (DER, apart from the certificate order, which is kept as given).
        case der
        /// Indefinite lengths for the outer structures, the layout of Apple's payment-token signatures
        /// (`30 80 06 09 2A 86 48 86 F7 0D 01 07 02 A0 80 ...`; base64 prefix `MIAGCSqGSIb3DQEHAqCA`).
        case berIndefiniteLength
    }

    /// A detached CMS SignedData over `content` (RFC 5652), signed with SHA-256 and `key`'s algorithm
    /// (ecdsa-with-SHA256 or sha256WithRSAEncryption).
    ///
    /// The signed attributes are contentType (id-data), signingTime, messageDigest and, if asked,
    /// CMSAlgorithmProtection (RFC 6211, as Apple adds since 2021), DER-sorted as a SET; the signature
    /// covers them re-tagged from `[0]` to SET. The signer is identified by issuer and serial number.
    ///
    /// - Parameters:
    ///   - certificates: the certificates to embed, in this order (Apple embeds leaf and intermediate,
    ///     not the root). `nil` embeds the signer certificate alone.
    /// - Throws: ``X509Error/Code/invalidKey`` if `key` is not the key of `signer`.
    public static func signDetached(
        _ content: some DataProtocol,
        signer: Certificate,
        key: CertificatePrivateKey,
        certificates: [Certificate]? = nil,
        signingTime: Date,
        encoding: Encoding = .der,
        includeAlgorithmProtection: Bool = false
    ) throws(X509Error) -> [UInt8] {
        try signDetached(
            content, signer: signer, key: key, certificates: certificates, signingTime: signingTime, encoding: encoding,
            includeAlgorithmProtection: includeAlgorithmProtection, variations: SignedAttributeVariations())
    }

    /// Deliberately wrong signed attributes, so tests can show the verifier rejects each of them.
    package struct SignedAttributeVariations: Sendable {
        package var omitted: Set<ASN1ObjectIdentifier> = []
        package var contentType: ASN1ObjectIdentifier = .cmsData
        package var protectedSignatureAlgorithm: ASN1ObjectIdentifier?
        /// No signed attributes at all: the signature covers the content itself (RFC 5652 allows it for id-data).
        package var withoutSignedAttributes = false
        /// Further attributes, each an encoded `Attribute` SEQUENCE, signed with the others.
        package var extra: [[UInt8]] = []
        package init() {}
    }

    package static func signDetached(
        _ content: some DataProtocol,
        signer: Certificate,
        key: CertificatePrivateKey,
        certificates: [Certificate]?,
        signingTime: Date,
        encoding: Encoding,
        includeAlgorithmProtection: Bool,
        variations: SignedAttributeVariations
    ) throws(X509Error) -> [UInt8] {
        guard key.publicKey.derRepresentation == signer.subjectPublicKeyInfo.derRepresentation else {
            throw X509Error(.invalidKey, "the signing key is not the key of the signer certificate")
        }
        let signatureAlgorithm = key.signatureAlgorithm
        let digest = SHA256.hash(content)
        var attributes: [[UInt8]] = []
        attributes.append(
            DERWriter.encode { w in
                w.appendConstructed(.sequence) { w in
                    w.appendObjectIdentifier(.contentTypeAttribute)
                    w.appendConstructed(.set) { $0.appendObjectIdentifier(variations.contentType) }
                }
            })
        attributes.append(
            try DERWriter.encode { (w) throws(X509Error) in
                try w.appendConstructed(.sequence) { (w) throws(X509Error) in
                    w.appendObjectIdentifier(.signingTimeAttribute)
                    try w.appendConstructed(.set) { (w) throws(X509Error) in try w.appendTime(signingTime) }
                }
            })
        attributes.append(
            DERWriter.encode { w in
                w.appendConstructed(.sequence) { w in
                    w.appendObjectIdentifier(.messageDigestAttribute)
                    w.appendConstructed(.set) { $0.appendOctetString(digest) }
                }
            })
        if includeAlgorithmProtection {
            attributes.append(
                DERWriter.encode { w in
                    w.appendConstructed(.sequence) { w in
                        w.appendObjectIdentifier(.algorithmProtectionAttribute)
                        w.appendConstructed(.set) { w in
                            w.appendConstructed(.sequence) { w in
                                AlgorithmIdentifier.sha256.write(to: &w)
                                w.appendConstructed(.contextSpecific(1, constructed: true)) { w in
                                    w.appendObjectIdentifier(
                                        variations.protectedSignatureAlgorithm ?? signatureAlgorithm.algorithm)
                                    if let p = signatureAlgorithm.parameters { w.appendEncoded(p) }
                                }
                            }
                        }
                    }
                })
        }
        let oids: [ASN1ObjectIdentifier] = [
            .contentTypeAttribute, .signingTimeAttribute, .messageDigestAttribute, .algorithmProtectionAttribute,
        ]
        attributes = zip(oids, attributes).filter { !variations.omitted.contains($0.0) }.map(\.1) + variations.extra
        let signedAttributes = DERWriter.encode { $0.appendSetOf(elements: attributes) }
        let signature =
            variations.withoutSignedAttributes
            ? try key.signature(for: content) : try key.signature(for: signedAttributes)

        let signerInfo = DERWriter.encode { w in
            w.appendConstructed(.sequence) { w in
                w.appendInteger(1)
                w.appendConstructed(.sequence) { w in
                    w.appendEncoded(signer.issuer.derRepresentation)
                    w.appendIntegerContents(signer.serialNumber)
                }
                AlgorithmIdentifier.sha256.write(to: &w)
                if !variations.withoutSignedAttributes { w.appendEncoded([0xA0] + signedAttributes.dropFirst()) }
                signatureAlgorithm.write(to: &w)
                w.appendOctetString(signature)
            }
        }
        let embedded = certificates ?? [signer]

        func body(_ w: inout DERWriter, indefinite: Bool) {
            func constructed(_ tag: ASN1Tag, _ w: inout DERWriter, _ inner: (inout DERWriter) -> Void) {
                if indefinite { w.appendIndefiniteLength(tag, inner) } else { w.appendConstructed(tag, inner) }
            }
            constructed(.sequence, &w) { w in
                w.appendObjectIdentifier(.cmsSignedData)
                constructed(.contextSpecific(0, constructed: true), &w) { w in
                    constructed(.sequence, &w) { w in
                        w.appendInteger(1)
                        w.appendConstructed(.set) { AlgorithmIdentifier.sha256.write(to: &$0) }
                        constructed(.sequence, &w) { $0.appendObjectIdentifier(.cmsData) }
                        if !embedded.isEmpty {
                            constructed(.contextSpecific(0, constructed: true), &w) { w in
                                for c in embedded { w.appendEncoded(c.derRepresentation) }
                            }
                        }
                        w.appendConstructed(.set) { $0.appendEncoded(signerInfo) }
                    }
                }
            }
        }
        return DERWriter.encode { body(&$0, indefinite: encoding == .berIndefiniteLength) }
    }
}
