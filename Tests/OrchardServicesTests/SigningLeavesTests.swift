import Foundation
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardX509
import PayServer
import PaymentToken
import Testing
import WebMerchantAPI

/// The Pay server's signing leaves on disk: one per kind, written by `orchard init`, issued at start for a
/// deployment made before them.
@Suite("The Pay server's signing leaves")
struct SigningLeavesTests {
    let temporary: TemporaryDirectory
    static let merchant = "merchant.dev.orchard.demo"
    init() throws { temporary = try TemporaryDirectory() }

    /// Every leaf is its kind's alone, under the token integration CA, with a key of its own.
    static func checkLeaves(in directory: DeploymentDirectory, at time: Date = Date()) throws -> SigningLeaves {
        let (leaves, issued) = try SigningLeaves.load(from: directory, clock: SystemClock(), random: SystemRandom())
        #expect(issued.isEmpty, "init left leaves to issue: \(issued)")
        let token = try PayService.loadTokenSigningPKI(from: directory)
        for kind in SigningLeafKind.allCases {
            let chain = leaves[kind]
            #expect(chain.kind == kind)
            #expect(chain.root == token.root && chain.intermediate == token.intermediate)
            let verifier = try CertificateChainVerifier(trustRoots: [token.root], policy: .signingLeaf(kind))
            #expect(verifier.verify(leaf: chain.leaf, intermediates: [chain.intermediate], at: time).isValid)
            #expect(
                try DeploymentPKI.readCertificate(named: SigningLeaves.fileName(kind), from: directory) == chain.leaf)
        }
        #expect(leaves.paymentToken.leaf == token.leaf)
        #expect(Set(SigningLeafKind.allCases.map { leaves[$0].leaf.subjectPublicKeyInfo.derRepresentation }).count == 4)
        return leaves
    }

    /// In one directory, `InitTests` checks the same (`tokenSigningChainHasApplesMarkersAndSignsTokensTheMerchantDecrypts`).
    @Test("Each kind's leaf is written by init --party pay, under the token root")
    func initWritesOneLeafPerKind() async throws {
        let directory = DeploymentDirectory(path: temporary.child("pay"))
        _ = try await DeploymentInitializer.initialize(
            directory, registry: try ServiceRegistry([PayService()]), options: .init(party: .pay))
        #expect(try Self.checkLeaves(in: directory).legacyAssociationFileSigner == nil)
    }

    @Test("A deployment made with one shared leaf: the Pay server issues the missing leaves at start, once")
    func startIssuesTheLeavesAnOlderDeploymentLacks() async throws {
        let directory = DeploymentDirectory(path: temporary.child("deployment"))
        let registry = try ServiceRegistry([PayService()])
        _ = try await DeploymentInitializer.initialize(directory, registry: registry)
        let tokenLeaf = try DeploymentPKI.readCertificate(named: PayService.Files.tokenSigning, from: directory)
        // The file a merchant serves, signed as before by the one shared leaf.
        let shared = try AssociationFiles(
            tokenSigning: try PayService.loadTokenSigningPKI(from: directory), clock: SystemClock())
        let servedFile = try shared.issue(merchantIdentifier: Self.merchant, at: Date())
        // As a deployment made before one leaf per kind: only token-signing under the integration CA.
        for kind in SigningLeafKind.allCases where kind != .paymentToken {
            for path in [
                try directory.certificatePath(named: SigningLeaves.fileName(kind)),
                try directory.privateKeyPath(named: SigningLeaves.fileName(kind)),
            ] {
                try FileManager.default.removeItem(atPath: path)
            }
        }

        // Upgraded a day later.
        let upgrade = Date().addingTimeInterval(86_400)
        let host = try await ServiceHost.start(
            [.pay], directory: directory, registry: registry,
            environment: ServiceEnvironment(wallClock: ManualClock(now: upgrade)), publish: false, anyPort: true)
        let leaves = try Self.checkLeaves(in: directory, at: upgrade)
        #expect(leaves.paymentToken.leaf == tokenLeaf)
        try directory.checkPermissions()
        // What the started server signs is the new capability-statement leaf's.
        let port = try #require(host.endpoint(of: .pay)?.port)
        let client = try HTTPClient(
            configuration: HTTPClientConfiguration(
                trustedRootsPEM: try directory.readCertificate(named: PKIFiles.rootCA), maxAttempts: 1,
                connectTo: [WebMerchantAPI.HostNames.pay: port]))
        defer { client.shutdown() }
        let answer = try await client.send(
            try HTTPClientRequest.json(
                .post, "https://" + WebMerchantAPI.HostNames.pay + WebMerchantAPI.Capability.path,
                CapabilityRequest(merchantIdentifier: Self.merchant, domain: "store.orchard.test")))
        #expect(answer.status == .ok, "\(String(decoding: answer.body, as: UTF8.self))")
        let statement = try CapabilityStatement(json: Array(answer.body))
        let verifier = try CapabilityStatements.verifier(root: leaves.paymentToken.root, clock: SystemClock())
        guard
            case .valid(let signer, _, _) = try verifier.verifyDetachedSignature(
                statement.signature, content: statement.signedContent, at: .signingTime)
        else {
            Issue.record("the statement does not verify as a capability statement")
            await host.stop()
            return
        }
        #expect(signer == leaves.capabilityStatement.leaf)
        await host.stop()

        // The file served since before stays valid (the leaf that signed it, created before the upgrade) and says
        // so; the shared leaf's signature on a file created after the upgrade is refused, naming the marker.
        let files = try AssociationFiles(
            tokenSigning: leaves.domainAssociationFile, legacy: leaves.legacyAssociationFileSigner,
            clock: SystemClock())
        #expect(files.problem(with: servedFile, merchantIdentifier: Self.merchant) == nil && files.isLegacy(servedFile))
        let late = try shared.issue(merchantIdentifier: Self.merchant, at: upgrade.addingTimeInterval(3600))
        guard case .signature(let reason) = files.problem(with: late, merchantIdentifier: Self.merchant) else {
            Issue.record("a file the shared leaf signed after the upgrade was accepted")
            return
        }
        #expect(reason.contains(SigningLeafKind.domainAssociationFile.marker.description), "\(reason)")
        let fresh = try files.issue(merchantIdentifier: Self.merchant, at: upgrade)
        #expect(files.problem(with: fresh, merchantIdentifier: Self.merchant) == nil && !files.isLegacy(fresh))

        // Started again: nothing more to issue, the same leaves.
        let again = try SigningLeaves.load(from: directory, clock: SystemClock(), random: SystemRandom())
        #expect(again.issued.isEmpty)
        #expect(again.leaves.merchantSession.leaf == leaves.merchantSession.leaf)
    }
}
