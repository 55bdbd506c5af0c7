import CommandTestSupport
import Foundation
import OrchardCrypto
import OrchardStore
import Testing

@Suite("Idempotency keys: IETF Idempotency-Key draft semantics", .serialized)
struct IdempotencyTests {
    let directory: TemporaryDirectory
    let clock = ManualClock(now: Date(timeIntervalSince1970: 1_750_000_000))
    let store: Store
    let keys: IdempotencyKeys

    static let migrations = [
        Migration(version: 1, name: "idempotency keys") { database in try IdempotencyKeys.install(in: database) },
        Migration(version: 2, name: "orders", sql: "CREATE TABLE orders (id INTEGER PRIMARY KEY, amount INTEGER)"),
    ]

    init() throws {
        directory = try TemporaryDirectory()
        store = try Store(
            path: directory.file("i.sqlite"), options: StoreOptions(durability: .full), migrations: Self.migrations
        )
        keys = try IdempotencyKeys(store: store, clock: clock)
    }

    static let payment = RequestFingerprint(method: "POST", path: "/v1/payments", body: Array(#"{"amount":1000}"#.utf8))

    /// A side effect that records an order and answers 201 with its id.
    static func createOrder(_ runs: Counter) -> @Sendable (Database) throws -> IdempotentResponse {
        { database in
            runs.increment()
            try database.execute("INSERT INTO orders (amount) VALUES (1000)")
            return IdempotentResponse(
                status: 201, headers: ["Content-Type": "application/json"],
                body: Array(#"{"order":\#(database.lastInsertRowID)}"#.utf8)
            )
        }
    }

    func orderCount() async throws -> Int {
        try await store.read { database in
            try database.queryFirst("SELECT count(*) FROM orders") { try $0.int(0) } ?? -1
        }
    }

    @Test func fingerprintKnownAnswer() {
        // SHA-256("orchard-idempotency-v1" || u64be(4) "POST" || u64be(12) "/v1/payments" || u64be(15) body),
        // computed independently with `openssl dgst -sha256`.
        let expected = "302c7fc2c810154aa62813f8357bca41e4714fbbf1a2e19c603131e81cb5f4cc"
        #expect(Self.payment.bytes.map { String(format: "%02x", $0) }.joined() == expected)
        // Moving bytes between fields changes the fingerprint.
        #expect(
            RequestFingerprint(method: "POST", path: "/a", body: Array("b".utf8))
                != RequestFingerprint(method: "POST", path: "/ab", body: [UInt8]()))
    }

    @Test("R2: the same key and body replay the stored response", arguments: StoreBackend.all)
    func sameKeySameBodyReplaysTheStoredResponse(_ backend: StoreBackend) async throws {
        let t = try await IdempotencyFixture(backend)
        let runs = Counter()
        let first = try await t.keys.perform(
            scope: "merchant-1", key: "k-1", fingerprint: Self.payment, Self.createOrder(runs))
        guard case .executed(let response) = first else {
            Issue.record("first request should execute, got \(first)")
            return
        }
        #expect(response.status == 201)
        let second = try await t.keys.perform(
            scope: "merchant-1", key: "k-1", fingerprint: Self.payment, Self.createOrder(runs))
        #expect(second == .replayed(response))
        #expect(second.httpStatus == 201)
        #expect(runs.value == 1)
        #expect(try await t.orderCount() == 1)
    }

    @Test("R2: the same key with another request is a mismatch", arguments: StoreBackend.all)
    func sameKeyAnotherRequestIsAMismatch(_ backend: StoreBackend) async throws {
        let t = try await IdempotencyFixture(backend)
        let runs = Counter()
        _ = try await t.keys.perform(scope: "m", key: "k", fingerprint: Self.payment, Self.createOrder(runs))
        for other in [
            RequestFingerprint(method: "POST", path: "/v1/payments", body: Array(#"{"amount":1001}"#.utf8)),
            RequestFingerprint(method: "POST", path: "/v1/refunds", body: Array(#"{"amount":1000}"#.utf8)),
            RequestFingerprint(method: "PUT", path: "/v1/payments", body: Array(#"{"amount":1000}"#.utf8)),
        ] {
            let outcome = try await t.keys.perform(scope: "m", key: "k", fingerprint: other, Self.createOrder(runs))
            #expect(outcome == .mismatch)
            #expect(outcome.httpStatus == 422)
            #expect(try await t.keys.begin(scope: "m", key: "k", fingerprint: other) == .mismatch)
        }
        #expect(runs.value == 1)
        // Keys belong to their scope: another merchant's identical key is independent.
        let elsewhere = try await t.keys.perform(
            scope: "m2", key: "k", fingerprint: Self.payment, Self.createOrder(runs))
        #expect(elsewhere.response != nil && elsewhere != .replayed(elsewhere.response!))
        #expect(runs.value == 2)
    }

    @Test("R2: concurrent requests with one key run once", arguments: StoreBackend.all)
    func concurrentRequestsWithOneKeyRunOnce(_ backend: StoreBackend) async throws {
        let t = try await IdempotencyFixture(backend)
        let runs = Counter()
        let keys = t.keys
        let outcomes = try await withThrowingTaskGroup(of: IdempotencyOutcome.self) { group in
            for _ in 0..<24 {
                group.addTask {
                    try await keys.perform(scope: "m", key: "same", fingerprint: Self.payment, Self.createOrder(runs))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let executed = outcomes.compactMap { if case .executed(let r) = $0 { r } else { nil } }
        #expect(executed.count == 1)
        #expect(outcomes.filter { $0 == .replayed(executed[0]) }.count == 23)
        #expect(runs.value == 1)
        #expect(try await t.orderCount() == 1)
    }

    @Test(arguments: StoreBackend.all) func concurrentClaimsWithOneKeyLetOneProceed(
        _ backend: StoreBackend
    ) async throws {
        let t = try await IdempotencyFixture(backend)
        let keys = t.keys
        let claims = try await withThrowingTaskGroup(of: IdempotencyClaim.self) { group in
            for _ in 0..<24 {
                group.addTask { try await keys.begin(scope: "m", key: "same", fingerprint: Self.payment) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let tickets = claims.compactMap { if case .proceed(let ticket) = $0 { ticket } else { nil } }
        #expect(tickets.count == 1)
        #expect(claims.filter { $0 == .inProgress }.count == 23)
        #expect(IdempotencyOutcome.inProgress.httpStatus == 409)
    }

    @Test("R2: a running request is in progress until it completes", arguments: StoreBackend.all)
    func aRunningRequestIsInProgressUntilItCompletes(_ backend: StoreBackend) async throws {
        let t = try await IdempotencyFixture(backend)
        let runs = Counter()
        guard case .proceed(let ticket) = try await t.keys.begin(scope: "m", key: "k", fingerprint: Self.payment) else {
            Issue.record("a fresh key should proceed")
            return
        }
        #expect(try await t.keys.begin(scope: "m", key: "k", fingerprint: Self.payment) == .inProgress)
        let meanwhile = try await t.keys.perform(
            scope: "m", key: "k", fingerprint: Self.payment, Self.createOrder(runs))
        #expect(meanwhile == .inProgress)
        #expect(runs.value == 0)
        let done = try await t.keys.complete(ticket, Self.createOrder(runs))
        guard case .executed(let response) = done else {
            Issue.record("the ticket holder should execute, got \(done)")
            return
        }
        #expect(try await t.keys.begin(scope: "m", key: "k", fingerprint: Self.payment) == .replay(response))
        // Completing the same ticket twice does not run the side effect again.
        #expect(try await t.keys.complete(ticket, Self.createOrder(runs)) == .replayed(response))
        #expect(runs.value == 1)
    }

    @Test(arguments: StoreBackend.all) func aFailedSideEffectCommitsNothingAndFreesTheKey(
        _ backend: StoreBackend
    ) async throws {
        let t = try await IdempotencyFixture(backend)
        struct Declined: Error {}
        let runs = Counter()
        await #expect(throws: Declined.self) {
            try await t.keys.perform(scope: "m", key: "k", fingerprint: Self.payment) { database in
                try database.execute("INSERT INTO orders (amount) VALUES (1)")
                throw Declined()
            }
        }
        #expect(try await t.orderCount() == 0)
        guard case .proceed(let ticket) = try await t.keys.begin(scope: "m", key: "k", fingerprint: Self.payment) else {
            Issue.record("the key should be free after a failed request")
            return
        }
        await #expect(throws: Declined.self) {
            try await t.keys.complete(ticket) { database in
                try database.execute("INSERT INTO orders (amount) VALUES (1)")
                throw Declined()
            }
        }
        #expect(try await t.orderCount() == 0)
        // complete released the key, so a retry runs.
        let retry = try await t.keys.perform(scope: "m", key: "k", fingerprint: Self.payment, Self.createOrder(runs))
        #expect(retry.response?.status == 201 && retry != .replayed(retry.response!))
        #expect(try await t.orderCount() == 1)
    }

    @Test("R4: the response and the side effect commit together")
    func theResponseAndTheSideEffectCommitTogether() async throws {
        // Make storing the response fail after the side effect ran: the side effect must roll back with it.
        try await store.write { database in
            try database.executeScript(
                """
                CREATE TRIGGER refuse_599 BEFORE INSERT ON orchard_idempotency_keys WHEN NEW.status = 599
                BEGIN SELECT RAISE(ABORT, 'refused'); END;
                """
            )
        }
        await expectStoreError(.constraint) {
            _ = try await keys.perform(scope: "m", key: "k", fingerprint: Self.payment) { database in
                try database.execute("INSERT INTO orders (amount) VALUES (1)")
                return IdempotentResponse(status: 599, body: [UInt8]())
            }
        }
        #expect(try await orderCount() == 0)
        guard case .proceed(let ticket) = try await keys.begin(scope: "m", key: "k", fingerprint: Self.payment) else {
            Issue.record("the key should be free")
            return
        }
        await expectStoreError(.constraint) {
            _ = try await keys.complete(ticket) { database in
                try database.execute("INSERT INTO orders (amount) VALUES (1)")
                return IdempotentResponse(status: 599, body: [UInt8]())
            }
        }
        #expect(try await orderCount() == 0)
    }

    @Test("R2: keys are kept 24 hours, then expire", arguments: StoreBackend.all)
    func keysAreKeptTwentyFourHoursThenExpire(_ backend: StoreBackend) async throws {
        let t = try await IdempotencyFixture(backend, expiryClock: .injected)
        let runs = Counter()
        let first = try await t.keys.perform(scope: "m", key: "k", fingerprint: Self.payment, Self.createOrder(runs))
        t.clock.advance(by: 24 * 3600 - 1)
        #expect(try await t.keys.purgeExpired() == 0)
        #expect(
            try await t.keys.perform(scope: "m", key: "k", fingerprint: Self.payment, Self.createOrder(runs))
                == .replayed(first.response!))
        // A mismatch is still a mismatch just before expiry...
        let other = RequestFingerprint(method: "POST", path: "/v1/payments", body: Array("{}".utf8))
        #expect(try await t.keys.begin(scope: "m", key: "k", fingerprint: other) == .mismatch)
        t.clock.advance(by: 2)
        // ...and after it, the key is free for any request, and purging reclaims it.
        #expect(try await t.keys.purgeExpired() == 1)
        let again = try await t.keys.perform(scope: "m", key: "k", fingerprint: other, Self.createOrder(runs))
        #expect(again.response != nil && again != .replayed(again.response!))
        #expect(runs.value == 2)
    }

    @Test(arguments: StoreBackend.all) func aStaleRunningMarkerIsTakenOverAndTheStaleTicketCannotCommit(
        _ backend: StoreBackend
    ) async throws {
        let t = try await IdempotencyFixture(backend, expiryClock: .injected)
        let runs = Counter()
        guard case .proceed(let stale) = try await t.keys.begin(scope: "m", key: "k", fingerprint: Self.payment) else {
            Issue.record("a fresh key should proceed")
            return
        }
        t.clock.advance(by: 121)  // past the 120 s lease: the first holder is presumed dead
        guard case .proceed(let fresh) = try await t.keys.begin(scope: "m", key: "k", fingerprint: Self.payment) else {
            Issue.record("a repeat after the lease should take over")
            return
        }
        #expect(try await t.keys.complete(stale, Self.createOrder(runs)) == .inProgress)
        #expect(runs.value == 0)
        let done = try await t.keys.complete(fresh, Self.createOrder(runs))
        #expect(try await t.keys.complete(stale, Self.createOrder(runs)) == .replayed(done.response!))
        #expect(runs.value == 1)
        #expect(try await t.orderCount() == 1)
    }

    @Test(
        "R2: two instances on one PostgreSQL database share its clock: keys and leases expire on it, not on theirs",
        .enabled(if: TestPostgreSQL.enabled, Comment(rawValue: TestPostgreSQL.installHint)))
    func twoInstancesExpireKeysOnTheDatabaseClock() async throws {
        let directory = try TemporaryDirectory()
        let location = try await StoreBackend.postgreSQL.location(in: directory)
        let options = StoreOptions(durability: .full)
        let storeA = try Store(location: location, options: options, migrations: Self.migrations)
        let storeB = try Store(location: location, options: options, migrations: Self.migrations)
        // Instance B's own clock is two days ahead of A's: neither clock decides anything.
        let clockA = ManualClock(now: Date(timeIntervalSince1970: 1_750_000_000))
        let clockB = ManualClock(now: Date(timeIntervalSince1970: 1_750_000_000 + 2 * 86_400))
        let keysA = try IdempotencyKeys(store: storeA, clock: clockA)
        let keysB = try IdempotencyKeys(store: storeB, clock: clockB)
        let runs = Counter()
        let first = try await keysA.perform(scope: "m", key: "k", fingerprint: Self.payment, Self.createOrder(runs))
        #expect(
            try await keysB.perform(scope: "m", key: "k", fingerprint: Self.payment, Self.createOrder(runs))
                == .replayed(first.response!))
        #expect(try await keysB.purgeExpired() == 0)
        // 24 hours pass on the database's clock (the record is aged by as much): the key is free on both.
        try await storeA.write { db in
            try db.execute(
                "UPDATE orchard_idempotency_keys SET created_at = created_at - ?, expires_at = expires_at - ?",
                [.integer(86_400_001), .integer(86_400_001)])
        }
        let again = try await keysA.perform(scope: "m", key: "k", fingerprint: Self.payment, Self.createOrder(runs))
        #expect(again != .replayed(first.response!) && runs.value == 2)

        // A running claim of A holds against B although B's clock is past A's lease...
        guard case .proceed(let stale) = try await keysA.begin(scope: "m", key: "l", fingerprint: Self.payment) else {
            Issue.record("a fresh key should proceed")
            return
        }
        #expect(try await keysB.begin(scope: "m", key: "l", fingerprint: Self.payment) == .inProgress)
        // ...until the lease runs out on the database's clock: then B takes it over and A's ticket cannot commit.
        try await storeA.write { db in
            try db.execute("UPDATE orchard_idempotency_keys SET lease_until = lease_until - ?", [.integer(120_001)])
        }
        guard case .proceed(let fresh) = try await keysB.begin(scope: "m", key: "l", fingerprint: Self.payment)
        else {
            Issue.record("a repeat after the lease should take over")
            return
        }
        #expect(try await keysA.complete(stale, Self.createOrder(runs)) == .inProgress)
        let done = try await keysB.complete(fresh, Self.createOrder(runs))
        #expect(try await keysA.complete(stale, Self.createOrder(runs)) == .replayed(done.response!))
        #expect(runs.value == 3)
        await storeA.close()
        await storeB.close()
    }

    @Test("the database clock: PostgreSQL's, moving; none on SQLite", arguments: StoreBackend.all)
    func databaseClock(_ backend: StoreBackend) async throws {
        let t = try await IdempotencyFixture(backend)
        let clock = t.clock
        let (first, second) = try await t.store.write { db in
            (try db.databaseClockMicroseconds(), try db.databaseClockMicroseconds())
        }
        switch backend {
        case .sqlite:
            #expect(first == nil && second == nil)
            let now = try await t.store.write { db in try db.expiryMilliseconds(.database) { clock.now() } }
            #expect(now == 1_750_000_000_000)
        case .postgreSQL:
            let system = Int64(Date().timeIntervalSince1970 * 1_000_000)
            // The test server runs on this host: its clock agrees with ours to well within a minute.
            #expect(abs((first ?? 0) - system) < 60_000_000)
            #expect((second ?? 0) >= (first ?? .max))
            let injected = try await t.store.write { db in try db.expiryMilliseconds(.injected) { clock.now() } }
            #expect(injected == 1_750_000_000_000)
        }
    }

    @Test(arguments: StoreBackend.all) func abandonFreesTheKey(_ backend: StoreBackend) async throws {
        let t = try await IdempotencyFixture(backend)
        guard case .proceed(let ticket) = try await t.keys.begin(scope: "m", key: "k", fingerprint: Self.payment) else {
            Issue.record("a fresh key should proceed")
            return
        }
        try await t.keys.abandon(ticket)
        guard case .proceed = try await t.keys.begin(scope: "m", key: "k", fingerprint: Self.payment) else {
            Issue.record("an abandoned key should be free")
            return
        }
    }

    @Test(arguments: StoreBackend.all) func invalidKeysAndShortRetentionAreRejected(
        _ backend: StoreBackend
    ) async throws {
        let t = try await IdempotencyFixture(backend)
        for bad in ["", String(repeating: "a", count: 256), "caf\u{E9}", "line\nbreak"] {
            await expectStoreError(.invalidArgument) {
                _ = try await t.keys.begin(scope: "m", key: bad, fingerprint: Self.payment)
            }
        }
        await expectStoreError(.invalidArgument) {
            _ = try await t.keys.begin(scope: "", key: "k", fingerprint: Self.payment)
        }
        expectStoreError(.invalidArgument) {
            _ = try IdempotencyKeys(store: t.store, clock: t.clock, retention: .seconds(3600))
        }
        expectStoreError(.invalidArgument) { _ = try IdempotencyKeys(store: t.store, clock: t.clock, lease: .zero) }
    }
}

/// One store with the idempotency table and an orders table, on one backend.
final class IdempotencyFixture {
    let directory: TemporaryDirectory
    let clock = ManualClock(now: Date(timeIntervalSince1970: 1_750_000_000))
    let store: Store
    let keys: IdempotencyKeys

    init(_ backend: StoreBackend, expiryClock: ExpiryClock = .database) async throws {
        directory = try TemporaryDirectory()
        store = try Store(
            location: try await backend.location(in: directory), options: StoreOptions(durability: .full),
            migrations: IdempotencyTests.migrations)
        keys = try IdempotencyKeys(store: store, clock: clock, expiryClock: expiryClock)
    }

    func orderCount() async throws -> Int {
        try await store.read { database in
            try database.queryFirst("SELECT count(*) FROM orders") { try $0.int(0) } ?? -1
        }
    }
}
