import Foundation
import MerchantServer
import OrchardCLI
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardX509
import PayServer
import Testing
import WebMerchantAPI

/// Runs the command line in this process and keeps what it printed.
final class Capture: @unchecked Sendable {
    private let lock = NSLock()
    private var out = ""
    private var err = ""
    var stdout: String { lock.withLock { out } }
    var stderr: String { lock.withLock { err } }

    func run(_ arguments: [String]) async -> Int32 {
        await CommandRunner.run(
            arguments, environment: ["HOME": "/tmp/orchard-home"], isInteractive: false,
            stdout: { text in self.lock.withLock { self.out += text } },
            stderr: { text in self.lock.withLock { self.err += text } })
    }
}

/// `orchard init` and the web merchant commands end to end: the sandbox host names, the demo site validated at
/// init, association files and domains through the Pay server's routes.
@Suite("Web merchants: init, host names and commands", .serialized)
struct WebCommandTests {
    static let demo = "merchant.dev.orchard.demo"

    /// A deployment `init` made in a fresh directory.
    struct Deployment {
        let temporary: TemporaryDirectory
        let path: String
        /// What `init` printed.
        let summary: String
        var directory: DeploymentDirectory { DeploymentDirectory(path: path) }

        init() async throws {
            temporary = try TemporaryDirectory()
            path = temporary.child("deployment")
            let initialize = Capture()
            let rc = await initialize.run(["init", "--data-dir", path])
            try #require(rc == 0, "\(initialize.stderr)")
            summary = initialize.stdout
        }

        func run(_ arguments: [String]) async -> Capture {
            let capture = Capture()
            _ = await capture.run(arguments + ["--data-dir", path])
            return capture
        }

        func rc(_ arguments: [String]) async -> (Int32, Capture) {
            let capture = Capture()
            let rc = await capture.run(arguments + ["--data-dir", path])
            return (rc, capture)
        }
    }

