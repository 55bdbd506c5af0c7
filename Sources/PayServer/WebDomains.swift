import Foundation
public import OrchardCrypto
import OrchardRuntime
public import OrchardServices
public import OrchardStore
import OrchardX509
public import WebMerchantAPI

/// The domains web merchants register at the Pay server and their validation (docs/web.md): a domain is
/// registered, validated only once the merchant's identity certificate exists, and then checked again at least
/// daily (``recheckDue()``, the Pay server's periodic pass) and at its site certificate's expiry. A wrong or
/// missing file fails it at once; a site that cannot be reached, does not answer in time or answers 5xx is tried
/// again ``retries`` times, ``retrySpacing`` apart (all within the hour), before it fails. A failed domain gets no
/// merchant session and no positive capability statement until a `domain verify` passes again.
///
/// The state is durable (`merchant_domains.state`, `attempts`, `next_check_at`); every read and write of it is
/// here.
public final class WebDomains: WebDomainOnboarding {
    /// How long a passed check holds before the domain is checked again (or until the site certificate's expiry,
    /// if sooner).
    public static let recheckInterval: Duration = .seconds(86_400)
    /// Further tries of a site that could not be reached before its domain fails.
    public static let retries = 3
    /// The wait before each further try: the last comes 45 minutes after the first failure.
    public static let retrySpacing: Duration = .seconds(900)
    /// How long a pass holds a due domain it is checking, so another instance on the same database does not
    /// check it too (and a pass that stopped mid-check leaves it due again after this).
    static let claimLease: Duration = .seconds(600)

    static let migrationName = "web merchants: registered domains and their validation"
    static let migrationSQL = """
        CREATE TABLE merchant_domains (
            merchant_identifier TEXT NOT NULL REFERENCES merchants(identifier),
            domain TEXT NOT NULL,
            registered_at INTEGER NOT NULL,
            verified_at INTEGER,
            expires_at INTEGER,
            checked_at INTEGER,
            failure TEXT,
            PRIMARY KEY (merchant_identifier, domain)
        ) STRICT;
        """

    /// Each domain's check state: `registered`, `verified`, `retrying` (still validated, a try failed to reach
    /// the site) or `failed`; the failed tries in a row; when the periodic pass checks it next (none for a
    /// registered or failed domain). A domain validated before keeps its validation and is checked within a day.
    static let stateMigrationName = "web merchants: domain check state, daily re-checks and retries"
    static let stateMigrationSQL = """
        ALTER TABLE merchant_domains ADD COLUMN state TEXT NOT NULL DEFAULT 'registered'
            CHECK (state IN ('registered', 'verified', 'retrying', 'failed'));
        ALTER TABLE merchant_domains ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE merchant_domains ADD COLUMN next_check_at INTEGER;
        UPDATE merchant_domains SET state = CASE WHEN expires_at IS NOT NULL THEN 'verified'
            WHEN failure IS NOT NULL THEN 'failed' ELSE 'registered' END;
        UPDATE merchant_domains SET next_check_at = COALESCE(checked_at, verified_at) + 86400000
            WHERE state = 'verified';
        CREATE INDEX merchant_domains_due ON merchant_domains(next_check_at) WHERE next_check_at IS NOT NULL;
        """

    private let store: Store
    private let validator: DomainValidator
    private let files: AssociationFiles
    private let clock: any WallClock

    public init(store: Store, validator: DomainValidator, files: AssociationFiles, clock: any WallClock) {
        self.store = store
        self.validator = validator
        self.files = files
        self.clock = clock
    }

    /// Registers `domain` for `merchantIdentifier` (registering it again changes nothing).
    public func add(_ domain: String, merchantIdentifier: String) async throws -> DomainRecord {
        let domain = try Self.checkDomain(domain)
        let now = clock.now()
        try await store.write { db in
            guard
                try db.queryFirst(
                    "SELECT 1 FROM merchants WHERE identifier = ?", [.text(merchantIdentifier)], { _ in true }) != nil
            else { throw PayServerError(.notFound, "merchant \(merchantIdentifier) is not registered") }
            try db.execute(
                """
                INSERT OR IGNORE INTO merchant_domains (merchant_identifier, domain, registered_at) VALUES (?, ?, ?)
                """, [.text(merchantIdentifier), .text(domain), .milliseconds(now)])
        }
        return try await record(domain, merchantIdentifier: merchantIdentifier)
    }

