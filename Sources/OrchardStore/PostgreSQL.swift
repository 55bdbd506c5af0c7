internal import CLibPQ
internal import Foundation

/// One libpq connection (`PGconn`), owned: closed with `PQfinish` when released.
///
/// Not `Sendable`: used by one thread at a time, like the ``Database`` that holds it. Every statement runs through
/// `PQexecParams` with values sent separately from the SQL text (text format; blobs in binary), results come
/// back in text format and are converted by column type.
final class PostgreSQLConnection {
    private let pointer: OpaquePointer
    /// What error messages call this connection (URL and schema, no password).
    let name: String
    /// Rows the last statement changed (`PQcmdTuples`).
    private(set) var changes = 0

    init(location: PostgreSQLLocation, options: StoreOptions, readOnly: Bool) throws(StoreError) {
        name = location.description
        var keywords = ["dbname", "application_name", "client_encoding", "connect_timeout"]
        var values = [location.url, "orchard", "UTF8", "10"]
        if let passfile = location.passfile {
            keywords.append("passfile")
            values.append(passfile)
        }
        let connection = Self.connect(keywords, values)
        guard let connection else { throw StoreError(.cannotOpen, "libpq is out of memory") }
        guard PQstatus(connection) == CONNECTION_OK else {
            let detail = Self.message(of: connection)
            PQfinish(connection)
            throw StoreError(.cannotOpen, "cannot connect to PostgreSQL at \(location.url): \(detail)")
        }
        pointer = connection
        // Notices ("schema already exists, skipping") are not errors; libpq would print them on stderr.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        try configure(location: location, options: options, readOnly: readOnly)
    }

    deinit { PQfinish(pointer) }

    private static func connect(_ keywords: [String], _ values: [String]) -> OpaquePointer? {
        let keywordPointers = keywords.map { strdup($0) } + [nil]
        let valuePointers = values.map { strdup($0) } + [nil]
        defer {
            for pointer in keywordPointers { free(pointer) }
            for pointer in valuePointers { free(pointer) }
        }
        return keywordPointers.map { UnsafePointer($0) }.withUnsafeBufferPointer { keywordBuffer in
            valuePointers.map { UnsafePointer($0) }.withUnsafeBufferPointer { valueBuffer in
                PQconnectdbParams(keywordBuffer.baseAddress, valueBuffer.baseAddress, 1)
            }
        }
    }

    private func configure(location: PostgreSQLLocation, options: StoreOptions, readOnly: Bool) throws(StoreError) {
        let schema = "\"\(location.schema)\""
        if !readOnly {
            do throws(StoreError) {
                try executeScript("CREATE SCHEMA IF NOT EXISTS \(schema)")
            } catch  where error.sqlState == "23505" || error.sqlState == "42P06" {
                // Another instance created it at the same moment: it exists now.
            }
        }
        let milliseconds =
            options.busyTimeout.components.seconds * 1000
            + options.busyTimeout.components.attoseconds / 1_000_000_000_000_000
        try executeScript(
            """
            SET search_path TO \(schema);
            SET lock_timeout = \(max(1, milliseconds));
            SET synchronous_commit = \(options.durability == .full ? "on" : "off");
            SET default_transaction_read_only = \(readOnly ? "on" : "off")
            """)
    }

    /// Whether a transaction is open (also one a failed statement aborted, until it is rolled back).
    var isInTransaction: Bool {
        let status = PQtransactionStatus(pointer)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR || status == PQTRANS_ACTIVE
    }

