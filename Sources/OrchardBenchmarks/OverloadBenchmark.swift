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
    /// Arrivals of the overload phase still unsent 2 s after its end (counted as not served): their class's
    /// connections were held back by the server (see ``AdmissionLimits/holdBackLimit``) or busy.
    public let notSent: Int
    /// The same per route class.
    public let notSentByClass: [String: Int]
    /// The CPU the server's event loop and its store's writer thread were pinned to (nil on one core).
    public let serverLoopCPU: Int?
    /// The CPU the generator's client threads were pinned to (nil on one core); its Swift tasks are not pinned.
    public let generatorCPU: Int?
    /// Keep-alive connections of each class's callers.
    public let connectionsPerClass: Int
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
        // The server (its event loop and its store's writer thread) on the last core, the generator on the first.
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let serverCPU = cores >= 2 ? cores - 1 : nil
        let generatorCPU = cores >= 2 ? 0 : nil
        let store = try ThreadAffinity.withThreads(on: serverCPU.map { [$0] } ?? []) {
            try Store(
                path: directory.appendingPathComponent("overload.sqlite").path,
                options: StoreOptions(durability: .full),
                migrations: [
                    Migration(version: 1, name: "acknowledged") { db in
                        try db.executeScript("CREATE TABLE acknowledged (id TEXT PRIMARY KEY, class TEXT NOT NULL)")
                    }
                ])
        }
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
        router.add(DeclaredRoute("GET", "/warm", .anyone)) { _ in HTTPResponse(status: .ok, headers: [:], body: Data())
        }
        let identity = try EphemeralCertificate()
        var configuration = HTTPServerConfiguration(
            listeners: [
                .init(
                    port: 0,
                    tls: TLSServerConfiguration(
                        certificateChainPEM: identity.certificatePEM, privateKeyPEM: identity.privateKeyPEM,
                        clientCertificatePolicy: .none))
            ],
            threads: 1)
        configuration.loopCPUs = serverCPU.map { [$0] }
        let server = try HTTPServer(
            configuration: configuration, router: router, logger: Logger(label: "bench", level: .warning))
        try server.start()
        let connections = 2 * maxInFlight
        var clientConfiguration = HTTPClientConfiguration(trustedRootsPEM: identity.certificatePEM)
        clientConfiguration.maxAttempts = 1
        clientConfiguration.maxCachedConnections = connections + 8
        // The callers' client threads start on the generator's core and stay there.
        let callers = try ThreadAffinity.withThreads(on: generatorCPU.map { [$0] } ?? []) {
            try routes.map { path, routeClass in
                Caller(
                    path: path, name: routeClass.name, client: try HTTPClient(configuration: clientConfiguration),
                    connections: connections)
            }
        }
        let (payments, orders, analytics) = (callers[0], callers[1], callers[2])
        let base = "https://localhost:\(server.port)"
        let ids = RequestIDs()

        do {
            for caller in callers { await warm(caller, base: base) }
            // As many closed-loop clients as the bound admits: none is shed, the server is kept busy.
            trace("capacity: \(maxInFlight) closed-loop clients, payments only, \(Int(seconds)) s…")
            let closed = try await closedLoop(
                caller: payments, base: base, clients: maxInFlight, seconds: seconds, ids: ids)
            let capacity = Double(closed.filter { $0.status == 200 }.count) / seconds
            trace("capacity \(Int(capacity))/s; unloaded: payments at \(Int(capacity / 2))/s, open loop…")
            let unloaded = await openLoop(
                callers: [(payments, 1)], base: base, rate: capacity / 2, seconds: seconds, ids: ids)
            let offered = capacity * multiple
            trace("overload: \(Int(offered))/s (20 % payments, 40 % orders, 40 % analytics), open loop…")
            let loaded = await openLoop(
                callers: [(payments, 0.2), (orders, 0.4), (analytics, 0.4)], base: base, rate: offered,
                seconds: seconds, ids: ids)
            await server.shutdown()
            for caller in callers { caller.client.shutdown() }

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
                notSent: loaded.filter { $0.status == -1 }.count,
                notSentByClass: Dictionary(grouping: loaded.filter { $0.status == -1 }, by: \.routeClass).mapValues(
                    \.count),
                serverLoopCPU: serverCPU,
                generatorCPU: generatorCPU, connectionsPerClass: connections)
        } catch {
            await server.shutdown()
            for caller in callers { caller.client.shutdown() }
            await store.close()
            throw error
        }
    }

    /// Unique row IDs over every phase.
    final class RequestIDs: Sendable {
        private let counter = Atomic<Int>(0)
        func next() -> String { "r\(take())" }
        /// 0, 1, 2, …
        func take() -> Int { counter.wrappingAdd(1, ordering: .relaxed).oldValue }
    }

    static let routes: [(String, RouteClass)] = [
        ("/pay", .payment), ("/orders", .orderCreation), ("/analytics", .analytics),
    ]

    static func round3(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }

    /// One class's callers: their own client with a pool of `connections` keep-alive connections (the callers of
    /// one class are other parties than those of another, as terminals and devices are).
    struct Caller: Sendable {
        let path: String
        let name: String
        let client: HTTPClient
        let connections: Int
    }

    /// Opens every connection of `caller`'s pool (a request to `/warm` on each) before anything is timed.
    static func warm(_ caller: Caller, base: String) async {
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<caller.connections {
                group.addTask { _ = try? await caller.client.send(HTTPClientRequest(url: base + "/warm")) }
            }
        }
    }

    /// `clients` tasks, each sending the next payment as soon as the last is answered, for `seconds`.
    static func closedLoop(
        caller: Caller, base: String, clients: Int, seconds: Double, ids: RequestIDs
    ) async throws -> [Sample] {
        let clock = SystemClock()
        let end = clock.nanoseconds() + UInt64(seconds * 1e9)
        return try await withThrowingTaskGroup(of: [Sample].self) { group in
            for _ in 0..<clients {
                group.addTask {
                    var samples: [Sample] = []
                    while clock.nanoseconds() < end {
                        let begin = clock.nanoseconds()
                        samples.append(
                            await send(caller.client, base + caller.path, caller.name, ids.next(), since: begin))
                    }
                    return samples
                }
            }
            var all: [Sample] = []
            for try await part in group { all += part }
            return all
        }
    }

    /// Open loop: each caller's arrivals come at `rate × share` per second on a fixed schedule for `seconds`, whatever
    /// the answers. A caller sends over its pool of connections, each arrival as soon as a connection is free and its
    /// time has come; its latency runs from its scheduled time, so time spent waiting for a connection (a server
    /// that answers late) is counted, not hidden (no coordinated omission). Arrivals still unsent 2 s after the end
    /// are counted as not sent.
    static func openLoop(
        callers: [(Caller, Double)], base: String, rate: Double, seconds: Double, ids: RequestIDs
    ) async -> [Sample] {
        let clock = SystemClock()
        let start = clock.nanoseconds() + 1_000_000
        let giveUp = start + UInt64((seconds + 2) * 1e9)
        return await withTaskGroup(of: [Sample].self) { group in
            for (caller, share) in callers {
                let callerRate = rate * share
                let total = Int(callerRate * seconds)
                let interval = 1e9 / callerRate
                let next = RequestIDs()
                for _ in 0..<caller.connections {
                    group.addTask {
                        var samples: [Sample] = []
                        while true {
                            let index = next.take()
                            guard index < total else { break }
                            let intended = start + UInt64(Double(index) * interval)
                            let now = clock.nanoseconds()
                            if now > giveUp {
                                samples.append(Sample(routeClass: caller.name, status: -1, nanoseconds: 0))
                                continue
                            }
                            if intended > now { try? await Task.sleep(for: .nanoseconds(intended - now)) }
                            samples.append(
                                await send(caller.client, base + caller.path, caller.name, ids.next(), since: intended))
                        }
                        return samples
                    }
                }
            }
            var all: [Sample] = []
            for await part in group { all += part }
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