    /// The merchant's domains, sorted.
    public func list(merchantIdentifier: String) async throws -> [DomainRecord] {
        let now = clock.now()
        return try await store.read { db in
            try db.query(
                "SELECT \(Self.columns) FROM merchant_domains WHERE merchant_identifier = ? ORDER BY domain",
                [.text(merchantIdentifier)]
            ) { row in try Self.record(row, merchantIdentifier: merchantIdentifier, now: now) }
        }
    }

    /// Removes `domain`; ``PayServerError/Code/notFound`` if it is not registered.
    public func remove(_ domain: String, merchantIdentifier: String) async throws {
        let changed = try await store.write { db in
            try db.execute(
                "DELETE FROM merchant_domains WHERE merchant_identifier = ? AND domain = ?",
                [.text(merchantIdentifier), .text(domain.lowercased())])
        }
        guard changed == 1 else {
            throw PayServerError(.notFound, "\(domain) is not registered for \(merchantIdentifier)")
        }
    }

    /// Validates a registered domain now and records the outcome: a pass validates it until the site
    /// certificate's expiry and schedules the next check a day later (or at that expiry, if sooner); a failure
    /// the next try may not see (``DomainValidator/Outcome/retryable``) keeps a validated domain `retrying`, tried
    /// again ``retrySpacing`` later, up to ``retries`` times; any other failure, or one more, fails the domain:
    /// no sessions, no check scheduled, until this passes again.
    ///
    /// `port` replaces the deployment's mapping of `domain` for this check (init's one-off site).
    public func verify(
        _ domain: String, merchantIdentifier: String, port: Int? = nil
    ) async throws -> DomainVerificationReport {
        let domain = domain.lowercased()
        _ = try await record(domain, merchantIdentifier: merchantIdentifier)
        let hasIdentity = try await hasIdentityCertificate(merchantIdentifier)
        let outcome = await validator.validate(
            domain: domain, merchantIdentifier: merchantIdentifier, hasIdentityCertificate: hasIdentity, port: port)
        try await recordOutcome(outcome, domain: domain, merchantIdentifier: merchantIdentifier)
        let record = try await record(domain, merchantIdentifier: merchantIdentifier)
        return DomainVerificationReport(verified: outcome.passed, checks: outcome.checks, record: record)
    }

    /// Writes what a check found, from the state the domain is in at the write.
    private func recordOutcome(
        _ outcome: DomainValidator.Outcome, domain: String, merchantIdentifier: String
    ) async throws {
        let now = clock.now().orchardMilliseconds
        let key: [SQLiteValue] = [.text(merchantIdentifier), .text(domain)]
        try await store.write { db in
            guard
                let (state, attempts, expiresAt) = try db.queryFirst(
                    "SELECT state, attempts, expires_at FROM merchant_domains WHERE merchant_identifier = ? AND domain = ?",
                    key, { row in (try row.string(0), try row.int64(1), try row.optionalInt64(2)) })
            else { return }  // removed while it was checked
            let failure = SQLiteValue.text(outcome.failure ?? "failed")
            let retryAt = now + Self.milliseconds(Self.retrySpacing)
            if outcome.passed, let notAfter = outcome.siteCertificateNotAfter?.orchardMilliseconds {
                // At the expiry if it comes first (a renewal is then seen at once); a certificate the TLS check
                // accepted but this clock already sees expired waits a day, rather than being checked at every pass.
                let daily = now + Self.milliseconds(Self.recheckInterval)
                let next = notAfter > now ? min(daily, notAfter) : daily
                _ = try db.execute(
                    """
                    UPDATE merchant_domains SET state = 'verified', verified_at = ?, expires_at = ?, checked_at = ?,
                    failure = NULL, attempts = 0, next_check_at = ? WHERE merchant_identifier = ? AND domain = ?
                    """, [.integer(now), .integer(notAfter), .integer(now), .integer(next)] + key)
            } else if outcome.retryable, state == "verified" || state == "retrying", (expiresAt ?? 0) > now,
                attempts < Int64(Self.retries)
            {
                _ = try db.execute(
                    """
                    UPDATE merchant_domains SET state = 'retrying', checked_at = ?, failure = ?, attempts = ?,
                    next_check_at = ? WHERE merchant_identifier = ? AND domain = ?
                    """,
                    [.integer(now), failure, .integer(attempts + 1), .integer(retryAt)] + key)
            } else {
                _ = try db.execute(
                    """
                    UPDATE merchant_domains SET state = 'failed', expires_at = NULL, checked_at = ?, failure = ?,
                    attempts = 0, next_check_at = NULL WHERE merchant_identifier = ? AND domain = ?
                    """, [.integer(now), failure] + key)
            }
        }
    }

