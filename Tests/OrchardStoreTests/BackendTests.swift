import CommandTestSupport
import Foundation
import Testing

@testable import OrchardStore

/// The store's guarantees on both backends: the same tests on an SQLite file and on a schema of a real PostgreSQL
/// server (one per test run, see `TestPostgreSQL`), including two instances of a party writing at once.
@Suite("Store backends: SQLite and PostgreSQL", .serialized)
struct BackendTests {
    @Test(
        "PostgreSQL starts for the tests (with CI=true a missing PostgreSQL fails here)",
        .enabled(if: TestPostgreSQL.enabled, Comment(rawValue: TestPostgreSQL.installHint)))
    func postgreSQLStarts() async throws {
        let server = try await TestPostgreSQL.shared()
        let database = try Database(
            location: .postgreSQL(try PostgreSQLLocation(url: server.url, schema: TestPostgreSQL.freshSchema())),
            options: StoreOptions(durability: .full))
        #expect(database.isPostgreSQL)
        #expect(try database.queryFirst("SELECT 40 + ?", [2]) { try $0.int64(0) } == 42)
    }

    static let counterMigrations = [
        Migration(
            version: 1, name: "counter and nonces",
            sql: """
                CREATE TABLE counter (id INTEGER PRIMARY KEY CHECK (id = 1), value INTEGER NOT NULL) STRICT;
                INSERT INTO counter (id, value) VALUES (1, 0);
                CREATE TABLE nonces (nonce TEXT PRIMARY KEY, used INTEGER NOT NULL, used_by TEXT) STRICT, WITHOUT ROWID;
                CREATE TABLE journal (id INTEGER PRIMARY KEY AUTOINCREMENT, amount INTEGER NOT NULL, note BLOB);
                """)
    ]

