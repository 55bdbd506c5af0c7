public import Foundation
public import OrchardCrypto

/// What identifies a request for the Idempotency-Key check: SHA-256 over its method, path and body.
///
/// Each field is length-prefixed before hashing, so no two different (method, path, body) triples share
/// a fingerprint by concatenation.
public struct RequestFingerprint: Sendable, Hashable {
    /// The 32-byte digest.
    public let bytes: [UInt8]

    public init(method: String, path: String, body: some DataProtocol) {
        var hasher = IncrementalHasher<SHA256>()
        hasher.update(Array("orchard-idempotency-v1".utf8))
        for field in [Array(method.utf8), Array(path.utf8)] {
            hasher.update(Self.length(field.count))
            hasher.update(field)
        }
        hasher.update(Self.length(body.count))
        hasher.update(body)
        bytes = hasher.finalize()
    }

    /// A fingerprint read back from storage.
    init(digest: [UInt8]) { bytes = digest }

    private static func length(_ count: Int) -> [UInt8] {
        withUnsafeBytes(of: UInt64(count).bigEndian) { Array($0) }
    }
}

/// The response stored for an idempotency key and replayed to repeats of the request.
public struct IdempotentResponse: Sendable, Hashable {
    /// The HTTP status code.
    public var status: Int
    /// Response headers worth replaying (content type, location).
    public var headers: [String: String]
    /// The response body.
    public var body: [UInt8]

    public init(status: Int, headers: [String: String] = [:], body: some DataProtocol) {
        self.status = status
        self.headers = headers
        self.body = Array(body)
    }
}

/// What became of a request carrying an idempotency key (the IETF Idempotency-Key draft's cases).
public enum IdempotencyOutcome: Sendable, Hashable {
    /// The request ran now; its side effect and response were committed together.
    case executed(IdempotentResponse)
    /// An earlier request with this key and the same fingerprint completed: its stored response.
    case replayed(IdempotentResponse)
    /// The key was used for a request with another fingerprint (HTTP 422).
    case mismatch
    /// A request with this key is still running (HTTP 409).
    case inProgress

    /// The response to send, when there is one.
    public var response: IdempotentResponse? {
        switch self {
        case .executed(let response), .replayed(let response): response
        case .mismatch, .inProgress: nil
        }
    }

    /// The HTTP status the draft gives this outcome: the stored response's own, 422 or 409.
    public var httpStatus: Int {
        switch self {
        case .executed(let response), .replayed(let response): response.status
        case .mismatch: 422
        case .inProgress: 409
        }
    }
}

/// The right to run a request, given by ``IdempotencyKeys/begin(scope:key:fingerprint:)``.
public struct IdempotencyTicket: Sendable, Hashable {
    /// Who owns the key space (a merchant, a client certificate, a device).
    public let scope: String
    /// The client's Idempotency-Key.
    public let key: String
    let fingerprint: RequestFingerprint
    /// Which claim of this key the ticket is; a later claim (after the lease ran out) supersedes it.
    let attempt: Int64
}

/// The answer of ``IdempotencyKeys/begin(scope:key:fingerprint:)``.
public enum IdempotencyClaim: Sendable, Hashable {
    /// This request may run; finish with ``IdempotencyKeys/complete(_:_:)`` or ``IdempotencyKeys/abandon(_:)``.
    case proceed(IdempotencyTicket)
    /// An earlier request with this key and fingerprint completed: replay its response.
    case replay(IdempotentResponse)
    /// The key was used for a request with another fingerprint (HTTP 422).
    case mismatch
    /// A request with this key is still running (HTTP 409).
    case inProgress
}

