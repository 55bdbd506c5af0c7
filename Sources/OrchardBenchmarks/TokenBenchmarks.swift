internal import CBenchmarks
internal import COpenSSL
internal import Foundation
internal import MerchantKit
internal import OrchardCrypto
internal import OrchardX509
internal import PaymentToken

/// `orchard bench token`: verify + decrypt of Apple-format tokens through `PaymentTokenDecryptor`, next to the
/// ceiling measured in the same run: the cryptographic operations no verifier can avoid, written in C with
/// OpenSSL. EC_v1: one ECDSA P-256 verify with a parsed key, one ECDH including the import of the 65-byte
/// ephemeral point, SHA-256 of the signed content, the single-step KDF and AES-256-GCM open. RSA_v1: one
/// RSA-2048 PKCS#1 v1.5 verify, one RSA-2048 OAEP decrypt, SHA-256 of the signed content and AES-128-GCM open.
/// Everything else the Swift side does (the CMS walk, the signed attributes, the chain cache, the plaintext's
/// strict parse and field checks) is what the ratio measures.
///
/// With the chain verified every time, the ceiling also does the chain's own unavoidable OpenSSL calls: the
/// intermediate's and the leaf's key imports (the cheapest way OpenSSL 3 offers) and the two certificate
/// signatures (the root's key is imported once: roots are configuration).
///
/// The rejection figures compare a token that must be refused (an unknown chain, a bad signature) with a good token
/// whose chain is cached, both through `PaymentTokenDecryptor` in the same run: a rejection may cost at most 1.5
/// times a good token, a ratio of rates of at least 1/1.5.
public enum TokenBenchmarks {
    /// The share of the ceiling the issue requires, with the chain cached or verified every time.
    public static let requiredRatio = 0.85
    /// A refused token's rate as a share of a good cached token's: costing at most 1.5 times as much.
    public static let rejectionRatio = 1 / 1.5

    public static let suite = BenchmarkSuite(
        name: "token",
        summary:
            "EC_v1 and RSA_v1 verify + decrypt per second, chain cached and not, against the ceiling; refused tokens"
    ) {
        try figures()
    }

    public static func figures() throws -> [BenchmarkFigure] {
        let ec = try Setup(rsa: false)
        let rsa = try Setup(rsa: true)
        return [
            ec.figure(cached: true), ec.figure(cached: false), rsa.figure(cached: true), rsa.figure(cached: false),
        ] + ec.rejectionFigures()
    }

    /// One merchant, one Apple-shaped PKI (P-256 signing leaf for EC_v1, RSA-2048 for RSA_v1, as Apple's
    /// broker certificates are), one token, and the raw ceiling's inputs taken from that token.
    struct Setup: Sendable {
        let name: String
        let token: PaymentToken
        let identity: MerchantIdentity
        let root: Certificate
        let clock: ManualClock
        let ceiling: @Sendable (Int) throws -> Void
        /// The chain's part of the ceiling when the chain is verified every time.
        let chainCeiling: @Sendable (Int) throws -> Void
        /// A token signed by a chain that imitates the trusted one (same names, no key identifiers, its own keys).
        let unknownChainToken: PaymentToken
        /// The good token with one bit of its ECDSA signature changed.
        let badSignatureToken: PaymentToken

