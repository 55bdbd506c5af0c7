import Foundation
import OrchardCrypto
import OrchardHTTP
import OrchardLogging
import OrchardRuntime
import OrchardServices
import OrchardStore
import OrchardX509
import PayServer
import PaymentToken
import Testing
import WebMerchantAPI

/// A merchant's site on loopback for the validator: its own TLS certificate from a test root for `host`, and what
/// it answers at each path.
final class TestSite: Sendable {
    let server: HTTPServer

    /// `pages` maps a path to its status, headers and body; anything else is 404.
    init(
        certificate: Certificate, key: P256.Signing.PrivateKey, port: Int = 0, legacyTLS11Only: Bool = false,
        pages: [String: (HTTPStatus, HTTPHeaders, String)]
    ) throws {
        var router = Router()
        for (path, page) in pages {
            router.add(.get, path) { _ in HTTPResponse(status: page.0, headers: page.1, body: Data(page.2.utf8)) }
        }
        var tls = TLSServerConfiguration(
            certificateChainPEM: certificate.pemRepresentation,
            privateKeyPEM: SecureBytes(Array(try key.pemRepresentation.utf8)))
        tls.legacyTLS11Only = legacyTLS11Only
        server = try HTTPServer(
            configuration: HTTPServerConfiguration(
                listeners: [HTTPServerConfiguration.Listener(port: port, tls: tls)], threads: 1),
            router: router, logger: Logger(label: "test-site", level: .error, sink: NullLogSink()))
        try server.start()
    }

    var port: Int { server.port }
    func stop() async { await server.shutdown() }
}

/// The Pay server's side of domain validation with a real site on loopback: a Pay store with the merchant and
/// (unless asked otherwise) its identity certificate, the token-signing chain, a test root that issues the
/// site's certificates, and a validator that maps `host` to the site's port.
struct DomainFixture {
    static let merchant = "merchant.dev.web.shop"
    static let host = "shop.web.test"

    let temporary: TemporaryDirectory
    let store: Store
    let root: CertificateAuthority
    let files: AssociationFiles
    let clock: ManualClock
    let registry: MerchantRegistry

    init(identityCertificate: Bool = true) async throws {
        temporary = try TemporaryDirectory()
        clock = ManualClock(now: Date())
        root = try CertificateAuthority.create(
            subject: DistinguishedName([.commonName("Web Test Root")]), issuer: nil, lifetime: 10 * 365 * 86_400,
            clock: SystemClock(), random: SystemRandom())
        let now = Date()
        let pki = try TokenSigningPKI.generate(
            notValidBefore: now.addingTimeInterval(-86_400), notValidAfter: now.addingTimeInterval(10 * 365 * 86_400)
        ).issuingLeaf(for: .domainAssociationFile, notValidBefore: now.addingTimeInterval(-86_400))
        files = try AssociationFiles(tokenSigning: pki, clock: SystemClock())
        store = try PayStore.open(in: DeploymentDirectory(path: temporary.path))
        registry = MerchantRegistry(store: store, authority: root, clock: clock, random: SystemRandom())
        try await registry.registerMerchant(identifier: Self.merchant, displayName: "Web Shop")
        try await registry.registerMerchant(identifier: "merchant.dev.other", displayName: "Other")
        if identityCertificate { try await issueIdentityCertificate() }
    }

    func issueIdentityCertificate() async throws {
        let request = try CertificateSigningRequest.create(
            subject: DistinguishedName([.userID(Self.merchant)]),
            key: CertificatePrivateKey(try RSA.PrivateKey(keySize: 2048)))
        _ = try await registry.issueMerchantIdentityCertificate(for: request, merchantIdentifier: Self.merchant)
    }

    /// The Pay server's domains, validating against `port` for ``host``.
    func domains(port: Int) -> WebDomains {
        let validator = DomainValidator(
            hostNames: [Self.host: port], trustedRootsPEM: root.certificate.pemRepresentation, files: files,
            timeout: .seconds(5))
        return WebDomains(store: store, validator: validator, files: files, clock: clock)
    }

    /// A site certificate for ``host`` valid from `notBefore` to `notAfter` (real time: the TLS check uses it).
    func siteCertificate(
        notBefore: Date = Date().addingTimeInterval(-3600), notAfter: Date = Date().addingTimeInterval(90 * 86_400),
        host: String = DomainFixture.host
    ) throws -> (Certificate, P256.Signing.PrivateKey) {
        let key = try P256.Signing.PrivateKey()
        let certificate = try Certificate.issue(
            subject: DistinguishedName([.commonName(host)]), publicKey: CertificatePublicKey(key.publicKey),
            issuer: root.issuer, notValidBefore: notBefore, notValidAfter: notAfter,
            extensions: [
                .basicConstraints(isCA: false), .keyUsage([.digitalSignature]), .extendedKeyUsage([.serverAuth]),
                try .subjectAlternativeNames(dnsNames: [host]),
            ])
        return (certificate, key)
    }

