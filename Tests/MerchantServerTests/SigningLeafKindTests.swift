import Foundation
import MerchantKit
import OrchardCrypto
import OrchardHTTP
import OrchardX509
import PayClient
import PayServer
import PaymentToken
import Testing
import WebMerchantAPI

/// One token root and integration CA with a leaf of every kind, as `orchard init` writes them, and every verifier
/// of each kind: the merchant's token check (MerchantKit), the device's and the Pay server's session checks, the
/// Pay server's association-file check, the device's and the Pay server's capability-statement checks.
@Suite("One signing leaf per kind")
struct SigningLeafKindTests {
    static let now = Date(timeIntervalSince1970: 1_780_000_000)
    static let merchant = "merchant.dev.orchard.leaves"
    static let domain = "shop.leaves.test"

    /// The four chains (made once: the parameterized cases share them).
    static let chains = Result { () throws -> [SigningLeafKind: TokenSigningPKI] in
        let token = try TokenSigningPKI.generate(
            notValidBefore: now.addingTimeInterval(-86_400), notValidAfter: now.addingTimeInterval(86_400 * 365))
        var chains: [SigningLeafKind: TokenSigningPKI] = [.paymentToken: token]
        for kind in SigningLeafKind.allCases where kind != .paymentToken {
            chains[kind] = try token.issuingLeaf(for: kind, notValidBefore: now.addingTimeInterval(-86_400))
        }
        return chains
    }

