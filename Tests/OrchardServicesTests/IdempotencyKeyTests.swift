import AccessPolicy
import Foundation
import OrchardCrypto
import OrchardHTTP
import OrchardLogging
import OrchardRuntime
import OrchardServices
import OrchardStore
import OrchardX509
import PayServer
import Testing

/// `Idempotency-Key` as every Orchard service honours it: the router's middleware over the service's
/// `DIR/<service>-idempotency.sqlite`, served by a real ``HTTPServiceInstance`` over HTTPS on loopback, with
/// device certificates from the deployment's device CA as the callers.
@Suite("Idempotency-Key on state-changing routes")
struct IdempotencyKeyTests {
    static let holds = DeclaredRoute("POST", "/test/holds", .role(CallerRoles.device))
    static let otherHolds = DeclaredRoute("POST", "/test/other-holds", .role(CallerRoles.device))
    static let gated = DeclaredRoute("POST", "/test/gated", .role(CallerRoles.device))
    static let failing = DeclaredRoute("POST", "/test/failing", .role(CallerRoles.device))
    static let exempt = DeclaredRoute("POST", "/test/exempt", .role(CallerRoles.device))
    static let open = DeclaredRoute("POST", "/test/open", .anyone)

    /// Counts the handler's runs (the "holds placed").
    final class Counter: @unchecked Sendable {
        // Thread-safety: `value` under `lock` only.
        private let lock = NSLock()
        private var value = 0
        func next() -> Int {
            lock.withLock {
                value += 1; return value
            }
        }
        var count: Int { lock.withLock { value } }
    }

    let temporary: TemporaryDirectory
    let directory: DeploymentDirectory
    let clock = ManualClock(now: Date(timeIntervalSince1970: 1_800_000_000))
    let counter = Counter()
    let started: AsyncStream<Void>
    let startedContinuation: AsyncStream<Void>.Continuation
    let gate: AsyncStream<Void>
    let gateContinuation: AsyncStream<Void>.Continuation

    init() async throws {
        temporary = try TemporaryDirectory()
        directory = DeploymentDirectory(path: temporary.child("deployment"))
        _ = try await DeploymentInitializer.initialize(directory, registry: try ServiceRegistry([PayService()]))
        (started, startedContinuation) = AsyncStream<Void>.makeStream()
        (gate, gateContinuation) = AsyncStream<Void>.makeStream()
    }

    /// The test routes: each placed hold answers 201 with its number.
    func router() -> Router {
        var router = Router()
        router.roles[CallerRoles.device] = .required(
            where: { _ in true },
            identity: { certificate in
                (try? Certificate(derEncoded: certificate.derRepresentation))?.subject.userID.flatMap {
                    CallerIdentity(subjectUserID: $0)
                }
            })
        let counter = self.counter
        let place: Router.Handler = { _ in try HTTPResponse.json(["hold": counter.next()], status: .created) }
        router.add(Self.holds, place)
        router.add(Self.otherHolds, place)
        router.add(Self.open, place)
        router.add(Self.exempt, place)
        router.exemptFromIdempotency(Self.exempt, because: "the test's naturally idempotent route")
        router.add(Self.failing) { _ in
            _ = counter.next()
            return HTTPResponse(status: .serviceUnavailable)
        }
        let started = startedContinuation
        let gate = self.gate
        router.add(Self.gated) { request in
            started.yield()
            for await _ in gate { break }
            return try await place(request)
        }
        return router
    }

    /// Runs `body` against a started service built from ``router()``, then stops it.
    func withService(_ body: (String) async throws -> Void) async throws {
        let registry = try ServiceRegistry([PayService()])
        let configuration = try registry.loadConfiguration(from: directory, environment: [:])
        let service = try HTTPServiceInstance(
            name: .pay, configuration: configuration, directory: directory, router: router(),
            logger: Logger(label: "test", level: .warning, sink: NullLogSink()), clock: clock)
        let endpoint = try await service.start()
        do {
            try await body("https://\(endpoint.host):\(endpoint.port)")
        } catch {
            await service.shutdown()
            throw error
        }
        await service.shutdown()
    }