    /// A site serving `file` at the well-known path (or `pages` instead), with a fresh certificate.
    func site(
        file: String? = nil, pages: [String: (HTTPStatus, HTTPHeaders, String)]? = nil, legacyTLS11Only: Bool = false,
        certificate: (Certificate, P256.Signing.PrivateKey)? = nil, port: Int = 0
    ) throws -> TestSite {
        let (cert, key) = try certificate ?? siteCertificate()
        let served = pages ?? [WebMerchantAPI.associationFilePath: (.ok, ["Content-Type": "text/plain"], file ?? "")]
        return try TestSite(certificate: cert, key: key, port: port, legacyTLS11Only: legacyTLS11Only, pages: served)
    }

    func associationFile(for merchant: String = DomainFixture.merchant) throws -> String {
        try files.issue(merchantIdentifier: merchant, at: Date()).fileContents
    }

    /// Registers ``host`` and validates it against `site`; returns the report.
    func verify(_ site: TestSite) async throws -> DomainVerificationReport {
        let domains = domains(port: site.port)
        _ = try await domains.add(Self.host, merchantIdentifier: Self.merchant)
        return try await domains.verify(Self.host, merchantIdentifier: Self.merchant)
    }

    func close() async { await store.close() }
}

/// Domain validation at the Pay server (docs/web.md): every refusal names the check that failed.
@Suite("Web merchants: domain validation", .serialized)
struct DomainValidationTests {
    /// The check that failed, and that everything before it passed and everything after was skipped.
    static func failedCheck(_ report: DomainVerificationReport) -> DomainCheck.Name? {
        guard let index = report.checks.firstIndex(where: { $0.result == "fail" }) else { return nil }
        #expect(report.checks[..<index].allSatisfy { $0.result == "pass" })
        #expect(report.checks[(index + 1)...].allSatisfy { $0.result == "skipped" })
        #expect(!report.verified)
        #expect(report.record.failure?.hasPrefix(report.checks[index].name.rawValue + ":") == true)
        return report.checks[index].name
    }

    @Test("A site serving the merchant's file validates; every check passes; expiry is the site certificate's")
    func validates() async throws {
        let fixture = try await DomainFixture()
        let (certificate, key) = try fixture.siteCertificate()
        let site = try fixture.site(file: try fixture.associationFile(), certificate: (certificate, key))
        let report = try await fixture.verify(site)
        await site.stop()
        #expect(report.verified, "\(report.checks)")
        #expect(report.checks.map(\.name) == DomainCheck.Name.allCases)
        #expect(report.checks.allSatisfy { $0.result == "pass" })
        #expect(report.record.status == "verified" && report.record.failure == nil)
        let expires = ISO8601DateFormatter().string(from: certificate.notValidAfter)
        #expect(report.record.expiresAt == expires)
        #expect(report.checks.first { $0.name == .tlsVersion }?.detail.hasPrefix("TLSv1.") == true)
        await fixture.close()
    }

    @Test("W2: Validation before the merchant's identity certificate exists is refused")
    func beforeIdentityCertificate() async throws {
        let fixture = try await DomainFixture(identityCertificate: false)
        let site = try fixture.site(file: try fixture.associationFile())
        let report = try await fixture.verify(site)
        #expect(Self.failedCheck(report) == .identityCertificate)
        #expect(report.record.status == "failed")
        // Once issued, the same site validates.
        try await fixture.issueIdentityCertificate()
        let again = try await fixture.domains(port: site.port).verify(
            DomainFixture.host, merchantIdentifier: DomainFixture.merchant)
        #expect(again.verified)
        await site.stop()
        await fixture.close()
    }

    @Test("W2: A redirect is refused, even to a valid file")
    func redirect() async throws {
        let fixture = try await DomainFixture()
        let target = "https://www.\(DomainFixture.host)\(WebMerchantAPI.associationFilePath)"
        let moved = HTTPStatus(code: 301, reason: "Moved Permanently")
        let site = try fixture.site(pages: [WebMerchantAPI.associationFilePath: (moved, ["Location": target], "")])
        let report = try await fixture.verify(site)
        await site.stop()
        #expect(Self.failedCheck(report) == .redirect)
        #expect(report.checks.first { $0.name == .redirect }?.detail.contains(target) == true)
        await fixture.close()
    }

