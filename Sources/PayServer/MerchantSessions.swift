public import Foundation
public import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
public import OrchardStore
public import OrchardX509
public import PaymentToken
public import WebMerchantAPI

/// The Pay server's web gateway (docs/web.md, "Merchant sessions"): a merchant's server, authenticated by its
/// identity certificate, asks for a merchant session for one of its validated domains; the session is signed by
/// the merchant-session signing leaf (``SigningLeaves``), recorded, and usable once for
/// ``MerchantSession/usableMilliseconds``.
public final class MerchantSessions: Sendable {
    static let migrationName = "web merchants: merchant sessions, usable once"
    static let migrationSQL = """
        CREATE TABLE merchant_sessions (
            identifier TEXT PRIMARY KEY,
            merchant_identifier TEXT NOT NULL REFERENCES merchants(identifier),
            domain TEXT NOT NULL,
            nonce TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            consumed_at INTEGER
        ) STRICT;
        """

    private let store: Store
    private let tokenSigning: TokenSigningPKI
    private let verifier: CMSVerifier
    private let clock: any WallClock
    private let random: any RandomSource

    public init(
        store: Store, tokenSigning: TokenSigningPKI, clock: any WallClock, random: any RandomSource
    )
        throws(X509Error)
    {
        self.store = store
        self.tokenSigning = tokenSigning
        self.clock = clock
        self.random = random
        verifier = try MerchantSessions.verifier(root: tokenSigning.root, clock: clock)
    }

    /// A verifier of session signatures to `root` (the token-signing root) by a merchant-session signing leaf: a
    /// leaf of another kind is refused (``OrchardX509/ChainPolicy/signingLeaf(_:)``).
    public static func verifier(root: Certificate, clock: any WallClock) throws(X509Error) -> CMSVerifier {
        try CMSVerifier(trustRoots: [root], policy: .signingLeaf(.merchantSession), cacheCapacity: 16, clock: clock)
    }

    /// A refusal, in Apple's words (``GatewayError``).
    public struct Refusal: Error, Sendable, Hashable {
        /// Which check refused; tests and logs use it.
        public enum Reason: String, Sendable, Hashable {
            case noCertificate, notIssuedHere, processingCertificate, revoked, expired, otherMerchant
            case unknownMerchant, domainNotValidated, domainFailed, contextNotIdentical, initiativeNotOffered
            case unknownInitiative
            case get, contentType, tooLarge, malformed, duplicateKey
        }
        public let reason: Reason
        public let error: GatewayError

        init(_ reason: Reason, _ message: String) {
            self.reason = reason
            error = GatewayError(statusMessage: "Payment Services Exception " + message)
        }
    }

    /// The 64 upper-case hex digits of SHA-256(merchant ID) and the ID, as refusals name a merchant.
    static func named(_ merchantIdentifier: String) -> String {
        "merchantId=\(AssociationFiles.merchantHash(merchantIdentifier)) (\(merchantIdentifier))"
    }