    /// Runs `sql` (one statement, `$n` parameters) with `values`.
    func execute(_ sql: String, _ values: [SQLiteValue]) throws(StoreError) -> PostgreSQLResult {
        try ensureConnected()
        var types: [Oid] = []
        var formats: [Int32] = []
        var lengths: [Int32] = []
        var buffers: [UnsafeMutablePointer<CChar>?] = []
        defer { for buffer in buffers { free(buffer) } }
        for value in values {
            switch value {
            case .null:
                types.append(0)
                formats.append(0)
                lengths.append(0)
                buffers.append(nil)
            case .integer(let number):
                types.append(PostgreSQLType.int8)
                formats.append(0)
                lengths.append(0)
                buffers.append(strdup(String(number)))
            case .real(let number):
                types.append(PostgreSQLType.float8)
                formats.append(0)
                lengths.append(0)
                buffers.append(strdup("\(number)"))
            case .text(let text):
                guard !text.utf8.contains(0) else {
                    throw StoreError(.invalidArgument, "PostgreSQL text cannot hold a NUL character")
                }
                // Unknown type: PostgreSQL infers it from where the parameter stands (a TEXT column, a JSON one).
                types.append(0)
                formats.append(0)
                lengths.append(0)
                buffers.append(strdup(text))
            case .blob(let bytes):
                guard bytes.count <= Int(Int32.max) else {
                    throw StoreError(.invalidArgument, "a value is larger than PostgreSQL accepts (2 GiB)")
                }
                let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: max(1, bytes.count))
                bytes.withUnsafeBytes { raw in
                    if let base = raw.baseAddress {
                        UnsafeMutableRawPointer(buffer).copyMemory(from: base, byteCount: raw.count)
                    }
                }
                types.append(PostgreSQLType.bytea)
                formats.append(1)
                lengths.append(Int32(bytes.count))
                buffers.append(buffer)
            }
        }
        let result = buffers.map { UnsafePointer($0) }.withUnsafeBufferPointer { valueBuffer in
            PQexecParams(
                pointer, sql, Int32(values.count), types, valueBuffer.baseAddress, lengths, formats, 0)
        }
        return try check(result, sql: sql)
    }

    /// Runs one or more `;`-separated statements without parameters (`PQexec`).
    func executeScript(_ sql: String) throws(StoreError) {
        try ensureConnected()
        _ = try check(PQexec(pointer, sql), sql: sql)
    }

    private func ensureConnected() throws(StoreError) {
        guard PQstatus(pointer) != CONNECTION_OK else { return }
        // A connection the server dropped is reset only outside a transaction: inside one its work is lost.
        PQreset(pointer)
        guard PQstatus(pointer) == CONNECTION_OK else {
            throw StoreError(
                .unavailable, "the PostgreSQL server of \(name) cannot be reached: \(Self.message(of: pointer))")
        }
    }

    private func check(_ result: OpaquePointer?, sql: String) throws(StoreError) -> PostgreSQLResult {
        guard let result else {
            throw StoreError(
                .unavailable, "PostgreSQL did not answer \(Statement.excerpt(sql)): \(Self.message(of: pointer))")
        }
        let owned = PostgreSQLResult(owning: result)
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            changes = Int(String(cString: PQcmdTuples(result))) ?? 0
            return owned
        default:
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            let primary = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
            let detail = primary ?? Self.message(of: pointer)
            throw StoreError(
                Self.code(forSQLState: state, connected: PQstatus(pointer) == CONNECTION_OK),
                "cannot run \(Statement.excerpt(sql)): \(detail)", sqlState: state)
        }
    }

    private static func message(of connection: OpaquePointer) -> String {
        guard let text = PQerrorMessage(connection) else { return "unknown error" }
        return String(cString: text).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Maps a SQLSTATE (its class, the first two characters, and a few codes) to a `Code`.
    static func code(forSQLState state: String?, connected: Bool) -> StoreError.Code {
        guard let state else { return connected ? .internalFailure : .unavailable }
        switch state {
        case "40001", "40P01": return .serializationFailure
        case "55P03": return .busy
        case "25006": return .readOnly
        case "53100": return .io
        default: break
        }
        switch state.prefix(2) {
        case "23": return .constraint
        case "42", "22", "0A": return state == "22P02" || state.hasPrefix("22") ? .invalidArgument : .sql
        case "08", "57": return .unavailable
        case "25", "40": return .transaction
        case "53", "58": return .io
        case "XX": return .corrupt
        default: return .internalFailure
        }
    }
}