/// Idempotency keys (IETF draft "The Idempotency-Key HTTP Header Field") over a ``Store``.
///
/// Keys are remembered for at least ``retention`` (24 hours or more) after their request, by ``expiryClock``:
/// on PostgreSQL the database's clock (shared by every instance of the party), on SQLite the injected wall clock. The stored response commits in the same transaction as the request's side effect, so a
/// crash leaves both or neither. Two ways to use it:
/// - ``perform(scope:key:fingerprint:_:)`` when the side effect is local: lookup, side effect and stored
///   response in one write transaction. Concurrent repeats queue behind it and get the replay.
/// - ``begin(scope:key:fingerprint:)`` … ``complete(_:_:)`` when the request awaits something else first
///   (another party over the network): `begin` marks the key as running, so repeats meanwhile get
///   ``IdempotencyClaim/inProgress``. A marker older than ``lease`` (a crashed process) may be taken over by
///   a repeat; `complete` then refuses the stale ticket, so the side effect still commits at most once.
///
/// The table lives in the store's own file; add ``install(in:)`` to the store's migrations.
public final class IdempotencyKeys: Sendable {
    /// The draft asks servers to keep keys at least this long (24 hours).
    public static let minimumRetention: Duration = .seconds(24 * 60 * 60)

    /// How long a completed key is remembered.
    public let retention: Duration
    /// How long a running request holds its key before a repeat may take it over.
    public let lease: Duration
    /// Which clock retention and leases run on (``ExpiryClock/database`` unless a test moves time by hand).
    public let expiryClock: ExpiryClock
    private let store: Store
    private let clock: any WallClock

    /// Throws ``StoreError/Code/invalidArgument`` when `retention` is shorter than 24 hours or `lease`
    /// is not positive.
    public init(
        store: Store, clock: any WallClock, retention: Duration = IdempotencyKeys.minimumRetention,
        lease: Duration = .seconds(120), expiryClock: ExpiryClock = .database
    ) throws(StoreError) {
        guard retention >= Self.minimumRetention else {
            throw StoreError(.invalidArgument, "idempotency keys must be kept at least 24 hours")
        }
        guard lease > .zero else { throw StoreError(.invalidArgument, "the idempotency lease must be positive") }
        self.store = store
        self.clock = clock
        self.retention = retention
        self.lease = lease
        self.expiryClock = expiryClock
    }

    /// Now, in milliseconds since 1970, on the clock keys expire by (read inside the write, so on PostgreSQL it is
    /// the database's time when the write runs).
    private func now(_ database: Database) throws(StoreError) -> Int64 {
        try database.expiryMilliseconds(expiryClock) { clock.now() }
    }

    /// Creates the idempotency table; call it from one of the store's migrations.
    public static func install(in database: Database) throws(StoreError) {
        try database.executeScript(
            """
            CREATE TABLE IF NOT EXISTS orchard_idempotency_keys (
                scope TEXT NOT NULL,
                key TEXT NOT NULL,
                fingerprint BLOB NOT NULL CHECK (length(fingerprint) = 32),
                attempt INTEGER NOT NULL,
                state INTEGER NOT NULL CHECK (state IN (0, 1)),
                lease_until INTEGER,
                status INTEGER,
                headers TEXT,
                body BLOB,
                created_at INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                PRIMARY KEY (scope, key)
            ) WITHOUT ROWID;
            CREATE INDEX IF NOT EXISTS orchard_idempotency_keys_expiry ON orchard_idempotency_keys (expires_at);
            """
        )
    }

    /// Runs `sideEffect` at most once per (scope, key, fingerprint) within the retention period.
    ///
    /// `sideEffect` runs inside the write transaction that stores its response; when it throws, both are
    /// rolled back, the key stays free and the error is rethrown (a failed request may be retried with
    /// the same key). To store a failure as the response, return it instead of throwing.
    public func perform(
        scope: String, key: String, fingerprint: RequestFingerprint,
        _ sideEffect: @escaping @Sendable (Database) throws -> IdempotentResponse
    ) async throws -> IdempotencyOutcome {
        try Self.validate(scope: scope, key: key)
        let keep = milliseconds(retention)
        return try await store.write { database in
            let now = try self.now(database)
            switch try Self.lookup(database, scope, key, fingerprint, now) {
            case .mismatch: return .mismatch
            case .completed(let response): return .replayed(response)
            case .running: return .inProgress
            case .free(let lastAttempt):
                let response = try sideEffect(database)
                try Self.store(database, scope, key, fingerprint, lastAttempt + 1, response, now, keep)
                return .executed(response)
            }
        }
    }

