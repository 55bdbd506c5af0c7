import Foundation
import OrchardCrypto
import OrchardX509
import Testing

@Suite("CMS signatures")
struct CMSTests {
    static func appleVerifier() throws -> CMSVerifier {
        try CMSVerifier(trustRoots: [AppleToken.appleRoot()], policy: .applePaymentTokenSigning)
    }

    // MARK: Real Apple tokens

    @Test(arguments: AppleToken.names)
    func appleTokenVerifiesAtItsSigningTimeAndNotToday(name: String) throws {
        let token = try AppleToken.load(name)
        let verifier = try Self.appleVerifier()
        let result = try verifier.verifyDetachedSignature(token.signature, content: token.content, at: .signingTime)
        guard case .valid(let signer, let chain, let signingTime) = result else {
            Issue.record("\(name): \(String(describing: result.failure))")
            return
        }
        #expect(signer.subject.commonName == token.leafCommonName)
        #expect(chain.count == 3)
        #expect(chain.last == (try AppleToken.appleRoot()))
        #expect(signingTime == token.signingTime)
        #expect(
            try verifier.verifyDetachedSignature(token.signature, content: token.content, at: .date(token.signingTime))
                .isValid)
        // Today the leaves have expired.
        let today = try verifier.verifyDetachedSignature(
            token.signature, content: token.content, at: .date(SystemClock().now()))
        #expect(today.failure?.code == .certificateExpired)

