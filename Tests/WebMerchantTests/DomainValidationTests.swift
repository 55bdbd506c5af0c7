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
import Synchronization
import Testing
import WebMerchantAPI

/// A merchant's site on loopback for the validator: its own TLS certificate from a test root for `host`, and what
/// it answers at each path.
final class TestSite: Sendable {
    let server: HTTPServer
    private let answered = Tally()

    /// `pages` maps a path to its status, headers and body; anything else is 404.
    init(
        certificate: Certificate, key: P256.Signing.PrivateKey, port: Int = 0, legacyTLS11Only: Bool = false,
        pages: [String: (HTTPStatus, HTTPHeaders, String)]
    ) throws {
        var router = Router()
        let answered = self.answered
        for (path, page) in pages {
            router.add(.get, path) { _ in
                answered.add()
                return HTTPResponse(status: page.0, headers: page.1, body: Data(page.2.utf8))
            }
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
    /// Requests answered at the pages given.
    var requests: Int { answered.count }
    func stop() async { await server.shutdown() }
}

/// A count shared with request handlers.
final class Tally: Sendable {
    private let value = Mutex(0)
    func add() { value.withLock { $0 += 1 } }
    var count: Int { value.withLock { $0 } }
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
    let pki: TokenSigningPKI
    /// The merchant's identity certificate (DER), when the fixture issued one.
    let identity: [UInt8]?

    init(identityCertificate: Bool = true) async throws {
        temporary = try TemporaryDirectory()
        clock = ManualClock(now: Date())
        root = try CertificateAuthority.create(
            subject: DistinguishedName([.commonName("Web Test Root")]), issuer: nil, lifetime: 10 * 365 * 86_400,
            clock: SystemClock(), random: SystemRandom())
        let now = Date()
        pki = try TokenSigningPKI.generate(
            notValidBefore: now.addingTimeInterval(-86_400), notValidAfter: now.addingTimeInterval(10 * 365 * 86_400)
        ).issuingLeaf(for: .domainAssociationFile, notValidBefore: now.addingTimeInterval(-86_400))
        files = try AssociationFiles(tokenSigning: pki, clock: SystemClock())
        store = try PayStore.open(in: DeploymentDirectory(path: temporary.path))
        registry = MerchantRegistry(store: store, authority: root, clock: clock, random: SystemRandom())
        try await registry.registerMerchant(identifier: Self.merchant, displayName: "Web Shop")
        try await registry.registerMerchant(identifier: "merchant.dev.other", displayName: "Other")
        identity = identityCertificate ? try await Self.issueIdentityCertificate(registry) : nil
    }

    func issueIdentityCertificate() async throws {
        _ = try await Self.issueIdentityCertificate(registry)
    }

    static func issueIdentityCertificate(_ registry: MerchantRegistry) async throws -> [UInt8] {
        let request = try CertificateSigningRequest.create(
            subject: DistinguishedName([.userID(Self.merchant)]),
            key: CertificatePrivateKey(try RSA.PrivateKey(keySize: 2048)))
        return try await registry.issueMerchantIdentityCertificate(for: request, merchantIdentifier: Self.merchant)[0]
            .derRepresentation
    }

    /// The Pay server's domains, validating against `port` for ``host``; `servicePorts` are the Orchard services'.
    func domains(
        port: Int, timeout: Duration = .seconds(5), servicePorts: Set<Int> = []
    ) -> WebDomains {
        let validator = DomainValidator(
            hostNames: [Self.host: port], trustedRootsPEM: root.certificate.pemRepresentation, files: files,
            timeout: timeout, servicePorts: { servicePorts })
        return WebDomains(store: store, validator: validator, files: files, clock: clock)
    }

    /// The gateway's merchant sessions on this store.
    func sessions() throws -> MerchantSessions {
        try MerchantSessions(store: store, tokenSigning: pki, clock: clock, random: SystemRandom())
    }

    /// Asks the gateway for a session for ``host`` with the merchant's identity certificate: nil when one is
    /// issued, else the refusal's reason.
    func sessionRefusal(_ sessions: MerchantSessions) async throws -> MerchantSessions.Refusal? {
        let outcome = try await sessions.session(
            body: SessionFixture.body(merchant: Self.merchant, context: Self.host), contentType: "application/json",
            certificateDER: identity, legacy: false)
        guard case .failure(let refusal) = outcome else { return nil }
        return refusal
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

    @Test("W2: a validated domain is checked daily and at its site certificate's expiry; a renewal extends it")
    func dailyAndExpiryChecks() async throws {
        let fixture = try await DomainFixture()
        let notAfter = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 40 * 86_400).rounded(.down))
        let file = try fixture.associationFile()
        var site = try fixture.site(file: file, certificate: try fixture.siteCertificate(notAfter: notAfter))
        let port = site.port
        let domains = fixture.domains(port: port)
        _ = try await domains.add(DomainFixture.host, merchantIdentifier: DomainFixture.merchant)
        let report = try await domains.verify(DomainFixture.host, merchantIdentifier: DomainFixture.merchant)
        let iso = ISO8601DateFormatter()
        let start = fixture.clock.now()
        #expect(report.verified && report.record.checkedAt == iso.string(from: start))
        #expect(report.record.nextCheckAt == iso.string(from: start.addingTimeInterval(86_400)))

        // Nothing is due within the day; at a day, checked again and scheduled a day later.
        fixture.clock.advance(by: 86_399)
        #expect(try await domains.recheckDue().isEmpty)
        fixture.clock.advance(by: 1)
        var rechecked = try await domains.recheckDue()
        #expect(rechecked.count == 1 && rechecked.first?.verified == true)
        #expect(rechecked.first?.record.nextCheckAt == iso.string(from: start.addingTimeInterval(2 * 86_400)))
        #expect(try await domains.recheckDue().isEmpty)

        // Less than a day before the site certificate expires: the next check is at the expiry.
        fixture.clock.setWall(notAfter.addingTimeInterval(-43_200))
        rechecked = try await domains.recheckDue()
        #expect(rechecked.first?.record.nextCheckAt == iso.string(from: notAfter))
        // Past the expiry, before that check: lapsed.
        fixture.clock.setWall(notAfter.addingTimeInterval(1))
        #expect(try await domains.list(merchantIdentifier: DomainFixture.merchant).first?.status == "lapsed")

        // Renewed: the check at the expiry moves the validation to the new certificate.
        await site.stop()
        let renewed = try fixture.siteCertificate(notAfter: notAfter.addingTimeInterval(365 * 86_400))
        site = try fixture.site(file: file, certificate: renewed, port: port)
        rechecked = try await domains.recheckDue()
        #expect(rechecked.count == 1 && rechecked.first?.verified == true)
        #expect(rechecked.first?.record.expiresAt == iso.string(from: renewed.0.notValidAfter))
        #expect(try await domains.list(merchantIdentifier: DomainFixture.merchant).first?.status == "verified")
        await site.stop()
        await fixture.close()
    }

    @Test("W2: a file that disappears, changes or is forged: no session after the next daily check; verify restores")
    func brokenAtTheDailyCheck() async throws {
        let fixture = try await DomainFixture()
        let file = try fixture.associationFile()
        let good = try fixture.siteCertificate()
        var site = try fixture.site(file: file, certificate: good)
        let port = site.port
        let domains = fixture.domains(port: port)
        let sessions = try fixture.sessions()
        _ = try await domains.add(DomainFixture.host, merchantIdentifier: DomainFixture.merchant)
        let forger = try await DomainFixture()
        let forged = try forger.associationFile()
        await forger.close()
        let expired = try fixture.siteCertificate(
            notBefore: Date().addingTimeInterval(-10 * 86_400), notAfter: Date().addingTimeInterval(-86_400))
        // Each way a site breaks, with the check it fails.
        let broken: [(String, DomainCheck.Name, () throws -> TestSite)] = [
            ("the file removed (404)", .status, { try fixture.site(pages: [:], certificate: good, port: port) }),
            (
                "another merchant's file", .merchant,
                {
                    try fixture.site(
                        file: try fixture.associationFile(for: "merchant.dev.other"), certificate: good, port: port)
                }
            ),
            ("a forged file", .signature, { try fixture.site(file: forged, certificate: good, port: port) }),
            ("an expired site certificate", .chain, { try fixture.site(file: file, certificate: expired, port: port) }),
        ]
        for (name, check, breaking) in broken {
            #expect(try await domains.verify(DomainFixture.host, merchantIdentifier: DomainFixture.merchant).verified)
            #expect(try await fixture.sessionRefusal(sessions) == nil, "\(name)")
            await site.stop()
            site = try breaking()
            // Until the daily check the domain is still validated; at it, failed at once: no retry.
            fixture.clock.advance(by: 86_399)
            #expect(try await domains.recheckDue().isEmpty)
            #expect(try await fixture.sessionRefusal(sessions) == nil, "\(name)")
            fixture.clock.advance(by: 1)
            let rechecked = try await domains.recheckDue()
            #expect(rechecked.count == 1 && rechecked.first.flatMap(Self.failedCheck) == check, "\(name)")
            let record = try #require(rechecked.first?.record)
            #expect(record.status == "failed" && record.nextCheckAt == nil && record.retriesLeft == nil, "\(name)")
            #expect(record.checkedAt == ISO8601DateFormatter().string(from: fixture.clock.now()))
            let refusal = try await fixture.sessionRefusal(sessions)
            #expect(refusal?.reason == .domainFailed, "\(name)")
            #expect(refusal?.error.statusMessage.contains("failed its last check (\(check.rawValue))") == true)
            // No further check is scheduled for a failed domain.
            fixture.clock.advance(by: 2 * 86_400)
            #expect(try await domains.recheckDue().isEmpty)
            await site.stop()
            site = try fixture.site(file: file, certificate: good, port: port)
        }
        // `domain verify` against the repaired site validates it again: sessions again.
        let again = try await domains.verify(DomainFixture.host, merchantIdentifier: DomainFixture.merchant)
        #expect(again.verified && again.record.status == "verified" && again.record.failure == nil)
        #expect(try await fixture.sessionRefusal(sessions) == nil)
        await site.stop()
        await fixture.close()
    }

    @Test("W2: a site that does not answer is tried 3 more times within the hour, still validated, then fails")
    func unreachableIsRetried() async throws {
        let fixture = try await DomainFixture()
        let site = try fixture.site(file: try fixture.associationFile())
        let domains = fixture.domains(port: site.port)
        let sessions = try fixture.sessions()
        _ = try await domains.add(DomainFixture.host, merchantIdentifier: DomainFixture.merchant)
        #expect(try await domains.verify(DomainFixture.host, merchantIdentifier: DomainFixture.merchant).verified)
        // A listener that never answers: the TCP connection is made, the TLS handshake never is.
        let silent = try SilentListener()
        let down = fixture.domains(port: silent.port, timeout: .milliseconds(200))
        let firstFailure = fixture.clock.now().addingTimeInterval(86_400)
        fixture.clock.setWall(firstFailure)
        let iso = ISO8601DateFormatter()
        func expectRetrying(_ left: Int) async throws {
            let reports = try await down.recheckDue()
            #expect(reports.count == 1 && reports.first.flatMap(Self.failedCheck) == .connect)
            let record = try #require(reports.first?.record)
            #expect(record.status == "retrying" && record.retriesLeft == left, "\(record)")
            #expect(record.failure?.hasPrefix("connect: no answer from \(DomainFixture.host) in time") == true)
            #expect(record.nextCheckAt == iso.string(from: fixture.clock.now().addingTimeInterval(900)))
            // Still validated while it is retried.
            #expect(try await fixture.sessionRefusal(sessions) == nil)
        }
        try await expectRetrying(3)
        fixture.clock.advance(by: 899)
        #expect(try await down.recheckDue().isEmpty)
        fixture.clock.advance(by: 1)
        // The site is back for one try: validated again, the count starts over.
        let back = try await domains.recheckDue()
        #expect(back.count == 1 && back.first?.verified == true && back.first?.record.status == "verified")
        fixture.clock.setWall(firstFailure.addingTimeInterval(2 * 86_400))
        try await expectRetrying(3)
        for left in [2, 1] {
            fixture.clock.advance(by: 900)
            try await expectRetrying(left)
        }
        // The third retry, 45 minutes after the first failure: failed.
        fixture.clock.advance(by: 900)
        let failed = try await down.recheckDue()
        #expect(failed.count == 1 && failed.first?.record.status == "failed" && failed.first?.record.nextCheckAt == nil)
        #expect(try await fixture.sessionRefusal(sessions)?.reason == .domainFailed)
        // A domain that is not validated is not retried: an unreachable site fails it at once.
        let unvalidated = try await down.verify(DomainFixture.host, merchantIdentifier: DomainFixture.merchant)
        #expect(unvalidated.record.status == "failed" && unvalidated.record.nextCheckAt == nil)
        silent.stop()
        await site.stop()
        await fixture.close()
    }

    @Test("W2: the fetch: never an Orchard service's port, at most an association file's size")
    func fetchRule() async throws {
        let fixture = try await DomainFixture()
        let site = try fixture.site(file: try fixture.associationFile())
        _ = try await fixture.domains(port: site.port).add(
            DomainFixture.host, merchantIdentifier: DomainFixture.merchant)
        // The name maps to a port an Orchard service listens on: refused before anything is sent.
        let service = fixture.domains(port: site.port, servicePorts: [site.port])
        let refused = try await service.verify(DomainFixture.host, merchantIdentifier: DomainFixture.merchant)
        #expect(Self.failedCheck(refused) == .nameMapping)
        #expect(refused.record.failure?.contains("an Orchard service's port") == true)
        #expect(site.requests == 0)
        // Elsewhere the same site validates.
        #expect(try await fixture.verify(site).verified && site.requests == 1)
        await site.stop()
        // An answer larger than an association file is not read further, and is no retry.
        let large = String(repeating: "A", count: DomainAssociationFile.maximumFileBytes + 2)
        let huge = try fixture.site(file: large)
        let report = try await fixture.verify(huge)
        #expect(Self.failedCheck(report) == .status && report.record.status == "failed")
        #expect(report.record.failure?.contains("larger than \(DomainAssociationFile.maximumFileBytes) bytes") == true)
        await huge.stop()
        await fixture.close()
    }

    @Test("W2: a domain validated before the check state keeps its validation and is checked within a day")
    func migration() async throws {
        let temporary = try TemporaryDirectory()
        let path = temporary.path + "/pay.sqlite"
        let now = Date()
        do {
            let old = try Store(
                path: path, options: PayStore.options, migrations: Array(PayStore.migrations.prefix(13)))
            try await old.write { db in
                _ = try db.execute(
                    "INSERT INTO merchants (identifier, display_name, created_at) VALUES ('merchant.dev.m', 'M', 0)")
                for (domain, expires, failure) in [
                    ("ok.test", Optional(now.addingTimeInterval(30 * 86_400)), String?.none),
                    ("broken.test", nil, Optional("status: 404")), ("new.test", nil, nil),
                ] {
                    _ = try db.execute(
                        """
                        INSERT INTO merchant_domains (merchant_identifier, domain, registered_at, verified_at,
                        expires_at, checked_at, failure) VALUES ('merchant.dev.m', ?, 0, ?, ?, ?, ?)
                        """,
                        [
                            .text(domain), expires == nil ? .null : .milliseconds(now),
                            expires.map { .milliseconds($0) } ?? .null,
                            expires == nil && failure == nil ? .null : .milliseconds(now),
                            failure.map { .text($0) } ?? .null,
                        ])
                }
            }
            await old.close()
        }
        let store = try Store(path: path, options: PayStore.options, migrations: PayStore.migrations)
        let pki = try TokenSigningPKI.generate(
            notValidBefore: now.addingTimeInterval(-86_400), notValidAfter: now.addingTimeInterval(86_400))
        let files = try AssociationFiles(tokenSigning: pki, clock: SystemClock())
        let validator = DomainValidator(hostNames: [:], trustedRootsPEM: "", files: files)
        let domains = WebDomains(store: store, validator: validator, files: files, clock: ManualClock(now: now))
        let records = try await domains.list(merchantIdentifier: "merchant.dev.m")
        let iso = ISO8601DateFormatter()
        #expect(records.map(\.status) == ["failed", "registered", "verified"])
        #expect(records.map(\.nextCheckAt) == [nil, nil, iso.string(from: now.addingTimeInterval(86_400))])
        await store.close()
    }
}

/// A TCP listener on loopback that never accepts: a client's connection completes in the kernel's backlog and
/// then hears nothing (a site that does not answer).
final class SilentListener: Sendable {
    let fd: Int32
    let port: Int

    init() throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let fd = self.fd
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && listen(fd, 16) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard fd >= 0, bound else { throw HTTPError(.bindFailed, "the silent listener cannot listen") }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    func stop() { close(fd) }
}