    /// Claims `key` for a request that must await something before its side effect.
    public func begin(scope: String, key: String, fingerprint: RequestFingerprint) async throws -> IdempotencyClaim {
        try Self.validate(scope: scope, key: key)
        let keep = milliseconds(retention)
        let leaseLength = milliseconds(lease)
        return try await store.write { database in
            let now = try self.now(database)
            let leaseUntil = now + leaseLength
            switch try Self.lookup(database, scope, key, fingerprint, now) {
            case .mismatch: return .mismatch
            case .completed(let response): return .replay(response)
            case .running: return .inProgress
            case .free(let lastAttempt):
                let attempt = lastAttempt + 1
                try database.execute(
                    """
                    INSERT INTO orchard_idempotency_keys
                        (scope, key, fingerprint, attempt, state, lease_until, created_at, expires_at)
                    VALUES (?, ?, ?, ?, 0, ?, ?, ?)
                    ON CONFLICT (scope, key) DO UPDATE SET
                        fingerprint = excluded.fingerprint, attempt = excluded.attempt, state = 0,
                        lease_until = excluded.lease_until, status = NULL, headers = NULL, body = NULL,
                        created_at = excluded.created_at, expires_at = excluded.expires_at
                    """,
                    [
                        .text(scope), .text(key), .blob(fingerprint.bytes), .integer(attempt), .integer(leaseUntil),
                        .integer(now), .integer(now + keep),
                    ]
                )
                return .proceed(IdempotencyTicket(scope: scope, key: key, fingerprint: fingerprint, attempt: attempt))
            }
        }
    }

    /// Runs `sideEffect` and stores its response in one transaction, if `ticket` still holds its key.
    ///
    /// When another claim superseded the ticket, `sideEffect` does not run and the outcome says what the
    /// key holds now (``IdempotencyOutcome/replayed(_:)`` or ``IdempotencyOutcome/inProgress``). When
    /// `sideEffect` throws, nothing is committed, the key is released and the error is rethrown.
    public func complete(
        _ ticket: IdempotencyTicket, _ sideEffect: @escaping @Sendable (Database) throws -> IdempotentResponse
    ) async throws -> IdempotencyOutcome {
        let keep = milliseconds(retention)
        do {
            return try await store.write { database in
                let now = try self.now(database)
                let current = try database.queryFirst(
                    "SELECT attempt, state FROM orchard_idempotency_keys WHERE scope = ? AND key = ?",
                    [.text(ticket.scope), .text(ticket.key)]
                ) { row in (try row.int64(0), try row.int64(1)) }
                if let current, current.0 == ticket.attempt, current.1 == 0 {
                    let response = try sideEffect(database)
                    try Self.store(
                        database, ticket.scope, ticket.key, ticket.fingerprint, ticket.attempt, response,
                        now, keep)
                    return .executed(response)
                }
                // Superseded, or the marker is gone: report what the key holds, without running.
                switch try Self.lookup(database, ticket.scope, ticket.key, ticket.fingerprint, now) {
                case .mismatch: return .mismatch
                case .completed(let response): return .replayed(response)
                case .running, .free: return .inProgress
                }
            }
        } catch {
            try? await abandon(ticket)
            throw error
        }
    }

    /// Releases every key still marked running and returns how many. For a process that serves the file alone,
    /// at its start: the requests behind those markers died with the previous process, and their retries must
    /// not wait out the lease (answered 409 meanwhile) to run again.
    @discardableResult
    public func releaseRunning() async throws -> Int {
        try await store.write { database in
            try database.execute("DELETE FROM orchard_idempotency_keys WHERE state = 0")
        }
    }

    /// Releases the key of a request that will not complete, so a retry with the same key can run.
    public func abandon(_ ticket: IdempotencyTicket) async throws {
        _ = try await store.write { database in
            try database.execute(
                "DELETE FROM orchard_idempotency_keys WHERE scope = ? AND key = ? AND attempt = ? AND state = 0",
                [.text(ticket.scope), .text(ticket.key), .integer(ticket.attempt)]
            )
        }
    }

