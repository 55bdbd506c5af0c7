internal import CSQLite
internal import CShims
public import Foundation

/// The `sqlite3*` of one connection, shared by its ``Database`` and its statements so that a statement
/// never outlives the connection it was compiled on.
final class ConnectionHandle {
    let pointer: OpaquePointer
    /// Whether a disk error stops this connection (read-write connections only).
    let stopsOnDiskError: Bool
    private let lock = NSLock()
    private var stoppedBy: StoreError?

    init(owning pointer: OpaquePointer, stopsOnDiskError: Bool = false) {
        self.pointer = pointer
        self.stopsOnDiskError = stopsOnDiskError
    }

    /// The ``StoreError/Code/unavailable`` error every later write gets once a disk error stopped the connection.
    var stopped: StoreError? { lock.withLock { stoppedBy } }

    /// Records `rc` if it is a disk error (I/O error, full disk) on a read-write connection: from then on the
    /// connection writes nothing more. After a failed fsync the kernel may have dropped the pages it could not
    /// write and marked them clean, so a later sync that succeeds would not bring them back (PostgreSQL's
    /// "fsyncgate"); only a restart, which recovers from what is really on disk, is safe.
    func noteFailure(_ rc: Int32, path: String) {
        guard stopsOnDiskError, StoreError.isDiskFailure(rc) else { return }
        lock.withLock {
            guard stoppedBy == nil else { return }
            // Closing must not checkpoint either: that writes and syncs the database file. The log stays for
            // the restart to recover from. (A failure here leaves SQLite's default; nothing better to do.)
            _ = orchard_sqlite3_no_checkpoint_on_close(pointer, 1)
            stoppedBy = StoreError(
                .unavailable,
                "\(path) stopped writing after a disk error (SQLite \(rc)): what it acknowledged before is on disk, "
                    + "nothing was acknowledged since; restart the process once the disk is fixed", sqliteCode: rc)
        }
    }

    // Every statement holds this handle, so all of them are finalized by now and the close succeeds.
    deinit { sqlite3_close_v2(pointer) }
}

/// A compiled SQL statement: bind parameters, step through rows, reset.
///
/// Not `Sendable`: a statement belongs to its connection's thread. ``Database`` caches the statements
/// it compiles; ``Database/prepare(_:)`` gives one the caller owns. Finalized when released.
///
/// On PostgreSQL a statement keeps its translated SQL (see ``PostgreSQLDialect``) and its bound values; its
/// first `step` sends both, and the following steps walk the rows of the answer.
public final class Statement {
    /// The SQLite connection and statement (nil on PostgreSQL).
    let handle: ConnectionHandle!
    let pointer: OpaquePointer!
    /// The PostgreSQL connection (nil on SQLite), the translated SQL and its state.
    let postgres: PostgreSQLConnection?
    private let postgresSQL: String
    private let postgresParameterCount: Int
    private var postgresValues: [SQLiteValue] = []
    private(set) var postgresResult: PostgreSQLResult?
    private(set) var postgresRow = 0
    /// The SQL text this statement was compiled from.
    public let sql: String
    /// Bumped on every step and reset, so a ``Row`` kept past its step is detected instead of read.
    private(set) var generation: UInt64 = 0
    /// Set while the statement is lent out of its connection's cache.
    var isLeased = false

    init(handle: ConnectionHandle, sql: String, persistent: Bool) throws(StoreError) {
        var statement: OpaquePointer?
        var rest = ""
        let flags = persistent ? UInt32(SQLITE_PREPARE_PERSISTENT) : 0
        let rc = sql.withCString { text in
            var tail: UnsafePointer<CChar>?
            let rc = sqlite3_prepare_v3(handle.pointer, text, -1, flags, &statement, &tail)
            // The tail points into `text`, which lives only inside this closure.
            rest = tail.map { String(cString: $0) } ?? ""
            return rc
        }
        guard rc == SQLITE_OK else {
            throw StoreError(sqlite: rc, connection: handle.pointer, context: "cannot compile \(Self.excerpt(sql))")
        }
        guard let statement else {
            throw StoreError(.sql, "no SQL statement in \(Self.excerpt(sql))")
        }
        guard rest.allSatisfy(\.isWhitespace) else {
            sqlite3_finalize(statement)
            throw StoreError(.sql, "more than one statement in \(Self.excerpt(sql)); use executeScript for scripts")
        }
        self.handle = handle
        self.pointer = statement
        self.sql = sql
        postgres = nil
        postgresSQL = ""
        postgresParameterCount = 0
    }

