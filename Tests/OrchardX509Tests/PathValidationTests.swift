import Foundation
import OrchardCrypto
import OrchardX509
import Testing

/// The Swift path validation (what `CertificateChainVerifier` now runs) against OpenSSL's `X509_verify_cert`
/// on the same chains, and the CMS verifier's cache of refused signers.
@Suite("Path validation")
struct PathValidationTests {
    /// A certificate issued by hand, for chains `TestPKI` does not make.
    static func issue(
        _ name: String, key: CertificatePrivateKey, by issuer: (Certificate, CertificatePrivateKey)?,
        extensions: [Certificate.Extension], keyIdentifiers: Bool = true,
        notValidBefore: Date = TestPKI.date(2020, 1, 1), notValidAfter: Date = TestPKI.date(2040, 1, 1)
    ) throws -> Certificate {
        try Certificate.issue(
            subject: DistinguishedName([.commonName(name), .organization("Orchard")]), publicKey: key.publicKey,
            issuer: issuer.map { .certificate($0.0, key: $0.1) } ?? .selfSigned(key), notValidBefore: notValidBefore,
            notValidAfter: notValidAfter, extensions: extensions, addKeyIdentifiers: keyIdentifiers)
    }

    static func p256() throws -> CertificatePrivateKey { CertificatePrivateKey(try P256.Signing.PrivateKey()) }

    static let ca: [Certificate.Extension] = [.basicConstraints(isCA: true), .keyUsage([.keyCertSign])]
    static let leafExtensions: [Certificate.Extension] = [.keyUsage([.digitalSignature])]

    /// Both validators' verdicts on one chain: the same validity and, where `sameCode`, the same failure code.
    func agree(
        _ verifier: CertificateChainVerifier, _ leaf: Certificate, _ intermediates: [Certificate], at time: Date,
        valid: Bool, code: VerificationFailure.Code? = nil, _ what: String
    ) {
        let swift = verifier.verifyUncached(leaf: leaf, intermediates: intermediates, at: time)
        let openSSL = verifier.verifyWithOpenSSL(leaf: leaf, intermediates: intermediates, at: time)
        #expect(swift.isValid == valid, "\(what): Swift \(String(describing: swift.failure))")
        #expect(openSSL.isValid == valid, "\(what): OpenSSL \(String(describing: openSSL.failure))")
        if case .valid(let a) = swift, case .valid(let b) = openSSL {
            #expect(a.certificates == b.certificates, "\(what): the same chain")
        }
        if let code {
            #expect(swift.failure?.code == code, "\(what): Swift \(String(describing: swift.failure))")
            #expect(openSSL.failure?.code == code, "\(what): OpenSSL \(String(describing: openSSL.failure))")
        }
    }

    @Test("F2: the Swift path validation and OpenSSL agree on Apple's chains (P-384 root, SHA-384)")
    func agreesWithOpenSSLOnAppleChains() throws {
        let verifier = try CertificateChainVerifier(
            trustRoots: [AppleToken.appleRoot()], policy: .applePaymentTokenSigning, cacheCapacity: 0)
        for name in AppleToken.names {
            let token = try AppleToken.load(name)
            let certificates = try CMSSignedData(berEncoded: token.signature).certificates
            // Apple Root CA - G3 is P-384 and signs with ecdsa-with-SHA384.
            agree(verifier, certificates[0], [certificates[1]], at: token.signingTime, valid: true, name)
            agree(
                verifier, certificates[0], [certificates[1]], at: Date(), valid: false, code: .certificateExpired,
                "\(name) today")
            agree(verifier, certificates[0], [], at: token.signingTime, valid: false, code: .untrustedChain, name)
        }
    }

