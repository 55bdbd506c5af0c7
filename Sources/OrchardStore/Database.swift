internal import CSQLite
internal import Foundation

/// How a store trades durability for speed. Every store chooses explicitly: there is no default.
public enum Durability: Sendable, Hashable {
    /// `synchronous=FULL`: a commit returns only after the write-ahead log is on disk. For state that
    /// acknowledges money (authorizations, balances, the token vault, orders): once a caller was told
    /// "done", a power loss cannot undo it. About 6,000 commits/s on the reference machine.
    case full
    /// `synchronous=NORMAL`: the log is synced at checkpoints. A power loss may drop the last commits but
    /// never corrupts the file. For state that can be rebuilt or lost (sessions, caches, analytics).
    case normal
}

/// How a connection is opened.
public struct StoreOptions: Sendable, Hashable {
    /// See ``Durability``.
    public var durability: Durability
    /// `secure_delete=ON`: deleted rows are overwritten with zeros in the database file. For stores that
    /// ever delete sensitive rows (keys, vault entries, sessions). The write-ahead log keeps old page images
    /// until a checkpoint, which every commit of more than 1,000 pages and every clean close runs.
    public var secureDelete: Bool
    /// How long a connection waits for a lock another process holds before failing with
    /// ``StoreError/Code/busy``.
    public var busyTimeout: Duration
    /// The most reader connections a ``Store`` opens.
    public var maximumReaders: Int

    public init(
        durability: Durability, secureDelete: Bool = false, busyTimeout: Duration = .seconds(5),
        maximumReaders: Int = 4
    ) {
        self.durability = durability
        self.secureDelete = secureDelete
        self.busyTimeout = busyTimeout
        self.maximumReaders = max(1, maximumReaders)
    }
}

/// How a transaction takes its lock.
public enum TransactionKind: Sendable, Hashable {
    /// `BEGIN DEFERRED`: no lock until the first read or write. For read transactions.
    case deferred
    /// `BEGIN IMMEDIATE`: the write lock at once, so the transaction never fails half-way on a lock.
    case immediate
    /// `BEGIN EXCLUSIVE`: like immediate (in WAL mode readers still proceed).
    case exclusive
}

/// One SQLite connection: pragmas set, a cache of compiled statements, transactions and migrations. Or, opened
/// at a ``StoreLocation/postgreSQL(_:)`` location, one PostgreSQL connection behind the same API: the SQL is
/// translated (see `PostgreSQLDialect`), write transactions run SERIALIZABLE and a top-level transaction that
/// a concurrent one made fail (``StoreError/Code/serializationFailure``) runs again.
///
/// Not `Sendable`: a connection is used by one thread at a time. ``Store`` gives each connection its thread;
/// a `Database` alone suits single-threaded tools. The connection closes when the object is released.
public final class Database {
    /// Whether a connection may write.
    public enum Access: Sendable, Hashable {
        /// Read and write; the file is created (mode 0600) if missing and put in WAL mode.
        case readWrite
        /// Read only; the file must exist.
        case readOnly
    }

    /// The SQLite connection (nil on PostgreSQL).
    let handle: ConnectionHandle!
    /// The PostgreSQL connection (nil on SQLite).
    let postgres: PostgreSQLConnection?
    /// The file this connection opened (on PostgreSQL: the URL and schema).
    public let path: String
    /// Whether this connection may write.
    public let access: Access
    private var cache: [String: Statement] = [:]
    private static let cacheLimit = 128
    /// How much of an SQLite file a connection maps for reading (`PRAGMA mmap_size`): address space, not memory.
    static let mappedBytes = 256 << 20
    /// How many statements this connection compiled; cache hits do not count.
    public private(set) var statementsCompiled = 0

    /// Opens (and for ``Access/readWrite`` creates) the database at `path`, with WAL, foreign keys, the busy
    /// timeout and the durability and secure-delete settings of `options`.
    public init(path: String, options: StoreOptions, access: Access = .readWrite) throws(StoreError) {
        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        flags |= access == .readOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
        let isNew = access == .readWrite && !FileManager.default.fileExists(atPath: path)
        var raw: OpaquePointer?
        let rc = sqlite3_open_v2(path, &raw, flags, nil)
        guard rc == SQLITE_OK, let raw else {
            let error = StoreError(sqlite: rc, connection: raw, context: "cannot open database \(path)")
            sqlite3_close_v2(raw)
            throw error
        }
        handle = ConnectionHandle(owning: raw, stopsOnDiskError: access == .readWrite)
        postgres = nil
        self.path = path
        self.access = access
        // The file may hold payment data: owner-only, like every file of a deployment. SQLite gives the
        // -wal and -shm files the database file's mode.
        if isNew && chmod(path, 0o600) != 0 {
            throw StoreError(.cannotOpen, "cannot restrict \(path) to mode 0600: errno \(errno)")
        }
        try configure(options)
    }