    /// A statement on a PostgreSQL connection: `sql` translated, nothing sent before the first `step`.
    init(postgres: PostgreSQLConnection, sql: String) throws(StoreError) {
        let statements = PostgreSQLDialect.splitStatements(sql)
        guard statements.count <= 1 else {
            throw StoreError(.sql, "more than one statement in \(Self.excerpt(sql)); use executeScript for scripts")
        }
        guard !statements.isEmpty else { throw StoreError(.sql, "no SQL statement in \(Self.excerpt(sql))") }
        let translated = PostgreSQLDialect.translate(statements[0])
        handle = nil
        pointer = nil
        self.postgres = postgres
        self.sql = sql
        postgresSQL = translated.sql
        postgresParameterCount = translated.parameters
        postgresValues = Array(repeating: .null, count: translated.parameters)
    }

    deinit { if let pointer { sqlite3_finalize(pointer) } }

    /// The number of `?` parameters.
    public var parameterCount: Int {
        if postgres != nil { return postgresParameterCount }
        return Int(sqlite3_bind_parameter_count(pointer))
    }

    /// The number of columns each row has (on PostgreSQL, known once the statement ran).
    public var columnCount: Int {
        if postgres != nil { return postgresResult?.columnCount ?? 0 }
        return Int(sqlite3_column_count(pointer))
    }

    /// The name of column `index` (0-based), as the SQL gave it.
    public func columnName(_ index: Int) -> String {
        if postgres != nil {
            guard let postgresResult, index >= 0, index < postgresResult.columnCount else { return "#\(index)" }
            return postgresResult.columnName(index)
        }
        guard index >= 0, index < columnCount, let name = sqlite3_column_name(pointer, Int32(index)) else {
            return "#\(index)"
        }
        return String(cString: name)
    }

    /// Resets the statement and binds `values` to its parameters, in order.
    ///
    /// Throws ``StoreError/Code/misuse`` when the count differs from ``parameterCount``.
    public func bind(_ values: [SQLiteValue]) throws(StoreError) {
        reset()
        clearBindings()
        guard values.count == parameterCount else {
            throw StoreError(
                .misuse, "\(Self.excerpt(sql)) has \(parameterCount) parameters, \(values.count) values were given"
            )
        }
        if postgres != nil {
            postgresValues = values
            return
        }
        for (offset, value) in values.enumerated() {
            try bind(value, at: offset + 1)
        }
    }

    /// Binds `value` to parameter `index` (1-based, as in SQLite).
    public func bind(_ value: SQLiteValue, at index: Int) throws(StoreError) {
        guard index >= 1, index <= parameterCount else {
            throw StoreError(.misuse, "parameter \(index) out of range 1...\(parameterCount) in \(Self.excerpt(sql))")
        }
        if postgres != nil {
            postgresValues[index - 1] = value
            return
        }
        let position = Int32(index)
        let rc: Int32
        switch value {
        case .null:
            rc = sqlite3_bind_null(pointer, position)
        case .integer(let number):
            rc = sqlite3_bind_int64(pointer, position, number)
        case .real(let number):
            rc = sqlite3_bind_double(pointer, position, number)
        case .text(let text):
            var text = text
            let count = text.utf8.count
            guard count <= Int(Int32.max) else { throw Self.tooLarge(index) }
            rc = text.withUTF8 { utf8 in
                // An empty string may have no storage; SQLite needs a non-null pointer to bind '' (not NULL).
                guard let base = utf8.baseAddress else {
                    return "".withCString { orchard_sqlite3_bind_text_transient(pointer, position, $0, 0) }
                }
                return base.withMemoryRebound(to: CChar.self, capacity: utf8.count) {
                    orchard_sqlite3_bind_text_transient(pointer, position, $0, Int32(utf8.count))
                }
            }
        case .blob(let bytes):
            guard bytes.count <= Int(Int32.max) else { throw Self.tooLarge(index) }
            rc = bytes.withUnsafeBytes { raw in
                // A null pointer would bind NULL, not an empty blob.
                guard let base = raw.baseAddress, raw.count > 0 else {
                    return sqlite3_bind_zeroblob(pointer, position, 0)
                }
                return orchard_sqlite3_bind_blob_transient(pointer, position, base, Int32(raw.count))
            }
        }
        guard rc == SQLITE_OK else {
            throw StoreError(sqlite: rc, connection: handle.pointer, context: "cannot bind parameter \(index)")
        }
    }