/// Type OIDs from PostgreSQL's `pg_type` catalogue (fixed since forever).
enum PostgreSQLType {
    static let bool: Oid = 16
    static let bytea: Oid = 17
    static let int8: Oid = 20
    static let int2: Oid = 21
    static let int4: Oid = 23
    static let oid: Oid = 26
    static let float4: Oid = 700
    static let float8: Oid = 701
    static let numeric: Oid = 1700
}

/// One `PGresult`, owned: cleared when released. Values come in text format and are converted by column type
/// into the ``SQLiteValue`` storage classes the store's rows expose.
final class PostgreSQLResult {
    private let pointer: OpaquePointer

    init(owning pointer: OpaquePointer) { self.pointer = pointer }

    deinit { PQclear(pointer) }

    var rowCount: Int { Int(PQntuples(pointer)) }
    var columnCount: Int { Int(PQnfields(pointer)) }

    func columnName(_ column: Int) -> String {
        PQfname(pointer, Int32(column)).map { String(cString: $0) } ?? "#\(column)"
    }

    func value(row: Int, column: Int) throws(StoreError) -> SQLiteValue {
        let (r, c) = (Int32(row), Int32(column))
        if PQgetisnull(pointer, r, c) == 1 { return .null }
        guard let raw = PQgetvalue(pointer, r, c) else { return .null }
        let count = Int(PQgetlength(pointer, r, c))
        let bytes = UnsafeRawBufferPointer(start: raw, count: count)
        let type = PQftype(pointer, c)
        switch type {
        case PostgreSQLType.bytea:
            return .blob(try Self.decodeHex(bytes, column: columnName(column)))
        case PostgreSQLType.bool:
            return .integer(bytes.first == UInt8(ascii: "t") ? 1 : 0)
        default: break
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw StoreError(.typeMismatch, "column \(columnName(column)) holds text that is not valid UTF-8")
        }
        switch type {
        case PostgreSQLType.int2, PostgreSQLType.int4, PostgreSQLType.int8, PostgreSQLType.oid:
            guard let number = Int64(text) else { throw Self.unreadable(columnName(column)) }
            return .integer(number)
        case PostgreSQLType.numeric:
            // SUM over BIGINT is NUMERIC: a whole number reads as INTEGER, as SQLite's sum gives.
            if let number = Int64(text) { return .integer(number) }
            guard let number = Double(text) else { throw Self.unreadable(columnName(column)) }
            return .real(number)
        case PostgreSQLType.float4, PostgreSQLType.float8:
            guard let number = Double(text) else { throw Self.unreadable(columnName(column)) }
            return .real(number)
        default:
            return .text(text)
        }
    }

    private static func unreadable(_ column: String) -> StoreError {
        StoreError(.typeMismatch, "column \(column) holds a number this store cannot read")
    }

    /// bytea's text output: `\x` and two hex digits a byte.
    private static func decodeHex(_ bytes: UnsafeRawBufferPointer, column: String) throws(StoreError) -> [UInt8] {
        guard bytes.count >= 2, bytes[0] == UInt8(ascii: "\\"), bytes[1] == UInt8(ascii: "x"), bytes.count % 2 == 0
        else {
            throw StoreError(.typeMismatch, "column \(column) holds bytea in an unexpected format (not hex)")
        }
        func nibble(_ byte: UInt8) -> UInt8? {
            switch byte {
            case 0x30...0x39: byte - 0x30
            case 0x61...0x66: byte - 0x61 + 10
            case 0x41...0x46: byte - 0x41 + 10
            default: nil
            }
        }
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count - 2) / 2)
        var index = 2
        while index < bytes.count {
            guard let high = nibble(bytes[index]), let low = nibble(bytes[index + 1]) else {
                throw StoreError(.typeMismatch, "column \(column) holds bytea that is not hex")
            }
            output.append(high << 4 | low)
            index += 2
        }
        return output
    }
}