    /// A client presenting a device certificate naming `device:<id>` (or none).
    func client(device id: String?) throws -> HTTPClient {
        var configuration = HTTPClientConfiguration(
            trustedRootsPEM: try directory.readCertificate(named: PKIFiles.rootCA), maxAttempts: 1)
        if let id {
            let deviceCA = try CertificateAuthority.load(named: PKIFiles.deviceCA, from: directory)
            let identity = try issueClientIdentity(from: deviceCA, uid: "device:" + id)
            configuration.clientCertificateChainPEM = identity.certificateChainPEM
            configuration.clientPrivateKeyPEM = identity.privateKeyPEM
        }
        return try HTTPClient(configuration: configuration)
    }

    func post(
        _ client: HTTPClient, _ url: String, key: String?, amount: Int = 100
    ) async throws -> HTTPResponse {
        try await client.post(url, json: ["amount": amount], headers: key.map { ["Idempotency-Key": $0] } ?? [:])
    }

    /// The records kept in the service's file.
    func storedKeys() throws -> Int {
        let database = try Database(
            path: directory.path + "/pay-idempotency.sqlite", options: StoreOptions(durability: .full))
        return Int(try database.queryFirst("SELECT count(*) FROM orchard_idempotency_keys") { try $0.int64(0) } ?? 0)
    }

    @Test func aReplayReturnsTheStoredAnswerWithoutRunningTheHandlerAgain() async throws {
        try await withService { base in
            let device = try client(device: "A")
            let first = try await post(device, base + "/test/holds", key: "\"order-1-attempt\"")
            #expect(first.status == .created)
            // The same key bare or as the draft's structured-field string is the same key.
            let replay = try await post(device, base + "/test/holds", key: "order-1-attempt")
            #expect(replay.status == .created)
            #expect(replay.body == first.body)
            #expect(replay.headers["Content-Type"] == "application/json")
            #expect(counter.count == 1)

            // Without the header, today's behaviour: every request runs.
            _ = try await post(device, base + "/test/holds", key: nil)
            _ = try await post(device, base + "/test/holds", key: nil)
            #expect(counter.count == 3)
            // An exempt route ignores the header.
            _ = try await post(device, base + "/test/exempt", key: "exempt-1")
            _ = try await post(device, base + "/test/exempt", key: "exempt-1")
            #expect(counter.count == 5)
            device.shutdown()
        }
    }

    @Test func anotherRequestWithTheSameKeyIsRefusedAndChangesNothing() async throws {
        try await withService { base in
            let device = try client(device: "A")
            let first = try await post(device, base + "/test/holds", key: "key-422", amount: 100)
            let otherBody = try await post(device, base + "/test/holds", key: "key-422", amount: 999)
            #expect(otherBody.status.code == 422)
            #expect(String(decoding: otherBody.body, as: UTF8.self).contains("idempotency_key_reused"))
            #expect(counter.count == 1)
            // Keys are per route: the same key on another route is another request (a reversal sends its
            // authorization's key).
            let otherRoute = try await post(device, base + "/test/other-holds", key: "key-422", amount: 100)
            #expect(otherRoute.status == .created && otherRoute.body != first.body)
            #expect(counter.count == 2)
            // The first answer is still the key's.
            #expect(try await post(device, base + "/test/holds", key: "key-422", amount: 100).body == first.body)
            device.shutdown()
        }
    }

