import CommandTestSupport
import Foundation
import OrchardCrypto
import OrchardRuntime
import OrchardServices
import OrchardStore
import OrchardX509
import PayServer
import PaymentToken
import Testing
import WebMerchantAPI

/// The Pay server's merchant sessions without HTTP: a Pay store with two merchants, their identity (and one
/// processing) certificate, a validated domain, and the gateway's checks one by one.
struct SessionFixture {
    static let merchant = "merchant.dev.web.shop"
    static let other = "merchant.dev.other"
    static let domain = "shop.web.test"

    let temporary: TemporaryDirectory
    let store: Store
    let clock: ManualClock
    let pki: TokenSigningPKI
    let registry: MerchantRegistry
    let sessions: MerchantSessions
    /// DER of each merchant's identity certificate.
    let identity: [String: [UInt8]]
    let processing: [UInt8]

    init(database: String? = nil) async throws {
        temporary = try TemporaryDirectory()
        if let database {
            // PayStore.open(in:) reads the Pay server's database from config.json.
            try #"{"pay": {"database": "\#(database)"}}"#.write(
                toFile: temporary.path + "/config.json", atomically: false, encoding: .utf8)
        }
        let now = Date()
        clock = ManualClock(now: now)
        let root = try CertificateAuthority.create(
            subject: DistinguishedName([.commonName("Session Test Merchant CA")]), issuer: nil,
            lifetime: 10 * 365 * 86_400, clock: SystemClock(), random: SystemRandom())
        pki = try TokenSigningPKI.generate(
            notValidBefore: now.addingTimeInterval(-86_400), notValidAfter: now.addingTimeInterval(10 * 365 * 86_400))
        store = try PayStore.open(in: DeploymentDirectory(path: temporary.path))
        registry = MerchantRegistry(store: store, authority: root, clock: clock, random: SystemRandom())
        var identity: [String: [UInt8]] = [:]
        for (merchant, name) in [(Self.merchant, "Web Shop"), (Self.other, "Other")] {
            try await registry.registerMerchant(identifier: merchant, displayName: name)
            let request = try CertificateSigningRequest.create(
                subject: DistinguishedName([.userID(merchant)]),
                key: CertificatePrivateKey(try RSA.PrivateKey(keySize: 2048)))
            identity[merchant] = try await registry.issueMerchantIdentityCertificate(
                for: request, merchantIdentifier: merchant)[0].derRepresentation
        }
        self.identity = identity
        let processingRequest = try CertificateSigningRequest.create(
            subject: DistinguishedName([.userID(Self.merchant)]),
            key: CertificatePrivateKey(try P256.Signing.PrivateKey()))
        processing = try await registry.issuePaymentProcessingCertificate(
            for: processingRequest, merchantIdentifier: Self.merchant)[0].derRepresentation
        let expires = now.addingTimeInterval(90 * 86_400).orchardMilliseconds
        try await store.write { db in
            for (merchant, domain, expiresAt) in [
                (Self.merchant, Self.domain, Optional(expires)), (Self.merchant, "pending.web.test", nil),
                (Self.other, "other.web.test", Optional(expires)),
            ] {
                try db.execute(
                    """
                    INSERT INTO merchant_domains
                    (merchant_identifier, domain, registered_at, verified_at, expires_at, state) VALUES (?, ?, ?, ?, ?, ?)
                    """,
                    [
                        .text(merchant), .text(domain), .milliseconds(now),
                        expiresAt == nil ? .null : .milliseconds(now), expiresAt.map { .integer($0) } ?? .null,
                        .text(expiresAt == nil ? "registered" : "verified"),
                    ])
            }
        }
        sessions = try MerchantSessions(
            store: store,
            tokenSigning: try pki.issuingLeaf(for: .merchantSession, notValidBefore: now.addingTimeInterval(-86_400)),
            clock: clock, random: SystemRandom())
    }

    /// Capability statements of the fixture's store, signed by a capability-statement leaf under its token root.
    func capabilityStatements(budgets: CapabilityStatements.Budgets) throws -> CapabilityStatements {
        CapabilityStatements(
            store: store,
            tokenSigning: try pki.issuingLeaf(
                for: .capabilityStatement, notValidBefore: clock.now().addingTimeInterval(-86_400)),
            clock: clock, monotonic: clock, budgets: budgets)
    }

    static func body(
        merchant: String = SessionFixture.merchant, initiative: String = "web", context: String = SessionFixture.domain
    ) -> Data {
        Data(
            "{\"merchantIdentifier\":\"\(merchant)\",\"displayName\":\"Web Shop\",\"initiative\":\"\(initiative)\",\"initiativeContext\":\"\(context)\"}"
                .utf8)
    }

    func ask(
        _ body: Data = SessionFixture.body(), contentType: String? = "application/json", certificate: [UInt8]? = nil,
        legacy: Bool = false
    ) async throws -> Result<MerchantSession, MerchantSessions.Refusal> {
        try await sessions.session(
            body: body, contentType: contentType, certificateDER: certificate ?? identity[Self.merchant],
            legacy: legacy)
    }

    func refusal(
        _ body: Data = SessionFixture.body(), contentType: String? = "application/json", certificate: [UInt8]? = nil,
        legacy: Bool = false
    ) async throws -> MerchantSessions.Refusal? {
        let outcome = try await ask(body, contentType: contentType, certificate: certificate, legacy: legacy)
        guard case .failure(let refusal) = outcome else { return nil }
        #expect(refusal.error.statusCode == "400")
        #expect(refusal.error.statusMessage.hasPrefix("Payment Services Exception "))
        return refusal
    }

    func close() async { await store.close() }
}