    @Test("F2: the Swift path validation and OpenSSL agree on good, expired, early and foreign chains")
    func agreesWithOpenSSLOnOrchardChains() throws {
        let pki = try TestPKI()
        let verifier = try CertificateChainVerifier(trustRoots: [pki.root], cacheCapacity: 0)
        agree(verifier, pki.leaf, [pki.intermediate], at: TestPKI.inside, valid: true, "good")
        agree(verifier, pki.leaf, [pki.intermediate, pki.root], at: TestPKI.inside, valid: true, "root embedded too")
        agree(
            verifier, pki.leaf, [pki.intermediate], at: TestPKI.leafEnd + 1, valid: false, code: .certificateExpired,
            "expired")
        agree(
            verifier, pki.leaf, [pki.intermediate], at: TestPKI.leafStart - 1, valid: false,
            code: .certificateNotYetValid, "not yet valid")
        agree(verifier, pki.leaf, [], at: TestPKI.inside, valid: false, code: .untrustedChain, "no intermediate")
        let other = try TestPKI(name: "Other")
        agree(
            verifier, other.leaf, [other.intermediate], at: TestPKI.inside, valid: false, code: .untrustedChain,
            "another root")

        let rsa = try TestPKI(name: "RSA", rsaLeaf: RSA.PrivateKey(keySize: 2048))
        let rsaVerifier = try CertificateChainVerifier(trustRoots: [rsa.root], cacheCapacity: 0)
        agree(rsaVerifier, rsa.leaf, [rsa.intermediate], at: TestPKI.inside, valid: true, "RSA leaf")
    }

    @Test("A6: an imitation of the trusted chain (same names, no key identifiers, other keys) is refused")
    func imitationIsRefusedBySignature() throws {
        let pki = try TestPKI()
        let verifier = try CertificateChainVerifier(trustRoots: [pki.root], cacheCapacity: 0)
        let fakeRootKey = try Self.p256()
        let fakeRoot = try Certificate.issue(
            subject: pki.root.subject, publicKey: fakeRootKey.publicKey, issuer: .selfSigned(fakeRootKey),
            notValidBefore: TestPKI.date(2020, 1, 1), notValidAfter: TestPKI.date(2040, 1, 1), extensions: Self.ca,
            addKeyIdentifiers: false)
        let fakeKey = try Self.p256()
        let fakeIntermediate = try Certificate.issue(
            subject: pki.intermediate.subject, publicKey: fakeKey.publicKey,
            issuer: .certificate(fakeRoot, key: fakeRootKey), notValidBefore: TestPKI.date(2020, 1, 1),
            notValidAfter: TestPKI.date(2040, 1, 1), extensions: Self.ca, addKeyIdentifiers: false)
        let leafKey = try Self.p256()
        let leaf = try Certificate.issue(
            subject: pki.leaf.subject, publicKey: leafKey.publicKey,
            issuer: .certificate(fakeIntermediate, key: fakeKey),
            notValidBefore: TestPKI.leafStart, notValidAfter: TestPKI.leafEnd, extensions: Self.leafExtensions,
            addKeyIdentifiers: false)
        agree(
            verifier, leaf, [fakeIntermediate], at: TestPKI.inside, valid: false, code: .invalidCertificateSignature,
            "imitation")
        // The real intermediate with a leaf it did not sign.
        let stray = try Certificate.issue(
            subject: pki.leaf.subject, publicKey: leafKey.publicKey,
            issuer: .certificate(fakeIntermediate, key: fakeKey),
            notValidBefore: TestPKI.leafStart, notValidAfter: TestPKI.leafEnd, extensions: Self.leafExtensions,
            addKeyIdentifiers: false)
        agree(
            verifier, stray, [pki.intermediate], at: TestPKI.inside, valid: false, code: .invalidCertificateSignature,
            "a leaf the intermediate did not sign")
    }