        init(rsa: Bool) throws {
            let now = Date()
            let pki = try TokenSigningPKI.generate(notValidBefore: now - 3600, notValidAfter: now + 86_400 * 365)
            let leaf: Certificate
            let leafKey: CertificatePrivateKey
            if rsa {
                leafKey = CertificatePrivateKey(try RSA.PrivateKey(keySize: 2048))
                leaf = try Certificate.issue(
                    subject: DistinguishedName([.commonName("rsa-smp-broker-sign-bench")]),
                    publicKey: leafKey.publicKey,
                    issuer: .certificate(pki.intermediate, key: pki.intermediateKey), notValidBefore: now - 3600,
                    notValidAfter: now + 86_400 * 365,
                    extensions: [.keyUsage([.digitalSignature]), .appleTokenSigningLeafMarker])
            } else {
                leaf = pki.leaf
                leafKey = pki.leafKey
            }
            clock = ManualClock(now: now)
            let merchantIdentifier = "merchant.dev.orchard.bench"
            let processingPEM: String
            let processingKey: CertificatePrivateKey
            let rsaMerchantKey = rsa ? try RSA.PrivateKey(keySize: 2048) : nil
            let ecMerchantKey = try P256.Signing.PrivateKey()
            if let rsaMerchantKey {
                processingKey = CertificatePrivateKey(rsaMerchantKey)
                processingPEM = try rsaMerchantKey.pemRepresentation
            } else {
                processingKey = CertificatePrivateKey(ecMerchantKey)
                processingPEM = try ecMerchantKey.pemRepresentation
            }
            let processing = try Certificate.issue(
                subject: DistinguishedName([.userID(merchantIdentifier)]), publicKey: processingKey.publicKey,
                issuer: .certificate(pki.root, key: pki.rootKey), notValidBefore: now - 3600,
                notValidAfter: now + 86_400 * 365, extensions: [.appleMerchantIdentifier(merchantIdentifier)])
            identity = try MerchantIdentity(certificate: processing, privateKeyPEM: processingPEM)
            root = pki.root
            let payment = try StrictJSONParser.parse(
                Array(
                    """
                    {"applicationPrimaryAccountNumber":"4895370012345671","applicationExpirationDate":"291231",\
                    "currencyCode":"840","transactionAmount":1999,"deviceManufacturerIdentifier":"040010030273",\
                    "paymentDataType":"3DSecure","paymentData":{"onlinePaymentCryptogram":"AgAAAAAABk4DWZ4C28yUQAAAAAA=",\
                    "eciIndicator":"7"}}
                    """.utf8), limits: .paymentToken)
            let signer = try CMSTokenSigner(leaf: leaf, key: leafKey, intermediate: pki.intermediate, clock: clock)
            let recipient = try MerchantProcessingPublicKey(processingCertificate: processing)
            let paymentData = try PaymentTokenEncoder(signer: signer).makePaymentData(
                payment: payment, recipient: recipient)
            token = PaymentToken(paymentData: paymentData, paymentMethod: nil, transactionIdentifier: nil)
            name = rsa ? "RSA_v1" : "EC_v1"

            let forged = try Self.imitation(of: pki, leafSubject: leaf.subject, now: now)
            unknownChainToken = PaymentToken(
                paymentData: try PaymentTokenEncoder(
                    signer: CMSTokenSigner(
                        leaf: forged.leaf, key: forged.leafKey, intermediate: forged.intermediate, clock: clock)
                ).makePaymentData(payment: payment, recipient: recipient), paymentMethod: nil,
                transactionIdentifier: nil)
            var tampered = paymentData
            // The last bit of the signature value (s of the ECDSA-Sig-Value) changed: the CMS stays well formed.
            guard let signatureValue = try CMSSignedData(berEncoded: paymentData.signature).signers.first?.signature,
                let at = Self.lastRange(of: signatureValue, in: paymentData.signature)
            else { throw BenchmarkError(.invalidConfiguration, "the benchmark token's signature value") }
            tampered.signature[at.upperBound - 1] ^= 0x01
            badSignatureToken = PaymentToken(paymentData: tampered, paymentMethod: nil, transactionIdentifier: nil)

            // The ceiling's inputs, from the token itself.
            let cms = try CMSSignedData(berEncoded: paymentData.signature)
            guard let signerInfo = cms.signers.first, var attributes = signerInfo.signedAttributesBytes else {
                throw BenchmarkError(.invalidConfiguration, "the benchmark token has no signed attributes")
            }
            attributes[0] = 0x31  // the signature covers the attributes re-tagged as SET
            let signature = signerInfo.signature
            let signedAttributes = attributes
            let leafPublic = try leaf.publicKey
            let verifyKey: EVPKey = try {
                if let p256 = leafPublic.p256 { return p256.impl.key }
                guard let rsaKey = leafPublic.rsa else { throw BenchmarkError(.invalidConfiguration, "leaf key") }
                return rsaKey.key
            }()
            let verify: @Sendable (Int) throws -> Void = { iterations in
                guard
                    orchard_bench_ecdsa_verify(
                        Fetched.sha256, verifyKey.pointer, signature, signature.count, signedAttributes,
                        signedAttributes.count, iterations) == 1
                else { throw BenchmarkError(.operationFailed, "ceiling signature verification failed") }
            }
            // The chain: import the intermediate's point and the leaf's key, verify both certificate signatures.
            let rootKey = try Self.evpKey(pki.root)
            let template = try Self.evpKey(pki.intermediate)
            let intermediatePoint = pki.intermediate.subjectPublicKeyInfo.publicKey
            let intermediateCert = pki.intermediate
            let leafCert = leaf
            let leafPoint: [UInt8]? = rsa ? nil : leaf.subjectPublicKeyInfo.publicKey
            var modulus: [UInt8] = []
            var exponent: [UInt8] = []
            if rsa, let rsaKey = try leaf.publicKey.rsa {
                let spki = try SubjectPublicKeyInfo(derEncoded: rsaKey.derRepresentation)
                let parts = try ASN1.parse(spki.publicKey).childElements()
                modulus = Array(parts[0].contentBytes.drop { $0 == 0 }.reversed())
                exponent = Array(parts[1].contentBytes.drop { $0 == 0 }.reversed())
            }
            let n = modulus
            let e = exponent
            chainCeiling = { iterations in
                let ok = intermediateCert.signature.withUnsafeBufferPointer { iSig in
                    intermediateCert.tbsCertificateBytes.withUnsafeBufferPointer { iTBS in
                        leafCert.signature.withUnsafeBufferPointer { lSig in
                            leafCert.tbsCertificateBytes.withUnsafeBufferPointer { lTBS in
                                orchard_bench_chain(
                                    rootKey.pointer, template.pointer, intermediatePoint, intermediatePoint.count,
                                    orchard_bench_cert_signature(
                                        tbs: iTBS.baseAddress, tbs_len: iTBS.count, signature: iSig.baseAddress,
                                        signature_len: iSig.count, md: Fetched.sha256),
                                    orchard_bench_cert_signature(
                                        tbs: lTBS.baseAddress, tbs_len: lTBS.count, signature: lSig.baseAddress,
                                        signature_len: lSig.count, md: Fetched.sha256),
                                    leafPoint, leafPoint?.count ?? 0, n, n.count, e, e.count, iterations)
                            }
                        }
                    }
                }
                guard ok == 1 else { throw BenchmarkError(.operationFailed, "ceiling chain verification failed") }
            }

            // SHA-256 of the content, the KDF (EC_v1) and AES-GCM open, from this token's own values.
            let content = paymentData.signedBytes
            let data = paymentData.data
            let symmetric: @Sendable (Int, [UInt8]?, [UInt8], [UInt8]?) throws -> Void = { iterations, z, info, key in
                var plaintext = [UInt8](repeating: 0, count: max(data.count - 16, 1))
                let gcm = key == nil || key?.count == 32 ? Fetched.aes256GCM : Fetched.aes128GCM
                guard
                    orchard_bench_token_symmetric(
                        Fetched.sha256, gcm, content, content.count, z, z?.count ?? 0, info, info.count, key, data,
                        data.count, &plaintext, iterations) == 1
                else { throw BenchmarkError(.operationFailed, "ceiling digest, KDF or AES-GCM open failed") }
            }
            switch paymentData.header.keyMaterial {
            case .ephemeralPublicKey(let spki):
                let point = Array(spki.suffix(65))
                let privateKey = try P256.KeyAgreement.PrivateKey(
                    derRepresentation: ecMerchantKey.derRepresentation.unsafeCopyOfBytes())
                let z = try privateKey.sharedSecretFromKeyAgreement(
                    with: try P256.KeyAgreement.PublicKey(x963Representation: point)
                ).unsafeCopyOfBytes()
                let otherInfo = [0x0D] + Array("id-aes256-GCMApple".utf8) + identity.merchantIdentifierHash
                ceiling = { iterations in
                    try verify(iterations)
                    var out = [UInt8](repeating: 0, count: 32)
                    guard orchard_bench_ecdh_import(privateKey.impl.key.pointer, point, &out, iterations) == 1 else {
                        throw BenchmarkError(.operationFailed, "ceiling ECDH failed")
                    }
                    try symmetric(iterations, z, otherInfo, nil)
                }
            case .wrappedKey(let wrapped):
                guard let rsaMerchantKey else { throw BenchmarkError(.invalidConfiguration, "RSA key") }
                let key = try rsaMerchantKey.decrypt(wrapped, oaepDigest: .sha256, mgf1Digest: .sha256)
                    .unsafeCopyOfBytes()
                ceiling = { iterations in
                    try verify(iterations)
                    var out = [UInt8](repeating: 0, count: 256)
                    var length = out.count
                    guard
                        orchard_bench_rsa_oaep_decrypt(
                            rsaMerchantKey.key.pointer, Fetched.sha256, Fetched.sha256, wrapped, wrapped.count, &out,
                            &length, iterations) == 1
                    else { throw BenchmarkError(.operationFailed, "ceiling RSA-OAEP failed") }
                    try symmetric(iterations, nil, [], key)
                }
            }
        }