    /// Runs the statement to its next row: the row, or nil when the statement is done.
    ///
    /// The row is valid until the next `step` or `reset`; reading it later throws ``StoreError/Code/misuse``.
    @discardableResult
    public func step() throws(StoreError) -> Row? {
        generation &+= 1
        if let postgres {
            if postgresResult == nil {
                postgresResult = try postgres.execute(postgresSQL, postgresValues)
                postgresRow = 0
            }
            guard let postgresResult, postgresRow < postgresResult.rowCount else { return nil }
            postgresRow += 1
            return Row(statement: self, generation: generation)
        }
        // After a disk error nothing that could write runs: only reads and the transaction control statements
        // (BEGIN, SAVEPOINT, RELEASE, ROLLBACK, an empty COMMIT) that undo or close what is open.
        if let stopped = handle.stopped, !isSafeAfterDiskError { throw stopped }
        let rc = sqlite3_step(pointer)
        switch rc {
        case SQLITE_ROW: return Row(statement: self, generation: generation)
        case SQLITE_DONE: return nil
        default:
            handle.noteFailure(rc, path: String(cString: sqlite3_db_filename(handle.pointer, "main")))
            throw StoreError(sqlite: rc, connection: handle.pointer, context: "cannot run \(Self.excerpt(sql))")
        }
    }

    /// Whether this statement may run on a connection a disk error stopped: it reads only, and is no pragma.
    private var isSafeAfterDiskError: Bool {
        guard sqlite3_stmt_readonly(pointer) != 0 else { return false }
        return !sql.drop(while: \.isWhitespace).lowercased().hasPrefix("pragma")
    }

    /// Rewinds the statement so it can run again; bindings are kept.
    public func reset() {
        generation &+= 1
        if postgres != nil {
            postgresResult = nil
            return
        }
        // The return value repeats the last step's error, which `step` already reported.
        sqlite3_reset(pointer)
    }

    /// Unbinds every parameter (they read as NULL).
    public func clearBindings() {
        if postgres != nil {
            postgresValues = Array(repeating: .null, count: postgresParameterCount)
            return
        }
        sqlite3_clear_bindings(pointer)
    }

    /// Column `index` of the current PostgreSQL row.
    func postgresValue(_ index: Int) throws(StoreError) -> SQLiteValue {
        guard let postgresResult, postgresRow >= 1 else {
            throw StoreError(.misuse, "a row of \(Self.excerpt(sql)) was read after its statement moved on")
        }
        return try postgresResult.value(row: postgresRow - 1, column: index)
    }

    /// The SQL in error messages, shortened. SQL text holds `?` placeholders, never bound values.
    static func excerpt(_ sql: String) -> String {
        let flat = sql.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        return flat.count <= 80 ? "`\(flat)`" : "`\(flat.prefix(77))...`"
    }

    private static func tooLarge(_ index: Int) -> StoreError {
        StoreError(.invalidArgument, "parameter \(index) is larger than SQLite accepts (2 GiB)")
    }
}

/// The current row of a ``Statement``, with typed column access (0-based indexes).
///
/// Accessors are strict: `int64` on a TEXT or NULL column throws ``StoreError/Code/typeMismatch`` rather
/// than converting, so a schema mistake surfaces as an error instead of a zero.
public struct Row {
    let statement: Statement
    let generation: UInt64

    /// The number of columns.
    public var columnCount: Int { statement.columnCount }