    /// Checks again every domain whose next check has come (a day after its last pass, at its site
    /// certificate's expiry, or a retry), and returns what each check found. The Pay server's periodic pass
    /// runs it (``PayServer/domainRecheckInterval``) against the injected clock. Each due domain is claimed before
    /// it is checked, so instances sharing a database check it once.
    public func recheckDue() async throws -> [DomainVerificationReport] {
        let now = clock.now().orchardMilliseconds
        let due = try await store.read { db in
            try db.query(
                """
                SELECT merchant_identifier, domain, next_check_at FROM merchant_domains WHERE next_check_at <= ?
                ORDER BY next_check_at, merchant_identifier, domain
                """, [.integer(now)]
            ) { row in (try row.string(0), try row.string(1), try row.int64(2)) }
        }
        var reports: [DomainVerificationReport] = []
        for (merchant, domain, dueAt) in due {
            let claimed = try await store.write { db in
                try db.execute(
                    """
                    UPDATE merchant_domains SET next_check_at = ?
                    WHERE merchant_identifier = ? AND domain = ? AND next_check_at = ?
                    """,
                    [
                        .integer(now + Self.milliseconds(Self.claimLease)), .text(merchant), .text(domain),
                        .integer(dueAt),
                    ])
            }
            guard claimed == 1 else { continue }
            reports.append(try await verify(domain, merchantIdentifier: merchant))
        }
        return reports
    }

    public func associationFile(for merchantIdentifier: String) async throws -> String {
        try await issueAssociationFile(merchantIdentifier: merchantIdentifier).fileContents
    }

    public func registerAndValidate(domain: String, merchantIdentifier: String, port: Int) async throws -> String? {
        _ = try await add(domain, merchantIdentifier: merchantIdentifier)
        let report = try await verify(domain, merchantIdentifier: merchantIdentifier, port: port)
        return report.verified ? nil : (report.record.failure ?? "failed")
    }

    /// A new association file for a registered merchant.
    public func issueAssociationFile(merchantIdentifier: String) async throws -> DomainAssociationFile {
        let registered = try await store.read { db in
            try db.queryFirst(
                "SELECT 1 FROM merchants WHERE identifier = ?", [.text(merchantIdentifier)], { _ in true }) != nil
        }
        guard registered else { throw PayServerError(.notFound, "merchant \(merchantIdentifier) is not registered") }
        return try files.issue(merchantIdentifier: merchantIdentifier, at: clock.now())
    }

    /// The record of a registered domain; ``PayServerError/Code/notFound`` if there is none.
    public func record(_ domain: String, merchantIdentifier: String) async throws -> DomainRecord {
        let now = clock.now()
        let found = try await store.read { db in
            try db.queryFirst(
                "SELECT \(Self.columns) FROM merchant_domains WHERE merchant_identifier = ? AND domain = ?",
                [.text(merchantIdentifier), .text(domain.lowercased())]
            ) { row in try Self.record(row, merchantIdentifier: merchantIdentifier, now: now) }
        }
        guard let found else {
            throw PayServerError(
                .notFound,
                "\(domain) is not registered for \(merchantIdentifier): "
                    + "`orchard merchant domain add --merchant \(merchantIdentifier) --domain \(domain)` first")
        }
        return found
    }

    /// Whether the merchant holds an unrevoked identity certificate valid now.
    func hasIdentityCertificate(_ merchantIdentifier: String) async throws -> Bool {
        let now = clock.now()
        return try await store.read { db in
            try db.queryFirst(
                """
                SELECT 1 FROM merchant_certificates WHERE merchant_identifier = ? AND kind = 'identity'
                AND revoked_at IS NULL AND not_after > ?
                """, [.text(merchantIdentifier), .milliseconds(now)], { _ in true }) != nil
        }
    }

    // MARK: Validated now

    /// The condition on a `merchant_domains` row for "validated at the time of parameter `?`": verified or
    /// retrying, its site certificate not expired.
    static let validatedCondition = "state IN ('verified', 'retrying') AND expires_at > ?"

