internal import CSQLite

/// `SQLITE_IOERR_NOMEM` (a macro Swift does not import): out of memory, not a disk error.
let sqliteIOErrorNoMemory: Int32 = SQLITE_IOERR | (12 << 8)

/// The one error type of `OrchardStore`.
///
/// A struct with an extensible code (the `CryptoError` pattern), so new failure kinds are not breaking
/// changes. Equality compares the code only. Messages name tables, columns and SQL text written by
/// programmers, never bound values: a bound value may be a card number or a key.
public struct StoreError: Error, Hashable, CustomStringConvertible, Sendable {
    /// What went wrong, as a value a caller can branch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case cannotOpen, busy, constraint, sql, typeMismatch, migration, transaction, corrupt, io
            case readOnly, closed, misuse, invalidArgument, internalFailure, unavailable
            case serializationFailure, unsupported
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The database file could not be opened or created (missing directory, permissions, not a database).
        public static let cannotOpen = Code(.cannotOpen)
        /// Another connection (usually another process) held the lock for longer than the busy timeout.
        public static let busy = Code(.busy)
        /// A UNIQUE, PRIMARY KEY, FOREIGN KEY, CHECK or NOT NULL constraint rejected the change.
        public static let constraint = Code(.constraint)
        /// SQL text was rejected (syntax, unknown table or column): a programming error.
        public static let sql = Code(.sql)
        /// A column held another type than the one asked for (for example NULL where an integer was expected).
        public static let typeMismatch = Code(.typeMismatch)
        /// The migration list is malformed, a migration failed, or the database is newer than this program.
        public static let migration = Code(.migration)
        /// A transaction could not begin, commit or roll back.
        public static let transaction = Code(.transaction)
        /// The database file is damaged or is not an SQLite database.
        public static let corrupt = Code(.corrupt)
        /// The operating system failed to read, write or sync the file (disk full, I/O error).
        public static let io = Code(.io)
        /// A write was attempted on a read-only connection or file.
        public static let readOnly = Code(.readOnly)
        /// The store was closed before the operation ran.
        public static let closed = Code(.closed)
        /// The API was used out of order (a row read after its statement moved on, a column index out of range).
        public static let misuse = Code(.misuse)
        /// An argument was rejected before reaching SQLite (an oversized value, a malformed idempotency key).
        public static let invalidArgument = Code(.invalidArgument)
        /// SQLite failed in a way the input does not explain.
        public static let internalFailure = Code(.internalFailure)
        /// The store stopped writing after a disk error (a failed write or sync, a full disk): what it acknowledged
        /// before is on disk, nothing since was acknowledged. Reads still work; restart the process once the disk
        /// is fixed (a service answers 503 with `Retry-After` meanwhile).
        public static let unavailable = Code(.unavailable)
        /// PostgreSQL aborted the transaction because a concurrent one conflicted with it (SQLSTATE 40001, or a
        /// deadlock, 40P01). ``Store`` retries such transactions itself; the error reaches a caller only when
        /// the retries ran out: retry the request.
        public static let serializationFailure = Code(.serializationFailure)
        /// The operation has no meaning on this backend (an SQLite pragma on PostgreSQL).
        public static let unsupported = Code(.unsupported)

        public var description: String { base.rawValue }
    }

    public let code: Code
    /// What happened and, where it helps, what to do about it.
    public let message: String
    /// SQLite's extended result code, when the error came from SQLite.
    public let sqliteCode: Int32?
    /// PostgreSQL's SQLSTATE (five characters, `23505` for a unique violation), when the error came from
    /// PostgreSQL.
    public let sqlState: String?

    public init(_ code: Code, _ message: String, sqliteCode: Int32? = nil, sqlState: String? = nil) {
        self.code = code
        self.message = message
        self.sqliteCode = sqliteCode
        self.sqlState = sqlState
    }

    public var description: String {
        if let sqlState { return "\(code): \(message) (SQLSTATE \(sqlState))" }
        guard let sqliteCode else { return "\(code): \(message)" }
        return "\(code): \(message) (SQLite \(sqliteCode))"
    }

    public static func == (lhs: StoreError, rhs: StoreError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}

extension StoreError {
    /// An error for SQLite result `rc`, with the connection's message when one is available.
    init(sqlite rc: Int32, connection: OpaquePointer?, context: String) {
        var detail = String(cString: sqlite3_errstr(rc))
        if let connection, sqlite3_extended_errcode(connection) == rc, let text = sqlite3_errmsg(connection) {
            detail = String(cString: text)
        }
        self.init(StoreError.code(forSQLite: rc), "\(context): \(detail)", sqliteCode: rc)
    }

    /// Whether `rc` reports the disk failing: an I/O error (other than running out of memory) or a full disk.
    static func isDiskFailure(_ rc: Int32) -> Bool {
        switch rc & 0xFF {
        case SQLITE_FULL: true
        case SQLITE_IOERR: rc != sqliteIOErrorNoMemory
        default: false
        }
    }

    /// Maps SQLite's primary result code (the low byte of an extended code) to a `Code`.
    static func code(forSQLite rc: Int32) -> Code {
        switch rc & 0xFF {
        case SQLITE_BUSY, SQLITE_LOCKED: .busy
        case SQLITE_CONSTRAINT: .constraint
        case SQLITE_ERROR: .sql
        case SQLITE_CORRUPT, SQLITE_NOTADB: .corrupt
        case SQLITE_IOERR, SQLITE_FULL, SQLITE_PROTOCOL: .io
        case SQLITE_CANTOPEN, SQLITE_PERM, SQLITE_AUTH: .cannotOpen
        case SQLITE_READONLY: .readOnly
        case SQLITE_MISUSE, SQLITE_RANGE: .misuse
        case SQLITE_TOOBIG, SQLITE_MISMATCH: .invalidArgument
        default: .internalFailure
        }
    }
}
