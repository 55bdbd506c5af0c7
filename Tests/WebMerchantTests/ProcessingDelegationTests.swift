import Foundation
import MerchantServer
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardStore
import OrchardX509
import Testing
import WebMerchantAPI

@testable import PayServer

/// A merchant delegates the decryption of its tokens to a processor through its own portal certificate, as Apple's
/// merchants upload their PSP's CSR: the processor's key gets a processing certificate for that merchant ID, and
/// nothing else can get one.
@Suite("Web merchants: processing certificates for a merchant's processor", .serialized)
struct ProcessingDelegationTests {
    static let demo = WebCommandTests.demo
    static let shop = "merchant.dev.shop"

    @Test(
        "D1: the merchant's portal has the processor's CSR certified; tokens go to it; another merchant, no portal, a bad CSR or name: refused, nothing issued"
    )
    func delegation() async throws {
        let deployment = try await WebCommandTests.Deployment()
        let out = deployment.temporary.path
        // The processor's key and CSR, for the demo merchant's ID (its key stays with the processor).
        #expect(await Capture().run(["merchant", "csr", "--merchant", Self.demo, "--out", out]) == 0)
        let csrPath = deployment.temporary.child("\(Self.demo)-processing.csr")
        let processorKey = try CertificateSigningRequest(
            pemEncoded: try String(contentsOfFile: csrPath, encoding: .utf8)
        ).publicKey
        // A second merchant with a portal certificate of its own.
        #expect(
            await Capture().run([
                "merchant", "csr", "--merchant", Self.shop, "--kind", "identity", "--out", out,
            ]) == 0)
        let (registered, registration) = await deployment.rc([
            "merchant", "register", "--merchant", Self.shop, "--display-name", "Shop", "--identity-csr",
            deployment.temporary.child("\(Self.shop)-identity.csr"), "--out", out,
        ])
        try #require(registered == 0, "\(registration.stderr)")

        let registry = try ServiceRegistry([PayService(), MerchantService()])
        let pay = try await ServiceHost.start(
            [.pay], directory: deployment.directory, registry: registry, publish: true)
        defer { Task { await pay.stop() } }
        let port = try #require(pay.endpoint(of: .pay)?.port)
        let root = try String(contentsOfFile: deployment.path + "/pki/root/root-ca.pem", encoding: .utf8)
        func client(_ merchant: String?) throws -> HTTPClient {
            let identity = try merchant.map {
                try TLSIdentity.load(named: MerchantPortal.fileName(for: $0), from: deployment.directory)
            }
            return try HTTPClient(
                configuration: HTTPClientConfiguration(
                    trustedRootsPEM: root, clientCertificateChainPEM: identity?.certificateChainPEM,
                    clientPrivateKeyPEM: identity?.privateKeyPEM, maxAttempts: 1,
                    connectTo: [WebMerchantAPI.HostNames.pay: port]))
        }
        let csr = try String(contentsOfFile: csrPath, encoding: .utf8)
        func ask(
            _ client: HTTPClient, for merchant: String = Self.demo, csr: String = csr, processor: String = "psp.example"
        ) async throws -> (status: Int, text: String) {
            let request = try HTTPClientRequest.json(
                .post,
                "https://\(WebMerchantAPI.HostNames.pay)"
                    + WebMerchantAPI.Route.processingCertificates(merchant: merchant),
                ProcessingCertificateRequest(certificateSigningRequest: csr, processor: processor))
            let answer = try await client.send(request)
            return (answer.status.code, String(decoding: answer.body, as: UTF8.self))
        }
        let store = try PayStore.open(in: deployment.directory)
        let certificates = MerchantCertificates(store: store, clock: SystemClock())
        let before = try await certificates.list()

        // Refused, and nothing issued: another merchant's portal, no portal certificate, a CSR for another merchant
        // ID, something that is not a CSR, a processor name that is not one.
        let shop = try client(Self.shop)
        let anonymous = try client(nil)
        let demo = try client(Self.demo)
        defer {
            for each in [shop, anonymous, demo] { each.shutdown() }
        }
        let otherMerchant = try await ask(shop)
        #expect(otherMerchant.status == 403 && otherMerchant.text.contains("caller_mismatch"), "\(otherMerchant.text)")
        let noPortal = try await ask(anonymous)
        #expect(noPortal.status == 401 || noPortal.status == 403, "\(noPortal.text)")
        let shopCSR = try String(
            contentsOfFile: deployment.temporary.child("\(Self.shop)-identity.csr"), encoding: .utf8)
        let wrongUID = try await ask(demo, csr: shopCSR)
        #expect(wrongUID.status == 400 && wrongUID.text.contains("subject UID"), "\(wrongUID.text)")
        let notCSR = try await ask(
            demo, csr: "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n")
        #expect(notCSR.status == 400 && notCSR.text.contains("certificateSigningRequest"), "\(notCSR.text)")
        for name in ["", "PSP", "-psp", "psp example", String(repeating: "p", count: 65)] {
            let badName = try await ask(demo, processor: name)
            #expect(badName.status == 400 && badName.text.contains("processor"), "\(name): \(badName.text)")
        }
        #expect(try await certificates.list() == before)

        // The merchant's own portal: the command writes the chain and prints the record.
        let chainPath = deployment.temporary.child("psp-chain.pem")
        let (issued, output) = await deployment.rc([
            "merchant", "processing-certificate", "--merchant", Self.demo, "--csr", csrPath, "--processor",
            "psp.example", "--out", chainPath,
        ])
        try #require(issued == 0, "\(output.stderr)")
        struct Printed: Decodable {
            let merchantIdentifier: String
            let serial: String
            let processor: String
            let certificateChain: String
        }
        let printed = try JSONDecoder().decode(Printed.self, from: Data(output.stdout.utf8))
        #expect(printed.merchantIdentifier == Self.demo && printed.processor == "psp.example")
        #expect(printed.certificateChain == chainPath)
        let chain = try Certificate.certificates(fromPEM: try String(contentsOfFile: chainPath, encoding: .utf8))
        #expect(chain.count == 2)
        #expect(chain[0].subjectPublicKeyInfo.derRepresentation == processorKey.derRepresentation)
        #expect(chain[0].subject.userID == Self.demo && chain[0].issuer == chain[1].subject)
        #expect(Hex.encode(chain[0].serialNumber) == printed.serial)

        // Recorded with its processor; the merchant's own certificates have none.
        let after = try await certificates.list(merchantIdentifier: Self.demo)
        let delegated = try #require(after.first { $0.serial == printed.serial })
        #expect(delegated.kind == "processing" && delegated.processor == "psp.example" && delegated.revokedAt == nil)
        #expect(after.filter { $0.serial != printed.serial }.allSatisfy { $0.processor == nil })
        let listed = await deployment.run(["merchant", "certs", "--merchant", Self.demo])
        #expect(
            listed.stdout.contains(#""processor" : "psp.example""#)
                || listed.stdout.contains(#""processor":"psp.example""#))

        // New tokens for the merchant are encrypted to the processor's key (the certificate that expires last);
        // revoked, they go back to the merchant's own.
        func chosen() async throws -> Certificate? {
            try await store.read { db in
                try MerchantCertificates.processingCertificate(for: Self.demo, at: Date(), in: db)
            }
        }
        #expect(try await chosen()?.serialNumber == chain[0].serialNumber)
        try await certificates.revoke(serial: printed.serial)
        let fallback = try #require(try await chosen())
        #expect(fallback.serialNumber != chain[0].serialNumber && fallback.subject.userID == Self.demo)
        await store.close()
    }
}
