import CardBasics
import Foundation
import MerchantServer
import NetworkServer
import OrchardCrypto
import OrchardRuntime
import OrchardStore
import PayServer
import TokenService

/// One size of `orchard bench scale`: every filled table holds `rows` rows when the figures are taken.
public struct ScaleLevel: Sendable, Codable, Hashable {
    public let rows: Int
    /// Seconds spent filling from the previous size to this one.
    public let fillSeconds: Double
    /// The process's resident set after the figures, in MiB.
    public let residentMegabytes: Double
    public let figures: [LatencyFigure]
}

/// What `orchard bench scale` prints as JSON on stdout.
public struct ScaleBenchmarkReport: Sendable, Codable {
    public let suite: String
    /// `"release"` or `"debug"`: only release figures mean anything.
    public let build: String
    public let levels: [ScaleLevel]
    /// Per figure, its p99 at the largest size divided by its p99 at the smallest.
    public let growth: [String: Double]
    /// The largest of ``growth``.
    public let worstGrowth: Double
    /// The ceiling on ``worstGrowth`` (1.5).
    public let target: Double
    public let meetsTarget: Bool
    public let loadAverage: Double
    public let freeDiskBytes: Int64
    public let requiredDiskBytes: Int64
}

/// `orchard bench scale`: fills each party's store through its own store code (the network's token vault with
/// its idempotency records, the Pay server's payment nonces, the merchant's orders), in batches of one
/// transaction each, to each size in turn, and at each size measures the store operations of the
/// authorization and in-app paths, p50/p99, and the resident set. The stores are SQLite files in a directory
/// of their own (WAL, synchronous FULL, as deployed), deleted afterwards.
public enum ScaleBenchmark {
    /// Disk per row of every filled table together (records, indexes, WAL), with a margin.
    public static let bytesPerRow: Int64 = 4096

    /// The free space `orchard bench scale` asks for before filling to `largest` rows.
    public static func requiredDiskBytes(largest: Int) -> Int64 { Int64(largest) * bytesPerRow + (64 << 20) }

    /// Throws when `free` bytes cannot hold the stores at `largest` rows.
    public static func checkDisk(free: Int64, largest: Int) throws(BenchmarkError) {
        let required = requiredDiskBytes(largest: largest)
        guard free >= required else {
            throw BenchmarkError(
                .invalidConfiguration,
                "\(largest) rows need about \(required >> 20) MiB of free disk and \(free >> 20) MiB are free: "
                    + "free some space or pass smaller --sizes")
        }
    }

    /// The free bytes of the file system holding `path`.
    public static func freeDiskBytes(at path: String) throws -> Int64 {
        let attributes = try FileManager.default.attributesOfFileSystem(forPath: path)
        guard let free = (attributes[.systemFreeSize] as? NSNumber)?.int64Value else {
            throw BenchmarkError(.operationFailed, "the free space of \(path) cannot be read")
        }
        return free
    }

