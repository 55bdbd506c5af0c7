import AccessPolicy
import Foundation
import OrchardCrypto
import OrchardHTTP
import OrchardLogging
import OrchardStore
import Synchronization

/// What ``OverloadBenchmark/run(seconds:multiple:maxInFlight:trace:)`` measured.
public struct OverloadBenchmarkResult: Sendable, Codable {
    public let cores: Int
    /// Seconds of each open-loop phase.
    public let seconds: Double
    /// The server's admission bound (``AdmissionLimits/maxInFlight``).
    public let maxInFlight: Int
    /// Payments per second with ``maxInFlight`` closed-loop clients and nothing else: the capacity.
    public let capacityPerSecond: Double
    /// The open-loop rate of the overload phase (`multiple` × capacity; 20 % payments, 40 % orders, 40 % analytics).
    public let offeredPerSecond: Double
    /// p99 of payments at half the capacity, payments only, open loop (from the intended send time).
    public let unloadedPaymentP99Milliseconds: Double
    /// p99 of the payments of the overload phase, from their intended send time.
    public let loadedPaymentP99Milliseconds: Double
    /// Loaded ÷ unloaded p99 (the target: at most 2).
    public let paymentP99Ratio: Double
    /// Answers 200 per second in the overload phase.
    public let goodputPerSecond: Double
    /// Goodput ÷ capacity (the target: at least 0.9).
    public let goodputFraction: Double
    /// Requests answered 503 ÷ requests sent, in the overload phase.
    public let shedFraction: Double
    /// The same per route class.
    public let shedFractionByClass: [String: Double]
    /// Payments of the overload phase answered 503.
    public let paymentsShed: Int
    /// Requests answered 200 over every phase (each acknowledges one durable row).
    public let acknowledged: Int
    /// Acknowledged rows not found in the store afterwards (must be 0).
    public let lost: Int
    /// Answers other than 200 and 503, and transport failures.
    public let errors: Int
    /// Arrivals of the overload phase the generator did not send because it already had
    /// ``OverloadBenchmark/maxOutstanding`` requests open (counted as not served).
    public let notSent: Int
    /// The CPU the server's event loop was pinned to (nil on one core); the generator and the blocking pool are not
    /// pinned.
    public let serverLoopCPU: Int?
}

/// Overload: an in-process HTTPS server with admission control, whose three routes (payment, order creation,
/// analytics) each sign the body with P-256 and store a row durably (SQLite WAL, `synchronous=FULL`) before they
/// answer 200. It measures the capacity (closed loop, payments only), the payments' unloaded p99 (open loop at half
/// the capacity), then an open-loop mix at `multiple` × capacity: the payments' p99 against the unloaded one, the
/// goodput against the capacity, the fraction shed, and that every acknowledged row is in the store.
public enum OverloadBenchmark {
    struct Sample: Sendable {
        let routeClass: String
        let status: Int
        let nanoseconds: UInt64
    }

    public static func run(
        seconds: Double, multiple: Double = 3, maxInFlight: Int = 16,
        trace: @escaping @Sendable (String) -> Void
    ) async throws -> OverloadBenchmarkResult {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "orchard-bench-overload-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try Store(
            path: directory.appendingPathComponent("overload.sqlite").path, options: StoreOptions(durability: .full),
            migrations: [
                Migration(version: 1, name: "acknowledged") { db in
                    try db.executeScript("CREATE TABLE acknowledged (id TEXT PRIMARY KEY, class TEXT NOT NULL)")
                }
            ])
        let key = try P256.Signing.PrivateKey()
        var limits = AdmissionLimits()
        limits.maxInFlight = maxInFlight
        limits.openRouteRate = nil
        var router = Router()
        router.admission = AdmissionControl(limits: limits)
        for (path, routeClass) in routes {
            let route = DeclaredRoute("POST", path, .anyone)
            router.classify(route, as: routeClass)
            let name = routeClass.name
            router.add(route) { request in
                let id = String(decoding: request.body, as: UTF8.self)
                _ = try key.signature(for: Array(request.body))
                try await store.write { db in
                    _ = try db.execute("INSERT INTO acknowledged (id, class) VALUES (?, ?)", [.text(id), .text(name)])
                }
                return HTTPResponse(status: .ok, headers: [:], body: Data())
            }
        }
        let identity = try EphemeralCertificate()
        let cores = ProcessInfo.processInfo.activeProcessorCount
        var configuration = HTTPServerConfiguration(
            listeners: [
                .init(
                    port: 0,
                    tls: TLSServerConfiguration(
                        certificateChainPEM: identity.certificatePEM, privateKeyPEM: identity.privateKeyPEM,
                        clientCertificatePolicy: .none))
            ],
            threads: 1)
        let loopCPU = cores >= 2 ? cores - 1 : nil
        configuration.loopCPUs = loopCPU.map { [$0] }
        let server = try HTTPServer(
            configuration: configuration, router: router, logger: Logger(label: "bench", level: .warning))
        try server.start()
        var clientConfiguration = HTTPClientConfiguration(trustedRootsPEM: identity.certificatePEM)
        clientConfiguration.maxAttempts = 1
        clientConfiguration.maxCachedConnections = 256
        let client = try HTTPClient(configuration: clientConfiguration)
        let base = "https://localhost:\(server.port)"
        let ids = RequestIDs()

