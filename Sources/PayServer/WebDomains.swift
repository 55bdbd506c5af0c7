import Foundation
public import OrchardCrypto
import OrchardRuntime
public import OrchardServices
public import OrchardStore
import OrchardX509
public import WebMerchantAPI

/// The domains web merchants register at the Pay server and their validation (docs/web.md): a domain is
/// registered, validated only once the merchant's identity certificate exists, and stays validated until the
/// site's TLS certificate expires; the Pay server checks the site again 30, 15 and 7 days before
/// (``recheckDue()``), and a renewed certificate extends the validation.
public final class WebDomains: WebDomainOnboarding {
    /// Days before the site certificate's expiry at which the domain is checked again.
    public static let recheckDays: [Int] = [30, 15, 7]

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
                """
                SELECT domain, verified_at, expires_at, checked_at, failure FROM merchant_domains
                WHERE merchant_identifier = ? ORDER BY domain
                """, [.text(merchantIdentifier)]
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

    /// Validates a registered domain now and records the outcome: on success the validation lasts until the
    /// site certificate's expiry; a failure is recorded but does not cut short a validation still running.
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
        let now = clock.now()
        try await store.write { db in
            if outcome.passed, let notAfter = outcome.siteCertificateNotAfter {
                try db.execute(
                    """
                    UPDATE merchant_domains SET verified_at = ?, expires_at = ?, checked_at = ?, failure = NULL
                    WHERE merchant_identifier = ? AND domain = ?
                    """,
                    [
                        .milliseconds(now), .milliseconds(notAfter), .milliseconds(now), .text(merchantIdentifier),
                        .text(domain),
                    ])
            } else {
                try db.execute(
                    """
                    UPDATE merchant_domains SET checked_at = ?, failure = ? WHERE merchant_identifier = ? AND domain = ?
                    """,
                    [.milliseconds(now), .text(outcome.failure ?? "failed"), .text(merchantIdentifier), .text(domain)])
            }
        }
        let record = try await record(domain, merchantIdentifier: merchantIdentifier)
        return DomainVerificationReport(verified: outcome.passed, checks: outcome.checks, record: record)
    }

    /// Checks again every domain whose next check (30, 15 or 7 days before its site certificate expires) has
    /// come, and returns what each check found. The Pay server runs it when it starts and then hourly.
    public func recheckDue() async throws -> [DomainVerificationReport] {
        let now = clock.now()
        let due = try await store.read { db in
            try db.query(
                """
                SELECT merchant_identifier, domain, verified_at, expires_at, checked_at, failure FROM merchant_domains
                WHERE expires_at IS NOT NULL ORDER BY merchant_identifier, domain
                """
            ) { row -> (String, String, DomainRecord) in
                let merchant = try row.string(0)
                let columns = try Self.Columns(row, offset: 1)
                return (merchant, columns.domain, Self.record(columns, merchantIdentifier: merchant, now: now))
            }
        }
        var reports: [DomainVerificationReport] = []
        for (merchant, domain, record) in due {
            guard let next = record.nextCheckAt.flatMap(Self.parseDate), next <= now else { continue }
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
                """
                SELECT domain, verified_at, expires_at, checked_at, failure FROM merchant_domains
                WHERE merchant_identifier = ? AND domain = ?
                """, [.text(merchantIdentifier), .text(domain.lowercased())]
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

    // MARK: Rows

    struct Columns {
        let domain: String
        let verifiedAt: Int64?
        let expiresAt: Int64?
        let checkedAt: Int64?
        let failure: String?

        init(_ row: Row, offset: Int) throws(StoreError) {
            domain = try row.string(offset)
            verifiedAt = try row.optionalInt64(offset + 1)
            expiresAt = try row.optionalInt64(offset + 2)
            checkedAt = try row.optionalInt64(offset + 3)
            failure = try row.optionalString(offset + 4)
        }
    }

    static func record(_ row: Row, merchantIdentifier: String, now: Date) throws(StoreError) -> DomainRecord {
        record(try Columns(row, offset: 0), merchantIdentifier: merchantIdentifier, now: now)
    }

    /// Status: `verified` until the site certificate's expiry, `lapsed` after; never validated: `failed` after a
    /// failed check, else `registered`. The next check is the first of 30, 15 and 7 days before expiry that
    /// comes after the last check.
    static func record(_ columns: Columns, merchantIdentifier: String, now: Date) -> DomainRecord {
        let nowMS = now.orchardMilliseconds
        let status: String
        var nextCheck: Int64?
        if let expiresAt = columns.expiresAt {
            status = nowMS < expiresAt ? "verified" : "lapsed"
            let checked = columns.checkedAt ?? 0
            nextCheck = recheckDays.map { expiresAt - Int64($0) * 86_400_000 }.first { $0 > checked && $0 < expiresAt }
        } else {
            status = columns.failure == nil ? "registered" : "failed"
        }
        return DomainRecord(
            status: status, merchantIdentifier: merchantIdentifier, domain: columns.domain,
            verifiedAt: columns.verifiedAt.map(format), expiresAt: columns.expiresAt.map(format),
            nextCheckAt: nextCheck.map(format), failure: columns.failure)
    }

    static func format(_ milliseconds: Int64) -> String {
        ISO8601DateFormatter().string(from: Date(orchardMilliseconds: milliseconds))
    }

    static func parseDate(_ text: String) -> Date? { ISO8601DateFormatter().date(from: text) }

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