    @Test("F2: the Swift path validation and OpenSSL agree on CA flags, key usage, path length, critical extensions")
    func issuerConstraintsAndCriticalExtensions() throws {
        let rootKey = try Self.p256()
        let root = try Self.issue("Constraints Root", key: rootKey, by: nil, extensions: Self.ca)
        let verifier = try CertificateChainVerifier(trustRoots: [root], cacheCapacity: 0)
        let time = TestPKI.inside
        func chain(
            _ caExtensions: [Certificate.Extension], leaf leafExtensions: [Certificate.Extension] = Self.leafExtensions
        )
            throws -> (Certificate, Certificate)
        {
            let key = try Self.p256()
            let intermediate = try Self.issue("Constraints CA", key: key, by: (root, rootKey), extensions: caExtensions)
            let leaf = try Self.issue("leaf", key: try Self.p256(), by: (intermediate, key), extensions: leafExtensions)
            return (leaf, intermediate)
        }
        var (leaf, intermediate) = try chain(Self.ca)
        agree(verifier, leaf, [intermediate], at: time, valid: true, "a CA")
        (leaf, intermediate) = try chain([.keyUsage([.keyCertSign])])
        agree(verifier, leaf, [intermediate], at: time, valid: false, "no basic constraints")
        (leaf, intermediate) = try chain([.basicConstraints(isCA: false), .keyUsage([.keyCertSign])])
        agree(verifier, leaf, [intermediate], at: time, valid: false, "cA false")
        (leaf, intermediate) = try chain([.basicConstraints(isCA: true), .keyUsage([.digitalSignature])])
        agree(verifier, leaf, [intermediate], at: time, valid: false, "no keyCertSign")
        let unknownCritical = Certificate.Extension(
            oid: try ASN1ObjectIdentifier("1.3.6.1.4.1.99999.1"), isCritical: true, value: [0x05, 0x00])
        (leaf, intermediate) = try chain(Self.ca, leaf: Self.leafExtensions + [unknownCritical])
        agree(verifier, leaf, [intermediate], at: time, valid: false, "an unknown critical extension on the leaf")
        (leaf, intermediate) = try chain(Self.ca + [unknownCritical])
        agree(verifier, leaf, [intermediate], at: time, valid: false, "an unknown critical extension on the CA")
        let unknownNonCritical = Certificate.Extension(
            oid: try ASN1ObjectIdentifier("1.3.6.1.4.1.99999.1"), value: [0x05, 0x00])
        (leaf, intermediate) = try chain(Self.ca, leaf: Self.leafExtensions + [unknownNonCritical])
        agree(verifier, leaf, [intermediate], at: time, valid: true, "an unknown non-critical extension")

        // Certificate policies (non-critical, as Apple's leaves carry them): neither requires a policy.
        let policies = Certificate.Extension(
            oid: try ASN1ObjectIdentifier("2.5.29.32"),
            value: DERWriter.encode { w in
                w.appendConstructed(.sequence) { w in
                    w.appendConstructed(.sequence) { $0.appendObjectIdentifier(.appleTokenSigningLeaf) }
                }
            })
        (leaf, intermediate) = try chain(Self.ca, leaf: Self.leafExtensions + [policies])
        agree(verifier, leaf, [intermediate], at: time, valid: true, "certificate policies")

        // Path length: a CA limited to 0 cannot have a CA below it.
        let limitedKey = try Self.p256()
        let limited = try Self.issue(
            "Limited CA", key: limitedKey, by: (root, rootKey),
            extensions: [.basicConstraints(isCA: true, pathLength: 0), .keyUsage([.keyCertSign])])
        let subKey = try Self.p256()
        let sub = try Self.issue("Sub CA", key: subKey, by: (limited, limitedKey), extensions: Self.ca)
        let deep = try Self.issue("deep leaf", key: try Self.p256(), by: (sub, subKey), extensions: Self.leafExtensions)
        agree(verifier, deep, [sub, limited], at: time, valid: false, "path length exceeded")
        let shallow = try Self.issue(
            "shallow leaf", key: try Self.p256(), by: (limited, limitedKey), extensions: Self.leafExtensions)
        agree(verifier, shallow, [limited], at: time, valid: true, "path length respected")

        // Name constraints are left to OpenSSL (after the signatures verified in Swift): both still agree.
        let nameConstraints = Certificate.Extension(
            oid: try ASN1ObjectIdentifier("2.5.29.30"), isCritical: true,
            value: [0x30, 0x0F, 0xA0, 0x0D, 0x30, 0x0B, 0x82, 0x09] + Array("orchard.x".utf8))
        (leaf, intermediate) = try chain(Self.ca + [nameConstraints])
        let swift = verifier.verifyUncached(leaf: leaf, intermediates: [intermediate], at: time)
        let openSSL = verifier.verifyWithOpenSSL(leaf: leaf, intermediates: [intermediate], at: time)
        #expect(swift.isValid == openSSL.isValid)
    }