        func figure(cached: Bool) -> BenchmarkFigure {
            let decryptor = try? PaymentTokenDecryptor(
                identities: [identity], trustRoots: [root], clock: clock, chainCacheCapacity: cached ? 1024 : 0)
            let token = self.token
            let ceiling = self.ceiling
            let chainCeiling = self.chainCeiling
            return BenchmarkFigure(
                name: "\(name) verify + decrypt (\(cached ? "chain cached" : "chain verified each time"))",
                minimumRatio: TokenBenchmarks.requiredRatio,
                swift: { iterations in
                    guard let decryptor else { throw BenchmarkError(.invalidConfiguration, "no decryptor") }
                    for _ in 0..<iterations { _ = try decryptor.decrypt(token) }
                },
                raw: cached
                    ? ceiling
                    : { iterations in
                        try chainCeiling(iterations)
                        try ceiling(iterations)
                    },
                crossCheck: {
                    guard let decryptor else { throw BenchmarkError(.invalidConfiguration, "no decryptor") }
                    _ = try decryptor.decrypt(token)
                })
        }

        /// Refused tokens against a good token with its chain cached, both through the decryptor: an unknown
        /// chain seen before (the rejection cache) and never seen (nothing cached: the imitation's names lead to
        /// the trusted root, so its intermediate's signature is what refuses it), a bad signature with the chain
        /// cached and with nothing cached.
        func rejectionFigures() -> [BenchmarkFigure] {
            let good = try? PaymentTokenDecryptor(identities: [identity], trustRoots: [root], clock: clock)
            let token = self.token
            let goodSide: @Sendable (Int) throws -> Void = { iterations in
                guard let good else { throw BenchmarkError(.invalidConfiguration, "no decryptor") }
                for _ in 0..<iterations { _ = try good.decrypt(token) }
            }
            let cases: [(String, PaymentToken, MerchantKitError.Code, Bool)] = [
                ("unknown chain, seen before", unknownChainToken, .chainUntrusted, true),
                ("unknown chain, never seen", unknownChainToken, .chainUntrusted, false),
                ("bad signature, chain cached", badSignatureToken, .signatureInvalid, true),
                ("bad signature, chain never seen", badSignatureToken, .signatureInvalid, false),
            ]
            return cases.map { label, refused, code, cached in
                let decryptor = try? PaymentTokenDecryptor(
                    identities: [identity], trustRoots: [root], clock: clock, chainCacheCapacity: cached ? 1024 : 0)
                if cached { _ = try? decryptor?.decrypt(token) }  // the trusted chain is cached
                let refuse: @Sendable () throws -> Void = {
                    guard let decryptor else { throw BenchmarkError(.invalidConfiguration, "no decryptor") }
                    do {
                        _ = try decryptor.decrypt(refused)
                    } catch let error as MerchantKitError where error.code == code {
                        return
                    }
                    throw BenchmarkError(.mismatch, "\(label): the token was not refused as \(code)")
                }
                return BenchmarkFigure(
                    name: "\(name) refused: \(label) (ceiling: a good token, chain cached)",
                    minimumRatio: TokenBenchmarks.rejectionRatio,
                    swift: { iterations in for _ in 0..<iterations { try refuse() } },
                    raw: goodSide,
                    crossCheck: {
                        try refuse()
                        try goodSide(1)
                    })
            }
        }

