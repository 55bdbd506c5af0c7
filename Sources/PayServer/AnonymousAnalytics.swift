import Foundation
import OrchardCrypto
public import OrchardHTTP
public import OrchardStore
public import PayAPI

/// Aggregates printed by `orchard analytics`.
public struct AnonymousAnalyticsSummary: Codable, Sendable, Hashable {
    public let purchases: Int
    public let byAmountBucket: [String: Int]
    public let byHour: [String: Int]
    public let byRegion: [String: Int]
}

/// The Pay server's anonymous transaction data: the table, the route and the aggregates.
///
/// Stored as counters, never as one row per purchase: `anonymous_purchase_tallies` holds
/// (`amount_bucket`, `purchase_hour`, `coarse_region`) → `tally`, so not even the order of arrival is kept.
/// No column shares a name with a column of another `pay.sqlite` table, and none holds anything that
/// identifies a device, account or card (`PayStoreSchemaTests` checks every table).
public enum AnonymousAnalytics {
    /// The migration that adds the table (appended to ``PayStore/migrations``).
    public static func migration(version: Int) -> Migration {
        Migration(
            version: version, name: "anonymous purchase tallies",
            sql: """
                CREATE TABLE anonymous_purchase_tallies (
                    amount_bucket TEXT NOT NULL,
                    purchase_hour TEXT NOT NULL,
                    coarse_region TEXT NOT NULL,
                    tally INTEGER NOT NULL CHECK (tally > 0),
                    PRIMARY KEY (amount_bucket, purchase_hour, coarse_region)
                ) STRICT, WITHOUT ROWID;
                """)
    }

    /// Checks a report's three fields: a known bucket, a real hour, a three-digit region.
    public static func validate(_ report: AnonymousPurchase) throws(HTTPError) {
        guard AnonymousPurchase.amountBuckets.contains(report.amountBucket) else {
            throw HTTPError(
                .invalidRequest, "amountBucket is one of \(AnonymousPurchase.amountBuckets.joined(separator: ", "))")
        }
        let region = Array(report.region.utf8)
        guard region.count == 3, region.allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw HTTPError(.invalidRequest, "region is an ISO 3166-1 numeric code (three digits)")
        }
        guard CivilTime.parseHourStamp(report.hour) != nil else {
            throw HTTPError(.invalidRequest, "hour is YYYY-MM-DDTHH (UTC)")
        }
    }

    /// Counts one purchase.
    public static func record(_ report: AnonymousPurchase, in store: Store) async throws {
        try validate(report)
        try await store.write { database in
            try database.execute(
                """
                INSERT INTO anonymous_purchase_tallies (amount_bucket, purchase_hour, coarse_region, tally)
                VALUES (?, ?, ?, 1)
                ON CONFLICT (amount_bucket, purchase_hour, coarse_region) DO UPDATE SET tally = tally + 1
                """, [.text(report.amountBucket), .text(report.hour), .text(report.region)])
        }
    }

    /// The totals per bucket, hour and region.
    public static func summary(of store: Store) async throws -> AnonymousAnalyticsSummary {
        let rows = try await store.read { database in
            try database.query(
                "SELECT amount_bucket, purchase_hour, coarse_region, tally FROM anonymous_purchase_tallies", []
            ) { row in (try row.string(0), try row.string(1), try row.string(2), try row.int(3)) }
        }
        var buckets: [String: Int] = [:]
        var hours: [String: Int] = [:]
        var regions: [String: Int] = [:]
        for (bucket, hour, region, tally) in rows {
            buckets[bucket, default: 0] += tally
            hours[hour, default: 0] += tally
            regions[region, default: 0] += tally
        }
        return AnonymousAnalyticsSummary(
            purchases: rows.reduce(0) { $0 + $1.3 }, byAmountBucket: buckets, byHour: hours, byRegion: regions)
    }
}

extension PayServer {
    /// `POST /v1/analytics/purchases`: ``AnonymousPurchase`` → 202 `{"accepted": true}`. Open to
    /// any TLS client, and refused (400) to one that presents a client certificate: the channel must not
    /// identify the device.
    func installAnonymousAnalytics(into router: inout Router) {
        let store = self.store
        router.exemptFromIdempotency(
            PayAPI.Declared.anonymousPurchases,
            because: "the channel is anonymous: a kept key would link a device's reports; a repeat adds one to a tally")
        router.classify(PayAPI.Declared.anonymousPurchases, as: .analytics)
        router.add(PayAPI.Declared.anonymousPurchases, status: .accepted) {
            (report: AnonymousPurchase, request: HTTPRequest) -> AnonymousPurchaseAccepted in
            guard request.clientCertificate == nil else {
                throw HTTPError(.invalidRequest, "anonymous data is sent without a client certificate")
            }
            try await AnonymousAnalytics.record(report, in: store)
            return AnonymousPurchaseAccepted(accepted: true)
        }
    }
}