    /// The resident set of this process in MiB (`/proc/self/status`), -1 when unreadable.
    static func residentMegabytes() -> Double {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return -1 }
        for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            let kilobytes = line.split(separator: " ").compactMap { Double($0) }.first ?? -1
            return (kilobytes / 1024 * 10).rounded() / 10
        }
        return -1
    }

    /// A 16-digit card number with a valid Luhn check digit: `prefix` then `index` zero-padded.
    static func dpan(_ index: Int, prefix: String = "489537") -> String {
        let body = prefix + String(repeating: "0", count: max(0, 9 - String(index).count)) + String(index)
        var sum = 0
        for (offset, character) in body.reversed().enumerated() {
            var digit = Int(character.asciiValue! - 48)
            if offset % 2 == 0 {
                digit *= 2
                if digit > 9 { digit -= 9 }
            }
            sum += digit
        }
        return body + String((10 - sum % 10) % 10)
    }

    /// The token every filled row copies (its reference and DPAN replaced).
    static func templateToken(at now: Date) throws -> TokenRecord {
        let json = """
            {"tokenReference":"tok_template","dpan":"\(dpan(0, prefix: "999999"))","panSequenceNumber":0,
            "tokenExpiry":{"year":2035,"month":12},"rangeID":"bench","issuerID":"bench","cardID":"card_bench",
            "tokenRequestorID":"bench","deviceID":"bench-device","deviceKind":"phone","domainControls":7,
            "suspendedBy":[],"deleted":false,"atcWindow":{"used":0},
            "createdAt":\(now.timeIntervalSinceReferenceDate),"updatedAt":\(now.timeIntervalSinceReferenceDate)}
            """
        return try JSONDecoder().decode(TokenRecord.self, from: Data(json.utf8))
    }

    static let scope = "authorize"
    static let fingerprint = String(repeating: "ab", count: 32)

    static func nanoseconds(_ duration: Duration) -> UInt64 {
        UInt64(duration.components.seconds) * 1_000_000_000 + UInt64(duration.components.attoseconds / 1_000_000_000)
    }

    /// Fills to each of `sizes` (ascending) rows per table in `directory` (which must exist and be empty) and
    /// measures `samples` operations of each figure at each size.
    public static func run(
        sizes: [Int], samples: Int, batch: Int = 10_000, directory: String, trace: (String) -> Void
    ) async throws -> ScaleBenchmarkReport {
        guard let largest = sizes.max(), sizes.allSatisfy({ $0 > 0 }), sizes == sizes.sorted(), samples > 0 else {
            throw BenchmarkError(.invalidConfiguration, "sizes must be positive and ascending, samples positive")
        }
        let free = try freeDiskBytes(at: directory)
        try checkDisk(free: free, largest: largest)
        let clock = SystemClock()
        let random = SystemRandom()
        let vault = try SQLiteTokenVaultStore(path: directory + "/network.sqlite")
        let pay = try PayStore.open(in: DeploymentDirectory(path: directory))
        let merchant = try Store(
            path: directory + "/merchant.sqlite", options: MerchantService.storeOptions,
            migrations: MerchantOrderStore.migrations)
        let nonces = BenchmarkNonces(store: pay, clock: clock, random: random)
        let template = try templateToken(at: clock.now())
        var filled = 0
        var levels: [ScaleLevel] = []
        var fresh = 0
        do {
            for size in sizes {
                let started = ContinuousClock.now
                while filled < size {
                    let range = filled..<min(size, filled + batch)
                    let now = clock.now()
                    try await vault.insertForBenchmark(
                        tokens: range.map { ("tok_bench_\($0)", dpan($0)) }, like: template,
                        records: range.map {
                            IdempotencyRecord(
                                scope: scope, key: "bench-\($0)", requestFingerprint: fingerprint,
                                response: Array("{\"responseCode\":\"00\"}".utf8), createdAt: now)
                        })
                    try await nonces.insertUsed(count: range.count, at: now)
                    try await MerchantOrderStore.insertForBenchmark(
                        orderIDs: range.map { "ord_bench_\($0)" }, amountMinor: 1999, at: now, in: merchant)
                    filled = range.upperBound
                }
                let fillSeconds = Double(nanoseconds(ContinuousClock.now - started)) / 1e9
                trace("filled \(size) rows per table in \(String(format: "%.1f", fillSeconds)) s")
                var authorization: [UInt64] = []
                var replay: [UInt64] = []
                var inApp: [UInt64] = []
                var order: [UInt64] = []
                for _ in 0..<samples {
                    let index = Int.random(in: 0..<size)
                    fresh += 1
                    var start = ContinuousClock.now
                    // The authorization path: the retry check, the token by DPAN, the ATC recorded with its record.
                    guard try await vault.idempotencyRecord(scope: scope, key: "fresh-\(fresh)") == nil,
                        let token = try await vault.token(dpan: try PrimaryAccountNumber(dpan(index)))
                    else { throw BenchmarkError(.mismatch, "a filled token is missing") }
                    try await vault.saveToken(
                        token,
                        with: IdempotencyRecord(
                            scope: scope, key: "fresh-\(fresh)", requestFingerprint: fingerprint, response: [],
                            createdAt: clock.now(),
                            started: StartedAuthorization(
                                tokenReference: token.tokenReference, applicationTransactionCounter: 1)))
                    authorization.append(nanoseconds(ContinuousClock.now - start))
                    start = ContinuousClock.now
                    guard try await vault.idempotencyRecord(scope: scope, key: "bench-\(index)") != nil else {
                        throw BenchmarkError(.mismatch, "a filled idempotency record is missing")
                    }
                    replay.append(nanoseconds(ContinuousClock.now - start))
                    start = ContinuousClock.now
                    let nonce = try await nonces.issue(to: "bench-device")
                    try await nonces.redeem(nonce, device: "bench-device")
                    inApp.append(nanoseconds(ContinuousClock.now - start))
                    start = ContinuousClock.now
                    guard
                        try await MerchantOrderStore.amountForBenchmark(orderID: "ord_bench_\(index)", in: merchant)
                            == 1999
                    else { throw BenchmarkError(.mismatch, "a filled order is missing") }
                    order.append(nanoseconds(ContinuousClock.now - start))
                }
                let figures = [
                    try LatencyFigure(
                        name: "authorization: token by DPAN + ATC", nanoseconds: authorization,
                        targetP99Milliseconds: nil),
                    try LatencyFigure(
                        name: "authorization: idempotency replay", nanoseconds: replay, targetP99Milliseconds: nil),
                    try LatencyFigure(
                        name: "in-app: nonce issue + redeem", nanoseconds: inApp, targetP99Milliseconds: nil),
                    try LatencyFigure(name: "merchant: order lookup", nanoseconds: order, targetP99Milliseconds: nil),
                ]
                let level = ScaleLevel(
                    rows: size, fillSeconds: (fillSeconds * 10).rounded() / 10, residentMegabytes: residentMegabytes(),
                    figures: figures)
                trace("\(size) rows, RSS \(level.residentMegabytes) MiB")
                for figure in figures { trace("  " + figure.row) }
                levels.append(level)
            }
        } catch {
            await vault.store.close()
            await pay.close()
            await merchant.close()
            throw error
        }
        await vault.store.close()
        await pay.close()
        await merchant.close()
        var growth: [String: Double] = [:]
        if let first = levels.first, let last = levels.last {
            for (small, large) in zip(first.figures, last.figures) {
                growth[small.name] = (large.p99Milliseconds / max(small.p99Milliseconds, 1e-6) * 100).rounded() / 100
            }
        }
        let worst = growth.values.max() ?? 1
        return ScaleBenchmarkReport(
            suite: "scale", build: BenchmarkReport.buildConfiguration, levels: levels, growth: growth,
            worstGrowth: worst, target: 1.5, meetsTarget: worst <= 1.5, loadAverage: InAppBenchmark.loadAverage(),
            freeDiskBytes: free, requiredDiskBytes: requiredDiskBytes(largest: largest))
    }
}
