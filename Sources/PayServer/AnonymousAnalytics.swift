public import Foundation
import OrchardCrypto
public import OrchardHTTP
public import OrchardStore
public import PayAPI

/// Aggregates printed by `orchard analytics`, with no cell under ``AnonymousAnalytics/minimumCell`` purchases.
///
/// A stored cell (amount bucket × hour × region) of fewer than five purchases is never shown: such cells are
/// merged into their day × region, which is shown when it reaches five, else only counted in ``withheld``.
public struct AnonymousAnalyticsSummary: Codable, Sendable, Hashable {
    /// Every purchase counted.
    public let purchases: Int
    /// Purchases of the cells of five or more, by amount bucket.
    public let byAmountBucket: [String: Int]
    /// Purchases of the cells of five or more, by hour (`YYYY-MM-DDTHH`, UTC).
    public let byHour: [String: Int]
    /// Purchases of the cells and merged cells of five or more, by region.
    public let byRegion: [String: Int]
    /// The small cells merged into day × region (`YYYY-MM-DD/region`), where they reach five.
    public let byDayAndRegion: [String: Int]
    /// Purchases of merged cells still under five: counted in ``purchases`` only.
    public let withheld: Int
    /// The in-app and web payments the Pay server counted, shown the same way.
    public let inAppAndWeb: ChannelTallies

    /// The Pay server's counters of accepted in-app and web payment credentials (`in_app_purchase_tallies`:
    /// channel × currency × value band × day), with the same rule as the in-store cells: a cell under five is
    /// merged into its channel × day, and one still under five is counted in ``withheld`` only.
    public struct ChannelTallies: Codable, Sendable, Hashable {
        /// Every in-app and web payment counted.
        public let purchases: Int
        /// Purchases of the cells of five or more, by channel (`in-app`, `web`).
        public let byChannel: [String: Int]
        /// Purchases of the cells of five or more, by currency (ISO 4217 alphabetic).
        public let byCurrency: [String: Int]
        /// Purchases of the cells of five or more, by value band (the decade of minor units: `"1000-9999"`).
        public let byValueBand: [String: Int]
        /// The small cells merged into channel × day (`web/YYYY-MM-DD`), where they reach five.
        public let byChannelAndDay: [String: Int]
        /// Purchases of merged cells still under five: counted in ``purchases`` only.
        public let withheld: Int
    }
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

    /// The migration that adds the day × region counters small cells are folded into (appended to
    /// ``PayStore/migrations``). Its columns share no name with any other table's, the hourly one's included.
    public static func dailyMigration(version: Int) -> Migration {
        Migration(
            version: version, name: "anonymous daily tallies",
            sql: """
                CREATE TABLE anonymous_daily_tallies (
                    tally_day TEXT NOT NULL,
                    day_region TEXT NOT NULL,
                    day_tally INTEGER NOT NULL CHECK (day_tally > 0),
                    PRIMARY KEY (tally_day, day_region)
                ) STRICT, WITHOUT ROWID;
                """)
    }

    /// Counts one purchase; then, in the same transaction, folds every cell of a day before `now`'s (UTC) that
    /// stayed under ``minimumCell`` into its day × region, so the file itself keeps no small hourly cell past its
    /// day (a late report for a closed day is folded at the next write).
    public static func record(_ report: AnonymousPurchase, in store: Store, now: Date) async throws {
        try validate(report)
        let today = CivilTime.dayStamp(now) ?? ""
        try await store.write { database in
            try database.execute(
                """
                INSERT INTO anonymous_purchase_tallies (amount_bucket, purchase_hour, coarse_region, tally)
                VALUES (?, ?, ?, 1)
                ON CONFLICT (amount_bucket, purchase_hour, coarse_region) DO UPDATE SET tally = anonymous_purchase_tallies.tally + 1
                """, [.text(report.amountBucket), .text(report.hour), .text(report.region)])
            try database.execute(
                """
                INSERT INTO anonymous_daily_tallies (tally_day, day_region, day_tally)
                SELECT substr(purchase_hour, 1, 10), coarse_region, SUM(tally) FROM anonymous_purchase_tallies
                WHERE tally < ?1 AND substr(purchase_hour, 1, 10) < ?2 GROUP BY 1, 2
                ON CONFLICT (tally_day, day_region) DO UPDATE SET
                    day_tally = anonymous_daily_tallies.day_tally + excluded.day_tally
                """, [.integer(Int64(minimumCell)), .text(today)])
            try database.execute(
                "DELETE FROM anonymous_purchase_tallies WHERE tally < ?1 AND substr(purchase_hour, 1, 10) < ?2",
                [.integer(Int64(minimumCell)), .text(today)])
        }
    }

    /// The fewest purchases a cell shown to anyone may hold: smaller cells could single out one person's purchase
    /// (the only purchase of 250+ in one region in one hour).
    public static let minimumCell = 5

