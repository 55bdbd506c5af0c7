public import Foundation
public import OrchardCrypto

/// Who signs a new certificate: the subject itself (a root) or a CA certificate with its key.
public struct CertificateIssuer: Sendable {
    let certificate: Certificate?
    let key: CertificatePrivateKey

    /// The new certificate is signed by the key of its own subject (a root CA, or a self-signed leaf).
    public static func selfSigned(_ key: CertificatePrivateKey) -> CertificateIssuer {
        CertificateIssuer(certificate: nil, key: key)
    }

    /// The new certificate is signed by `key`, which must be the key of `certificate`.
    public static func certificate(_ certificate: Certificate, key: CertificatePrivateKey) -> CertificateIssuer {
        CertificateIssuer(certificate: certificate, key: key)
    }
}

extension Certificate {
    /// Builds and signs an X.509 v3 certificate, encoded in Swift and signed through OrchardCrypto.
    ///
    /// - Parameters:
    ///   - extensions: written in the given order, each OID at most once. Custom extensions made with
    ///     ``Extension/init(oid:isCritical:value:)`` are non-critical unless asked otherwise.
    ///   - serialNumber: the unsigned big-endian serial; by default 16 random bytes (positive, non-zero).
    ///   - addKeyIdentifiers: adds the subject key identifier (SHA-1 of the key, RFC 5280 method 1) and the
    ///     authority key identifier (the issuer's) unless `extensions` already has them.
    /// - Throws: ``X509Error/Code/invalidKey`` when the issuer key does not match the issuer certificate
    ///   (or, self-signed, the subject key); ``X509Error/Code/invalidValue`` for duplicate extensions,
    ///   a validity period that ends before it starts, or an unrepresentable date.
    public static func issue(
        subject: DistinguishedName,
        publicKey: CertificatePublicKey,
        issuer: CertificateIssuer,
        notValidBefore: Date,
        notValidAfter: Date,
        extensions: [Extension] = [],
        serialNumber: [UInt8]? = nil,
        addKeyIdentifiers: Bool = true,
        random: any RandomSource = SystemRandom()
    ) throws(X509Error) -> Certificate {
        let issuerName: DistinguishedName
        let issuerKeyIdentifier: [UInt8]
        if let issuerCertificate = issuer.certificate {
            guard issuer.key.publicKey.derRepresentation == issuerCertificate.subjectPublicKeyInfo.derRepresentation
            else { throw X509Error(.invalidKey, "the issuer key is not the key of the issuer certificate") }
            issuerName = issuerCertificate.subject
            issuerKeyIdentifier =
                try issuerCertificate.subjectKeyIdentifier ?? issuerCertificate.subjectPublicKeyInfo.keyIdentifier
        } else {
            guard issuer.key.publicKey == publicKey else {
                throw X509Error(.invalidKey, "a self-signed certificate must be signed with the subject's own key")
            }
            issuerName = subject
            issuerKeyIdentifier = try SubjectPublicKeyInfo(derEncoded: publicKey.derRepresentation).keyIdentifier
        }
        guard notValidBefore <= notValidAfter else {
            throw X509Error(
                .invalidValue, "the validity period ends (\(notValidAfter)) before it starts (\(notValidBefore))")
        }

        var allExtensions = extensions
        if addKeyIdentifiers {
            if !allExtensions.contains(where: { $0.oid == .subjectKeyIdentifier }) {
                let spki = try SubjectPublicKeyInfo(derEncoded: publicKey.derRepresentation)
                allExtensions.append(.subjectKeyIdentifier(spki.keyIdentifier))
            }
            if !allExtensions.contains(where: { $0.oid == .authorityKeyIdentifier }) {
                allExtensions.append(.authorityKeyIdentifier(issuerKeyIdentifier))
            }
        }
        guard Set(allExtensions.map(\.oid)).count == allExtensions.count else {
            throw X509Error(.invalidValue, "an extension appears more than once")
        }

        var serial = serialNumber ?? random.bytes(16)
        if serialNumber == nil {
            serial[0] &= 0x7F
            if serial[0] == 0 { serial[0] = 0x01 }
        }
        guard serial.contains(where: { $0 != 0 }), serial.count <= 20 else {
            throw X509Error(.invalidValue, "a serial number is 1 to 20 bytes and not zero (RFC 5280 §4.1.2.2)")
        }

        let algorithm = issuer.key.signatureAlgorithm
        let tbs = try DERWriter.encode { (w) throws(X509Error) in
            try w.appendConstructed(.sequence) { (w) throws(X509Error) in
                w.appendConstructed(.contextSpecific(0, constructed: true)) { $0.appendInteger(2) }
                w.appendUnsignedInteger(serial)
                algorithm.write(to: &w)
                w.appendEncoded(issuerName.derRepresentation)
                try w.appendConstructed(.sequence) { (w) throws(X509Error) in
                    try w.appendTime(notValidBefore)
                    try w.appendTime(notValidAfter)
                }
                w.appendEncoded(subject.derRepresentation)
                w.appendEncoded(publicKey.derRepresentation)
                if !allExtensions.isEmpty {
                    w.appendConstructed(.contextSpecific(3, constructed: true)) { w in
                        w.appendConstructed(.sequence) { w in for e in allExtensions { e.write(to: &w) } }
                    }
                }
            }
        }
        let signature = try issuer.key.signature(for: tbs)
        let der = DERWriter.encode { w in
            w.appendConstructed(.sequence) { w in
                w.appendEncoded(tbs)
                algorithm.write(to: &w)
                w.appendBitString(signature)
            }
        }
        return try Certificate(derEncoded: der)
    }

    /// Issues a certificate for the subject and key of a CSR, after checking the CSR's signature.
    /// The CSR's requested extensions are not copied: the issuer decides them (pass
    /// ``CertificateSigningRequest/requestedExtensions`` to honour them).
    public static func issue(
        for request: CertificateSigningRequest,
        issuer: CertificateIssuer,
        notValidBefore: Date,
        notValidAfter: Date,
        extensions: [Extension] = [],
        serialNumber: [UInt8]? = nil,
        addKeyIdentifiers: Bool = true,
        random: any RandomSource = SystemRandom()
    ) throws(X509Error) -> Certificate {
        guard request.isSignatureValid else {
            throw X509Error(.invalidSignature, "the CSR's signature does not verify with its own public key")
        }
        return try issue(
            subject: request.subject, publicKey: request.publicKey, issuer: issuer, notValidBefore: notValidBefore,
            notValidAfter: notValidAfter, extensions: extensions, serialNumber: serialNumber,
            addKeyIdentifiers: addKeyIdentifiers, random: random)
    }
}