    @Test("W2: A status other than 200 is refused")
    func non200() async throws {
        let fixture = try await DomainFixture()
        for status in [HTTPStatus.forbidden, .internalServerError, .notFound] {
            let site = try fixture.site(pages: [
                WebMerchantAPI.associationFilePath: (status, [:], try fixture.associationFile())
            ])
            let report = try await fixture.verify(site)
            await site.stop()
            #expect(Self.failedCheck(report) == .status)
            #expect(report.checks.first { $0.name == .status }?.detail.hasPrefix("\(status.code)") == true)
        }
        await fixture.close()
    }

    @Test("W2: Only a .txt file at the well-known path is refused, and named")
    func onlyTextFile() async throws {
        let fixture = try await DomainFixture()
        let site = try fixture.site(pages: [
            WebMerchantAPI.associationFilePath + ".txt": (.ok, [:], try fixture.associationFile())
        ])
        let report = try await fixture.verify(site)
        await site.stop()
        #expect(Self.failedCheck(report) == .file)
        #expect(report.checks.first { $0.name == .file }?.detail.contains(".txt") == true)
        await fixture.close()
    }

    @Test("W2: Another merchant's file is refused, naming both merchant hashes")
    func otherMerchantsFile() async throws {
        let fixture = try await DomainFixture()
        let site = try fixture.site(file: try fixture.associationFile(for: "merchant.dev.other"))
        let report = try await fixture.verify(site)
        await site.stop()
        #expect(Self.failedCheck(report) == .merchant)
        let detail = report.checks.first { $0.name == .merchant }?.detail ?? ""
        #expect(detail.contains(AssociationFiles.merchantHash("merchant.dev.other")))
        #expect(detail.contains(AssociationFiles.merchantHash(DomainFixture.merchant)))
        await fixture.close()
    }

    @Test("W2: A forged file (another signer) and an altered file (changed createdOn) are refused")
    func forgedFile() async throws {
        let fixture = try await DomainFixture()
        let forger = try await DomainFixture()
        let forged = try forger.associationFile()
        await forger.close()
        let genuine = try DomainAssociationFile(fileContents: Array(try fixture.associationFile().utf8))
        let altered = DomainAssociationFile(
            pspId: genuine.pspId, createdOn: genuine.createdOn + 60_000, signature: genuine.signature)
        for file in [forged, altered.fileContents] {
            let site = try fixture.site(file: file)
            let report = try await fixture.verify(site)
            await site.stop()
            #expect(Self.failedCheck(report) == .signature)
        }
        // A web page where the file should be.
        let page = try fixture.site(file: "<html><body>Welcome</body></html>")
        #expect(Self.failedCheck(try await fixture.verify(page)) == .file)
        await page.stop()
        await fixture.close()
    }

    @Test("W2: An expired site certificate is refused at the chain check")
    func expiredSiteCertificate() async throws {
        let fixture = try await DomainFixture()
        let expired = try fixture.siteCertificate(
            notBefore: Date().addingTimeInterval(-10 * 86_400), notAfter: Date().addingTimeInterval(-86_400))
        let site = try fixture.site(file: try fixture.associationFile(), certificate: expired)
        let report = try await fixture.verify(site)
        await site.stop()
        #expect(Self.failedCheck(report) == .chain)
        #expect(report.checks.first { $0.name == .chain }?.detail.contains("expired") == true)
        // A certificate for another name is refused at the chain check too.
        let otherName = try fixture.siteCertificate(host: "elsewhere.web.test")
        let wrong = try fixture.site(file: try fixture.associationFile(), certificate: otherName)
        #expect(Self.failedCheck(try await fixture.verify(wrong)) == .chain)
        await wrong.stop()
        await fixture.close()
    }

    @Test("W2: A site that offers only TLS 1.1 is refused at the TLS version check")
    func tls11Site() async throws {
        let fixture = try await DomainFixture()
        let site = try fixture.site(file: try fixture.associationFile(), legacyTLS11Only: true)
        let report = try await fixture.verify(site)
        await site.stop()
        #expect(Self.failedCheck(report) == .tlsVersion, "\(report.checks)")
        await fixture.close()
    }