        // OpenSSL's CMS_verify agrees on both.
        let roots = [try AppleToken.appleRoot()]
        #expect(
            OpenSSLReference.cmsVerifyDetached(
                signature: token.signature, content: token.content, roots: roots, at: token.signingTime))
        #expect(
            !OpenSSLReference.cmsVerifyDetached(
                signature: token.signature, content: token.content, roots: roots, at: SystemClock().now()))
    }

    @Test func appleTokenStructure() throws {
        for name in AppleToken.names {
            let token = try AppleToken.load(name)
            #expect(Array(token.signature.prefix(2)) == [0x30, 0x80], "BER, indefinite length")
            let cms = try CMSSignedData(berEncoded: token.signature)
            #expect(cms.contentType == .cmsData)
            #expect(cms.content == nil)
            #expect(cms.certificates.count == 2)
            #expect(cms.signers.count == 1)
            let signer = try #require(cms.signers.first)
            #expect(signer.identifier.matches(cms.certificates[0]))
            #expect(!signer.identifier.matches(cms.certificates[1]))
            #expect(signer.digestAlgorithm.algorithm == .sha256)
            #expect(signer.signatureAlgorithm.algorithm == (token.isRSA ? .sha256WithRSAEncryption : .ecdsaWithSHA256))
            #expect(signer.messageDigest == SHA256.hash(token.content))
            #expect(signer.contentType == .cmsData)
            #expect(signer.signingTime == token.signingTime)
            #expect(signer.signedAttributesBytes?.first == 0xA0)
            // The signature covers the attributes re-tagged as SET.
            let attributes = try #require(signer.signedAttributesBytes)
            let key = try cms.certificates[0].publicKey
            #expect(
                key.isValidSignature(
                    signer.signature, for: [0x31] + attributes.dropFirst(),
                    algorithm: signer.signatureAlgorithm.algorithm))
            #expect(
                !key.isValidSignature(signer.signature, for: attributes, algorithm: signer.signatureAlgorithm.algorithm)
            )
        }
    }

    @Test(arguments: AppleToken.names)
    func tamperedAppleTokensAreRejected(name: String) throws {
        let token = try AppleToken.load(name)
        // A clock at the signing time lets the (otherwise expired) chain be cached, as it would be in 2014.
        let verifier = try CMSVerifier(
            trustRoots: [AppleToken.appleRoot()], policy: .applePaymentTokenSigning,
            clock: ManualClock(now: token.signingTime))
        // Altered content: the digest no longer matches.
        var content = token.content
        content[content.count / 2] ^= 0x01
        #expect(
            outcome { try verifier.verifyDetachedSignature(token.signature, content: content, at: .signingTime) }
                == .invalid(.digestMismatch))
        #expect(
            !OpenSSLReference.cmsVerifyDetached(
                signature: token.signature, content: content, roots: [try AppleToken.appleRoot()], at: token.signingTime
            ))
        #expect(
            outcome {
                try verifier.verifyDetachedSignature(token.signature, content: token.content + [0], at: .signingTime)
            } == .invalid(.digestMismatch))
        // Another root: the chain is untrusted.
        let other = try CMSVerifier(trustRoots: [TestPKI().root])
        #expect(
            outcome { try other.verifyDetachedSignature(token.signature, content: token.content, at: .signingTime) }
                == .invalid(.untrustedChain))
        // Bit flips across the signature (every 5th byte; each certificate, attribute and the signature
        // value are hit): never valid, and never a crash.
        for index in stride(from: 0, to: token.signature.count, by: 5) {
            var signature = token.signature
            signature[index] ^= 0x10
            let result = outcome {
                try verifier.verifyDetachedSignature(signature, content: token.content, at: .signingTime)
            }
            #expect(
                result != Outcome.valid,
                "\(name): flip at \(index) still verifies: \(hexDump(signature, around: index))")
        }
    }

    // MARK: Round trips with a test PKI

    @Test(arguments: [CMS.Encoding.der, .berIndefiniteLength], [false, true])
    func signAndVerifyRoundTrip(encoding: CMS.Encoding, algorithmProtection: Bool) throws {
        let pki = try TestPKI()
        let content = Array("ephemeralPublicKey‖data‖transactionId".utf8)
        let signingTime = TestPKI.inside + 0.75
        let signature = try CMS.signDetached(
            content, signer: pki.leaf, key: pki.leafKey, certificates: [pki.leaf, pki.intermediate],
            signingTime: signingTime, encoding: encoding, includeAlgorithmProtection: algorithmProtection)
        if encoding == .berIndefiniteLength {
            #expect(Data(signature).base64EncodedString().hasPrefix("MIAGCSqGSIb3DQEHAqCA"))
        } else {
            try ASN1.validate(signature[...], rules: .der)
        }
        let verifier = try CMSVerifier(trustRoots: [pki.root], policy: .applePaymentTokenSigning)
        let result = try verifier.verifyDetachedSignature(signature, content: content, at: .signingTime)
        guard case .valid(let signer, let chain, let time) = result else {
            Issue.record("\(String(describing: result.failure))")
            return
        }
        #expect(signer == pki.leaf)
        #expect(chain == [pki.leaf, pki.intermediate, pki.root])
        #expect(time == TestPKI.inside)
        #expect(
            OpenSSLReference.cmsVerifyDetached(
                signature: signature, content: content, roots: [pki.root], at: TestPKI.inside))
        // The parsed structure is what was asked for.
        let parsed = try CMSSignedData(berEncoded: signature)
        #expect(parsed.certificates == [pki.leaf, pki.intermediate])
        #expect(parsed.signers.first?.signingTime == TestPKI.inside)
    }

    @Test func rsaSignerRoundTrip() throws {
        let pki = try TestPKI(name: "RSA", rsaLeaf: try RSA.PrivateKey(keySize: 2048))
        let content = Array("wrappedKey‖data‖transactionId".utf8)
        let signature = try CMS.signDetached(
            content, signer: pki.leaf, key: pki.leafKey, certificates: [pki.leaf, pki.intermediate],
            signingTime: TestPKI.inside, encoding: .berIndefiniteLength)
        let verifier = try CMSVerifier(trustRoots: [pki.root], policy: .applePaymentTokenSigning)
        #expect(try verifier.verifyDetachedSignature(signature, content: content, at: .signingTime).isValid)
        #expect(
            OpenSSLReference.cmsVerifyDetached(
                signature: signature, content: content, roots: [pki.root], at: TestPKI.inside))
        #expect(
            outcome { try verifier.verifyDetachedSignature(signature, content: content + [1], at: .signingTime) }
                == .invalid(.digestMismatch))
    }

    @Test func everyBitFlipOfAnOrchardSignatureIsRejected() throws {
        let pki = try TestPKI()
        let content = Array("payload".utf8)
        let signature = try CMS.signDetached(
            content, signer: pki.leaf, key: pki.leafKey, certificates: [pki.leaf, pki.intermediate],
            signingTime: TestPKI.inside, encoding: .berIndefiniteLength)
        let verifier = try CMSVerifier(trustRoots: [pki.root], policy: .applePaymentTokenSigning)
        #expect(try verifier.verifyDetachedSignature(signature, content: content, at: .signingTime).isValid)
        // The certificates, the signed attributes and the signature value.
        let parsed = try CMSSignedData(berEncoded: signature)
        let signer = try #require(parsed.signers.first)
        let attributes = try #require(signer.signedAttributesBytes)
        let signedRanges = (parsed.certificates.map(\.derRepresentation) + [attributes, signer.signature])
            .compactMap { firstRange(of: $0, in: signature) }
        #expect(signedRanges.count == 4)
        var codes = Set<String>()
        for index in 0..<signature.count {
            var flipped = signature
            flipped[index] ^= 0x04
            let result = outcome { try verifier.verifyDetachedSignature(flipped, content: content, at: .signingTime) }
            #expect(result != Outcome.valid, "flip at \(index) still verifies: \(hexDump(flipped, around: index))")
            codes.insert("\(result)")
            // OpenSSL, as the reference, also rejects every flip inside signed bytes. (Outside them it is
            // laxer than Orchard: it ignores the versions, eContentType and the signature algorithm OID.)
            if index % 3 == 0 && signedRanges.contains(where: { $0.contains(index) }) {
                #expect(
                    !OpenSSLReference.cmsVerifyDetached(
                        signature: flipped, content: content, roots: [pki.root], at: TestPKI.inside),
                    "OpenSSL accepts the flip at \(index)")
            }
        }
        // The flips exercise many different checks, not one.
        #expect(codes.count >= 5)
        // The cache was used for the unmodified certificates, and is still correct afterwards.
        #expect(try verifier.verifyDetachedSignature(signature, content: content, at: .signingTime).isValid)
    }

    @Test func chainPolicyAndTimeFailures() throws {
        let pki = try TestPKI()
        let content: [UInt8] = [1, 2, 3]
        let signature = try CMS.signDetached(
            content, signer: pki.leaf, key: pki.leafKey, certificates: [pki.leaf, pki.intermediate],
            signingTime: TestPKI.inside)
        let verifier = try CMSVerifier(trustRoots: [pki.root], policy: .applePaymentTokenSigning)
        #expect(
            outcome {
                try verifier.verifyDetachedSignature(signature, content: content, at: .date(TestPKI.leafEnd + 1))
            } == .invalid(.certificateExpired))
        #expect(
            outcome {
                try verifier.verifyDetachedSignature(signature, content: content, at: .date(TestPKI.leafStart - 1))
            } == .invalid(.certificateNotYetValid))
        // Without the intermediate in the signature, no chain can be built.
        let leafOnly = try CMS.signDetached(content, signer: pki.leaf, key: pki.leafKey, signingTime: TestPKI.inside)
        #expect(
            outcome { try verifier.verifyDetachedSignature(leafOnly, content: content, at: .signingTime) }
                == .invalid(.untrustedChain))
        // Without any certificate, the signer cannot be found.
        let none = try CMS.signDetached(
            content, signer: pki.leaf, key: pki.leafKey, certificates: [], signingTime: TestPKI.inside)
        #expect(
            outcome { try verifier.verifyDetachedSignature(none, content: content, at: .signingTime) }
                == .invalid(.signerNotFound))
        // A leaf without Apple's marker fails Apple's policy.
        let unmarked = try TestPKI(name: "Unmarked", leafMarker: false)
        let unmarkedSignature = try CMS.signDetached(
            content, signer: unmarked.leaf, key: unmarked.leafKey,
            certificates: [unmarked.leaf, unmarked.intermediate],
            signingTime: TestPKI.inside)
        let strict = try CMSVerifier(trustRoots: [unmarked.root], policy: .applePaymentTokenSigning)
        #expect(
            outcome { try strict.verifyDetachedSignature(unmarkedSignature, content: content, at: .signingTime) }
                == .invalid(.policyViolation))
        // Signed by a key that is not the signer certificate's: refused when signing.
        #expect(throws: X509Error(.invalidKey, "")) {
            try CMS.signDetached(content, signer: pki.leaf, key: pki.intermediateKey, signingTime: TestPKI.inside)
        }
    }

    @Test func signedAttributeChecks() throws {
        let pki = try TestPKI()
        let content: [UInt8] = [9, 8, 7]
        let verifier = try CMSVerifier(trustRoots: [pki.root], policy: .applePaymentTokenSigning)
        func sign(_ change: (inout CMS.SignedAttributeVariations) -> Void, protection: Bool = false) throws -> [UInt8] {
            var variations = CMS.SignedAttributeVariations()
            change(&variations)
            return try CMS.signDetached(
                content, signer: pki.leaf, key: pki.leafKey, certificates: [pki.leaf, pki.intermediate],
                signingTime: TestPKI.inside, encoding: .der, includeAlgorithmProtection: protection,
                variations: variations)
        }
        func check(_ signature: [UInt8], _ time: CMSVerifier.ValidationTime = .signingTime) -> Outcome {
            outcome { try verifier.verifyDetachedSignature(signature, content: content, at: time) }
        }
        #expect(check(try sign { _ in }) == .valid)
        #expect(check(try sign({ _ in }, protection: true)) == .valid)
        #expect(check(try sign { $0.omitted = [.signingTimeAttribute] }) == .invalid(.missingAttribute))
        #expect(check(try sign { $0.omitted = [.signingTimeAttribute] }, .date(TestPKI.inside)) == .valid)
        #expect(check(try sign { $0.omitted = [.messageDigestAttribute] }) == .invalid(.missingAttribute))
        #expect(check(try sign { $0.omitted = [.contentTypeAttribute] }) == .invalid(.missingAttribute))
        #expect(check(try sign { $0.contentType = .cmsSignedData }) == .invalid(.invalidAttribute))
        // A signature over the content without any signed attribute: valid CMS (OpenSSL accepts it),
        // refused by Orchard, which needs the attributes.
        let bare = try sign { $0.withoutSignedAttributes = true }
        #expect(check(bare) == .invalid(.missingAttribute))
        #expect(
            OpenSSLReference.cmsVerifyDetached(signature: bare, content: content, roots: [pki.root], at: TestPKI.inside)
        )
        #expect(
            check(try sign({ $0.protectedSignatureAlgorithm = .sha256WithRSAEncryption }, protection: true))
                == .invalid(.invalidAttribute))
        // Attributes Orchard does not read are signed and skipped, however deep (within the depth limit),
        // and still must be well-formed DER; a known attribute may not appear twice.
        func attribute(_ oid: ASN1ObjectIdentifier, nesting: Int) -> [UInt8] {
            var value: [UInt8] = [0x05, 0x00]
            for _ in 0..<nesting {
                value = DERWriter.encode { $0.appendConstructed(.sequence) { $0.appendEncoded(value) } }
            }
            return DERWriter.encode { w in
                w.appendConstructed(.sequence) { w in
                    w.appendObjectIdentifier(oid)
                    w.appendConstructed(.set) { $0.appendEncoded(value) }
                }
            }
        }
        let unknown = try ASN1ObjectIdentifier("1.2.3.4.5")
        #expect(check(try sign { $0.extra = [attribute(unknown, nesting: 40)] }) == .valid)
        #expect(check(try sign { $0.extra = [attribute(unknown, nesting: 80)] }) == .malformed(.nestingTooDeep))
        // A caller's limit far beyond what any input can nest is fine too.
        let deep = try sign { $0.extra = [attribute(unknown, nesting: 80)] }
        #expect(try CMSSignedData(berEncoded: deep, limits: ASN1Limits(maximumDepth: .max)).signers.count == 1)
        let secondTime = try DERWriter.encode { (w) throws(X509Error) in
            try w.appendConstructed(.sequence) { (w) throws(X509Error) in
                w.appendObjectIdentifier(.signingTimeAttribute)
                try w.appendConstructed(.set) { (w) throws(X509Error) in try w.appendTime(TestPKI.inside) }
            }
        }
        #expect(check(try sign { $0.extra = [secondTime] }) == .malformed(.invalidValue))
        // OpenSSL also rejects a missing content type and accepts the valid variants.
        #expect(
            !OpenSSLReference.cmsVerifyDetached(
                signature: try sign { $0.omitted = [.contentTypeAttribute] }, content: content, roots: [pki.root],
                at: TestPKI.inside))
        #expect(
            OpenSSLReference.cmsVerifyDetached(
                signature: try sign({ _ in }, protection: true), content: content, roots: [pki.root], at: TestPKI.inside
            ))
    }

    @Test func structureChecks() throws {
        let pki = try TestPKI()
        let content: [UInt8] = [4, 5, 6]
        let der = try CMS.signDetached(
            content, signer: pki.leaf, key: pki.leafKey, certificates: [pki.leaf, pki.intermediate],
            signingTime: TestPKI.inside)
        let verifier = try CMSVerifier(trustRoots: [pki.root], policy: .applePaymentTokenSigning)
        func check(_ parts: SignedDataParts) -> Outcome {
            outcome { try verifier.verifyDetachedSignature(parts.der, content: content, at: .signingTime) }
        }
        let original = try SignedDataParts(der: der)
        #expect(original.der == der)
        #expect(check(original) == .valid)

        var twoSigners = original
        twoSigners.signers += original.signers
        #expect(check(twoSigners) == .invalid(.signerNotFound))
        var noSigner = original
        noSigner.signers = []
        #expect(check(noSigner) == .invalid(.signerNotFound))

        var attached = original
        attached.encapContentInfo = DERWriter.encode { w in
            w.appendConstructed(.sequence) { w in
                w.appendObjectIdentifier(.cmsData)
                w.appendConstructed(.contextSpecific(0, constructed: true)) { $0.appendOctetString(content) }
            }
        }
        #expect(check(attached) == .invalid(.unexpectedContent))
        #expect(try CMSSignedData(berEncoded: attached.der).content == content)

        var sha384 = original
        sha384.digestAlgorithms = DERWriter.encode { $0.appendSetOf(elements: [SignedDataParts.algorithm(.sha384)]) }
        sha384.signers[0][2] = SignedDataParts.algorithm(.sha384)
        #expect(check(sha384) == .invalid(.unsupportedAlgorithm))

        var ecdsaSHA384 = original
        ecdsaSHA384.signers[0][4] = SignedDataParts.algorithm(.ecdsaWithSHA384)
        #expect(check(ecdsaSHA384) == .invalid(.unsupportedAlgorithm))
        var rsaClaimed = original
        rsaClaimed.signers[0][4] = DERWriter.encode { w in
            w.appendConstructed(.sequence) { w in
                w.appendObjectIdentifier(.sha256WithRSAEncryption)
                w.appendNull()
            }
        }
        #expect(check(rsaClaimed) == .invalid(.invalidSignature))

        // Fields no signature covers are still checked (RFC 5652 §5.1).
        var wrongVersion = original
        wrongVersion.version = [0x02, 0x01, 0x03]
        #expect(check(wrongVersion) == .malformed(.invalidValue))
        var unlisted = original
        unlisted.digestAlgorithms = DERWriter.encode { $0.appendSetOf(elements: [SignedDataParts.algorithm(.sha384)]) }
        #expect(check(unlisted) == .malformed(.invalidValue))

        // Signed attributes that are not DER-sorted are malformed (OpenSSL would re-sort them and fail).
        var unsorted = original
        let attributes = try ASN1.parse(unsorted.signers[0][3]).childElements().map { Array($0.encodedBytes) }
        unsorted.signers[0][3] = DERWriter.encode { w in
            w.appendConstructed(.contextSpecific(0, constructed: true)) { w in
                for a in attributes.reversed() { w.appendEncoded(a) }
            }
        }
        #expect(check(unsorted) == .malformed(.invalidValue))
    }

    @Test func cachedChainIsReusedOnlyWhileValid() throws {
        let pki = try TestPKI()
        let clock = ManualClock(now: TestPKI.inside)
        let verifier = try CMSVerifier(trustRoots: [pki.root], policy: .applePaymentTokenSigning, clock: clock)
        let content: [UInt8] = [1]
        let signature = try CMS.signDetached(
            content, signer: pki.leaf, key: pki.leafKey, certificates: [pki.leaf, pki.intermediate],
            signingTime: TestPKI.inside)
        #expect(try verifier.verifyDetachedSignature(signature, content: content, at: .signingTime).isValid)
        #expect(verifier.chainVerifier.cachedChainCount == 1)
        // A second signature by the same chain: a cache hit, still checked cryptographically.
        let second = try CMS.signDetached(
            [2], signer: pki.leaf, key: pki.leafKey, certificates: [pki.leaf, pki.intermediate],
            signingTime: TestPKI.inside + 60)
        #expect(try verifier.verifyDetachedSignature(second, content: [2], at: .signingTime).isValid)
        #expect(
            outcome { try verifier.verifyDetachedSignature(second, content: content, at: .signingTime) }
                == .invalid(.digestMismatch))
        #expect(verifier.chainVerifier.cachedChainCount == 1)
        #expect(
            outcome { try verifier.verifyDetachedSignature(second, content: [2], at: .date(TestPKI.leafEnd + 1)) }
                == .invalid(.certificateExpired))
    }

    // MARK: Malformed input

    @Test func malformedSignaturesThrowTypedErrors() throws {
        let token = try AppleToken.load("gala-2023")
        let verifier = try Self.appleVerifier()
        for length in stride(from: 0, to: token.signature.count, by: 7) {
            let truncated = Array(token.signature[0..<length])
            #expect(throws: X509Error.self) {
                try verifier.verifyDetachedSignature(truncated, content: token.content, at: .signingTime)
            }
        }
        #expect(throws: X509Error.self) { try CMSSignedData(berEncoded: Array(token.signature.dropLast(2))) }
        #expect(throws: X509Error(.trailingData, "")) { try CMSSignedData(berEncoded: token.signature + [0]) }
        #expect(throws: X509Error(.unexpectedElement, "")) {
            try CMSSignedData(berEncoded: TestPKI().root.derRepresentation)
        }
        let random = InsecureDeterministicRandom(seed: [1])
        for _ in 0..<200 {
            let junk = random.bytes(64)
            #expect(throws: X509Error.self) {
                try verifier.verifyDetachedSignature(junk, content: token.content, at: .signingTime)
            }
        }
    }
}

func hexDump(_ bytes: [UInt8], around index: Int) -> String {
    let lo = max(0, index - 12)
    let hi = min(bytes.count, index + 12)
    return bytes[lo..<hi].enumerated().map { (i, b) in (lo + i == index ? "*" : "") + String(format: "%02X", b) }
        .joined(separator: " ")
}
