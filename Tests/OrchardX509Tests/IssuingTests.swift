import Foundation
import OrchardCrypto
import OrchardX509
import Testing

@Suite("Certificates and CSRs: building")
struct IssuingTests {
    @Test func appleShapedChainRoundTrips() throws {
        let pki = try TestPKI()
        for c in [pki.root, pki.intermediate, pki.leaf] {
            // Parsing what was built gives the same bytes, and OpenSSL reads the same fields.
            #expect(try Certificate(derEncoded: c.derRepresentation) == c)
            let reference = try OpenSSLReference.certificateFields(c.derRepresentation)
            #expect(reference.reencoded == c.derRepresentation)
            #expect(reference.subjectDER == c.subject.derRepresentation)
            #expect(reference.extensions.map(\.oid) == c.extensions.map(\.oid.description))
            #expect(reference.notAfter == c.notValidAfter)
            #expect(c.version == 3)
            #expect(c.serialNumber.count <= 17 && c.serialNumber.first.map { $0 & 0x80 == 0 } == true)
        }
        #expect(pki.root.isSelfIssued && pki.root.isSignature(validUnder: pki.rootKey.publicKey))
        #expect(pki.intermediate.isSignature(validUnder: pki.rootKey.publicKey))
        #expect(pki.leaf.isSignature(validUnder: pki.intermediateKey.publicKey))
        #expect(!pki.leaf.isSignature(validUnder: pki.rootKey.publicKey))

        #expect(try pki.root.basicConstraints == BasicConstraints(isCA: true))
        #expect(try pki.intermediate.basicConstraints == BasicConstraints(isCA: true, pathLength: 0))
        #expect(try pki.leaf.basicConstraints == BasicConstraints(isCA: false))
        #expect(try pki.leaf.keyUsage == .digitalSignature)
        #expect(try pki.intermediate.keyUsage == [.keyCertSign, .cRLSign])
        // Key identifiers link the chain; the root's AKI is its own SKI.
        #expect(try pki.leaf.subjectKeyIdentifier == pki.leaf.subjectPublicKeyInfo.keyIdentifier)
        #expect(try pki.leaf.authorityKeyIdentifier == pki.intermediate.subjectKeyIdentifier)
        #expect(try pki.intermediate.authorityKeyIdentifier == pki.root.subjectKeyIdentifier)
        #expect(try pki.root.authorityKeyIdentifier == pki.root.subjectKeyIdentifier)
        // Apple's markers: ASN.1 NULL, non-critical, and the criticality of the standard extensions.
        #expect(
            pki.leaf.extension(.appleTokenSigningLeaf)
                == Certificate.Extension(oid: .appleTokenSigningLeaf, value: [0x05, 0x00]))
        #expect(pki.intermediate.extension(.appleApplicationIntegrationCA)?.value == [0x05, 0x00])
        #expect(pki.intermediate.extension(.appleApplicationIntegrationCA)?.isCritical == false)
        #expect(pki.leaf.extension(.basicConstraints)?.isCritical == true)
        #expect(pki.leaf.extension(.keyUsage)?.isCritical == true)
        #expect(pki.leaf.issuer == pki.intermediate.subject)
        #expect(pki.leaf.notValidBefore == TestPKI.leafStart && pki.leaf.notValidAfter == TestPKI.leafEnd)
        #expect(ApplePayCertificates.hasTokenSigningMarkers(leaf: pki.leaf, intermediate: pki.intermediate))
    }

    @Test func customExtensionsSANAndFarFutureDates() throws {
        let key = CertificatePrivateKey(try P256.Signing.PrivateKey())
        let custom = try ASN1ObjectIdentifier("1.3.6.1.4.1.55555.1.2")
        let value = DERWriter.encode { $0.appendUTF8String("orchard") }
        let c = try Certificate.issue(
            subject: DistinguishedName([.commonName("pay.orchard.test")]), publicKey: key.publicKey,
            issuer: .selfSigned(key), notValidBefore: TestPKI.date(2049, 6, 1), notValidAfter: TestPKI.date(2060, 1, 1),
            extensions: [
                Certificate.Extension(oid: custom, value: value),
                try .subjectAlternativeNames(
                    dnsNames: ["pay.orchard.test", "localhost"], ipAddresses: [[127, 0, 0, 1]]),
                .extendedKeyUsage([.serverAuth, .clientAuth]),
            ], serialNumber: [0x01, 0x02], addKeyIdentifiers: false)
        #expect(c.extensions.count == 3)
        #expect(c.extension(custom) == Certificate.Extension(oid: custom, isCritical: false, value: value))
        #expect(
            try c.subjectAlternativeNames
                == SubjectAlternativeNames(dnsNames: ["pay.orchard.test", "localhost"], ipAddresses: [[127, 0, 0, 1]]))
        #expect(try c.extendedKeyUsage == [.serverAuth, .clientAuth])
        #expect(c.serialNumber == [0x01, 0x02])
        #expect(try c.subjectKeyIdentifier == nil)
        // 2060 is a GeneralizedTime; OpenSSL reads the same instant.
        #expect(c.notValidAfter == TestPKI.date(2060, 1, 1))
        #expect(try OpenSSLReference.certificateFields(c.derRepresentation).notAfter == TestPKI.date(2060, 1, 1))
        #expect(throws: X509Error(.invalidValue, "")) {
            try Certificate.Extension.subjectAlternativeNames(ipAddresses: [[1, 2, 3]])
        }
    }

    @Test func rsaIssuerAndRSASubject() throws {
        let rsa = try RSA.PrivateKey(keySize: 2048)
        let rsaKey = CertificatePrivateKey(rsa)
        let root = try Certificate.issue(
            subject: DistinguishedName([.commonName("RSA Root")]), publicKey: rsaKey.publicKey,
            issuer: .selfSigned(rsaKey),
            notValidBefore: TestPKI.date(2020, 1, 1), notValidAfter: TestPKI.date(2040, 1, 1),
            extensions: [.basicConstraints(isCA: true), .keyUsage([.keyCertSign])])
        #expect(root.signatureAlgorithm == .sha256WithRSAEncryption)
        #expect(root.isSignature(validUnder: rsaKey.publicKey))
        #expect(try root.publicKey.rsa?.keySizeInBits == 2048)
        let ecKey = CertificatePrivateKey(try P256.Signing.PrivateKey())
        let leaf = try Certificate.issue(
            subject: DistinguishedName([.commonName("EC leaf")]), publicKey: ecKey.publicKey,
            issuer: .certificate(root, key: rsaKey), notValidBefore: TestPKI.date(2021, 1, 1),
            notValidAfter: TestPKI.date(2030, 1, 1))
        #expect(leaf.isSignature(validUnder: rsaKey.publicKey))
        #expect(!leaf.isSignature(validUnder: ecKey.publicKey))
        let verifier = try CertificateChainVerifier(trustRoots: [root])
        #expect(verifier.verify(leaf: leaf, at: TestPKI.inside).isValid)
        #expect(String(describing: rsaKey).contains("redacted"))
        #expect(!String(describing: rsaKey).contains("BEGIN"))
    }

    @Test func issuingRejectsInconsistentInput() throws {
        let pki = try TestPKI()
        let other = CertificatePrivateKey(try P256.Signing.PrivateKey())
        let name = DistinguishedName([.commonName("x")])
        #expect(throws: X509Error(.invalidKey, "")) {
            try Certificate.issue(
                subject: name, publicKey: other.publicKey, issuer: .certificate(pki.intermediate, key: pki.rootKey),
                notValidBefore: TestPKI.leafStart, notValidAfter: TestPKI.leafEnd)
        }
        #expect(throws: X509Error(.invalidKey, "")) {
            try Certificate.issue(
                subject: name, publicKey: other.publicKey, issuer: .selfSigned(pki.rootKey),
                notValidBefore: TestPKI.leafStart, notValidAfter: TestPKI.leafEnd)
        }
        #expect(throws: X509Error(.invalidValue, "")) {
            try Certificate.issue(
                subject: name, publicKey: other.publicKey, issuer: .selfSigned(other),
                notValidBefore: TestPKI.leafEnd, notValidAfter: TestPKI.leafStart)
        }
        #expect(throws: X509Error(.invalidValue, "")) {
            try Certificate.issue(
                subject: name, publicKey: other.publicKey, issuer: .selfSigned(other),
                notValidBefore: TestPKI.leafStart,
                notValidAfter: TestPKI.leafEnd, extensions: [.keyUsage(.digitalSignature), .keyUsage(.keyAgreement)])
        }
        #expect(throws: X509Error(.invalidValue, "")) {
            try Certificate.issue(
                subject: name, publicKey: other.publicKey, issuer: .selfSigned(other),
                notValidBefore: TestPKI.leafStart,
                notValidAfter: TestPKI.leafEnd, serialNumber: [0, 0])
        }
        #expect(throws: X509Error(.invalidValue, "")) {
            try Certificate.issue(
                subject: name, publicKey: other.publicKey, issuer: .selfSigned(other),
                notValidBefore: Date(timeIntervalSince1970: -70_000_000_000), notValidAfter: TestPKI.leafEnd)
        }
        #expect(throws: X509Error(.invalidValue, "")) {
            try Certificate.issue(
                subject: name, publicKey: other.publicKey, issuer: .selfSigned(other),
                notValidBefore: TestPKI.leafStart,
                notValidAfter: Date(timeIntervalSince1970: .infinity))
        }
    }

    @Test func merchantCertificateFromACSR() throws {
        let merchantID = "merchant.com.orchard.store"
        let key = CertificatePrivateKey(try P256.Signing.PrivateKey())
        let subject = DistinguishedName([
            .userID(merchantID), .commonName("Apple Pay Payment Processing:\(merchantID)"),
            .organizationalUnit("ORCHARD01"),
            .organization("Orchard Store"), .country("US"),
        ])
        let csr = try CertificateSigningRequest.create(
            subject: subject, key: key, extensions: [.keyUsage([.keyAgreement, .keyEncipherment])])
        #expect(csr.isSignatureValid)
        #expect(OpenSSLReference.csrSignatureIsValid(csr.derRepresentation))
        let parsed = try CertificateSigningRequest(pemEncoded: csr.pemRepresentation)
        #expect(parsed == csr)
        #expect(parsed.subject.userID == merchantID)
        #expect(parsed.publicKey == key.publicKey)
        #expect(parsed.requestedExtensions == [.keyUsage([.keyAgreement, .keyEncipherment])])

        let pki = try TestPKI()
        let issued = try Certificate.issue(
            for: parsed, issuer: .certificate(pki.intermediate, key: pki.intermediateKey),
            notValidBefore: TestPKI.leafStart, notValidAfter: TestPKI.leafEnd,
            extensions: parsed.requestedExtensions + [.appleMerchantIdentifier(merchantID)])
        #expect(issued.subject == subject)
        #expect(issued.subjectPublicKeyInfo.derRepresentation == key.publicKey.derRepresentation)
        let ext = try #require(issued.extension(.appleMerchantIdentifier))
        #expect(!ext.isCritical)
        // UTF8String (0x0C) of 64 upper-case hex digits (0x40 bytes).
        let hex = SHA256.hash(Array(merchantID.utf8)).map { String(format: "%02X", $0) }.joined()
        #expect(ext.value == [0x0C, 0x40] + Array(hex.utf8))
        #expect(try issued.appleMerchantIdentifierHash == SHA256.hash(Array(merchantID.utf8)))
        #expect(try issued.keyUsage == [.keyAgreement, .keyEncipherment])

        // A CSR whose signature was altered is refused, by Swift and by OpenSSL.
        var tampered = csr.derRepresentation
        tampered[tampered.count - 5] ^= 0x01
        let bad = try CertificateSigningRequest(derEncoded: tampered)
        #expect(!bad.isSignatureValid)
        #expect(!OpenSSLReference.csrSignatureIsValid(tampered))
        #expect(throws: X509Error(.invalidSignature, "")) {
            try Certificate.issue(
                for: bad, issuer: .certificate(pki.intermediate, key: pki.intermediateKey),
                notValidBefore: TestPKI.leafStart, notValidAfter: TestPKI.leafEnd)
        }
    }

    @Test func rsaCSRAndMalformedCSRs() throws {
        let key = CertificatePrivateKey(try RSA.PrivateKey(keySize: 2048))
        let csr = try CertificateSigningRequest.create(
            subject: DistinguishedName([.commonName("merchant identity")]), key: key)
        #expect(csr.isSignatureValid)
        #expect(csr.requestedExtensions.isEmpty)
        #expect(OpenSSLReference.csrSignatureIsValid(csr.derRepresentation))
        for length in stride(from: 0, to: csr.derRepresentation.count, by: 3) {
            #expect(throws: X509Error.self) {
                try CertificateSigningRequest(derEncoded: Array(csr.derRepresentation[0..<length]))
            }
        }
        #expect(throws: X509Error(.invalidPEM, "")) { try CertificateSigningRequest(pemEncoded: "nothing") }
    }
}