    @Test("values of every storage class round-trip, typed access refuses the wrong type", arguments: StoreBackend.all)
    func valuesRoundTrip(_ backend: StoreBackend) async throws {
        let directory = try TemporaryDirectory()
        let store = try Store(
            location: try await backend.location(in: directory), options: StoreOptions(durability: .full),
            migrations: Self.counterMigrations)
        let blob: [UInt8] = [0, 1, 0x7F, 0x80, 0xFF]
        let id = try await store.write { database in
            try database.queryFirst(
                "INSERT INTO journal (amount, note) VALUES (?, ?) RETURNING id", [.integer(Int64.max), .blob(blob)]
            ) { try $0.int64(0) }
        }
        #expect(id == 1)
        _ = try await store.write { database in
            try database.execute("INSERT INTO journal (amount, note) VALUES (?, ?)", [-7, .blob([])])
            try database.execute("INSERT INTO journal (amount, note) VALUES (?, ?)", [0, nil])
            try database.execute("INSERT INTO nonces (nonce, used, used_by) VALUES (?, 0, ?)", ["'; --?", ""])
        }
        let rows = try await store.read { database in
            try database.query("SELECT id, amount, note FROM journal ORDER BY id") { row in
                (try row.int64(0), try row.int64(1), try row.optionalBlob(2))
            }
        }
        #expect(rows.map(\.0) == [1, 2, 3])
        #expect(rows.map(\.1) == [Int64.max, -7, 0])
        #expect(rows.map(\.2) == [blob, [], nil])
        let (nonce, empty, sum, ratio) = try await store.read { database in
            try database.queryFirst(
                "SELECT nonce, used_by, (SELECT sum(amount) FROM journal WHERE amount < 0), 1.5 FROM nonces"
            ) { row in (try row.string(0), try row.string(1), try row.int64(2), try row.double(3)) }!
        }
        #expect(nonce == "'; --?" && empty == "" && sum == -7 && ratio == 1.5)
        // The wrong type, a missing column, a duplicate key and bad SQL are typed errors.
        try await store.read { database in
            try database.withStatement("SELECT amount, note FROM journal WHERE id = 3") { statement in
                let row = try #require(try statement.step())
                expectStoreError(.typeMismatch) { try row.string(0) }
                expectStoreError(.typeMismatch) { try row.blob(1) }
                expectStoreError(.misuse) { try row.int64(2) }
            }
        }
        await expectStoreError(.constraint) {
            try await store.write { database in
                try database.execute("INSERT INTO nonces (nonce, used) VALUES (?, 0)", ["'; --?"])
            }
        }
        await expectStoreError(.sql) {
            try await store.write { database in try database.execute("SELECT nothing FROM nowhere") }
        }
        await expectStoreError(.readOnly) {
            try await store.read { database in try database.execute("DELETE FROM journal") }
        }
        #expect(
            try await store.read { database in try database.queryFirst("SELECT count(*) FROM journal") { try $0.int(0) }
            } == 3)
    }

    @Test(
        "group commit: a failing write undoes only itself, the others of its group commit", arguments: StoreBackend.all)
    func groupCommitIsolatesAFailingWrite(_ backend: StoreBackend) async throws {
        let directory = try TemporaryDirectory()
        let store = try Store(
            location: try await backend.location(in: directory), options: StoreOptions(durability: .full),
            migrations: Self.counterMigrations)
        let results = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<40 {
                group.addTask {
                    do {
                        try await store.write { database in
                            try database.execute("INSERT INTO journal (amount) VALUES (?)", [.int(index)])
                            if index % 10 == 3 { throw StoreError(.invalidArgument, "refused") }
                        }
                        return true
                    } catch {
                        return false
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.filter { $0 }.count == 36)
        let amounts = try await store.read { database in
            try database.query("SELECT amount FROM journal ORDER BY amount") { try $0.int(0) }
        }
        #expect(amounts == (0..<40).filter { $0 % 10 != 3 })
    }

    @Test(
        "two instances on one database: read-then-write increments are never lost, a nonce is consumed once",
        arguments: StoreBackend.all)
    func twoInstancesNeverLoseOrRepeatAWrite(_ backend: StoreBackend) async throws {
        let directory = try TemporaryDirectory()
        let location = try await backend.location(in: directory)
        // Two instances of a party: two stores, each with its own writer connection, migrating at once.
        async let first = Store(
            location: location, options: StoreOptions(durability: .full), migrations: Self.counterMigrations)
        async let second = Store(
            location: location, options: StoreOptions(durability: .full), migrations: Self.counterMigrations)
        let instances = try await [first, second]
        _ = try await instances[0].write { database in
            for index in 0..<20 {
                try database.execute("INSERT INTO nonces (nonce, used) VALUES (?, 0)", [.text("n\(index)")])
            }
        }
        let consumed = try await withThrowingTaskGroup(of: Bool.self) { group in
            for round in 0..<40 {
                let instance = instances[round % 2]
                group.addTask {
                    // Read, then write what was read plus one: only a serializable store keeps every increment.
                    try await instance.write { database in
                        let value = try database.queryFirst("SELECT value FROM counter WHERE id = 1") {
                            try $0.int64(0)
                        }!
                        try database.execute("UPDATE counter SET value = ? WHERE id = 1", [.integer(value + 1)])
                    }
                    // Check, then mark used: the same nonce offered to both instances at once is accepted once.
                    return try await instance.write { database in
                        let nonce = "n\(round / 2)"
                        let used = try database.queryFirst("SELECT used FROM nonces WHERE nonce = ?", [.text(nonce)]) {
                            try $0.bool(0)
                        }
                        guard used == false else { return false }
                        try database.execute(
                            "UPDATE nonces SET used = 1, used_by = ? WHERE nonce = ?",
                            [.text("instance \(round % 2)"), .text(nonce)])
                        return true
                    }
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(consumed.filter { $0 }.count == 20)
        let (value, used) = try await instances[1].read { database in
            (
                try database.queryFirst("SELECT value FROM counter") { try $0.int(0) },
                try database.queryFirst("SELECT count(*) FROM nonces WHERE used = 1") { try $0.int(0) }
            )
        }
        #expect(value == 40)
        #expect(used == 20)
        #expect(try await instances[0].read { try $0.schemaVersion } == 1)
    }

    @Test("migrations: a database newer than the program is refused, on both backends", arguments: StoreBackend.all)
    func newerSchemaIsRefused(_ backend: StoreBackend) async throws {
        let directory = try TemporaryDirectory()
        let location = try await backend.location(in: directory)
        let later =
            Self.counterMigrations + [
                Migration(version: 2, name: "notes", sql: "ALTER TABLE journal ADD COLUMN memo TEXT")
            ]
        try await Store(location: location, options: StoreOptions(durability: .full), migrations: later).close()
        let error = #expect(throws: StoreError.self) {
            try Store(location: location, options: StoreOptions(durability: .full), migrations: Self.counterMigrations)
        }
        #expect(error?.code == .migration)
        let reopened = try Store(location: location, options: StoreOptions(durability: .full), migrations: later)
        #expect(try await reopened.read { try $0.schemaVersion } == 2)
    }

    @Test("a PostgreSQL URL with a password, or a bad schema name, is refused")
    func badPostgreSQLLocationsAreRefused() {
        for url in ["postgresql://orchard:secret@db.example/pay", "postgresql://db.example/pay?password=secret"] {
            let error = expectStoreError(.invalidArgument) { try PostgreSQLLocation(url: url, schema: "pay") }
            #expect(error?.message.contains("secret") == false)
            #expect(error?.message.contains("passfile") == true)
        }
        expectStoreError(.invalidArgument) { try PostgreSQLLocation(url: "mysql://db/pay", schema: "pay") }
        expectStoreError(.invalidArgument) {
            try PostgreSQLLocation(url: "postgresql://db/pay?nosuch=1", schema: "pay")
        }
        for schema in ["", "Pay", "1pay", "pay; DROP", "pay-x", String(repeating: "a", count: 64)] {
            expectStoreError(.invalidArgument) {
                try PostgreSQLLocation(url: "postgresql://@/pay?host=/run/postgresql", schema: schema)
            }
        }
        #expect(
            (try? PostgreSQLLocation(url: "postgresql://orchard@/pay?host=/run/postgresql", schema: "pay_2")) != nil)
    }

    @Test("a PostgreSQL URL over TCP needs verified TLS and a login bound to it; a Unix socket needs none")
    func postgreSQLOverTCPNeedsVerifiedTLS() {
        let verified = "sslmode=verify-full&sslrootcert=/etc/orchard/db-ca.pem"
        for url in [
            "postgresql://orchard@/pay", "postgresql://orchard@/pay?host=/run/postgresql",
            "postgresql://orchard@%2Frun%2Fpostgresql:5433/pay", "postgresql://orchard@/pay?host=@orchard",
            "postgresql://orchard@db.example/pay?\(verified)&channel_binding=require",
            "postgresql://orchard@db.example/pay?\(verified)&sslcert=/etc/orchard/c.pem&sslkey=/etc/orchard/c.key",
            "postgresql://orchard@/pay?hostaddr=192.0.2.7&host=db.example&\(verified)&channel_binding=require",
        ] {
            #expect((try? PostgreSQLLocation(url: url, schema: "pay")) != nil, "\(url)")
        }
        let refused: [(String, [String])] = [
            // libpq's default sslmode=prefer, and each weaker mode.
            ("postgresql://orchard@db.example/pay", ["sslmode=verify-full", "sslrootcert", "channel_binding"]),
            ("postgresql://orchard@127.0.0.1:5432/pay?sslmode=require", ["sslmode=verify-full"]),
            (
                "postgresql://orchard@db.example/pay?sslmode=verify-ca&sslrootcert=/ca.pem&channel_binding=require",
                ["sslmode=verify-full"]
            ),
            ("postgresql://orchard@db.example/pay?sslmode=verify-full&channel_binding=require", ["sslrootcert"]),
            ("postgresql://orchard@db.example/pay?\(verified)", ["channel_binding=require"]),
            ("postgresql://orchard@db.example/pay?\(verified)&channel_binding=prefer", ["channel_binding=require"]),
            ("postgresql://orchard@db.example/pay?\(verified)&sslcert=/c.pem", ["channel_binding=require"]),
            // A TCP host beside a socket, or a TCP address alone.
            ("postgresql://orchard@/pay?host=/run/postgresql,db.example", ["db.example", "sslmode=verify-full"]),
            ("postgresql://orchard@/pay?hostaddr=192.0.2.7", ["192.0.2.7", "sslmode=verify-full"]),
        ]
        for (url, named) in refused {
            let error = expectStoreError(.invalidArgument) { try PostgreSQLLocation(url: url, schema: "pay") }
            for part in named + ["over TCP without verified TLS", "Unix socket"] {
                #expect(error?.message.contains(part) == true, "\(url): \(error?.message ?? "")")
            }
        }
    }

    @Test("the SQL the parties write, translated for PostgreSQL (known answers)")
    func dialectKnownAnswers() {
        let cases: [(String, String)] = [
            (
                "SELECT a FROM t WHERE b = ? AND c = '?' AND d = ?",
                "SELECT a FROM t WHERE b = $1 AND c = '?' AND d = $2"
            ),
            ("BEGIN IMMEDIATE", "BEGIN ISOLATION LEVEL SERIALIZABLE"),
            ("BEGIN DEFERRED", "BEGIN ISOLATION LEVEL REPEATABLE READ"),
            ("INSERT OR IGNORE INTO a (x) VALUES (?)", "INSERT INTO a (x) VALUES ($1) ON CONFLICT DO NOTHING"),
            (
                "CREATE TABLE q (id INTEGER PRIMARY KEY AUTOINCREMENT, b BLOB, r REAL, s TEXT) STRICT",
                "CREATE TABLE q (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, b BYTEA, r DOUBLE PRECISION, s TEXT)"
            ),
            ("CREATE TABLE k (a TEXT PRIMARY KEY) STRICT, WITHOUT ROWID", "CREATE TABLE k (a TEXT PRIMARY KEY)"),
            ("CREATE TABLE k (a TEXT PRIMARY KEY) WITHOUT ROWID", "CREATE TABLE k (a TEXT PRIMARY KEY)"),
            ("SELECT \"integer\", 'BLOB' -- ?\n", "SELECT \"integer\", 'BLOB' -- ?\n"),
        ]
        for (sqlite, postgreSQL) in cases {
            #expect(PostgreSQLDialect.translate(sqlite).sql == postgreSQL)
        }
        #expect(PostgreSQLDialect.translate("SELECT ?, ?, ?").parameters == 3)
        #expect(PostgreSQLDialect.translate("SELECT ?2, ?1 WHERE ?2").sql == "SELECT $2, $1 WHERE $2")
        #expect(PostgreSQLDialect.translate("SELECT ?2, ?1 WHERE ?2").parameters == 2)
        #expect(PostgreSQLDialect.splitStatements("A; B ';'; ; C").count == 3)
    }
}