    @Test("F2: a trusted certificate that is not self-issued does not end a path (OpenSSL needs a self-signed top)")
    func anchorsMustBeSelfIssued() throws {
        let pki = try TestPKI()
        let onIntermediate = try CertificateChainVerifier(trustRoots: [pki.intermediate], cacheCapacity: 0)
        agree(onIntermediate, pki.leaf, [], at: TestPKI.inside, valid: false, code: .untrustedChain, "no root")
        agree(
            onIntermediate, pki.leaf, [pki.intermediate], at: TestPKI.inside, valid: false, code: .untrustedChain,
            "the intermediate presented too")
        let both = try CertificateChainVerifier(trustRoots: [pki.intermediate, pki.root], cacheCapacity: 0)
        agree(both, pki.leaf, [], at: TestPKI.inside, valid: true, "a trusted intermediate under a trusted root")
    }

    @Test func rsaIssuers() throws {
        let rootKey = CertificatePrivateKey(try RSA.PrivateKey(keySize: 2048))
        let root = try Self.issue("RSA Root", key: rootKey, by: nil, extensions: Self.ca)
        let caKey = CertificatePrivateKey(try RSA.PrivateKey(keySize: 2048))
        let intermediate = try Self.issue("RSA CA", key: caKey, by: (root, rootKey), extensions: Self.ca)
        let leaf = try Self.issue(
            "RSA-signed leaf", key: try Self.p256(), by: (intermediate, caKey), extensions: Self.leafExtensions)
        let verifier = try CertificateChainVerifier(trustRoots: [root], cacheCapacity: 0)
        agree(verifier, leaf, [intermediate], at: TestPKI.inside, valid: true, "RSA root and CA")
        var der = leaf.derRepresentation
        der[der.count - 5] ^= 0x01
        agree(
            verifier, try Certificate(derEncoded: der), [intermediate], at: TestPKI.inside, valid: false,
            code: .invalidCertificateSignature, "RSA signature altered")
    }