    /// Opens a connection to `location`: an SQLite file as ``init(path:options:access:)``, or a PostgreSQL schema
    /// (created when missing, for ``Access/readWrite``). On PostgreSQL ``Durability/full`` is
    /// `synchronous_commit = on` and ``Durability/normal`` `off`, the busy timeout is the `lock_timeout`, and
    /// ``StoreOptions/secureDelete`` does not apply (the server's own storage settings decide).
    public convenience init(
        location: StoreLocation, options: StoreOptions, access: Access = .readWrite
    )
        throws(StoreError)
    {
        switch location {
        case .file(let path): try self.init(path: path, options: options, access: access)
        case .postgreSQL(let target):
            self.init(
                postgres: try PostgreSQLConnection(location: target, options: options, readOnly: access == .readOnly),
                name: target.description, access: access)
        }
    }

    private init(postgres: PostgreSQLConnection, name: String, access: Access) {
        handle = nil
        self.postgres = postgres
        path = name
        self.access = access
    }

    /// Whether this connection is to PostgreSQL (rather than an SQLite file).
    public var isPostgreSQL: Bool { postgres != nil }

    private func configure(_ options: StoreOptions) throws(StoreError) {
        let milliseconds =
            options.busyTimeout.components.seconds * 1000
            + options.busyTimeout.components.attoseconds / 1_000_000_000_000_000
        let rc = sqlite3_busy_timeout(handle.pointer, Int32(clamping: milliseconds))
        guard rc == SQLITE_OK else { throw StoreError(sqlite: rc, connection: handle.pointer, context: "busy timeout") }
        // Views and triggers in the file must not call functions with side effects: defence against a
        // planted database file.
        try executeScript("PRAGMA trusted_schema = OFF")
        // Pages of the database file are read through a mapping rather than a read() and a copy each. A connection
        // loses its page cache whenever another one commits, so a reader next to a busy writer read the same pages
        // again for each transaction (docs/performance.md, `bench inapp`). SQLite writes through write() still; a
        // disk error on a mapped read stops the process (SIGBUS), as the store stops writing after one anyway.
        try executeScript("PRAGMA mmap_size = \(Self.mappedBytes)")
        guard access == .readWrite else { return }
        let mode = try firstValue("PRAGMA journal_mode = WAL")
        guard case .text(let name) = mode, name.lowercased() == "wal" else {
            throw StoreError(.cannotOpen, "\(path) cannot use write-ahead logging")
        }
        let synchronous = options.durability == .full ? 2 : 1
        try executeScript("PRAGMA synchronous = \(synchronous)")
        try executeScript("PRAGMA foreign_keys = ON")
        try executeScript("PRAGMA secure_delete = \(options.secureDelete ? 1 : 0)")
        // Read the settings back: a pragma SQLite does not know is silently ignored.
        guard try pragmaInteger("synchronous") == Int64(synchronous), try pragmaInteger("foreign_keys") == 1,
            try pragmaInteger("secure_delete") == (options.secureDelete ? 1 : 0)
        else {
            throw StoreError(.internalFailure, "SQLite did not accept the connection settings for \(path)")
        }
    }

    /// The integer a `PRAGMA name` returns.
    public func pragmaInteger(_ name: String) throws(StoreError) -> Int64? {
        guard postgres == nil else { throw StoreError(.unsupported, "PostgreSQL has no pragma \(name)") }
        guard name.allSatisfy({ $0.isLetter || $0 == "_" }) else {
            throw StoreError(.invalidArgument, "\"\(name)\" is not a pragma name")
        }
        guard case .integer(let value) = try firstValue("PRAGMA \(name)") else { return nil }
        return value
    }

    /// The first column of the first row of `sql`, for typed-throws callers.
    func firstValue(_ sql: String, _ arguments: [SQLiteValue] = []) throws(StoreError) -> SQLiteValue? {
        let statement = try lease(sql)
        defer { release(statement) }
        try statement.bind(arguments)
        return try statement.step()?.value(0)
    }