    /// The value of column `index`, whatever its storage class.
    public func value(_ index: Int) throws(StoreError) -> SQLiteValue {
        if statement.postgres != nil {
            try check(index)
            return try statement.postgresValue(index)
        }
        switch try type(index) {
        case SQLITE_NULL: return .null
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(statement.pointer, Int32(index)))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(statement.pointer, Int32(index)))
        case SQLITE_TEXT: return .text(try text(index))
        default: return .blob(bytes(index))
        }
    }

    /// Whether column `index` is NULL.
    public func isNull(_ index: Int) throws(StoreError) -> Bool {
        if statement.postgres != nil { return try value(index) == .null }
        return try type(index) == SQLITE_NULL
    }

    /// An INTEGER column.
    public func int64(_ index: Int) throws(StoreError) -> Int64 {
        if statement.postgres != nil {
            let value = try value(index)
            guard case .integer(let number) = value else { throw mismatch(index, value, "INTEGER") }
            return number
        }
        try expect(index, SQLITE_INTEGER, "INTEGER")
        return sqlite3_column_int64(statement.pointer, Int32(index))
    }

    /// An INTEGER column as `Int`.
    public func int(_ index: Int) throws(StoreError) -> Int { Int(try int64(index)) }

    /// An INTEGER column holding 0 or 1.
    public func bool(_ index: Int) throws(StoreError) -> Bool {
        switch try int64(index) {
        case 0: return false
        case 1: return true
        default: throw StoreError(.typeMismatch, "column \(name(index)) holds an integer other than 0 or 1")
        }
    }

    /// A REAL column (an INTEGER one is widened).
    public func double(_ index: Int) throws(StoreError) -> Double {
        if statement.postgres != nil {
            switch try value(index) {
            case .real(let number): return number
            case .integer(let number): return Double(number)
            case let other: throw mismatch(index, other, "REAL")
            }
        }
        let kind = try type(index)
        guard kind == SQLITE_FLOAT || kind == SQLITE_INTEGER else { throw mismatch(index, kind, "REAL") }
        return sqlite3_column_double(statement.pointer, Int32(index))
    }

    /// A TEXT column; its bytes must be valid UTF-8.
    public func string(_ index: Int) throws(StoreError) -> String {
        if statement.postgres != nil {
            let value = try value(index)
            guard case .text(let text) = value else { throw mismatch(index, value, "TEXT") }
            return text
        }
        try expect(index, SQLITE_TEXT, "TEXT")
        return try text(index)
    }

    /// A BLOB column.
    public func blob(_ index: Int) throws(StoreError) -> [UInt8] {
        if statement.postgres != nil {
            let value = try value(index)
            guard case .blob(let bytes) = value else { throw mismatch(index, value, "BLOB") }
            return bytes
        }
        try expect(index, SQLITE_BLOB, "BLOB")
        return bytes(index)
    }

    /// An INTEGER column of milliseconds since 1970 (see ``SQLiteValue/milliseconds(_:)``).
    public func date(_ index: Int) throws(StoreError) -> Date { Date(orchardMilliseconds: try int64(index)) }

    /// A TEXT column or NULL.
    public func optionalString(_ index: Int) throws(StoreError) -> String? {
        try isNull(index) ? nil : try string(index)
    }

    /// An INTEGER column or NULL.
    public func optionalInt64(_ index: Int) throws(StoreError) -> Int64? {
        try isNull(index) ? nil : try int64(index)
    }

    /// A BLOB column or NULL.
    public func optionalBlob(_ index: Int) throws(StoreError) -> [UInt8]? {
        try isNull(index) ? nil : try blob(index)
    }

    private func type(_ index: Int) throws(StoreError) -> Int32 {
        try check(index)
        return sqlite3_column_type(statement.pointer, Int32(index))
    }

    /// Throws ``StoreError/Code/misuse`` when the statement moved on or `index` is out of range.
    private func check(_ index: Int) throws(StoreError) {
        guard statement.generation == generation else {
            throw StoreError(
                .misuse, "a row of \(Statement.excerpt(statement.sql)) was read after its statement moved on")
        }
        guard index >= 0, index < statement.columnCount else {
            throw StoreError(.misuse, "column \(index) out of range 0..<\(statement.columnCount)")
        }
    }

    private func mismatch(_ index: Int, _ value: SQLiteValue, _ wanted: String) -> StoreError {
        StoreError(.typeMismatch, "column \(name(index)) holds \(value.typeName), expected \(wanted)")
    }

    private func expect(_ index: Int, _ wanted: Int32, _ wantedName: String) throws(StoreError) {
        let kind = try type(index)
        guard kind == wanted else { throw mismatch(index, kind, wantedName) }
    }

    private func mismatch(_ index: Int, _ kind: Int32, _ wanted: String) -> StoreError {
        let names = [SQLITE_INTEGER: "INTEGER", SQLITE_FLOAT: "REAL", SQLITE_TEXT: "TEXT", SQLITE_BLOB: "BLOB"]
        return StoreError(.typeMismatch, "column \(name(index)) holds \(names[kind] ?? "NULL"), expected \(wanted)")
    }

    private func name(_ index: Int) -> String { "\(index) (\(statement.columnName(index)))" }

    private func text(_ index: Int) throws(StoreError) -> String {
        // sqlite3_column_text before sqlite3_column_bytes, as SQLite documents.
        guard let base = sqlite3_column_text(statement.pointer, Int32(index)) else { return "" }
        let count = Int(sqlite3_column_bytes(statement.pointer, Int32(index)))
        guard let text = String(validating: UnsafeBufferPointer(start: base, count: count), as: UTF8.self) else {
            throw StoreError(.typeMismatch, "column \(name(index)) holds text that is not valid UTF-8")
        }
        return text
    }

    private func bytes(_ index: Int) -> [UInt8] {
        guard let base = sqlite3_column_blob(statement.pointer, Int32(index)) else { return [] }
        let count = Int(sqlite3_column_bytes(statement.pointer, Int32(index)))
        return Array(UnsafeRawBufferPointer(start: base, count: count))
    }
}