    /// Deletes the keys whose retention has passed (and running markers whose lease ran out with them);
    /// returns how many. Expired keys already behave as absent; purging only reclaims space.
    @discardableResult
    public func purgeExpired() async throws -> Int {
        try await store.write { database in
            let now = try self.now(database)
            return try database.execute(
                """
                DELETE FROM orchard_idempotency_keys
                WHERE expires_at <= ? AND (state = 1 OR lease_until <= ?)
                """,
                [.integer(now), .integer(now)]
            )
        }
    }

    // MARK: Internals

    private enum Found {
        case free(lastAttempt: Int64)
        case running
        case completed(IdempotentResponse)
        case mismatch
    }

    private static func lookup(
        _ database: Database, _ scope: String, _ key: String, _ fingerprint: RequestFingerprint, _ now: Int64
    ) throws -> Found {
        let row = try database.queryFirst(
            """
            SELECT fingerprint, attempt, state, lease_until, status, headers, body, expires_at
            FROM orchard_idempotency_keys WHERE scope = ? AND key = ?
            """,
            [.text(scope), .text(key)]
        ) { row in
            (
                fingerprint: try row.blob(0), attempt: try row.int64(1), state: try row.int64(2),
                leaseUntil: try row.optionalInt64(3), status: try row.optionalInt64(4),
                headers: try row.optionalString(5), body: try row.optionalBlob(6), expiresAt: try row.int64(7)
            )
        }
        guard let row else { return .free(lastAttempt: 0) }
        let leaseRunning = row.state == 0 && (row.leaseUntil ?? 0) > now
        // An expired key is as good as absent, unless its request is still running.
        if row.expiresAt <= now && !leaseRunning { return .free(lastAttempt: row.attempt) }
        guard constantTimeEquals(row.fingerprint, fingerprint.bytes) else { return .mismatch }
        if row.state == 0 { return leaseRunning ? .running : .free(lastAttempt: row.attempt) }
        guard let status = row.status else {
            throw StoreError(.internalFailure, "idempotency key record without a status")
        }
        return .completed(
            IdempotentResponse(status: Int(status), headers: try decodeHeaders(row.headers), body: row.body ?? [])
        )
    }

    private static func store(
        _ database: Database, _ scope: String, _ key: String, _ fingerprint: RequestFingerprint, _ attempt: Int64,
        _ response: IdempotentResponse, _ now: Int64, _ keep: Int64
    ) throws {
        try database.execute(
            """
            INSERT INTO orchard_idempotency_keys
                (scope, key, fingerprint, attempt, state, lease_until, status, headers, body, created_at, expires_at)
            VALUES (?, ?, ?, ?, 1, NULL, ?, ?, ?, ?, ?)
            ON CONFLICT (scope, key) DO UPDATE SET
                fingerprint = excluded.fingerprint, attempt = excluded.attempt, state = 1, lease_until = NULL,
                status = excluded.status, headers = excluded.headers, body = excluded.body,
                created_at = excluded.created_at, expires_at = excluded.expires_at
            """,
            [
                .text(scope), .text(key), .blob(fingerprint.bytes), .integer(attempt), .int(response.status),
                .text(try encodeHeaders(response.headers)), .blob(response.body), .integer(now), .integer(now + keep),
            ]
        )
    }

    private static func encodeHeaders(_ headers: [String: String]) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return String(decoding: try encoder.encode(headers), as: UTF8.self)
    }

    private static func decodeHeaders(_ text: String?) throws -> [String: String] {
        guard let text else { return [:] }
        do {
            return try JSONDecoder().decode([String: String].self, from: Data(text.utf8))
        } catch {
            throw StoreError(.corrupt, "stored idempotent response headers are not a JSON object of strings")
        }
    }

    /// The draft's key is a structured-field string: printable ASCII. Bounded so it can be indexed.
    private static func validate(scope: String, key: String) throws(StoreError) {
        guard (1...255).contains(key.utf8.count), key.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) else {
            throw StoreError(.invalidArgument, "an Idempotency-Key must be 1 to 255 printable ASCII characters")
        }
        guard (1...255).contains(scope.utf8.count) else {
            throw StoreError(.invalidArgument, "an idempotency scope must be 1 to 255 bytes")
        }
    }

    private func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }
}