    @Test func rsaPublicKeysImportWithoutTheDecoderAndCheckTheirSize() throws {
        let key = try RSA.PrivateKey(keySize: 2048)
        let imported = try CertificatePublicKey(derRepresentation: key.publicKey.derRepresentation)
        #expect(imported.rsa?.keySizeInBits == 2048)
        let message: [UInt8] = [1, 2, 3]
        #expect(
            imported.isValidSignature(
                try key.pkcs1v15Signature(for: message), for: message, algorithm: .sha256WithRSAEncryption))
        // A 1024-bit modulus is refused: RSAPublicKey { n (129 bytes with its sign byte), e = 65537 }.
        let small = [0x00, 0xC1] + [UInt8](repeating: 0x11, count: 126) + [0x01]
        let rsaPublicKey = [0x30, 0x81, 0x89, 0x02, 0x81, 0x81] + small + [0x02, 0x03, 0x01, 0x00, 0x01]
        var spki: [UInt8] = [
            0x30, 0x81, 0x9F, 0x30, 0x0D, 0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01,
        ]
        spki += [0x05, 0x00, 0x03, 0x81, 0x8D, 0x00] + rsaPublicKey
        #expect(throws: X509Error.self) { try CertificatePublicKey(derRepresentation: spki) }
    }

    // MARK: The CMS verifier's refused signers

    @Test("A6: a refused chain is remembered by its exact bytes; a good chain refused at a forged time is not")
    func refusedSignersAreRememberedOnlyForBytesOnlyReasons() throws {
        let pki = try TestPKI()
        let clock = ManualClock(now: TestPKI.inside)
        let verifier = try CMSVerifier(trustRoots: [pki.root], policy: .applePaymentTokenSigning, clock: clock)
        let content: [UInt8] = [1]

        // An unknown chain: refused, remembered, refused again from memory.
        let other = try TestPKI(name: "Other")
        let unknown = try CMS.signDetached(
            content, signer: other.leaf, key: other.leafKey, certificates: [other.leaf, other.intermediate],
            signingTime: TestPKI.inside)
        for _ in 0..<2 {
            #expect(
                outcome { try verifier.verifyDetachedSignature(unknown, content: content, at: .signingTime) }
                    == .invalid(.untrustedChain))
        }
        #expect(verifier.rejectedSignerCount == 1)

        // The trusted chain signed at a time outside its validity (the signer picks signingTime): refused, not
        // remembered, so the same chain at a good time verifies.
        let late = try CMS.signDetached(
            content, signer: pki.leaf, key: pki.leafKey, certificates: [pki.leaf, pki.intermediate],
            signingTime: TestPKI.leafEnd + 10)
        #expect(
            outcome { try verifier.verifyDetachedSignature(late, content: content, at: .signingTime) }
                == .invalid(.certificateExpired))
        // A bad signature by the trusted chain: refused for the signature, not the chain.
        let good = try CMS.signDetached(
            content, signer: pki.leaf, key: pki.leafKey, certificates: [pki.leaf, pki.intermediate],
            signingTime: TestPKI.inside)
        #expect(
            outcome { try verifier.verifyDetachedSignature(good, content: [2], at: .signingTime) }
                == .invalid(.digestMismatch))
        let otherKey = try P256.Signing.PrivateKey()
        var parts = try SignedDataParts(der: good)
        parts.signers[0][5] = DERWriter.encode {
            $0.appendOctetString(try! otherKey.signature(for: [9]).derRepresentation)
        }
        let forgedSignature = parts.der
        #expect(
            outcome { try verifier.verifyDetachedSignature(forgedSignature, content: content, at: .signingTime) }
                == .invalid(.invalidSignature))
        #expect(verifier.rejectedSignerCount == 1)
        #expect(verifier.chainVerifier.cachedChainCount == 0)
        #expect(try verifier.verifyDetachedSignature(good, content: content, at: .signingTime).isValid)
        #expect(verifier.chainVerifier.cachedChainCount == 1)
    }

    @Test func refusedSignersAreBounded() throws {
        let pki = try TestPKI()
        let verifier = try CMSVerifier(trustRoots: [pki.root], cacheCapacity: 2)
        for index in 0..<4 {
            let other = try TestPKI(name: "Other \(index)")
            let signature = try CMS.signDetached(
                [1], signer: other.leaf, key: other.leafKey, certificates: [other.leaf, other.intermediate],
                signingTime: TestPKI.inside)
            #expect(
                outcome { try verifier.verifyDetachedSignature(signature, content: [1], at: .signingTime) }
                    == .invalid(.untrustedChain))
            #expect(verifier.rejectedSignerCount == min(index + 1, 2))
        }
        // Without a cache, nothing is remembered.
        let uncached = try CMSVerifier(trustRoots: [pki.root], cacheCapacity: 0)
        let other = try TestPKI(name: "Other")
        let signature = try CMS.signDetached(
            [1], signer: other.leaf, key: other.leafKey, certificates: [other.leaf, other.intermediate],
            signingTime: TestPKI.inside)
        _ = try uncached.verifyDetachedSignature(signature, content: [1], at: .signingTime)
        #expect(uncached.rejectedSignerCount == 0)
    }
}
