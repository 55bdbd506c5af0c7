import DeviceProcess
import Foundation
import MerchantServer
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardStore
import OrchardX509
import PayAPI
import PayServer
import Testing

@Suite("Pay server: anonymous purchase data", .serialized)
struct AnonymousAnalyticsTests {
    let temporary: TemporaryDirectory
    let directory: DeploymentDirectory
    init() throws {
        temporary = try TemporaryDirectory()
        directory = DeploymentDirectory(path: temporary.child("deployment"))
    }

    func initialise() async throws -> ServiceRegistry {
        let registry = try ServiceRegistry([PayService(), MerchantService()])
        _ = try await DeploymentInitializer.initialize(directory, registry: registry)
        return registry
    }

    /// Every column of every table in `pay.sqlite`, by table.
    func columns(of store: Store) async throws -> [String: [String]] {
        let tables = try await store.read { database in
            try database.query("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name", []) { row in
                try row.string(0)
            }
        }
        var out: [String: [String]] = [:]
        for table in tables {
            out[table] = try await store.read { database in
                // `table` comes from sqlite_master, not from input.
                try database.query("SELECT name FROM pragma_table_info('\(table)')", []) { row in try row.string(0) }
            }
        }
        return out
    }

    @Test("V1: no analytics column can be joined to another table")
    func noAnalyticsColumnCanBeJoinedToAnotherTable() async throws {
        _ = try await initialise()
        let store = try PayStore.open(in: directory)
        let tables = try await columns(of: store)
        await store.close()
        let hourly = try #require(tables["anonymous_purchase_tallies"])
        #expect(Set(hourly) == ["amount_bucket", "purchase_hour", "coarse_region", "tally"])
        let daily = try #require(tables["anonymous_daily_tallies"])
        #expect(Set(daily) == ["tally_day", "day_region", "day_tally"])
        let analytics = hourly + daily
        #expect(tables.count > 2)
        for (table, names) in tables where !["anonymous_purchase_tallies", "anonymous_daily_tallies"].contains(table) {
            let shared = Set(names).intersection(analytics)
            #expect(shared.isEmpty, "\(table) shares \(shared.sorted()) with the analytics table")
        }
        // Nothing in it names a party, a card or a connection.
        for name in analytics {
            for word in ["device", "account", "card", "pan", "merchant", "token", "address", "ip", "id"] {
                #expect(!name.split(separator: "_").contains(Substring(word)), "\(name) looks identifying")
            }
        }
    }

    @Test func theRouteCountsAnonymousReportsAndRefusesTheRest() async throws {
        let registry = try await initialise()
        let connections = try await ServiceConnections.connect([.pay], directory: directory, registry: registry)
        let url = try connections.baseURL(of: .pay) + PayAPI.Route.anonymousPurchases
        let anonymous = try connections.client()
        for report in [
            AnonymousPurchase(amountBucket: "10-25", hour: "2026-03-01T12", region: "840"),
            AnonymousPurchase(amountBucket: "10-25", hour: "2026-03-01T12", region: "840"),
            AnonymousPurchase(amountBucket: "250+", hour: "2026-03-01T13", region: "250"),
        ] {
            let answer = try await anonymous.post(url, json: report)
            #expect(answer.status == .accepted)
            #expect(try JSONDecoder().decode(AnonymousPurchaseAccepted.self, from: answer.body).accepted)
        }
        // Malformed fields: refused, nothing counted.
        for report in [
            AnonymousPurchase(amountBucket: "12.34", hour: "2026-03-01T12", region: "840"),
            AnonymousPurchase(amountBucket: "0-5", hour: "2026-03-01T12:34", region: "840"),
            AnonymousPurchase(amountBucket: "0-5", hour: "2026-02-30T12", region: "840"),
            AnonymousPurchase(amountBucket: "0-5", hour: "2026-03-01T12", region: "USA"),
        ] {
            #expect(try await anonymous.post(url, json: report).status == .badRequest)
        }
        anonymous.shutdown()
        // A client that presents a certificate (here the merchant's identity) is refused: the channel must
        // not identify its sender.
        let identified = try connections.client(
            identity: try TLSIdentity.load(named: MerchantService.Files.identity, from: directory))
        let refused = try await identified.post(
            url, json: AnonymousPurchase(amountBucket: "0-5", hour: "2026-03-01T12", region: "840"))
        #expect(refused.status == .badRequest)
        identified.shutdown()
        await connections.close()

        let store = try PayStore.open(in: directory)
        let summary = try await AnonymousAnalytics.summary(of: store)
        await store.close()
        // All three counted; every cell is under five, so none is shown (see the V1 test below).
        #expect(summary.purchases == 3 && summary.withheld == 3)
        #expect(summary.byAmountBucket.isEmpty && summary.byHour.isEmpty && summary.byRegion.isEmpty)
    }

