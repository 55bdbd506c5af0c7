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
public enum TokenBenchmarks {
    /// The share of the ceiling the issue requires with the chain cached.
    public static let requiredRatio = 0.85

    public static let suite = BenchmarkSuite(
        name: "token",
        summary: "EC_v1 and RSA_v1 verify + decrypt per second, chain cached and not, against the ceiling"
    ) {
        try figures()
    }

    public static func figures() throws -> [BenchmarkFigure] {
        let ec = try Setup(rsa: false)
        let rsa = try Setup(rsa: true)
        return [
            ec.figure(cached: true), ec.figure(cached: false), rsa.figure(cached: true), rsa.figure(cached: false),
        ]
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
            let paymentData = try PaymentTokenEncoder(signer: signer).makePaymentData(
                payment: payment, recipient: try MerchantProcessingPublicKey(processingCertificate: processing))
            token = PaymentToken(paymentData: paymentData, paymentMethod: nil, transactionIdentifier: nil)
            name = rsa ? "RSA_v1" : "EC_v1"

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
            return BenchmarkFigure(
                name: "\(name) verify + decrypt (\(cached ? "chain cached" : "chain verified each time"))",
                minimumRatio: cached ? TokenBenchmarks.requiredRatio : nil,
                swift: { iterations in
                    guard let decryptor else { throw BenchmarkError(.invalidConfiguration, "no decryptor") }
                    for _ in 0..<iterations { _ = try decryptor.decrypt(token) }
                },
                raw: ceiling,
                crossCheck: {
                    guard let decryptor else { throw BenchmarkError(.invalidConfiguration, "no decryptor") }
                    _ = try decryptor.decrypt(token)
                })
        }
    }
}