    // MARK: Statements

    /// Runs `sql` with `arguments` to completion through the statement cache; returns the rows changed.
    @discardableResult
    public func execute(_ sql: String, _ arguments: [SQLiteValue] = []) throws(StoreError) -> Int {
        let statement = try lease(sql)
        defer { release(statement) }
        try statement.bind(arguments)
        while try statement.step() != nil {}
        if let postgres { return postgres.changes }
        return Int(sqlite3_changes(handle.pointer))
    }

    /// Runs `sql` and maps every row with `transform`.
    public func query<T>(_ sql: String, _ arguments: [SQLiteValue] = [], _ transform: (Row) throws -> T) throws -> [T] {
        let statement = try lease(sql)
        defer { release(statement) }
        try statement.bind(arguments)
        var rows: [T] = []
        while let row = try statement.step() {
            rows.append(try transform(row))
        }
        return rows
    }

    /// Runs `sql` and maps its first row with `transform`; nil when there is none.
    public func queryFirst<T>(
        _ sql: String, _ arguments: [SQLiteValue] = [], _ transform: (Row) throws -> T
    ) throws
        -> T?
    {
        let statement = try lease(sql)
        defer { release(statement) }
        try statement.bind(arguments)
        guard let row = try statement.step() else { return nil }
        return try transform(row)
    }

    /// Lends the cached statement for `sql` to `body` (compiling it on first use), reset afterwards.
    ///
    /// A statement already lent (the same SQL used again inside `body`) is not shared: the inner use gets a
    /// statement of its own.
    @discardableResult
    public func withStatement<T>(_ sql: String, _ body: (Statement) throws -> T) throws -> T {
        let statement = try lease(sql)
        defer { release(statement) }
        return try body(statement)
    }

    /// Compiles `sql` into a statement the caller owns, outside the cache.
    public func prepare(_ sql: String) throws(StoreError) -> Statement {
        statementsCompiled += 1
        if let postgres { return try Statement(postgres: postgres, sql: sql) }
        return try Statement(handle: handle, sql: sql, persistent: false)
    }

    /// How many statements the cache holds.
    public var cachedStatementCount: Int { cache.count }

    private func lease(_ sql: String) throws(StoreError) -> Statement {
        if let cached = cache[sql] {
            if !cached.isLeased {
                cached.isLeased = true
                return cached
            }
            return try prepare(sql)
        }
        if cache.count >= Self.cacheLimit, let victim = cache.first(where: { !$0.value.isLeased })?.key {
            cache[victim] = nil
        }
        statementsCompiled += 1
        let statement =
            if let postgres {
                try Statement(postgres: postgres, sql: sql)
            } else {
                try Statement(handle: handle, sql: sql, persistent: true)
            }
        statement.isLeased = true
        cache[sql] = statement
        return statement
    }

    private func release(_ statement: Statement) {
        statement.reset()
        statement.clearBindings()
        statement.isLeased = false
    }