    /// No one reads a cell of fewer than five purchases.
    @Test("V1/S11: cells under 5 purchases are merged into day × region, and withheld while still under 5")
    func smallCellsAreMergedIntoDayAndRegion() async throws {
        _ = try await initialise()
        let store = try PayStore.open(in: directory)
        func record(_ count: Int, _ bucket: String, _ hour: String, _ region: String, now: String) async throws {
            for _ in 0..<count {
                try await AnonymousAnalytics.record(
                    AnonymousPurchase(amountBucket: bucket, hour: hour, region: region), in: store,
                    now: try #require(CivilTime.parseHourStamp(now)))
            }
        }
        func hourlyCells() async throws -> [String: Int] {
            let rows = try await store.read { database in
                try database.query(
                    "SELECT amount_bucket || ' ' || purchase_hour || ' ' || coarse_region, tally "
                        + "FROM anonymous_purchase_tallies", []
                ) { row in (try row.string(0), try row.int(1)) }
            }
            return Dictionary(uniqueKeysWithValues: rows)
        }
        try await record(5, "10-25", "2026-03-01T12", "840", now: "2026-03-01T12")  // shown as it is
        // 3 + 2 in one day and region: shown as the day.
        try await record(3, "250+", "2026-03-01T13", "840", now: "2026-03-01T13")
        try await record(2, "0-5", "2026-03-01T20", "840", now: "2026-03-01T20")
        try await record(1, "250+", "2026-03-01T12", "250", now: "2026-03-01T21")  // alone in its day: withheld
        let sameDay = try await AnonymousAnalytics.summary(of: store)
        #expect(try await hourlyCells().count == 4)  // the day is open: nothing folded yet
        // The next day's first report folds the closed day's small cells: the file keeps none past its day.
        try await record(4, "0-5", "2026-03-02T09", "840", now: "2026-03-02T09")  // another day: withheld
        #expect(try await hourlyCells() == ["10-25 2026-03-01T12 840": 5, "0-5 2026-03-02T09 840": 4])
        let summary = try await AnonymousAnalytics.summary(of: store)
        await store.close()
        #expect(sameDay.byDayAndRegion == summary.byDayAndRegion && sameDay.withheld == 1)
        #expect(summary.purchases == 15)
        #expect(summary.byAmountBucket == ["10-25": 5] && summary.byHour == ["2026-03-01T12": 5])
        #expect(summary.byDayAndRegion == ["2026-03-01/840": 5])
        #expect(summary.byRegion == ["840": 10] && summary.withheld == 5)
        // Every number shown is 5 or more.
        let shown = [summary.byAmountBucket, summary.byHour, summary.byRegion, summary.byDayAndRegion]
        #expect(shown.allSatisfy { $0.values.allSatisfy { $0 >= AnonymousAnalytics.minimumCell } })
    }

    @Test(
        "V1/S11: the in-app and web counters beside the in-store ones: shards summed, cells under 5 merged into channel × day, withheld while still under 5"
    )
    func inAppAndWebTalliesAreShownByTheSameRule() async throws {
        _ = try await initialise()
        let store = try PayStore.open(in: directory)
        // (channel, currency, value band, day, shard, purchases), as the Pay server counts accepted credentials.
        let rows: [(String, String, String, String, Int64, Int64)] = [
            ("in-app", "USD", "1000-9999", "2026-03-01", 0, 3), ("in-app", "USD", "1000-9999", "2026-03-01", 7, 2),
            ("web", "EUR", "100-999", "2026-03-01", 0, 3), ("web", "USD", "1000-9999", "2026-03-01", 0, 2),
            ("in-app", "USD", "10-99", "2026-03-02", 0, 4),
        ]
        try await store.write { database in
            for (channel, currency, band, day, shard, purchases) in rows {
                try database.execute(
                    """
                    INSERT INTO in_app_purchase_tallies
                        (payment_channel, currency_code, value_band, purchase_day, tally_shard, purchases)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """,
                    [.text(channel), .text(currency), .text(band), .text(day), .integer(shard), .integer(purchases)])
            }
        }
        let tallies = try await AnonymousAnalytics.summary(of: store).inAppAndWeb
        await store.close()
        #expect(tallies.purchases == 14)
        // The one cell of five (two shards) as it is; the web's two small cells of one day merged to five; the
        // in-app four of another day withheld.
        #expect(tallies.byCurrency == ["USD": 5] && tallies.byValueBand == ["1000-9999": 5])
        #expect(tallies.byChannelAndDay == ["web/2026-03-01": 5] && tallies.withheld == 4)
        #expect(tallies.byChannel == ["in-app": 5, "web": 5])
        let shown = [tallies.byChannel, tallies.byCurrency, tallies.byValueBand, tallies.byChannelAndDay]
        #expect(shown.allSatisfy { $0.values.allSatisfy { $0 >= AnonymousAnalytics.minimumCell } })
    }

    @Test func theDeviceReporterSendsWithoutItsCertificateOrDrops() async throws {
        let registry = try await initialise()
        let clock = ManualClock(now: Date(timeIntervalSince1970: 1_772_366_400))  // 2026-03-01 12:00 UTC
        let reporter = PayAnalyticsReporter(deployment: directory, maxDelay: .zero, clock: clock)
        let record = AnonymousPurchase(amountMinorUnits: 1_234, currency: 840, country: 840, at: clock.now())
        #expect(record == AnonymousPurchase(amountMinorUnits: 1_000, currency: 840, country: 840, at: clock.now()))
        #expect(record.amountBucket == "10-25" && record.hour == "2026-03-01T12" && record.region == "840")
        // No Pay server running: dropped, at once.
        #expect(await reporter.send(record) == .dropped)

        let connections = try await ServiceConnections.connect([.pay], directory: directory, registry: registry)
        let base = try connections.baseURL(of: .pay)
        let port = try #require(Int(base.split(separator: ":").last ?? ""))
        try directory.publish(ServiceRecord(service: .pay, host: "127.0.0.1", port: port))
        #expect(await reporter.send(record) == .sent)
        // With two instances, one that cannot be reached is passed over (its record names a port nobody listens on).
        let dead = try DeploymentInitializer.freePorts(1)[0]
        try directory.publish(ServiceRecord(service: .pay, host: "127.0.0.1", port: dead))
        try directory.publish(ServiceRecord(service: .pay, host: "127.0.0.1", port: port), instance: 2)
        #expect(await reporter.send(record) == .sent)
        directory.withdraw(.pay, instance: 2)
        try directory.publish(ServiceRecord(service: .pay, host: "127.0.0.1", port: port))
        // Through the sink interface, with the delay drawn from 0…0.
        let delivered = AsyncStream<PayAnalyticsReporter.Delivery>.makeStream()
        let sink = PayAnalyticsReporter(
            deployment: directory, maxDelay: .zero, clock: clock,
            delivered: { _, outcome in
                delivered.continuation.yield(outcome)
            })
        sink.purchase(amountMinorUnits: 99_900, currency: 392, country: 392)
        var iterator = delivered.stream.makeAsyncIterator()
        #expect(await iterator.next() == .sent)
        directory.withdraw(.pay)
        await connections.close()

        let store = try PayStore.open(in: directory)
        let summary = try await AnonymousAnalytics.summary(of: store)
        await store.close()
        // All three counted; each alone in its cell, so only as withheld.
        #expect(summary.purchases == 3 && summary.withheld == 3 && summary.byAmountBucket.isEmpty)
    }

    @Test("V1: amount buckets follow the currency exponent")
    func amountBucketsFollowTheCurrencyExponent() {
        let date = Date(timeIntervalSince1970: 0)
        let cases: [(UInt64, UInt16, String)] = [
            (0, 840, "0-5"), (499, 840, "0-5"), (500, 840, "5-10"), (2_499, 978, "10-25"), (4_999, 840, "25-50"),
            (9_999, 840, "50-100"), (24_999, 840, "100-250"), (25_000, 840, "250+"), (300, 392, "250+"),
            (4, 392, "0-5"), (12_345, 414, "10-25"), (6_000, 352, "250+"), (12_000, 368, "10-25"),
        ]
        for (amount, currency, bucket) in cases {
            let record = AnonymousPurchase(amountMinorUnits: amount, currency: currency, country: 4, at: date)
            #expect(record.amountBucket == bucket, "\(amount) in \(currency)")
            #expect(record.region == "004" && record.hour == "1970-01-01T00")
        }
    }

    @Test func onlyAReleasedCryptogramIsAPurchase() {
        // SELECT PPSE answered: no purchase.
        let select = [0x00, 0xA4, 0x04, 0x00, 0x0E] + Array("2PAY.SYS.DDF01".utf8) + [0x00]
        #expect(AnonymousPurchase.observed(command: select, response: [0x6F, 0x00, 0x90, 0x00]) == nil)
        // A GET PROCESSING OPTIONS the card refused (6985: no authorization): no purchase.
        let gpo: [UInt8] = [0x80, 0xA8, 0x00, 0x00, 0x02, 0x83, 0x00, 0x00]
        #expect(AnonymousPurchase.observed(command: gpo, response: [0x69, 0x85]) == nil)
        // Answered, but without a cryptogram (a Mastercard-style GPO): no purchase.
        #expect(AnonymousPurchase.observed(command: gpo, response: [0x77, 0x02, 0x82, 0x00, 0x90, 0x00]) == nil)
    }
}

@Suite("orchard bench instore and orchard analytics as commands")
struct InStoreCommandTests {
    /// A few taps through the whole benchmark, then the phone started as its own process (no timing is asserted:
    /// only that each figure was measured and every tap approved).
    @Test func benchInstoreChargesThroughTheRealParties() async throws {
        let (status, stdout, stderr) = try await runOrchard(["bench", "instore", "--seconds", "0.2", "--taps", "3"])
        #expect(status == 0, "\(stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: Any])
        let taps = report["taps"] as? Int ?? 0
        #expect(taps >= 1 && taps <= 3 && report["approved"] as? Int == taps)
        let figures = report["figures"] as? [[String: Any]] ?? []
        #expect(
            figures.compactMap { $0["name"] as? String } == [
                "device-side APDU exchange", "tap → authorization response", "device store fsync (4 KiB)",
                "device run → first tap answered",
            ])
        // `orchard device run` was started five times, each timed to its first tap answered.
        #expect(figures.last?["samples"] as? Int == 5)
        #expect(figures.last?["targetP99Milliseconds"] as? Double == 200)
        #expect(figures.allSatisfy { ($0["samples"] as? Int ?? 0) >= taps })
        #expect(figures.first?["targetP99Milliseconds"] as? Double == 5)
    }

    @Test func analyticsNeedsADeployment() async throws {
        let temporary = try TemporaryDirectory()
        let (status, _, stderr) = try await runOrchard(["analytics", "--data-dir", temporary.child("none")])
        #expect(status != 0 && stderr.contains("pay.sqlite"), "\(stderr)")
        let registry = try ServiceRegistry([PayService(), MerchantService()])
        _ = try await DeploymentInitializer.initialize(
            DeploymentDirectory(path: temporary.child("deployment")), registry: registry)
        let (ok, stdout, _) = try await runOrchard(["analytics", "--data-dir", temporary.child("deployment")])
        #expect(ok == 0)
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: Any])
        #expect(summary["purchases"] as? Int == 0)
        let inAppAndWeb = try #require(summary["inAppAndWeb"] as? [String: Any])
        #expect(inAppAndWeb["purchases"] as? Int == 0 && inAppAndWeb["withheld"] as? Int == 0)
    }
}