    /// Answers one gateway request: `legacy` for `startSession`'s body. `certificateDER` is the client
    /// certificate the listener verified (chained to the Orchard root), if any.
    public func session(
        body: Data, contentType: String?, certificateDER: [UInt8]?, legacy: Bool
    ) async throws -> Result<MerchantSession, Refusal> {
        guard let certificateDER else {
            return .failure(
                Refusal(
                    .noCertificate,
                    "reason=\"no client certificate: connect with the merchant identity certificate (mutual TLS)\""))
        }
        let merchant: String
        let domains: MerchantDomains
        switch try await certificateHolder(certificateDER) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let holder): (merchant, domains) = holder
        }
        let mediaType = contentType.map(Self.mediaType)
        // Apple's documented test (`curl --data …`) sends curl's default form type with the JSON body.
        guard mediaType == "application/json" || mediaType == "application/x-www-form-urlencoded" else {
            return .failure(
                Refusal(
                    .contentType,
                    "\(Self.named(merchant)) reason=\"Content-Type \(contentType ?? "(none)") is not application/json\""
                ))
        }
        guard body.count <= WebMerchantAPI.Gateway.maximumRequestBytes else {
            return .failure(
                Refusal(
                    .tooLarge,
                    "\(Self.named(merchant)) reason=\"the body has \(body.count) bytes; at most "
                        + "\(WebMerchantAPI.Gateway.maximumRequestBytes)\""))
        }
        // Through the one strict decoder: a key given twice is refused (in Apple's error form, as every refusal
        // here), as every Orchard party refuses it.
        let request: PaymentSessionRequest
        do throws(HTTPError) {
            request = try JSONCoding.decodeRequestBody(PaymentSessionRequest.self, from: body)
        } catch  where error.code == .duplicateKey {
            return .failure(Refusal(.duplicateKey, "\(Self.named(merchant)) reason=\"\(error.message)\""))
        } catch {
            return .failure(
                Refusal(
                    .malformed,
                    "\(Self.named(merchant)) reason=\"the body is not a JSON object with merchantIdentifier, "
                        + "displayName, initiative and initiativeContext\""))
        }
        return try await session(request, merchant: merchant, domains: domains, legacy: legacy)
    }

    /// `Content-Type`'s media type: before any `;`, spaces and tabs trimmed, lower-case (ASCII).
    static func mediaType(_ contentType: String) -> String {
        let bytes = contentType.utf8.prefix { $0 != UInt8(ascii: ";") }
        let isBlank = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        guard let first = bytes.firstIndex(where: { !isBlank($0) }),
            let last = bytes.lastIndex(where: { !isBlank($0) })
        else { return "" }
        return String(decoding: bytes[first...last], as: UTF8.self).lowercased()
    }

    /// Client certificates parsed before, by their DER bytes. Everything that depends on the time or on pay.sqlite
    /// (the record, the kind, revocation, validity) is still checked on every request.
    private let parsedCertificates = DERMemo<Certificate>(capacity: 1024)

    func parsedCertificate(_ der: [UInt8]) -> Certificate? {
        // try?: a certificate that does not parse is nil, which the caller refuses.
        parsedCertificates.value(for: der) { try? Certificate(derEncoded: der) }
    }

    /// A merchant's domains validated now, and those that failed their last check (each with the failed check).
    struct MerchantDomains: Sendable {
        var validated: [String] = []
        var failed: [String: String] = [:]
    }

    /// The merchant a presented certificate is the identity certificate of (one this Pay server issued and
    /// recorded, of kind identity, unrevoked and valid now), with its domains as they are now: one read.
    func certificateHolder(_ der: [UInt8]) async throws -> Result<(String, MerchantDomains), Refusal> {
        guard let certificate = parsedCertificate(der) else {
            return .failure(Refusal(.notIssuedHere, "reason=\"the client certificate cannot be read\""))
        }
        let serial = Hex.encode(certificate.serialNumber)
        let now = clock.now()
        let (row, domains) = try await store.read { db in
            let row = try db.queryFirst(
                """
                SELECT merchant_identifier, kind, der, not_after, revoked_at FROM merchant_certificates WHERE serial = ?
                """, [.text(serial)]
            ) { row in
                (
                    try row.string(0), try row.string(1), try row.blob(2), try row.int64(3),
                    try row.optionalInt64(4)
                )
            }
            guard let merchant = row?.0 else { return (row, MerchantDomains()) }
            let found = try WebDomains.sessionDomains(db, merchantIdentifier: merchant, now: now)
            return (row, MerchantDomains(validated: found.validated, failed: found.failed))
        }
        guard let (merchant, kind, recorded, notAfter, revokedAt) = row, recorded == der else {
            return .failure(
                Refusal(
                    .notIssuedHere,
                    "reason=\"the client certificate is not a merchant identity certificate issued by this Pay server\""
                ))
        }
        guard kind == "identity" else {
            return .failure(
                Refusal(
                    .processingCertificate,
                    "\(Self.named(merchant)) reason=\"a payment processing certificate was presented; merchant "
                        + "sessions need the merchant identity certificate\""))
        }
        guard revokedAt == nil else {
            return .failure(
                Refusal(.revoked, "\(Self.named(merchant)) reason=\"the merchant identity certificate is revoked\""))
        }
        guard notAfter > now.orchardMilliseconds, certificate.isValid(at: now) else {
            return .failure(
                Refusal(
                    .expired, "\(Self.named(merchant)) reason=\"the merchant identity certificate is not valid now\""))
        }
        return .success((merchant, domains))
    }

    /// The checks after authentication: the merchant named, the initiative, the domain (`domains`: the merchant's
    /// domains as they are now, read with its certificate); then a new session.
    func session(
        _ request: PaymentSessionRequest, merchant: String, domains: MerchantDomains, legacy: Bool
    ) async throws -> Result<MerchantSession, Refusal> {
        let validated = domains.validated
        let certificateHash = AssociationFiles.merchantHash(merchant)
        let named = request.merchantIdentifier
        let namedHash =
            named.utf8.count != 64 && named == merchant
            ? certificateHash
            : named.utf8.count == 64 && named.utf8.allSatisfy({ $0 < 0x80 && Character(Unicode.Scalar($0)).isHexDigit })
                ? named.uppercased() : AssociationFiles.merchantHash(named)
        guard namedHash == certificateHash else {
            let registered = try await store.read { db in
                try db.query("SELECT identifier FROM merchants", []) { try $0.string(0) }
            }.first { AssociationFiles.merchantHash($0) == namedHash }
            guard let registered else {
                return .failure(
                    Refusal(
                        .unknownMerchant,
                        "\(Self.named(merchant)) unauthorized to process transactions on behalf of merchantId="
                            + "\(namedHash) (\(named)) reason=\"The latter is not registered for Apple Pay on the web\""
                    ))
            }
            return .failure(
                Refusal(
                    .otherMerchant,
                    "\(Self.named(merchant)) unauthorized to process transactions on behalf of "
                        + "\(Self.named(registered)) reason=\"\(namedHash) never authorized transactions to occur "
                        + "via \(certificateHash): present \(registered)'s own identity certificate\""))
        }
        let context: String
        if legacy {
            context = request.domainName ?? ""
        } else {
            switch request.initiative {
            case "web": context = request.initiativeContext ?? ""
            case "in_app", "messaging":
                return .failure(
                    Refusal(
                        .initiativeNotOffered,
                        "\(Self.named(merchant)) reason=\"initiative \(request.initiative ?? "") is not offered: "
                            + "this gateway serves initiative web\""))
            default:
                return .failure(
                    Refusal(
                        .unknownInitiative,
                        "\(Self.named(merchant)) reason=\"initiative must be web (in_app and messaging are not "
                            + "offered)\""))
            }
        }
        guard MerchantSession.isPlainString(request.displayName), request.displayName.utf8.count <= 64 else {
            return .failure(
                Refusal(
                    .malformed,
                    "\(Self.named(merchant)) reason=\"displayName must be 1 to 64 printable bytes without \\\" or \\\\\""
                ))
        }
        guard validated.contains(context) else {
            if let check = domains.failed[context] {
                return .failure(
                    Refusal(
                        .domainFailed,
                        "\(Self.named(merchant)) reason=\"\(context) failed its last check (\(check)): it gets no "
                            + "merchant session until it validates again; fix the site, then `orchard merchant domain "
                            + "verify --merchant \(merchant) --domain \(context) --explain`\""))
            }
            if let match = validated.first(where: { $0 == Self.addressBarHost(context) }) {
                return .failure(
                    Refusal(
                        .contextNotIdentical,
                        "\(Self.named(merchant)) reason=\"initiativeContext must be exactly the validated domain "
                            + "\(match): the host name alone, lower-case, no scheme, port or path\""))
            }
            return .failure(
                Refusal(
                    .domainNotValidated,
                    "\(Self.named(merchant)) reason=\"\(MerchantSession.isPlainString(context) ? context : "the context")"
                        + " is not a validated domain of \(merchant): `orchard merchant domain verify --merchant "
                        + "\(merchant) --domain …`\""))
        }
        return .success(try await issue(merchant: merchant, domain: context, displayName: request.displayName))
    }

    /// `https://Store.Example.test:443/pay` → `store.example.test`: what a near miss of a domain names.
    static func addressBarHost(_ context: String) -> String {
        var text = Substring(context.lowercased())
        if let scheme = text.range(of: "://") { text = text[scheme.upperBound...] }
        if let slash = text.firstIndex(of: "/") { text = text[..<slash] }
        if let colon = text.firstIndex(of: ":") { text = text[..<colon] }
        while text.hasSuffix(".") { text = text.dropLast() }
        return String(text)
    }

    /// Signs and records a new session for a validated domain.
    /// The session is dated by the database's clock on PostgreSQL (every instance reads it, so any instance ages it
    /// alike), by this process's wall clock on SQLite.
    func issue(merchant: String, domain: String, displayName: String) async throws -> MerchantSession {
        let now = try await store.databaseClock() ?? clock.now()
        let session = try Self.sign(
            merchant: merchant, domain: domain, displayName: displayName, at: now, random: random,
            tokenSigning: tokenSigning)
        let epoch = session.epochTimestamp
        try await store.write { db in
            try db.execute(
                """
                INSERT INTO merchant_sessions (identifier, merchant_identifier, domain, nonce, created_at)
                VALUES (?, ?, ?, ?, ?)
                """,
                [
                    .text(session.merchantSessionIdentifier), .text(merchant), .text(domain), .text(session.nonce),
                    .integer(epoch),
                ])
        }
        return session
    }

    /// A new session for `merchant` and `domain` at `now`, signed by `tokenSigning`'s leaf (the merchant-session
    /// signing leaf): the cryptography of
    /// the gateway without its checks and its record (the benchmark's ceiling measures it alone).
    public static func sign(
        merchant: String, domain: String, displayName: String, at now: Date, random: any RandomSource,
        tokenSigning: TokenSigningPKI
    ) throws(X509Error) -> MerchantSession {
        let epoch = now.orchardMilliseconds
        let hash = AssociationFiles.merchantHash(merchant)
        let unsigned = MerchantSession(
            epochTimestamp: epoch,
            merchantSessionIdentifier: "SSH" + Hex.encode(random.bytes(16)) + "_" + MerchantSession.identifierSuffix,
            nonce: Hex.encode(random.bytes(4), lowercase: true), merchantIdentifier: hash, domainName: domain,
            displayName: displayName, signature: [], pspId: hash)
        let signature = try CMS.signDetached(
            unsigned.signedContent, signer: tokenSigning.leaf, key: tokenSigning.leafKey,
            certificates: [tokenSigning.leaf, tokenSigning.intermediate],
            signingTime: Date(timeIntervalSince1970: Double(epoch / 1000)), encoding: .berIndefiniteLength,
            includeAlgorithmProtection: true)
        return MerchantSession(
            epochTimestamp: epoch, merchantSessionIdentifier: unsigned.merchantSessionIdentifier, nonce: unsigned.nonce,
            merchantIdentifier: hash, domainName: domain, displayName: displayName, signature: signature, pspId: hash)
    }

    /// Checks a session's signature (to the token-signing root, by a merchant-session signing leaf with
    /// `verifier` from ``verifier(root:clock:)``, chain valid at its signingTime, which must be
    /// `epochTimestamp` to the second) and its age at `now`: nil when it is genuine and still usable.
    public static func problem(
        with session: MerchantSession, verifier: CMSVerifier, now: Date
    ) -> String? {
        if let problem = verifier.signingProblem(
            session.signature, content: session.signedContent, signedAt: session.epochTimestamp,
            field: "the session's epochTimestamp")
        {
            return problem
        }
        let age = now.orchardMilliseconds - session.epochTimestamp
        guard age >= -60_000 else { return "the session is dated \(-age / 1000) s in the future" }
        guard age <= MerchantSession.usableMilliseconds else {
            return "the session expired: it was created \(age / 1000) s ago and is usable for 300 s"
        }
        return nil
    }

    /// ``problem(with:verifier:now:)`` with this Pay server's root and clock.
    public func problem(with session: MerchantSession) -> String? {
        Self.problem(with: session, verifier: verifier, now: clock.now())
    }

    /// Deletes the sessions older than ``MerchantSession/usableMilliseconds`` at the clock's time, used or not;
    /// returns how many. Such a session is refused anyway (its signed `epochTimestamp` is too old), so purging
    /// only reclaims space; the Pay server runs it with its periodic pass.
    @discardableResult
    public func purgeExpired() async throws -> Int {
        let local = clock.now()
        return try await store.write { db in
            // Sessions are dated on the database's clock when instances share one (as `consume` ages them).
            let now = try db.expiryMilliseconds(.database) { local }
            return try db.execute(
                "DELETE FROM merchant_sessions WHERE created_at < ?",
                [.integer(now - MerchantSession.usableMilliseconds)])
        }
    }

    /// ``consume(identifier:nonce:merchant:domain:at:in:)`` in a transaction of its own, at the clock's time.
    public func consume(identifier: String, nonce: String, merchant: String, domain: String) async throws {
        let now = clock.now()
        try await store.write { db in
            try Self.consume(identifier: identifier, nonce: nonce, merchant: merchant, domain: domain, at: now, in: db)
        }
    }

    /// Consumes a web credential's merchant session inside the transaction that issues its token, and returns the
    /// session's merchant ID: the session must be one this Pay server issued, for `merchant` (its ID or the
    /// upper-case hex SHA-256 the session names it by) and `domain` (the credential's tag 03), with this
    /// nonce, at most ``MerchantSession/usableMilliseconds`` old and unused. Two credentials racing for one
    /// session: the store's write transactions are serial, so the second finds it used. On PostgreSQL the age is
    /// measured on the database's clock, not `local` (another instance may have issued the session).
    @discardableResult
    static func consume(
        identifier: String, nonce: String, merchant: String, domain: String, at local: Date, in db: Database
    ) throws -> String {
        let now = Date(orchardMilliseconds: try db.expiryMilliseconds(.database) { local })
        let row = try db.queryFirst(
            "SELECT merchant_identifier, domain, nonce, created_at, consumed_at FROM merchant_sessions WHERE identifier = ?",
            [.text(identifier)]
        ) { row in
            (try row.string(0), try row.string(1), try row.string(2), try row.int64(3), try row.optionalInt64(4))
        }
        guard let (sessionMerchant, sessionDomain, sessionNonce, createdAt, consumedAt) = row else {
            throw PayServerError(.sessionMismatch, "the merchant session was not issued by this Pay server")
        }
        // A browser's device knows the merchant by the session's identifier (the hash, as the session names it).
        guard sessionMerchant == merchant || AssociationFiles.merchantHash(sessionMerchant) == merchant else {
            throw PayServerError(.sessionMismatch, "the merchant session was issued to another merchant")
        }
        guard sessionDomain == domain else {
            throw PayServerError(.sessionMismatch, "the merchant session was issued for another domain than the page's")
        }
        guard sessionNonce == nonce else {
            throw PayServerError(.sessionMismatch, "the merchant session's nonce differs")
        }
        guard consumedAt == nil else {
            throw PayServerError(.sessionUsed, "the merchant session was already used: ask for a new one")
        }
        guard now.orchardMilliseconds - createdAt <= MerchantSession.usableMilliseconds else {
            throw PayServerError(.sessionExpired, "the merchant session is older than 5 minutes: ask for a new one")
        }
        try db.execute(
            "UPDATE merchant_sessions SET consumed_at = ? WHERE identifier = ? AND consumed_at IS NULL",
            [.milliseconds(now), .text(identifier)])
        return sessionMerchant
    }
}