    @Test("init maps the three host names to their ports and puts them in the services' TLS certificates")
    func hostNames() async throws {
        let deployment = try await Deployment()
        let registry = try ServiceRegistry([PayService(), MerchantService()])
        let configuration = try registry.loadConfiguration(from: deployment.directory, environment: [:])
        let payPort = configuration[ServiceSettings.port(.pay)]
        #expect(
            configuration.hostNames == [
                WebMerchantAPI.HostNames.gateway: payPort, WebMerchantAPI.HostNames.pay: payPort,
                WebMerchantAPI.HostNames.store: configuration[MerchantService.sitePort],
            ])
        let config = try String(contentsOfFile: deployment.path + "/config.json", encoding: .utf8)
        #expect(config.contains("\"names\""))
        let pay = try DeploymentPKI.readCertificate(named: PKIFiles.tlsServer(.pay), from: deployment.directory)
        #expect(
            try pay.subjectAlternativeNames?.dnsNames
                == ["localhost", WebMerchantAPI.HostNames.gateway, WebMerchantAPI.HostNames.pay])
        let merchant = try DeploymentPKI.readCertificate(
            named: PKIFiles.tlsServer(.merchant), from: deployment.directory)
        #expect(try merchant.subjectAlternativeNames?.dnsNames == ["localhost", WebMerchantAPI.HostNames.store])
        // ORCHARD_NAMES_<HOST> overrides a mapping.
        let overridden = try registry.loadConfiguration(
            from: deployment.directory, environment: ["ORCHARD_NAMES_STORE_ORCHARD_TEST": "8999"])
        #expect(overridden.hostNames[WebMerchantAPI.HostNames.store] == 8999)
        #expect(throws: ServicesError.self) {
            _ = try registry.loadConfiguration(
                from: deployment.directory, environment: ["ORCHARD_NAMES_STORE_ORCHARD_TEST": "70000"])
        }

        // A client maps the name to the port (CURLOPT_CONNECT_TO): the URL keeps the name, TLS checks it.
        let connections = try await ServiceConnections.connect(
            [.pay], directory: deployment.directory, registry: registry)
        let root = try deployment.directory.readCertificate(named: PKIFiles.rootCA)
        let port = try #require(connections.endpoints[.pay]?.port)
        let client = try HTTPClient(
            configuration: HTTPClientConfiguration(
                trustedRootsPEM: root, maxAttempts: 1,
                connectTo: [
                    WebMerchantAPI.HostNames.gateway: port, WebMerchantAPI.HostNames.pay: port,
                    WebMerchantAPI.HostNames.store: port,
                ]))
        #expect(try await client.get("https://pay.orchard.test/health").status == .ok)
        // The gateway's name reaches the same listener and its certificate names it; /health is not a gateway
        // route, so the virtual host answers 421 (an HTTP answer: the name was mapped and TLS accepted it).
        #expect(try await client.get("https://apple-pay-gateway.orchard.test:443/health").status.code == 421)
        // The Pay server's certificate does not name store.orchard.test: refused even though it connects.
        await #expect(throws: HTTPError.self) { _ = try await client.get("https://store.orchard.test/health") }
        // A name outside the map is not mapped (and .test names resolve nowhere).
        await #expect(throws: HTTPError.self) { _ = try await client.get("https://other.orchard.test/health") }
        client.shutdown()
        await connections.close()
        #expect(throws: HTTPError.self) {
            _ = try HTTPClient(configuration: HTTPClientConfiguration(connectTo: ["bad:name": 443]))
        }
        #expect(throws: HTTPError.self) {
            _ = try HTTPClient(configuration: HTTPClientConfiguration(connectTo: ["pay.orchard.test": 0]))
        }
    }

    @Test("init validates store.orchard.test for the demo merchant with an RSA identity certificate")
    func initValidatesTheDemoSite() async throws {
        let deployment = try await Deployment()
        #expect(deployment.summary.contains("\"demoSite\" : \"https://store.orchard.test\""))
        let list = await deployment.run(["merchant", "domain", "list", "--merchant", Self.demo])
        let records = try JSONDecoder().decode([DomainRecord].self, from: Data(list.stdout.utf8))
        #expect(records.map(\.domain) == [WebMerchantAPI.HostNames.store] && records.first?.status == "verified")
        let identity = try DeploymentPKI.readCertificate(
            named: MerchantService.Files.identity, from: deployment.directory)
        #expect(try identity.publicKey.rsa?.keySizeInBits == 2048)
        #expect(identity.subject.commonName == "Apple Pay Merchant Identity:\(Self.demo)")
        // The file the site hosts is one the Pay server issued for the demo merchant.
        let hosted = try Data(
            contentsOf: URL(
                fileURLWithPath: deployment.path + "/merchant-site/apple-developer-merchantid-domain-association"))
        let hostedFile = try DomainAssociationFile(fileContents: Array(hosted))
        #expect(hostedFile.pspId == AssociationFiles.merchantHash(Self.demo))
    }

    @Test("W2: association-file, domain add/verify --explain/list/remove; a broken site names what is broken")
    func commands() async throws {
        let deployment = try await Deployment()
        // A new association file.
        let file = deployment.temporary.child("association")
        let (written, output) = await deployment.rc(
            ["merchant", "association-file", "--merchant", Self.demo, "--out", file])
        #expect(written == 0, "\(output.stderr)")
        let parsed = try DomainAssociationFile(fileContents: Array(try Data(contentsOf: URL(fileURLWithPath: file))))
        #expect(parsed.pspId == AssociationFiles.merchantHash(Self.demo))
        #expect(output.stdout.contains(parsed.pspId))

        // The demo site served by the merchant service (started here): verify --explain passes every check.
        let registry = try ServiceRegistry([PayService(), MerchantService()])
        // On its configured ports: the names map store.orchard.test to the configured site port.
        let merchant = try await ServiceHost.start(
            [.merchant], directory: deployment.directory, registry: registry, publish: false)
        let (verified, explained) = await deployment.rc(
            ["merchant", "domain", "verify", "--merchant", Self.demo, "--domain", "store.orchard.test", "--explain"])
        #expect(verified == 0, "\(explained.stderr)")
        let lines = explained.stdout.split(separator: "\n")
        #expect(
            lines.count == DomainCheck.Name.allCases.count + 1 && lines.dropLast().allSatisfy { $0.hasPrefix("pass") })
        // The last line: the state, the last and the next check.
        #expect(lines.last?.hasPrefix("state   verified") == true && lines.last?.contains("next check 20") == true)

        // Another merchant claims store.orchard.test: the site hosts the demo merchant's file.
        let csr = Capture()
        #expect(
            await csr.run([
                "merchant", "csr", "--merchant", "merchant.dev.shop", "--kind", "identity", "--out",
                deployment.temporary.path,
            ]) == 0)
        let (registered, registration) = await deployment.rc([
            "merchant", "register", "--merchant", "merchant.dev.shop", "--display-name", "Shop", "--identity-csr",
            deployment.temporary.child("merchant.dev.shop-identity.csr"), "--out", deployment.temporary.path,
        ])
        #expect(registered == 0, "\(registration.stderr)")
        let (added, _) = await deployment.rc(
            ["merchant", "domain", "add", "--merchant", "merchant.dev.shop", "--domain", "store.orchard.test"])
        #expect(added == 0)
        let (broken, report) = await deployment.rc([
            "merchant", "domain", "verify", "--merchant", "merchant.dev.shop", "--domain", "store.orchard.test",
            "--explain",
        ])
        #expect(broken == 1)
        #expect(report.stdout.contains("fail    merchant"))
        #expect(
            report.stdout.contains("state   failed") && report.stdout.contains("next check none; failure merchant:"))
        #expect(report.stderr.hasPrefix("error: store.orchard.test did not validate: merchant: the file was issued"))

        // Without --explain: the JSON report, and the same failure.
        let (json, plain) = await deployment.rc(
            ["merchant", "domain", "verify", "--merchant", "merchant.dev.shop", "--domain", "store.orchard.test"])
        #expect(json == 1)
        let decoded = try JSONDecoder().decode(DomainVerificationReport.self, from: Data(plain.stdout.utf8))
        #expect(!decoded.verified && decoded.record.status == "failed" && decoded.record.checkedAt != nil)
        let listed = await deployment.run(["merchant", "domain", "list", "--merchant", "merchant.dev.shop"])
        let failed = try JSONDecoder().decode([DomainRecord].self, from: Data(listed.stdout.utf8))
        #expect(failed.first?.status == "failed" && failed.first?.failure?.hasPrefix("merchant: ") == true)
        #expect(failed.first?.checkedAt != nil && failed.first?.nextCheckAt == nil)

        // The Pay server's own names map to its port: never fetched from, whoever registers them.
        _ = await deployment.run([
            "merchant", "domain", "add", "--merchant", "merchant.dev.shop", "--domain", "pay.orchard.test",
        ])
        let (service, refusal) = await deployment.rc([
            "merchant", "domain", "verify", "--merchant", "merchant.dev.shop", "--domain", "pay.orchard.test",
            "--explain",
        ])
        #expect(service == 1 && refusal.stdout.contains("fail    name mapping"), "\(refusal.stdout)")
        #expect(refusal.stderr.contains("an Orchard service's port"))
        _ = await deployment.run([
            "merchant", "domain", "remove", "--merchant", "merchant.dev.shop", "--domain", "pay.orchard.test",
        ])
        await merchant.stop()

        // A P-256 identity CSR is refused at registration.
        let out = deployment.temporary.path
        _ = await Capture().run(["merchant", "csr", "--merchant", "merchant.dev.ec", "--out", out])
        let (ecIdentity, ecRefusal) = await deployment.rc([
            "merchant", "register", "--merchant", "merchant.dev.ec", "--display-name", "EC", "--identity-csr",
            deployment.temporary.child("merchant.dev.ec-processing.csr"), "--out", deployment.temporary.path,
        ])
        #expect(ecIdentity == 1, "\(ecRefusal.stderr)")
        #expect(ecRefusal.stderr.contains("identity certificates are RSA-2048"))

        // A merchant without an identity certificate: validation is refused before anything is fetched.
        _ = await deployment.run(["merchant", "register", "--merchant", "merchant.dev.noid", "--display-name", "N"])
        _ = await deployment.run(["merchant", "domain", "add", "--merchant", "merchant.dev.noid", "--domain", "a.test"])
        let (noIdentity, refused) = await deployment.rc(
            ["merchant", "domain", "verify", "--merchant", "merchant.dev.noid", "--domain", "a.test", "--explain"])
        #expect(noIdentity == 1 && refused.stdout.hasPrefix("fail    identity certificate"))

        // A merchant's portal certificate acts for that merchant only: the demo merchant's cannot read or change
        // merchant.dev.shop's domains (403 caller_mismatch), while its own routes answer.
        let connections = try await ServiceConnections.connect(
            [.pay], directory: deployment.directory, registry: registry)
        let demoPortal = try TLSIdentity.load(
            named: MerchantPortal.fileName(for: Self.demo), from: deployment.directory)
        let portalPort = try #require(connections.endpoints[.pay]?.port)
        let client = try HTTPClient(
            configuration: HTTPClientConfiguration(
                trustedRootsPEM: connections.rootCertificatePEM,
                clientCertificateChainPEM: demoPortal.certificateChainPEM,
                clientPrivateKeyPEM: demoPortal.privateKeyPEM, maxAttempts: 1,
                connectTo: [WebMerchantAPI.HostNames.pay: portalPort]))
        let base = "https://" + WebMerchantAPI.HostNames.pay
        let foreign = try await client.get(base + WebMerchantAPI.Route.domains(merchant: "merchant.dev.shop"))
        #expect(
            foreign.status == .forbidden && String(decoding: foreign.body, as: UTF8.self).contains("caller_mismatch"))
        let foreignFile = try await client.send(
            HTTPClientRequest(
                method: .post, url: base + WebMerchantAPI.Route.associationFile(merchant: "merchant.dev.shop")))
        #expect(foreignFile.status == .forbidden)
        #expect(try await client.get(base + WebMerchantAPI.Route.domains(merchant: Self.demo)).status == .ok)
        client.shutdown()
        await connections.close()

        // Remove; then verifying or removing again is refused with one error line.
        let (removed, left) = await deployment.rc(
            ["merchant", "domain", "remove", "--merchant", "merchant.dev.shop", "--domain", "store.orchard.test"])
        #expect(removed == 0 && left.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "[\n\n]")
        let (again, error) = await deployment.rc(
            ["merchant", "domain", "remove", "--merchant", "merchant.dev.shop", "--domain", "store.orchard.test"])
        #expect(again == 1 && error.stderr.hasPrefix("error: store.orchard.test is not registered"))
        let (bad, badDomain) = await deployment.rc(
            ["merchant", "domain", "add", "--merchant", "merchant.dev.shop", "--domain", "https://x.test/"])
        #expect(bad == 1 && badDomain.stderr.contains("is not a domain"))
    }
}