/// The SQL the parties write (SQLite's dialect, kept to what PostgreSQL also means the same way) rewritten for
/// PostgreSQL, outside string literals, quoted identifiers and comments:
/// - `?` parameters become `$1`, `$2`, … and `?NNN` `$NNN`;
/// - `BEGIN IMMEDIATE` / `BEGIN EXCLUSIVE` become `BEGIN ISOLATION LEVEL SERIALIZABLE`, `BEGIN DEFERRED` becomes
///   `BEGIN ISOLATION LEVEL REPEATABLE READ` (one snapshot for the whole read);
/// - in schemas, `INTEGER PRIMARY KEY [AUTOINCREMENT]` becomes an identity column, `INTEGER` `BIGINT`, `BLOB`
///   `BYTEA`, `REAL` `DOUBLE PRECISION`, and the table options `STRICT` and `WITHOUT ROWID` go;
/// - `INSERT OR IGNORE` becomes `INSERT … ON CONFLICT DO NOTHING`.
///
/// What does not translate (`INSERT OR REPLACE`, pragmas, SQLite's own functions) fails on PostgreSQL with a
/// `sql` error: the shared SQL avoids it.
enum PostgreSQLDialect {
    enum Token: Equatable {
        case word(String)
        /// `?` (number nil: the next one) or `?NNN`.
        case parameter(Int?)
        case other(String)
    }

    static func translate(_ sql: String) -> (sql: String, parameters: Int) {
        let tokens = tokenize(sql)
        var output = ""
        var parameters = 0
        var ignoreConflicts = false
        var index = 0
        func word(_ offset: Int) -> String? {
            // The next word token at or after `offset`, skipping whitespace.
            var position = offset
            while position < tokens.count {
                switch tokens[position] {
                case .word(let text): return text.uppercased()
                case .other(let text) where text.allSatisfy(\.isWhitespace): position += 1
                default: return nil
                }
            }
            return nil
        }
        func skipWord(_ offset: Int) -> Int {
            var position = offset
            while position < tokens.count, case .other(let text) = tokens[position], text.allSatisfy(\.isWhitespace) {
                position += 1
            }
            return position + 1
        }
        while index < tokens.count {
            switch tokens[index] {
            case .parameter(let number):
                let position = number ?? parameters + 1
                parameters = max(parameters, position)
                output += "$\(position)"
                index += 1
            case .other(let text):
                if text == ")", let next = word(index + 1), next == "STRICT" || next == "WITHOUT" {
                    // `) STRICT`, `) WITHOUT ROWID`, `) STRICT, WITHOUT ROWID`: table options PostgreSQL lacks.
                    output += ")"
                    var position = index + 1
                    while true {
                        guard let option = word(position) else { break }
                        if option == "STRICT" {
                            position = skipWord(position)
                        } else if option == "WITHOUT", word(skipWord(position)) == "ROWID" {
                            position = skipWord(skipWord(position))
                        } else {
                            break
                        }
                        var after = position
                        while after < tokens.count, case .other(let text) = tokens[after],
                            text.allSatisfy(\.isWhitespace)
                        {
                            after += 1
                        }
                        if after < tokens.count, tokens[after] == .other(","), word(after + 1) == "WITHOUT" {
                            position = after + 1
                        }
                    }
                    index = position
                    continue
                }
                output += text
                index += 1
            case .word(let text):
                let upper = text.uppercased()
                switch upper {
                case "BEGIN" where index == firstWordIndex(tokens):
                    let kind = word(index + 1)
                    if kind == "IMMEDIATE" || kind == "EXCLUSIVE" {
                        output += "BEGIN ISOLATION LEVEL SERIALIZABLE"
                        index = skipWord(index + 1)
                    } else if kind == "DEFERRED" {
                        output += "BEGIN ISOLATION LEVEL REPEATABLE READ"
                        index = skipWord(index + 1)
                    } else {
                        output += text
                        index += 1
                    }
                case "INSERT" where word(index + 1) == "OR" && word(skipWord(index + 1)) == "IGNORE":
                    output += "INSERT"
                    index = skipWord(skipWord(index + 1))
                    ignoreConflicts = true
                case "INTEGER" where word(index + 1) == "PRIMARY" && word(skipWord(index + 1)) == "KEY":
                    output += "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"
                    index = skipWord(skipWord(index + 1))
                    if word(index) == "AUTOINCREMENT" { index = skipWord(index) }
                case "INTEGER":
                    output += "BIGINT"
                    index += 1
                case "BLOB":
                    output += "BYTEA"
                    index += 1
                case "REAL":
                    output += "DOUBLE PRECISION"
                    index += 1
                case "RETURNING" where ignoreConflicts:
                    output += "ON CONFLICT DO NOTHING RETURNING"
                    ignoreConflicts = false
                    index += 1
                default:
                    output += text
                    index += 1
                }
            }
        }
        if ignoreConflicts {
            let trimmed = output.trimmingCharacters(in: .whitespacesAndNewlines)
            output = (trimmed.hasSuffix(";") ? String(trimmed.dropLast()) : trimmed) + " ON CONFLICT DO NOTHING"
        }
        return (output, parameters)
    }

