import Foundation
import OrchardStore
import Testing

@Suite("Database: connection settings, statements, typed columns, transactions")
struct DatabaseTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    func open(_ durability: Durability = .full, secureDelete: Bool = false) throws -> Database {
        let database = try Database(
            path: directory.file("test.sqlite"),
            options: StoreOptions(durability: durability, secureDelete: secureDelete)
        )
        try database.executeScript("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v, UNIQUE (v))")
        return database
    }

    @Test func connectionSettings() throws {
        let full = try open(.full, secureDelete: true)
        #expect(try full.pragmaInteger("synchronous") == 2)
        #expect(try full.pragmaInteger("foreign_keys") == 1)
        #expect(try full.pragmaInteger("secure_delete") == 1)
        #expect(try full.queryFirst("PRAGMA journal_mode") { try $0.string(0) } == "wal")
        let normal = try open(.normal)
        #expect(try normal.pragmaInteger("synchronous") == 1)
        #expect(try normal.pragmaInteger("secure_delete") == 0)
        // Reads go through a mapping of the file, on writing and read-only connections alike.
        let reader = try Database(
            path: directory.file("test.sqlite"), options: StoreOptions(durability: .full), access: .readOnly)
        for connection in [full, normal, reader] { #expect(try connection.pragmaInteger("mmap_size") == 256 << 20) }
        // The file is created owner-only.
        let attributes = try FileManager.default.attributesOfItem(atPath: directory.file("test.sqlite"))
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
    }

    @Test func secureDeleteOverwritesDeletedRows() throws {
        // A recognizable value, deleted, then checkpointed into the file: with secure_delete it is gone from
        // the bytes on disk; without it, it lingers (the negative case shows the check can fail).
        let marker = Array("CARD-DATA-MARKER-0123456789".utf8)
        for secureDelete in [true, false] {
            let path = directory.file("secure-\(secureDelete).sqlite")
            let database = try Database(
                path: path, options: StoreOptions(durability: .full, secureDelete: secureDelete)
            )
            try database.executeScript("CREATE TABLE vault (id INTEGER PRIMARY KEY, secret BLOB)")
            try database.execute("INSERT INTO vault (secret) VALUES (?), (?)", [.blob(marker), .blob([1, 2, 3])])
            try database.checkpoint()
            try database.execute("DELETE FROM vault WHERE id = 1")
            try database.checkpoint()
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
            let present = (0...(bytes.count - marker.count)).contains {
                bytes[$0..<($0 + marker.count)].elementsEqual(marker)
            }
            #expect(present == !secureDelete, "secureDelete \(secureDelete)")
            // The log's files inherit the database file's owner-only mode.
            let wal = try FileManager.default.attributesOfItem(atPath: path + "-wal")
            #expect((wal[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        }
    }

    @Test func foreignKeysAreEnforced() throws {
        let database = try open()
        try database.executeScript(
            """
            CREATE TABLE parent (id INTEGER PRIMARY KEY);
            CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER NOT NULL REFERENCES parent (id));
            INSERT INTO parent (id) VALUES (1);
            """
        )
        try database.execute("INSERT INTO child (parent) VALUES (?)", [1])
        expectStoreError(.constraint) { try database.execute("INSERT INTO child (parent) VALUES (?)", [2]) }
    }

    @Test func valuesRoundTripWithTheirStorageClass() throws {
        let database = try open()
        let values: [SQLiteValue] = [
            .null, .integer(Int64.min), .integer(Int64.max), .real(-0.5), .text(""), .text("caf\u{E9} \u{1F34E}"),
            .text("a\u{0}b"), .blob([]), .blob([0, 1, 0xFF]),
        ]
        for value in values {
            try database.execute("DELETE FROM t")
            try database.execute("INSERT INTO t (v) VALUES (?)", [value])
            let read = try database.queryFirst("SELECT v FROM t") { try $0.value(0) }
            #expect(read == value, "\(value)")
        }
        // Typed accessors and literals.
        try database.execute("DELETE FROM t")
        try database.execute("INSERT INTO t (id, v) VALUES (?, ?)", [7, true])
        let row = try database.queryFirst("SELECT id, v, NULL, 'x', x'00', 1.5 FROM t") { row in
            (
                try row.int(0), try row.bool(1), try row.optionalString(2), try row.string(3), try row.blob(4),
                try row.double(5), try row.double(0), try row.isNull(2)
            )
        }
        #expect(row?.0 == 7)
        #expect(row?.1 == true)
        #expect(row?.2 == nil)
        #expect(row?.3 == "x")
        #expect(row?.4 == [0])
        #expect(row?.5 == 1.5)
        #expect(row?.6 == 7.0)
        #expect(row?.7 == true)
        let stamp = Date(timeIntervalSince1970: 1_700_000_000.123)
        try database.execute("UPDATE t SET v = ?", [.milliseconds(stamp)])
        #expect(
            try database.queryFirst("SELECT v FROM t") { try $0.date(0) }
                == Date(orchardMilliseconds: 1_700_000_000_123))
    }

    @Test func typedAccessorsRejectOtherTypes() throws {
        let database = try open()
        try database.execute("INSERT INTO t (v) VALUES ('text')")
        for (index, read) in [
            (0, { (row: Row) throws -> Void in _ = try row.int64(1) }),
            (1, { (row: Row) throws -> Void in _ = try row.blob(1) }),
            (2, { (row: Row) throws -> Void in _ = try row.string(0) }),
            (3, { (row: Row) throws -> Void in _ = try row.double(1) }),
            (4, { (row: Row) throws -> Void in _ = try row.string(2) }),  // NULL is not text
            (5, { (row: Row) throws -> Void in _ = try row.bool(3) }),  // 2 is not a boolean
        ] {
            let error = expectStoreError(.typeMismatch) {
                _ = try database.queryFirst("SELECT id, v, NULL, 2 FROM t") { try read($0) }
            }
            #expect(error != nil, "case \(index)")
        }
        // Text that is not UTF-8 is rejected rather than repaired.
        try database.execute("UPDATE t SET v = CAST(x'C328' AS TEXT)")
        expectStoreError(.typeMismatch) { _ = try database.queryFirst("SELECT v FROM t") { try $0.string(0) } }
    }

    @Test func misuseIsReportedNotCrashed() throws {
        let database = try open()
        try database.execute("INSERT INTO t (v) VALUES (1), (2)")
        // A row kept past its step.
        var kept: Row?
        _ = try database.query("SELECT v FROM t ORDER BY v") { row in
            if kept == nil { kept = row }
        }
        expectStoreError(.misuse) { _ = try kept?.int64(0) }
        // A column out of range, a wrong argument count, a parameter index out of range.
        expectStoreError(.misuse) { _ = try database.queryFirst("SELECT v FROM t") { try $0.int64(1) } }
        expectStoreError(.misuse) { _ = try database.queryFirst("SELECT v FROM t") { try $0.int64(-1) } }
        expectStoreError(.misuse) { try database.execute("INSERT INTO t (v) VALUES (?)", [1, 2]) }
        let statement = try database.prepare("SELECT ?")
        expectStoreError(.misuse) { try statement.bind(1, at: 2) }
        // SQL errors.
        expectStoreError(.sql) { try database.execute("SELEC 1") }
        expectStoreError(.sql) { try database.execute("SELECT * FROM missing") }
        expectStoreError(.sql) { try database.execute("SELECT 1; SELECT 2") }
        expectStoreError(.sql) { try database.execute("   ") }
        expectStoreError(.constraint) { try database.execute("INSERT INTO t (v) VALUES (1)") }
        expectStoreError(.invalidArgument) { _ = try database.pragmaInteger("user_version; DROP TABLE t") }
    }

    @Test func statementsAreCachedAndNotSharedWhileInUse() throws {
        let database = try open()
        let before = database.statementsCompiled
        for number in 0..<50 {
            try database.execute("INSERT INTO t (v) VALUES (?)", [.int(number)])
        }
        #expect(database.statementsCompiled == before + 1)
        let cached = database.cachedStatementCount
        // The same SQL used again while its cached statement is stepping gets a statement of its own,
        // so the outer iteration is not disturbed.
        let pairs = try database.query("SELECT v FROM t WHERE v < ? ORDER BY v", [3]) { outer in
            let value = try outer.int64(0)
            let inner = try database.query("SELECT v FROM t WHERE v < ? ORDER BY v", [2]) { try $0.int64(0) }
            return (value, inner)
        }
        #expect(pairs.map(\.0) == [0, 1, 2])
        #expect(pairs.allSatisfy { $0.1 == [0, 1] })
        #expect(database.cachedStatementCount == cached + 1)
        #expect(database.statementsCompiled == before + 5)  // insert, outer, and three inner one-offs
        // A statement is reset after use: running it again starts from the first row.
        #expect(try database.queryFirst("SELECT v FROM t ORDER BY v", []) { try $0.int(0) } == 0)
        #expect(try database.queryFirst("SELECT v FROM t ORDER BY v", []) { try $0.int(0) } == 0)
    }

    @Test func transactionCommitsOrRollsBack() throws {
        let database = try open()
        struct Refused: Error {}
        try database.transaction { try $0.execute("INSERT INTO t (v) VALUES ('kept')") }
        #expect(throws: Refused.self) {
            try database.transaction { database in
                try database.execute("INSERT INTO t (v) VALUES ('dropped')")
                throw Refused()
            }
        }
        #expect(!database.isInTransaction)
        // A failing statement inside the transaction rolls back the earlier ones too.
        expectStoreError(.constraint) {
            try database.transaction { database in
                try database.execute("INSERT INTO t (v) VALUES ('also dropped')")
                try database.execute("INSERT INTO t (v) VALUES ('kept')")
            }
        }
        #expect(try database.query("SELECT v FROM t") { try $0.string(0) } == ["kept"])
    }

    @Test func nestedTransactionsAreSavepoints() throws {
        let database = try open()
        struct Refused: Error {}
        try database.transaction { database in
            try database.execute("INSERT INTO t (v) VALUES ('outer')")
            #expect(throws: Refused.self) {
                try database.transaction { database in
                    try database.execute("INSERT INTO t (v) VALUES ('inner')")
                    throw Refused()
                }
            }
            try database.transaction { database in try database.execute("INSERT INTO t (v) VALUES ('inner2')") }
        }
        #expect(try database.query("SELECT v FROM t ORDER BY v") { try $0.string(0) } == ["inner2", "outer"])
        // An outer rollback undoes released savepoints as well.
        #expect(throws: Refused.self) {
            try database.transaction { database in
                try database.transaction { database in try database.execute("INSERT INTO t (v) VALUES ('gone')") }
                throw Refused()
            }
        }
        #expect(try database.queryFirst("SELECT count(*) FROM t") { try $0.int(0) } == 2)
    }

    @Test func openFailuresAreTyped() throws {
        expectStoreError(.cannotOpen) {
            _ = try Database(path: directory.file("missing/dir/x.sqlite"), options: StoreOptions(durability: .full))
        }
        expectStoreError(.cannotOpen) {
            _ = try Database(
                path: directory.file("absent.sqlite"), options: StoreOptions(durability: .full), access: .readOnly
            )
        }
        let garbage = directory.file("garbage.sqlite")
        try Data(repeating: 0x41, count: 4096).write(to: URL(fileURLWithPath: garbage))
        expectStoreError(.corrupt) { _ = try Database(path: garbage, options: StoreOptions(durability: .full)) }
    }

    @Test func readOnlyConnectionRejectsWrites() throws {
        _ = try open()
        let reader = try Database(
            path: directory.file("test.sqlite"), options: StoreOptions(durability: .full), access: .readOnly
        )
        #expect(try reader.queryFirst("SELECT count(*) FROM t") { try $0.int(0) } == 0)
        expectStoreError(.readOnly) { try reader.execute("INSERT INTO t (v) VALUES (1)") }
    }

    @Test func integrityCheckReportsIntactFile() throws {
        let database = try open()
        try database.execute("INSERT INTO t (v) VALUES (1)")
        #expect(try database.integrityCheck().isEmpty)
    }
}