    @Test func aDuplicateWhileTheFirstRunsGets409AtOnce() async throws {
        try await withService { base in
            let device = try client(device: "A")
            let url = base + "/test/gated"
            let first = Task { try await post(device, url, key: "in-flight") }
            for await _ in started { break }
            let duplicate = try await post(device, url, key: "in-flight")
            #expect(duplicate.status == .conflict)
            #expect(String(decoding: duplicate.body, as: UTF8.self).contains("idempotency_key_in_use"))
            gateContinuation.yield()
            let answer = try await first.value
            #expect(answer.status == .created)
            #expect(try await post(device, url, key: "in-flight").body == answer.body)
            #expect(counter.count == 1)
            device.shutdown()
        }
    }

    @Test func twoCallersWithTheSameKeyDoNotCollide() async throws {
        try await withService { base in
            let deviceA = try client(device: "A")
            let deviceB = try client(device: "B")
            let a = try await post(deviceA, base + "/test/holds", key: "shared-key", amount: 100)
            let b = try await post(deviceB, base + "/test/holds", key: "shared-key", amount: 200)
            #expect(a.status == .created)
            #expect(b.status == .created)
            #expect(a.body != b.body)
            #expect(counter.count == 2)
            // Each replays its own answer.
            #expect(try await post(deviceB, base + "/test/holds", key: "shared-key", amount: 200).body == b.body)
            #expect(try await post(deviceA, base + "/test/holds", key: "shared-key", amount: 100).body == a.body)
            #expect(counter.count == 2)
            deviceA.shutdown()
            deviceB.shutdown()
        }
    }

    @Test func aKeyIsKept24HoursThenFreedAndPurged() async throws {
        try await withService { base in
            let device = try client(device: "A")
            _ = try await post(device, base + "/test/holds", key: "day-old", amount: 100)
            clock.advance(by: 24 * 3600 - 1)
            #expect(try await post(device, base + "/test/holds", key: "day-old", amount: 200).status.code == 422)
            #expect(counter.count == 1)
            clock.advance(by: 2)
            // Past 24 hours the key is free again, for any request.
            #expect(try await post(device, base + "/test/holds", key: "day-old", amount: 200).status == .created)
            #expect(counter.count == 2)
            #expect(try storedKeys() == 1)
            // A day later, the next write purges what expired.
            clock.advance(by: 25 * 3600)
            _ = try await post(device, base + "/test/holds", key: "next-day", amount: 100)
            #expect(try storedKeys() == 1)
            device.shutdown()
        }
    }

    @Test func failuresAreNotKept() async throws {
        try await withService { base in
            let device = try client(device: "A")
            #expect(try await post(device, base + "/test/failing", key: "retry-me").status.code == 503)
            #expect(try await post(device, base + "/test/failing", key: "retry-me").status.code == 503)
            #expect(counter.count == 2)
            device.shutdown()
        }
    }

    @Test(arguments: [
        "has space", String(repeating: "k", count: 256), "card-4111111111111111", "\"quote\"inside\"",
        "back\\slash", "é",
    ])
    func aMalformedKeyIs400(key: String) async throws {
        try await withService { base in
            let device = try client(device: "A")
            let response = try await post(device, base + "/test/holds", key: key)
            #expect(response.status == .badRequest)
            #expect(!String(decoding: response.body, as: UTF8.self).contains("4111111111111111"))
            #expect(counter.count == 0)
            device.shutdown()
        }
    }

    @Test func anonymousCallersShareOneScopeAndCertificateHoldersHaveTheirOwn() async throws {
        try await withService { base in
            let anonymous = try client(device: nil)
            let device = try client(device: "A")
            let first = try await post(anonymous, base + "/test/open", key: "anon-key", amount: 1)
            #expect(try await post(anonymous, base + "/test/open", key: "anon-key", amount: 1).body == first.body)
            #expect(try await post(anonymous, base + "/test/open", key: "anon-key", amount: 2).status.code == 422)
            // On a route open to anyone, a certificate still identifies its holder.
            #expect(try await post(device, base + "/test/open", key: "anon-key", amount: 2).status == .created)
            #expect(counter.count == 2)
            anonymous.shutdown()
            device.shutdown()
        }
    }
}