    @Test("W1: A name the deployment does not serve, a site not listening, an unregistered domain: refused")
    func unmappedAndUnregistered() async throws {
        let fixture = try await DomainFixture()
        let domains = fixture.domains(port: 1)
        _ = try await domains.add("elsewhere.web.test", merchantIdentifier: DomainFixture.merchant)
        let unmapped = try await domains.verify("elsewhere.web.test", merchantIdentifier: DomainFixture.merchant)
        #expect(Self.failedCheck(unmapped) == .nameMapping)
        // Port 1 on loopback: nothing listens.
        _ = try await domains.add(DomainFixture.host, merchantIdentifier: DomainFixture.merchant)
        let closed = try await domains.verify(DomainFixture.host, merchantIdentifier: DomainFixture.merchant)
        #expect(Self.failedCheck(closed) == .connect)
        // Not registered for this merchant, or no domain at all.
        await #expect(throws: PayServerError.self) {
            _ = try await domains.verify(DomainFixture.host, merchantIdentifier: "merchant.dev.other")
        }
        for bad in ["https://shop.web.test", "shop.web.test:443", "shop", "shop..test", "-shop.test"] {
            await #expect(throws: PayServerError.self) {
                _ = try await domains.add(bad, merchantIdentifier: DomainFixture.merchant)
            }
        }
        await #expect(throws: PayServerError.self) {
            _ = try await domains.add("shop.web.test", merchantIdentifier: "merchant.dev.unknown")
        }
        // Removed: gone from the list; removing again is refused.
        try await domains.remove(DomainFixture.host, merchantIdentifier: DomainFixture.merchant)
        let left = try await domains.list(merchantIdentifier: DomainFixture.merchant)
        #expect(left.map(\.domain) == ["elsewhere.web.test"])
        await #expect(throws: PayServerError.self) {
            try await domains.remove(DomainFixture.host, merchantIdentifier: DomainFixture.merchant)
        }
        await fixture.close()
    }

    @Test("W2: Validation lapses with the site certificate; re-checks 30, 15 and 7 days before; a renewal extends it")
    func lapseAndRechecks() async throws {
        let fixture = try await DomainFixture()
        let notAfter = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 40 * 86_400).rounded(.down))
        let file = try fixture.associationFile()
        let first = try fixture.siteCertificate(notAfter: notAfter)
        var site = try fixture.site(file: file, certificate: first)
        let port = site.port
        let domains = fixture.domains(port: port)
        _ = try await domains.add(DomainFixture.host, merchantIdentifier: DomainFixture.merchant)
        let report = try await domains.verify(DomainFixture.host, merchantIdentifier: DomainFixture.merchant)
        #expect(report.verified)
        let iso = ISO8601DateFormatter()
        func at(_ daysBefore: Double) -> Date { notAfter.addingTimeInterval(-daysBefore * 86_400) }
        #expect(report.record.nextCheckAt == iso.string(from: at(30)))

        // Nothing is due before 30 days out.
        fixture.clock.setWall(at(31))
        #expect(try await domains.recheckDue().isEmpty)
        // 30 days before: checked again (same certificate), next at 15, then 7.
        fixture.clock.setWall(at(29))
        var rechecked = try await domains.recheckDue()
        #expect(rechecked.count == 1 && rechecked[0].verified)
        #expect(rechecked[0].record.nextCheckAt == iso.string(from: at(15)))
        #expect(try await domains.recheckDue().isEmpty)
        fixture.clock.setWall(at(14))
        rechecked = try await domains.recheckDue()
        #expect(rechecked.first?.record.nextCheckAt == iso.string(from: at(7)))

        // Past the expiry: lapsed, with no further check scheduled.
        fixture.clock.setWall(notAfter.addingTimeInterval(1))
        let lapsed = try await domains.list(merchantIdentifier: DomainFixture.merchant)
        #expect(lapsed.first?.status == "lapsed")

        // Renewed before the last check: the 7-day check extends the validation to the new certificate.
        await site.stop()
        let renewedNotAfter = notAfter.addingTimeInterval(365 * 86_400)
        let renewed = try fixture.siteCertificate(notAfter: renewedNotAfter)
        site = try fixture.site(file: file, certificate: renewed, port: port)
        fixture.clock.setWall(at(6))
        rechecked = try await domains.recheckDue()
        #expect(rechecked.count == 1 && rechecked[0].verified)
        #expect(rechecked[0].record.expiresAt == iso.string(from: renewed.0.notValidAfter))
        fixture.clock.setWall(notAfter.addingTimeInterval(1))
        #expect(try await domains.list(merchantIdentifier: DomainFixture.merchant).first?.status == "verified")
        await site.stop()
        await fixture.close()
    }
}