    /// What each verifier of `kind` says of an object of that kind signed by `signer`'s leaf: nil for accepted.
    static func verdicts(of kind: SigningLeafKind, signedBy signer: TokenSigningPKI) throws -> [String?] {
        let clock = ManualClock(now: now)
        let root = signer.root
        switch kind {
        case .paymentToken:
            let recipient = try P256.KeyAgreement.PrivateKey()
            let paymentData = try PaymentTokenEncoder(signer: try signer.signer(clock: clock)).makePaymentData(
                payment: try StrictJSONParser.parse(Array(#"{"transactionAmount":1}"#.utf8), limits: .paymentToken),
                recipient: .ec(recipient.publicKey, merchantIdentifierHash: SHA256.hash(Array(merchant.utf8))))
            let verifier = try PaymentTokenVerifier(trustRoots: [root], clock: clock)
            switch verifier.verifySignature(
                PaymentToken(paymentData: paymentData, paymentMethod: nil, transactionIdentifier: nil))
            {
            case .success: return [nil]
            case .failure(let error):
                #expect(error.code == .markerMissing, "\(error)")
                return [error.message]
            }
        case .merchantSession:
            let session = try MerchantSessions.sign(
                merchant: merchant, domain: domain, displayName: "Leaves", at: now, random: SystemRandom(),
                tokenSigning: signer)
            let device = try MerchantSessionCheck(tokenRoot: root, clock: clock)
            let server = try MerchantSessions.verifier(root: root, clock: clock)
            return [
                device.problem(with: session, domain: domain),
                MerchantSessions.problem(with: session, verifier: server, now: now),
            ]
        case .domainAssociationFile:
            let file = try AssociationFiles(tokenSigning: signer, clock: clock).issue(
                merchantIdentifier: merchant, at: now)
            let checker = try AssociationFiles(tokenSigning: try chains.get()[.domainAssociationFile]!, clock: clock)
            switch checker.problem(with: file, merchantIdentifier: merchant) {
            case nil: return [nil]
            case .signature(let reason): return [reason]
            case .otherMerchant(let pspId): return ["issued for \(pspId)"]
            }
        case .capabilityStatement:
            let issuedAt = Int64(now.timeIntervalSince1970 * 1000)
            let hash = AssociationFiles.merchantHash(merchant)
            let unsigned = CapabilityStatement(
                domain: domain, merchantIdentifier: hash, issuedAt: issuedAt, validated: true, signature: [])
            let statement = CapabilityStatement(
                domain: domain, merchantIdentifier: hash, issuedAt: issuedAt, validated: true,
                signature: try CMS.signDetached(
                    unsigned.signedContent, signer: signer.leaf, key: signer.leafKey,
                    certificates: [signer.leaf, signer.intermediate],
                    signingTime: Date(timeIntervalSince1970: Double(issuedAt / 1000)), encoding: .berIndefiniteLength,
                    includeAlgorithmProtection: true))
            let client = try HTTPClient(configuration: HTTPClientConfiguration(maxAttempts: 1))
            defer { client.shutdown() }
            let device = try WebCapabilityCheck(
                client: client, baseURL: "https://" + WebMerchantAPI.HostNames.pay, tokenRoot: root, clock: clock)
            let server = try CapabilityStatements.verifier(root: root, clock: clock)
            return [
                device.problem(with: statement, merchantIdentifier: merchant, domain: domain),
                CapabilityStatements.problem(with: statement, verifier: server, now: now),
            ]
        }
    }

    @Test(
        "Each verifier accepts its own kind's leaf and refuses the other three kinds', naming the marker they lack",
        arguments: SigningLeafKind.allCases, SigningLeafKind.allCases)
    func eachVerifierAcceptsOnlyItsKind(verifying kind: SigningLeafKind, signer: SigningLeafKind) throws {
        let chains = try Self.chains.get()
        let verdicts = try Self.verdicts(of: kind, signedBy: try #require(chains[signer]))
        if kind == signer {
            #expect(verdicts.allSatisfy { $0 == nil }, "\(verdicts)")
        } else {
            for verdict in verdicts {
                #expect(
                    verdict?.contains(kind.marker.description) == true, "\(kind) ← \(signer): \(verdict ?? "accepted")")
            }
        }
    }

    @Test("OpenSSL's CMS_verify accepts every kind's leaf: each marker is non-critical, the Orchard arc 128 bits wide")
    func openSSLAcceptsEveryKind() throws {
        let content = Array("signed content".utf8)
        for (kind, chain) in try Self.chains.get() {
            #expect(SigningLeafKind.kinds(of: chain.leaf) == [kind] && chain.kind == kind)
            #expect(chain.leaf.extension(kind.marker) == Certificate.Extension(oid: kind.marker, value: [0x05, 0x00]))
            let signature = try CMS.signDetached(
                content, signer: chain.leaf, key: chain.leafKey, certificates: [chain.leaf, chain.intermediate],
                signingTime: Self.now, encoding: .berIndefiniteLength, includeAlgorithmProtection: true)
            #expect(
                OpenSSLReference.cmsVerifyDetached(
                    signature: signature, content: content, roots: [chain.root], at: Self.now), "\(kind)")
        }
    }

    @Test("A leaf that carries two kinds' markers is refused by both kinds' verifiers")
    func aLeafOfTwoKindsIsRefused() throws {
        let token = try #require(try Self.chains.get()[.paymentToken])
        let key = CertificatePrivateKey(try P256.Signing.PrivateKey())
        let both = try Certificate.issue(
            subject: DistinguishedName([.commonName("two-kinds")]), publicKey: key.publicKey,
            issuer: .certificate(token.intermediate, key: token.intermediateKey),
            notValidBefore: Self.now.addingTimeInterval(-60), notValidAfter: Self.now.addingTimeInterval(3600),
            extensions: [
                .basicConstraints(isCA: false), .keyUsage([.digitalSignature]),
                SigningLeafKind.paymentToken.markerExtension,
                SigningLeafKind.merchantSession.markerExtension,
            ])
        let chain = TokenSigningPKI(
            root: token.root, rootKey: token.rootKey, intermediate: token.intermediate,
            intermediateKey: token.intermediateKey, leaf: both, leafKey: key)
        #expect(chain.kind == nil)
        for kind in [SigningLeafKind.paymentToken, .merchantSession] {
            for verdict in try Self.verdicts(of: kind, signedBy: chain) {
                #expect(verdict?.contains("a signing leaf signs one kind") == true, "\(kind): \(verdict ?? "accepted")")
            }
        }
    }
}