    /// Runs one or more `;`-separated statements without parameters (migrations, pragmas).
    public func executeScript(_ sql: String) throws(StoreError) {
        if let postgres { return try postgres.executeScript(PostgreSQLDialect.translateScript(sql)) }
        if let stopped = handle.stopped { throw stopped }
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle.pointer, sql, nil, nil, &message)
        defer { sqlite3_free(message) }
        guard rc == SQLITE_OK else {
            handle.noteFailure(rc, path: path)
            let detail = message.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(rc))
            throw StoreError(
                StoreError.code(forSQLite: rc), "cannot run \(Statement.excerpt(sql)): \(detail)", sqliteCode: rc
            )
        }
    }

    /// Set once a disk error (an I/O error, a full disk) stopped this read-write connection: an
    /// ``StoreError/Code/unavailable`` error that every later write gets, until the process restarts.
    public var diskFailure: StoreError? { handle?.stopped }

    /// The rowid of the last row inserted on this connection. On PostgreSQL the last value an identity column
    /// (an `INTEGER PRIMARY KEY`) took on this connection, 0 when none did; portable code says
    /// `INSERT … RETURNING id` instead.
    public var lastInsertRowID: Int64 {
        guard postgres == nil else {
            guard case .integer(let id) = try? firstValue("SELECT lastval()") else { return 0 }
            return id
        }
        return sqlite3_last_insert_rowid(handle.pointer)
    }

    // MARK: Transactions

    /// Whether a transaction is open on this connection.
    public var isInTransaction: Bool {
        if let postgres { return postgres.isInTransaction }
        return sqlite3_get_autocommit(handle.pointer) == 0
    }

    /// How often a PostgreSQL transaction runs before a serialization failure reaches the caller.
    static let serializationAttempts = 8

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws.
    ///
    /// Inside another transaction this becomes a savepoint: a throwing inner body undoes only its own
    /// changes, and nothing is durable before the outermost transaction commits.
    @discardableResult
    public func transaction<T>(_ kind: TransactionKind = .immediate, _ body: (Database) throws -> T) throws -> T {
        if isInTransaction { return try savepoint(body) }
        guard postgres != nil else { return try runTransaction(kind, body) }
        var attempt = 1
        while true {
            do {
                return try runTransaction(kind, body)
            } catch let error as StoreError where error.code == .serializationFailure {
                guard attempt < Self.serializationAttempts else { throw error }
                Self.backOff(attempt)
                attempt += 1
            }
        }
    }

    /// Waits a little longer after each serialization failure, so the transactions that collided spread out: 2 ms
    /// times the attempt, plus as much again at random, so two instances that collided do not retry in step (a
    /// timing jitter, not a secret: the system generator is fine).
    static func backOff(_ attempt: Int) {
        let base = min(attempt, 8) * 2_000
        usleep(useconds_t(base + Int.random(in: 0...base)))
    }

    private func runTransaction<T>(_ kind: TransactionKind, _ body: (Database) throws -> T) throws -> T {
        switch kind {
        case .deferred: try execute("BEGIN DEFERRED")
        case .immediate: try execute("BEGIN IMMEDIATE")
        case .exclusive: try execute("BEGIN EXCLUSIVE")
        }
        let result: T
        do {
            result = try body(self)
        } catch {
            rollback()
            throw error
        }
        do throws(StoreError) {
            try execute("COMMIT")
        } catch {
            rollback()
            throw StoreError(
                error.code, "the transaction was rolled back: \(error.message)", sqliteCode: error.sqliteCode,
                sqlState: error.sqlState)
        }
        return result
    }

    private var savepointDepth = 0

    private func savepoint<T>(_ body: (Database) throws -> T) throws -> T {
        savepointDepth += 1
        defer { savepointDepth -= 1 }
        let name = "orchard_savepoint_\(savepointDepth)"
        try execute("SAVEPOINT \(name)")
        do {
            let result = try body(self)
            try execute("RELEASE \(name)")
            return result
        } catch {
            // Undo this level only; the enclosing transaction decides about the rest.
            if isInTransaction {
                _ = try? execute("ROLLBACK TO \(name)")
                _ = try? execute("RELEASE \(name)")
            }
            throw error
        }
    }

    private func rollback() {
        // Some errors (disk full, I/O) make SQLite roll back by itself; a second ROLLBACK would fail.
        guard isInTransaction else { return }
        // A failed ROLLBACK leaves SQLite to roll back when the connection closes; nothing better to do here.
        _ = try? execute("ROLLBACK")
    }

    // MARK: Maintenance

    /// Copies every committed page from the write-ahead log into the database file and truncates the log
    /// (`PRAGMA wal_checkpoint(TRUNCATE)`). After deleting sensitive rows with `secureDelete`, this removes
    /// the old page images the log still held. Throws ``StoreError/Code/busy`` when a reader kept it from
    /// finishing.
    /// On PostgreSQL nothing to do: the server checkpoints its own log.
    public func checkpoint() throws(StoreError) {
        guard postgres == nil else { return }
        let statement = try prepare("PRAGMA wal_checkpoint(TRUNCATE)")
        guard let row = try statement.step(), try row.int64(0) == 0 else {
            throw StoreError(.busy, "the checkpoint of \(path) could not finish: a reader is still active")
        }
    }

    /// `PRAGMA integrity_check`: the problems found, empty when the file is intact.
    /// On PostgreSQL throws ``StoreError/Code/unsupported``.
    public func integrityCheck() throws(StoreError) -> [String] {
        guard postgres == nil else {
            throw StoreError(.unsupported, "integrity_check is SQLite's; PostgreSQL checks with its amcheck extension")
        }
        let statement = try prepare("PRAGMA integrity_check")
        var lines: [String] = []
        while let row = try statement.step() {
            lines.append(try row.string(0))
        }
        return lines == ["ok"] ? [] : lines
    }
}