        do {
            // As many closed-loop clients as the bound admits: none is shed, the server is kept busy.
            trace("capacity: \(maxInFlight) closed-loop clients, payments only, \(Int(seconds)) s…")
            let closed = try await closedLoop(
                client: client, base: base, clients: maxInFlight, seconds: seconds, ids: ids)
            let capacity = Double(closed.filter { $0.status == 200 }.count) / seconds
            trace("capacity \(Int(capacity))/s; unloaded: payments at \(Int(capacity / 2))/s, open loop…")
            let unloaded = try await openLoop(
                client: client, base: base, rate: capacity / 2, seconds: seconds, mix: [("/pay", "payment")],
                ids: ids)
            let offered = capacity * multiple
            trace("overload: \(Int(offered))/s (20 % payments, 40 % orders, 40 % analytics), open loop…")
            let loaded = try await openLoop(
                client: client, base: base, rate: offered, seconds: seconds,
                mix: [
                    ("/pay", "payment"), ("/orders", "order_creation"), ("/orders", "order_creation"),
                    ("/analytics", "analytics"), ("/analytics", "analytics"),
                ], ids: ids)
            await server.shutdown()
            client.shutdown()

            let all = closed + unloaded + loaded
            let acknowledged = all.filter { $0.status == 200 }.count
            let stored = try await store.read { db in
                try db.query("SELECT count(*) FROM acknowledged") { row in try row.int(0) }.first ?? 0
            }
            await store.close()
            func p99(_ samples: [Sample]) -> Double {
                let sorted = samples.filter { $0.status == 200 }.map(\.nanoseconds).sorted()
                guard !sorted.isEmpty else { return 0 }
                let index = min(sorted.count - 1, Int((Double(sorted.count) * 0.99).rounded(.up)) - 1)
                return (Double(sorted[max(0, index)]) / 1e6 * 100).rounded() / 100
            }
            let unloadedP99 = p99(unloaded)
            let loadedPayments = loaded.filter { $0.routeClass == "payment" }
            let loadedP99 = p99(loadedPayments)
            var shedByClass: [String: Double] = [:]
            for name in Set(loaded.map { (sample: Sample) in sample.routeClass }) {
                let samples = loaded.filter { $0.routeClass == name }
                let shed = samples.filter { $0.status == 503 }.count
                shedByClass[name] = round3(Double(shed) / Double(samples.count))
            }
            let goodput = Double(loaded.filter { $0.status == 200 }.count) / seconds
            return OverloadBenchmarkResult(
                cores: cores, seconds: seconds, maxInFlight: maxInFlight, capacityPerSecond: capacity.rounded(),
                offeredPerSecond: offered.rounded(), unloadedPaymentP99Milliseconds: unloadedP99,
                loadedPaymentP99Milliseconds: loadedP99,
                paymentP99Ratio: unloadedP99 > 0 ? round3(loadedP99 / unloadedP99) : 0,
                goodputPerSecond: goodput.rounded(), goodputFraction: round3(goodput / max(capacity, 1)),
                shedFraction: round3(Double(loaded.filter { $0.status == 503 }.count) / Double(max(loaded.count, 1))),
                shedFractionByClass: shedByClass,
                paymentsShed: loadedPayments.filter { $0.status == 503 }.count, acknowledged: acknowledged,
                lost: max(0, acknowledged - stored),
                errors: all.filter { $0.status != 200 && $0.status != 503 && $0.status != -1 }.count,
                notSent: loaded.filter { $0.status == -1 }.count, serverLoopCPU: loopCPU)
        } catch {
            await server.shutdown()
            client.shutdown()
            await store.close()
            throw error
        }
    }

    /// The most requests the open-loop generator keeps open at once.
    static let maxOutstanding = 512

    /// Requests the generator has open.
    final class Outstanding: Sendable {
        private let count = Atomic<Int>(0)
        /// Counts one more open request; false (and nothing counted) when `limit` are open already.
        func open(limit: Int) -> Bool {
            guard count.wrappingAdd(1, ordering: .relaxed).newValue <= limit else {
                count.wrappingSubtract(1, ordering: .relaxed)
                return false
            }
            return true
        }
        /// One open request was answered.
        func close() { count.wrappingSubtract(1, ordering: .relaxed) }
    }

    /// Unique row IDs over every phase.
    final class RequestIDs: Sendable {
        private let counter = Atomic<Int>(0)
        func next() -> String { "r\(counter.wrappingAdd(1, ordering: .relaxed).newValue)" }
    }

    static let routes: [(String, RouteClass)] = [
        ("/pay", .payment), ("/orders", .orderCreation), ("/analytics", .analytics),
    ]

    static func round3(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }

    /// `clients` tasks, each sending the next payment as soon as the last is answered, for `seconds`.
    static func closedLoop(
        client: HTTPClient, base: String, clients: Int, seconds: Double, ids: RequestIDs
    ) async throws -> [Sample] {
        let clock = SystemClock()
        let end = clock.nanoseconds() + UInt64(seconds * 1e9)
        return try await withThrowingTaskGroup(of: [Sample].self) { group in
            for _ in 0..<clients {
                group.addTask {
                    var samples: [Sample] = []
                    while clock.nanoseconds() < end {
                        let begin = clock.nanoseconds()
                        samples.append(await send(client, base + "/pay", "payment", ids.next(), since: begin))
                    }
                    return samples
                }
            }
            var all: [Sample] = []
            for try await part in group { all += part }
            return all
        }
    }

    /// Sends at `rate` per second for `seconds`, whatever the answers (open loop), cycling through `mix`; each
    /// latency runs from the request's intended send time, so a stalled generator is counted, not hidden.
    static func openLoop(
        client: HTTPClient, base: String, rate: Double, seconds: Double, mix: [(String, String)],
        ids: RequestIDs
    ) async throws -> [Sample] {
        let clock = SystemClock()
        let start = clock.nanoseconds()
        let total = Int(rate * seconds)
        let interval = 1e9 / rate
        let outstanding = Outstanding()
        return await withTaskGroup(of: Sample.self) { group in
            var notSent: [Sample] = []
            var index = 0
            while index < total {
                let now = clock.nanoseconds()
                while index < total, Double(now - start) >= Double(index) * interval {
                    let intended = start + UInt64(Double(index) * interval)
                    let (path, name) = mix[index % mix.count]
                    let id = ids.next()
                    index += 1
                    // The generator keeps at most `maxOutstanding` requests open (one connection each): past it an
                    // arrival is counted as not sent rather than opening connections until descriptors run out.
                    guard outstanding.open(limit: maxOutstanding) else {
                        notSent.append(Sample(routeClass: name, status: -1, nanoseconds: 0))
                        continue
                    }
                    group.addTask {
                        defer { outstanding.close() }
                        return await send(client, base + path, name, id, since: intended)
                    }
                }
                try? await Task.sleep(for: .microseconds(500))
            }
            var all = notSent
            for await sample in group { all.append(sample) }
            return all
        }
    }

    static func send(
        _ client: HTTPClient, _ url: String, _ name: String, _ id: String, since: UInt64
    ) async -> Sample {
        let status: Int
        do {
            status = try await client.send(HTTPClientRequest(method: .post, url: url, body: Data(id.utf8))).status.code
        } catch {
            status = 0
        }
        return Sample(routeClass: name, status: status, nanoseconds: SystemClock().nanoseconds() &- since)
    }
}