    /// Whether `merchantIdentifier` has `domain` validated at `now`: one primary-key read, inside `db`'s
    /// transaction.
    static func isValidated(
        _ db: Database, merchantIdentifier: String, domain: String, now: Date
    ) throws -> Bool {
        try db.queryFirst(
            "SELECT 1 FROM merchant_domains WHERE merchant_identifier = ? AND domain = ? AND \(validatedCondition)",
            [.text(merchantIdentifier), .text(domain), .milliseconds(now)], { _ in true }) != nil
    }

    /// The merchant's domains validated at `now`, and those that failed (each with its failed check's name),
    /// inside `db`'s transaction: what the gateway needs to answer a session request.
    static func sessionDomains(
        _ db: Database, merchantIdentifier: String, now: Date
    ) throws -> (validated: [String], failed: [String: String]) {
        let rows = try db.query(
            """
            SELECT domain, CASE WHEN \(validatedCondition) THEN 1 ELSE 0 END, state, failure FROM merchant_domains
            WHERE merchant_identifier = ?
            """, [.milliseconds(now), .text(merchantIdentifier)]
        ) { row in (try row.string(0), try row.int64(1) != 0, try row.string(2), try row.optionalString(3)) }
        var validated: [String] = []
        var failed: [String: String] = [:]
        for (domain, isValidated, state, failure) in rows {
            if isValidated {
                validated.append(domain)
            } else if state == "failed" {
                failed[domain] = failure.map { String($0.prefix { $0 != ":" }) } ?? "failed"
            }
        }
        return (validated, failed)
    }

    // MARK: Rows

    /// The columns ``Columns`` reads, in its order.
    static let columns = "domain, verified_at, expires_at, checked_at, failure, state, attempts, next_check_at"

    struct Columns {
        let domain: String
        let verifiedAt: Int64?
        let expiresAt: Int64?
        let checkedAt: Int64?
        let failure: String?
        let state: String
        let attempts: Int64
        let nextCheckAt: Int64?

        init(_ row: Row, offset: Int) throws(StoreError) {
            domain = try row.string(offset)
            verifiedAt = try row.optionalInt64(offset + 1)
            expiresAt = try row.optionalInt64(offset + 2)
            checkedAt = try row.optionalInt64(offset + 3)
            failure = try row.optionalString(offset + 4)
            state = try row.string(offset + 5)
            attempts = try row.int64(offset + 6)
            nextCheckAt = try row.optionalInt64(offset + 7)
        }
    }

    static func record(_ row: Row, merchantIdentifier: String, now: Date) throws(StoreError) -> DomainRecord {
        record(try Columns(row, offset: 0), merchantIdentifier: merchantIdentifier, now: now)
    }

    /// Status: the stored state, but `lapsed` for a verified or retrying domain whose site certificate has
    /// expired (until its check at that expiry decides).
    static func record(_ columns: Columns, merchantIdentifier: String, now: Date) -> DomainRecord {
        var status = columns.state
        if status == "verified" || status == "retrying", (columns.expiresAt ?? 0) <= now.orchardMilliseconds {
            status = "lapsed"
        }
        let retriesLeft = columns.state == "retrying" ? max(0, Self.retries + 1 - Int(columns.attempts)) : nil
        return DomainRecord(
            status: status, merchantIdentifier: merchantIdentifier, domain: columns.domain,
            verifiedAt: columns.verifiedAt.map(format), expiresAt: columns.expiresAt.map(format),
            nextCheckAt: columns.nextCheckAt.map(format), failure: columns.failure,
            checkedAt: columns.checkedAt.map(format), retriesLeft: retriesLeft)
    }

    static func milliseconds(_ duration: Duration) -> Int64 { duration.components.seconds * 1000 }

    static func format(_ milliseconds: Int64) -> String {
        ISO8601DateFormatter().string(from: Date(orchardMilliseconds: milliseconds))
    }

    /// A domain as the address bar shows it: a DNS host name, lower-cased; no scheme, port or path.
    static func checkDomain(_ domain: String) throws -> String {
        let lower = domain.lowercased()
        guard HostNames.isHostName(lower) else {
            throw PayServerError(
                .invalidRequest,
                "\"\(domain)\" is not a domain: give the host name shown in the address bar (e.g. store.orchard.test), "
                    + "without scheme, port or path")
        }
        return lower
    }
}
