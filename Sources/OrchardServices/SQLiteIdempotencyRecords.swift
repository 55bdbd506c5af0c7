public import Foundation
public import OrchardCrypto
public import OrchardHTTP
public import OrchardStore

/// The router's ``IdempotencyRecords`` over OrchardStore's ``IdempotencyKeys``, in a SQLite file of the party's
/// own (`DIR/<service>-idempotency.sqlite`).
///
/// Keys are kept ``IdempotencyKeys/minimumRetention`` (24 hours) by the injected clock; expired records are
/// purged on write, at most once per ``purgeInterval``. The request's own side effects commit in the party's
/// stores, in other transactions than the stored answer: a crash between the two leaves the key free (released at
/// the next start, ``releaseAbandonedClaims()``) and the retry runs the handler again, which the parties' own
/// records answer with the first answer (docs/network.md, "Exactly once").
public final class SQLiteIdempotencyRecords: IdempotencyRecords, @unchecked Sendable {
    /// How often, at most, a write also deletes the expired records.
    public static let purgeInterval: Duration = .seconds(60 * 60)

    private let store: Store
    private let keys: IdempotencyKeys
    private let clock: any WallClock
    // Thread-safety: `lastPurge` is read and written under `lock` only.
    private let lock = NSLock()
    private var lastPurge: Int64?

    /// Opens (creating if needed) the records at `path`, keeping keys 24 hours by `clock`.
    public convenience init(path: String, clock: any WallClock) throws {
        try self.init(location: .file(path), clock: clock)
    }

    /// Opens (creating if needed) the records at `location` (a file, or a PostgreSQL schema).
    public init(location: StoreLocation, clock: any WallClock) throws {
        store = try Store(
            // Full: an answer acknowledged to a client must survive a power loss, or its retry would run again.
            location: location, options: StoreOptions(durability: .full),
            migrations: [
                Migration(version: 1, name: "idempotency keys") { database in
                    try IdempotencyKeys.install(in: database)
                }
            ])
        keys = try IdempotencyKeys(store: store, clock: clock)
        self.clock = clock
    }

    public func run(
        scope: String, key: String, method: String, path: String, body: Data,
        _ handler: @escaping @Sendable () async throws -> HTTPResponse
    ) async throws -> HTTPResponse {
        let fingerprint = RequestFingerprint(method: method, path: path, body: body)
        let ticket: IdempotencyTicket
        switch try await keys.begin(scope: scope, key: key, fingerprint: fingerprint) {
        case .proceed(let claimed): ticket = claimed
        case .replay(let stored): return Self.response(stored)
        case .mismatch:
            throw HTTPError(.idempotencyKeyReused, "this Idempotency-Key was used for another request; use a new key")
        case .inProgress:
            throw HTTPError(.idempotencyKeyInUse, "a request with this Idempotency-Key is still running; retry later")
        }
        let response: HTTPResponse
        do {
            response = try await handler()
        } catch {
            // A refused or failed request is not an answer to keep: the retry runs again.
            try? await keys.abandon(ticket)
            throw error
        }
        guard response.status.code < 500 else {
            try? await keys.abandon(ticket)
            return response
        }
        var kept: [String: String] = [:]
        for name in ["Content-Type", "Location"] { kept[name] = response.headers[name] }
        let stored = IdempotentResponse(status: response.status.code, headers: kept, body: response.body)
        let outcome = try await keys.complete(ticket) { _ in stored }
        // The answer is kept; a purge that fails now is retried by a later write, and must not fail this one.
        try? await purgeIfDue()
        // Superseded after the lease ran out: the other claim's answer is the key's.
        return outcome.response.map(Self.response) ?? response
    }

    /// Releases the keys a previous process of this service left marked running (it was killed mid-request):
    /// their retries run again at once instead of getting 409 until the lease ends. Call it before listening;
    /// one process serves a deployment's service at a time (`DIR/run/`), so no live request holds one. On
    /// PostgreSQL, where several instances share the records, nothing is released (returns 0): a live request of
    /// another instance may hold a claim, and the lease decides instead.
    public func releaseAbandonedClaims() async throws -> Int {
        if case .postgreSQL = store.location { return 0 }
        return try await keys.releaseRunning()
    }

    /// Closes the file.
    public func close() async { await store.close() }

    private func purgeIfDue() async throws {
        let now = clock.now().orchardMilliseconds
        let interval = Self.purgeInterval.components.seconds * 1000
        let due = lock.withLock {
            guard let lastPurge, now - lastPurge < interval else {
                lastPurge = now
                return true
            }
            return false
        }
        if due { try await keys.purgeExpired() }
    }

    private static func response(_ stored: IdempotentResponse) -> HTTPResponse {
        var headers = HTTPHeaders()
        for (name, value) in stored.headers.sorted(by: { $0.key < $1.key }) { headers.add(name, value) }
        return HTTPResponse(
            status: HTTPStatus(code: stored.status, reason: reason(stored.status)), headers: headers,
            body: Data(stored.body))
    }

    private static func reason(_ code: Int) -> String {
        let known: [HTTPStatus] = [
            .ok, .created, .accepted, .noContent, .badRequest, .unauthorized, .forbidden, .notFound,
            .methodNotAllowed, .conflict, .gone, .payloadTooLarge, .unsupportedMediaType, .unprocessableContent,
            .tooManyRequests,
        ]
        return known.first { $0.code == code }?.reason ?? "Status \(code)"
    }
}