@Suite("Web merchants: merchant sessions at the gateway")
struct MerchantSessionTests {
    static let hash = AssociationFiles.merchantHash(SessionFixture.merchant)

    @Test("W3: a session has every field and format of Apple's, signed by the token-signing leaf at epochTimestamp")
    func sessionFormat() async throws {
        let fixture = try await SessionFixture()
        defer { Task { await fixture.close() } }
        let session = try (try await fixture.ask()).get()
        #expect(session.epochTimestamp == fixture.clock.now().orchardMilliseconds)
        #expect(session.expiresAt == session.epochTimestamp + 3_600_000)
        #expect(MerchantSession.isSessionIdentifier(session.merchantSessionIdentifier))
        #expect(session.nonce.utf8.count == 8 && session.nonce == session.nonce.lowercased())
        #expect(session.merchantIdentifier == Self.hash && session.pspId == Self.hash)
        #expect(session.domainName == SessionFixture.domain && session.displayName == "Web Shop")
        #expect(session.operationalAnalyticsIdentifier == "Web Shop:" + Self.hash)
        #expect(session.retries == 0)
        // Apple's member order, and the signed content sorted without the signature.
        let text = String(decoding: session.json, as: UTF8.self)
        let order = [
            "epochTimestamp", "expiresAt", "merchantSessionIdentifier", "nonce", "merchantIdentifier", "domainName",
            "displayName", "signature", "operationalAnalyticsIdentifier", "retries", "pspId",
        ].map { text.range(of: "\"\($0)\":")!.lowerBound }
        #expect(order == order.sorted())
        #expect(
            String(decoding: session.signedContent, as: UTF8.self)
                == "{\"displayName\":\"Web Shop\",\"domainName\":\"shop.web.test\",\"epochTimestamp\":"
                + "\(session.epochTimestamp),\"expiresAt\":\(session.expiresAt),\"merchantIdentifier\":\"\(Self.hash)\","
                + "\"merchantSessionIdentifier\":\"\(session.merchantSessionIdentifier)\",\"nonce\":\"\(session.nonce)\","
                + "\"operationalAnalyticsIdentifier\":\"Web Shop:\(Self.hash)\",\"pspId\":\"\(Self.hash)\",\"retries\":0}"
        )
        // BER with indefinite lengths, as Apple's: 30 80.
        #expect(Array(session.signature.prefix(2)) == [0x30, 0x80])
        // Round trip, and the signature verifies to the root at its signingTime.
        #expect(try MerchantSession(json: session.json) == session)
        #expect(fixture.sessions.problem(with: session) == nil)
        // The legacy startSession body.
        let legacy = try
            (try await fixture.ask(
                Data(
                    "{\"merchantIdentifier\":\"\(Self.hash)\",\"domainName\":\"shop.web.test\",\"displayName\":\"Web Shop\"}"
                        .utf8),
                legacy: true)).get()
        #expect(legacy.domainName == SessionFixture.domain)
        // The hash in lower case is accepted too.
        _ = try (try await fixture.ask(SessionFixture.body(merchant: Self.hash.lowercased()))).get()
    }

    @Test("W4: a session verifies only unaltered, to the token root, for 5 minutes")
    func sessionVerification() async throws {
        let fixture = try await SessionFixture()
        defer { Task { await fixture.close() } }
        let session = try (try await fixture.ask()).get()
        // Another domain swapped in: the signature no longer covers it.
        let text = String(decoding: session.json, as: UTF8.self)
        let swapped = try MerchantSession(
            json: Array(text.replacingOccurrences(of: "shop.web.test", with: "evil.web.test").utf8))
        #expect(fixture.sessions.problem(with: swapped)?.contains("does not verify") == true)
        // Signed by another chain.
        let foreign = try TokenSigningPKI.generate(
            notValidBefore: Date().addingTimeInterval(-86_400), notValidAfter: Date().addingTimeInterval(86_400))
        let verifier = try MerchantSessions.verifier(root: foreign.root, clock: fixture.clock)
        #expect(
            MerchantSessions.problem(with: session, verifier: verifier, now: fixture.clock.now())?.contains(
                "does not verify") == true)
        // Expired after 5 minutes.
        fixture.clock.advance(by: 301)
        #expect(fixture.sessions.problem(with: session)?.contains("expired") == true)
    }

    @Test("Expired merchant sessions are purged on the clock's time; an unexpired one stays and is still usable")
    func expiredSessionsArePurged() async throws {
        let fixture = try await SessionFixture()
        defer { Task { await fixture.close() } }
        let old = try (try await fixture.ask()).get()
        fixture.clock.advance(by: 200)
        let young = try (try await fixture.ask()).get()
        #expect(try await fixture.sessions.purgeExpired() == 0)
        // Usable for 300 s: the first is 301 s old, the second 101 s.
        fixture.clock.advance(by: 101)
        #expect(try await fixture.sessions.purgeExpired() == 1)
        let left = try await fixture.store.read { db in
            try db.query("SELECT identifier FROM merchant_sessions ORDER BY identifier") { try $0.string(0) }
        }
        #expect(left == [young.merchantSessionIdentifier])
        try await fixture.sessions.consume(
            identifier: young.merchantSessionIdentifier, nonce: young.nonce, merchant: SessionFixture.merchant,
            domain: SessionFixture.domain)
        await #expect(throws: PayServerError.self) {
            try await fixture.sessions.consume(
                identifier: old.merchantSessionIdentifier, nonce: old.nonce, merchant: SessionFixture.merchant,
                domain: SessionFixture.domain)
        }
    }

    @Test("W3: each gateway refusal names its own reason, in Apple's format, naming the plain ID and the hash")
    func refusals() async throws {
        let fixture = try await SessionFixture()
        defer { Task { await fixture.close() } }
        let otherHash = AssociationFiles.merchantHash(SessionFixture.other)
        // Another merchant's certificate (for this merchant's ID).
        let other = try #require(
            try await fixture.refusal(certificate: fixture.identity[SessionFixture.other]))
        #expect(other.reason == .otherMerchant)
        #expect(other.error.statusMessage.contains("merchantId=\(otherHash) (\(SessionFixture.other))"))
        #expect(other.error.statusMessage.contains("\(Self.hash) (\(SessionFixture.merchant))"))
        // A processing certificate.
        #expect(try await fixture.refusal(certificate: fixture.processing)?.reason == .processingCertificate)
        // No certificate at all, or one the Pay server did not issue.
        #expect(try await fixture.refusal(certificate: [0x30])?.reason == .notIssuedHere)
        let outcome = try await fixture.sessions.session(
            body: SessionFixture.body(), contentType: "application/json", certificateDER: nil, legacy: false)
        guard case .failure(let none) = outcome else { Issue.record("no certificate accepted"); return }
        #expect(none.reason == .noCertificate)
        // An unknown merchant.
        let unknown = try #require(try await fixture.refusal(SessionFixture.body(merchant: "merchant.dev.nobody")))
        #expect(unknown.reason == .unknownMerchant)
        #expect(unknown.error.statusMessage.contains(AssociationFiles.merchantHash("merchant.dev.nobody")))
        #expect(unknown.error.statusMessage.contains("merchant.dev.nobody"))
        // A domain not validated (registered, never validated), and another merchant's validated domain.
        #expect(
            try await fixture.refusal(SessionFixture.body(context: "pending.web.test"))?.reason == .domainNotValidated)
        #expect(
            try await fixture.refusal(SessionFixture.body(context: "other.web.test"))?.reason == .domainNotValidated)
        // A context not identical to the validated domain.
        for near in ["https://shop.web.test/pay", "Shop.Web.Test", "shop.web.test:443", "shop.web.test."] {
            #expect(try await fixture.refusal(SessionFixture.body(context: near))?.reason == .contextNotIdentical)
        }
        // Initiatives: in_app and messaging not offered; anything else unknown.
        #expect(try await fixture.refusal(SessionFixture.body(initiative: "in_app"))?.reason == .initiativeNotOffered)
        #expect(
            try await fixture.refusal(SessionFixture.body(initiative: "messaging"))?.reason == .initiativeNotOffered)
        #expect(try await fixture.refusal(SessionFixture.body(initiative: "WEB"))?.reason == .unknownInitiative)
        // Content type, size, malformed bodies.
        #expect(try await fixture.refusal(contentType: "text/plain")?.reason == .contentType)
        #expect(try await fixture.refusal(contentType: nil)?.reason == .contentType)
        #expect(try await fixture.refusal(Data(repeating: 0x20, count: 4097))?.reason == .tooLarge)
        #expect(try await fixture.refusal(Data("{\"merchantIdentifier\":".utf8))?.reason == .malformed)
        #expect(try await fixture.refusal(Data())?.reason == .malformed)
        #expect(try await fixture.refusal(Data("{\"displayName\":\"x\"}".utf8))?.reason == .malformed)
        // Every refusal leaves no session behind.
        let count = try await fixture.store.read { db in
            try db.queryFirst("SELECT count(*) FROM merchant_sessions", []) { try $0.int64(0) }
        }
        #expect(count == 0)
    }

    @Test("W3: revoked and expired identity certificates are refused")
    func revokedAndExpired() async throws {
        let fixture = try await SessionFixture()
        defer { Task { await fixture.close() } }
        let certificate = try Certificate(derEncoded: try #require(fixture.identity[SessionFixture.merchant]))
        fixture.clock.advance(by: MerchantRegistry.certificateLifetime + 60)
        #expect(try await fixture.refusal()?.reason == .expired)
        fixture.clock.setWall(Date())
        try await MerchantCertificates(store: fixture.store, clock: fixture.clock).revoke(
            serial: Hex.encode(certificate.serialNumber))
        #expect(try await fixture.refusal()?.reason == .revoked)
    }

    @Test("The session parser refuses anything but the exact format")
    func parserRefusals() async throws {
        let fixture = try await SessionFixture()
        defer { Task { await fixture.close() } }
        let text = String(decoding: try (try await fixture.ask()).get().json, as: UTF8.self)
        func code(_ mutated: String) -> MerchantSessionError.Code? {
            do {
                _ = try MerchantSession(json: Array(mutated.utf8))
                return nil
            } catch { return error.code }
        }
        #expect(code(String(repeating: " ", count: 33 * 1024)) == .tooLarge)
        #expect(code("[]") == .notJSON)
        #expect(code(text.replacingOccurrences(of: ",\"retries\":0", with: "")) == .wrongMembers)
        #expect(code(text.replacingOccurrences(of: "\"retries\":0", with: "\"retries\":1")) == .wrongType)
        #expect(code(text.replacingOccurrences(of: "\"retries\":0", with: "\"retries\":\"0\"")) == .wrongType)
        #expect(code(text.replacingOccurrences(of: "\"SSH", with: "\"SSX")) == .wrongType)
        #expect(code(text.replacingOccurrences(of: "\"expiresAt\":", with: "\"expiresAt\":1")) == .wrongType)
        #expect(code(text.replacingOccurrences(of: "Web Shop:", with: "Shop:")) == .wrongType)
        #expect(code(text.replacingOccurrences(of: "}", with: ",\"extra\":1}")) == .wrongMembers)
    }

    @Test(
        "W4: a session is used once, by its merchant, for its domain and nonce, within 5 minutes; a race has one winner",
        arguments: TestPostgreSQL.enabled ? [false, true] : [false])
    func consumption(onPostgreSQL: Bool) async throws {
        let fixture = try await SessionFixture(
            database: onPostgreSQL ? try await TestPostgreSQL.shared().freshDatabase() : nil)
        defer { Task { await fixture.close() } }
        func code(
            _ session: MerchantSession, merchant: String = SessionFixture.merchant,
            domain: String = SessionFixture.domain, nonce: String? = nil
        ) async -> PayServerError.Code? {
            do {
                try await fixture.sessions.consume(
                    identifier: session.merchantSessionIdentifier, nonce: nonce ?? session.nonce, merchant: merchant,
                    domain: domain)
                return nil
            } catch let error as PayServerError {
                return error.code
            } catch {
                Issue.record("\(error)")
                return nil
            }
        }
        let session = try (try await fixture.ask()).get()
        #expect(await code(session, merchant: SessionFixture.other) == .sessionMismatch)
        #expect(await code(session, domain: "other.web.test") == .sessionMismatch)
        #expect(await code(session, nonce: "00000000") == .sessionMismatch)
        #expect(await code(session) == nil)
        #expect(await code(session) == .sessionUsed)
        // Unknown to this Pay server.
        let forged = MerchantSession(
            epochTimestamp: session.epochTimestamp,
            merchantSessionIdentifier: "SSH" + String(repeating: "0", count: 32) + "_"
                + MerchantSession.identifierSuffix,
            nonce: session.nonce, merchantIdentifier: session.merchantIdentifier, domainName: session.domainName,
            displayName: session.displayName, signature: session.signature, pspId: session.pspId)
        #expect(await code(forged) == .sessionMismatch)
        // Expired after 5 minutes: on this process's clock on SQLite; on PostgreSQL on the database's clock (the
        // session is aged there), which every instance shares, whatever their own clocks say.
        let late = try (try await fixture.ask()).get()
        if onPostgreSQL {
            fixture.clock.advance(by: 300.5)
            let kept = try (try await fixture.ask()).get()
            #expect(await code(kept) == nil)
            try await fixture.store.write { db in
                try db.execute(
                    "UPDATE merchant_sessions SET created_at = created_at - ? WHERE identifier = ?",
                    [.integer(300_500), .text(late.merchantSessionIdentifier)])
            }
        } else {
            fixture.clock.advance(by: 300.5)
        }
        #expect(await code(late) == .sessionExpired)
        // Two credentials race for one session: exactly one consumes it.
        let raced = try (try await fixture.ask()).get()
        async let first = code(raced)
        async let second = code(raced)
        let outcomes = await [first, second]
        #expect(outcomes.filter { $0 == nil }.count == 1 && outcomes.contains(.sessionUsed))
    }

    @Test("W3: capability statements: signed by the token chain, 5 minutes, validated only for a validated domain")
    func capabilityStatements() async throws {
        let fixture = try await SessionFixture()
        defer { Task { await fixture.close() } }
        var budgets = CapabilityStatements.Budgets()
        (budgets.rate, budgets.burst) = (1, 1)
        let statements = try fixture.capabilityStatements(budgets: budgets)
        let verifier = try CapabilityStatements.verifier(root: fixture.pki.root, clock: fixture.clock)
        let client = "192.0.2.1"
        let yes = try await statements.statement(
            merchantIdentifier: SessionFixture.merchant, domain: "Shop.Web.Test", client: client)
        #expect(yes.validated && yes.domain == SessionFixture.domain && yes.merchantIdentifier == Self.hash)
        #expect(yes.expiresAt == yes.issuedAt + 300_000)
        #expect(CapabilityStatements.problem(with: yes, verifier: verifier, now: fixture.clock.now()) == nil)
        #expect(try CapabilityStatement(json: yes.json) == yes)
        // Not validated: registered only, another merchant's domain, an unknown merchant; signed all the same.
        for (merchant, domain) in [
            (SessionFixture.merchant, "pending.web.test"), (SessionFixture.merchant, "other.web.test"),
            ("merchant.dev.nobody", SessionFixture.domain),
        ] {
            let no = try await statements.statement(merchantIdentifier: merchant, domain: domain, client: client)
            #expect(
                !no.validated
                    && CapabilityStatements.problem(with: no, verifier: verifier, now: fixture.clock.now()) == nil)
        }
        // The shared limit: a kept statement costs nothing; a new one is refused until the bucket refills (the
        // unvalidated pairs above took nothing from it).
        #expect(
            try await statements.statement(
                merchantIdentifier: SessionFixture.merchant, domain: SessionFixture.domain, client: client) == yes)
        await #expect(throws: CapabilityStatements.RateLimited.self) {
            _ = try await statements.statement(
                merchantIdentifier: SessionFixture.other, domain: "other.web.test", client: client)
        }
        fixture.clock.advance(by: 1.5)
        #expect(
            try await statements.statement(
                merchantIdentifier: SessionFixture.other, domain: "other.web.test", client: client
            ).validated)
        // Altered or stale statements fail.
        let altered = CapabilityStatement(
            domain: "pending.web.test", merchantIdentifier: yes.merchantIdentifier, issuedAt: yes.issuedAt,
            validated: true, signature: yes.signature)
        #expect(CapabilityStatements.problem(with: altered, verifier: verifier, now: fixture.clock.now()) != nil)
        fixture.clock.advance(by: 300)
        #expect(CapabilityStatements.problem(with: yes, verifier: verifier, now: fixture.clock.now()) != nil)
        // The parser's refusals.
        let text = String(decoding: yes.json, as: UTF8.self)
        for mutated in [
            text.replacingOccurrences(of: "\"validated\":1", with: "\"validated\":2"),
            text.replacingOccurrences(of: "{", with: "{ "),
            text.replacingOccurrences(of: ",\"validated\":1", with: ""),
            text.replacingOccurrences(of: "\"expiresAt\":", with: "\"expiresAt\":9"), "[]",
        ] {
            #expect(throws: MerchantSessionError.self) { try CapabilityStatement(json: Array(mutated.utf8)) }
        }
    }
}
