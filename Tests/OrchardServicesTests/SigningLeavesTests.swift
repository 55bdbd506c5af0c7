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
    init() throws { temporary = try TemporaryDirectory() }

    /// Every leaf is its kind's alone, under the token integration CA, with a key of its own.
    static func checkLeaves(in directory: DeploymentDirectory) throws -> SigningLeaves {
        let (leaves, issued) = try SigningLeaves.load(from: directory, clock: SystemClock(), random: SystemRandom())
        #expect(issued.isEmpty, "init left leaves to issue: \(issued)")
        let token = try PayService.loadTokenSigningPKI(from: directory)
        for kind in SigningLeafKind.allCases {
            let chain = leaves[kind]
            #expect(chain.kind == kind)
            #expect(chain.root == token.root && chain.intermediate == token.intermediate)
            let verifier = try CertificateChainVerifier(trustRoots: [token.root], policy: .signingLeaf(kind))
            #expect(verifier.verify(leaf: chain.leaf, intermediates: [chain.intermediate], at: Date()).isValid)
            #expect(
                try DeploymentPKI.readCertificate(named: SigningLeaves.fileName(kind), from: directory) == chain.leaf)
        }
        #expect(leaves.paymentToken.leaf == token.leaf)
        #expect(Set(SigningLeafKind.allCases.map { leaves[$0].leaf.subjectPublicKeyInfo.derRepresentation }).count == 4)
        return leaves
    }

    @Test("Each kind's leaf is written at init, in one directory and with --party pay, under the token root")
    func initWritesOneLeafPerKind() async throws {
        for (name, party) in [("all", DeploymentParty?.none), ("pay", .pay)] {
            let directory = DeploymentDirectory(path: temporary.child(name))
            _ = try await DeploymentInitializer.initialize(
                directory, registry: try ServiceRegistry([PayService()]), options: .init(party: party))
            _ = try Self.checkLeaves(in: directory)
        }
    }

    @Test("A deployment made with one shared leaf: the Pay server issues the missing leaves at start, once")
    func startIssuesTheLeavesAnOlderDeploymentLacks() async throws {
        let directory = DeploymentDirectory(path: temporary.child("deployment"))
        let registry = try ServiceRegistry([PayService()])
        _ = try await DeploymentInitializer.initialize(directory, registry: registry)
        let tokenLeaf = try DeploymentPKI.readCertificate(named: PayService.Files.tokenSigning, from: directory)
        // As a deployment made before one leaf per kind: only token-signing under the integration CA.
        for kind in SigningLeafKind.allCases where kind != .paymentToken {
            for path in [
                try directory.certificatePath(named: SigningLeaves.fileName(kind)),
                try directory.privateKeyPath(named: SigningLeaves.fileName(kind)),
            ] {
                try FileManager.default.removeItem(atPath: path)
            }
        }

        let host = try await ServiceHost.start(
            [.pay], directory: directory, registry: registry, publish: false, anyPort: true)
        let leaves = try Self.checkLeaves(in: directory)
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
                CapabilityRequest(merchantIdentifier: "merchant.dev.orchard.demo", domain: "store.orchard.test")))
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

        // Started again: nothing more to issue, the same leaves.
        let again = try SigningLeaves.load(from: directory, clock: SystemClock(), random: SystemRandom())
        #expect(again.issued.isEmpty)
        #expect(again.leaves.merchantSession.leaf == leaves.merchantSession.leaf)
    }
}