    /// Translates each statement of a `;`-separated script.
    static func translateScript(_ sql: String) -> String {
        splitStatements(sql).map { translate($0).sql }.joined(separator: ";\n")
    }

    private static func firstWordIndex(_ tokens: [Token]) -> Int? {
        tokens.firstIndex { if case .word = $0 { true } else { false } }
    }

    /// The statements of a script, split at `;` outside literals and comments (empty ones dropped).
    static func splitStatements(_ sql: String) -> [String] {
        var statements: [String] = []
        var current = ""
        for token in tokenize(sql) {
            switch token {
            case .other(";"):
                statements.append(current)
                current = ""
            case .word(let text), .other(let text): current += text
            case .parameter(let number): current += "?" + (number.map(String.init) ?? "")
            }
        }
        statements.append(current)
        return statements.filter { !$0.allSatisfy(\.isWhitespace) }
    }

    /// Words (letters, digits, `_`), `?`, and everything else (literals, quoted identifiers and comments whole;
    /// whitespace runs; single punctuation characters).
    static func tokenize(_ sql: String) -> [Token] {
        var tokens: [Token] = []
        let characters = Array(sql)
        var index = 0
        func isWordCharacter(_ character: Character) -> Bool {
            character.isLetter || character.isNumber || character == "_"
        }
        while index < characters.count {
            let character = characters[index]
            if character == "'" || character == "\"" {
                var end = index + 1
                while end < characters.count {
                    if characters[end] == character {
                        if end + 1 < characters.count, characters[end + 1] == character {
                            end += 2
                            continue
                        }
                        break
                    }
                    end += 1
                }
                end = min(end + 1, characters.count)
                tokens.append(.other(String(characters[index..<end])))
                index = end
            } else if character == "-", index + 1 < characters.count, characters[index + 1] == "-" {
                var end = index
                while end < characters.count, characters[end] != "\n" { end += 1 }
                tokens.append(.other(String(characters[index..<end])))
                index = end
            } else if character == "?" {
                var end = index + 1
                while end < characters.count, characters[end].isASCII, characters[end].isNumber { end += 1 }
                tokens.append(.parameter(end > index + 1 ? Int(String(characters[(index + 1)..<end])) : nil))
                index = end
            } else if isWordCharacter(character) {
                var end = index
                while end < characters.count, isWordCharacter(characters[end]) { end += 1 }
                tokens.append(.word(String(characters[index..<end])))
                index = end
            } else if character.isWhitespace {
                var end = index
                while end < characters.count, characters[end].isWhitespace { end += 1 }
                tokens.append(.other(String(characters[index..<end])))
                index = end
            } else {
                tokens.append(.other(String(character)))
                index += 1
            }
        }
        return tokens
    }
}