    /// The totals per bucket, hour and region, over the cells of ``minimumCell`` or more; the smaller cells merged
    /// into day × region first (see ``AnonymousAnalyticsSummary``). This is the only reading of the table.
    public static func summary(of store: Store) async throws -> AnonymousAnalyticsSummary {
        let (rows, folded) = try await store.read { database in
            (
                try database.query(
                    "SELECT amount_bucket, purchase_hour, coarse_region, tally FROM anonymous_purchase_tallies", []
                ) { row in (try row.string(0), try row.string(1), try row.string(2), try row.int(3)) },
                try database.query("SELECT tally_day, day_region, day_tally FROM anonymous_daily_tallies", []) {
                    row in (try row.string(0), try row.string(1), try row.int(2))
                }
            )
        }
        var buckets: [String: Int] = [:]
        var hours: [String: Int] = [:]
        var regions: [String: Int] = [:]
        var merged: [String: (region: String, tally: Int)] = [:]
        for (bucket, hour, region, tally) in rows {
            guard tally >= minimumCell else {
                // `hour` is YYYY-MM-DDTHH (checked on the way in): its day is the first ten characters.
                let cell = String(hour.prefix(10)) + "/" + region
                merged[cell, default: (region, 0)].tally += tally
                continue
            }
            buckets[bucket, default: 0] += tally
            hours[hour, default: 0] += tally
            regions[region, default: 0] += tally
        }
        for (day, region, tally) in folded {
            merged[day + "/" + region, default: (region, 0)].tally += tally
        }
        var days: [String: Int] = [:]
        var withheld = 0
        for (cell, value) in merged {
            guard value.tally >= minimumCell else {
                withheld += value.tally
                continue
            }
            days[cell] = value.tally
            regions[value.region, default: 0] += value.tally
        }
        return AnonymousAnalyticsSummary(
            purchases: rows.reduce(0) { $0 + $1.3 } + folded.reduce(0) { $0 + $1.2 }, byAmountBucket: buckets,
            byHour: hours, byRegion: regions,
            byDayAndRegion: days, withheld: withheld, inAppAndWeb: try await channelTallies(of: store))
    }

    /// The in-app and web counters (their shards summed; the sum cast, as PostgreSQL's `sum` of a BIGINT is
    /// NUMERIC), under ``minimumCell`` merged into channel × day.
    static func channelTallies(of store: Store) async throws -> AnonymousAnalyticsSummary.ChannelTallies {
        let cells = try await store.read { database in
            try database.query(
                """
                SELECT payment_channel, currency_code, value_band, purchase_day, CAST(sum(purchases) AS BIGINT)
                FROM in_app_purchase_tallies GROUP BY payment_channel, currency_code, value_band, purchase_day
                """, []
            ) { row in (try row.string(0), try row.string(1), try row.string(2), try row.string(3), try row.int(4)) }
        }
        var channels: [String: Int] = [:]
        var currencies: [String: Int] = [:]
        var bands: [String: Int] = [:]
        var merged: [String: Int] = [:]
        for (channel, currency, band, day, purchases) in cells {
            guard purchases >= minimumCell else {
                merged[channel + "/" + day, default: 0] += purchases
                continue
            }
            channels[channel, default: 0] += purchases
            currencies[currency, default: 0] += purchases
            bands[band, default: 0] += purchases
        }
        var days: [String: Int] = [:]
        var withheld = 0
        for (cell, purchases) in merged {
            guard purchases >= minimumCell else {
                withheld += purchases
                continue
            }
            days[cell] = purchases
            // `cell` is `<channel>/<day>`: its channel is shown too.
            channels[String(cell.prefix { $0 != "/" }), default: 0] += purchases
        }
        return AnonymousAnalyticsSummary.ChannelTallies(
            purchases: cells.reduce(0) { $0 + $1.4 }, byChannel: channels, byCurrency: currencies, byValueBand: bands,
            byChannelAndDay: days, withheld: withheld)
    }
}

extension PayServer {
    /// `POST /v1/analytics/purchases`: ``AnonymousPurchase`` → 202 `{"accepted": true}`. Open to
    /// any TLS client, and refused (400) to one that presents a client certificate: the channel must not
    /// identify the device.
    func installAnonymousAnalytics(into router: inout Router) {
        let store = self.store
        let clock = self.clock
        router.exemptFromIdempotency(
            PayAPI.Declared.anonymousPurchases,
            because: "the channel is anonymous: a kept key would link a device's reports; a repeat adds one to a tally")
        router.classify(PayAPI.Declared.anonymousPurchases, as: .analytics)
        router.add(PayAPI.Declared.anonymousPurchases, status: .accepted) {
            (report: AnonymousPurchase, request: HTTPRequest) -> AnonymousPurchaseAccepted in
            guard request.clientCertificate == nil else {
                throw HTTPError(.invalidRequest, "anonymous data is sent without a client certificate")
            }
            try await AnonymousAnalytics.record(report, in: store, now: clock.now())
            return AnonymousPurchaseAccepted(accepted: true)
        }
    }
}