        /// A chain that copies the trusted one's names and markers with keys of its own and no key identifiers
        /// (so nothing but the signatures tells it apart): what an attacker can make.
        static func imitation(
            of pki: TokenSigningPKI, leafSubject: DistinguishedName, now: Date
        ) throws -> TokenSigningPKI {
            let rootKey = CertificatePrivateKey(try P256.Signing.PrivateKey())
            let root = try Certificate.issue(
                subject: pki.root.subject, publicKey: rootKey.publicKey, issuer: .selfSigned(rootKey),
                notValidBefore: now - 3600, notValidAfter: now + 86_400,
                extensions: [.basicConstraints(isCA: true), .keyUsage([.keyCertSign])], addKeyIdentifiers: false)
            let intermediateKey = CertificatePrivateKey(try P256.Signing.PrivateKey())
            let intermediate = try Certificate.issue(
                subject: pki.intermediate.subject, publicKey: intermediateKey.publicKey,
                issuer: .certificate(root, key: rootKey), notValidBefore: now - 3600, notValidAfter: now + 86_400,
                extensions: [
                    .basicConstraints(isCA: true, pathLength: 0), .keyUsage([.keyCertSign]),
                    .appleApplicationIntegrationCAMarker,
                ], addKeyIdentifiers: false)
            let leafKey = CertificatePrivateKey(try P256.Signing.PrivateKey())
            let leaf = try Certificate.issue(
                subject: leafSubject, publicKey: leafKey.publicKey,
                issuer: .certificate(intermediate, key: intermediateKey), notValidBefore: now - 3600,
                notValidAfter: now + 86_400,
                extensions: [.keyUsage([.digitalSignature]), .appleTokenSigningLeafMarker], addKeyIdentifiers: false)
            return TokenSigningPKI(
                root: root, rootKey: rootKey, intermediate: intermediate, intermediateKey: intermediateKey, leaf: leaf,
                leafKey: leafKey)
        }

        static func lastRange(of needle: [UInt8], in haystack: [UInt8]) -> Range<Int>? {
            guard !needle.isEmpty, needle.count <= haystack.count else { return nil }
            for start in stride(from: haystack.count - needle.count, through: 0, by: -1)
            where haystack[start..<start + needle.count].elementsEqual(needle) {
                return start..<start + needle.count
            }
            return nil
        }

        /// A certificate's P-256 key as the ceiling's OpenSSL object.
        static func evpKey(_ certificate: Certificate) throws -> EVPKey {
            guard let key = try certificate.publicKey.p256 else {
                throw BenchmarkError(.invalidConfiguration, "the benchmark CA keys are P-256")
            }
            return key.impl.key
        }
    }
}
