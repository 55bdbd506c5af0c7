import Foundation
import OrchardStore
import Testing

@Suite("Migrations: ordered, versioned through user_version, each in a transaction")
struct MigrationTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    func open() throws -> Database {
        try Database(path: directory.file("m.sqlite"), options: StoreOptions(durability: .full))
    }

    static let first = [
        Migration(version: 1, name: "accounts", sql: "CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT)"),
        Migration(version: 2, name: "balances", sql: "ALTER TABLE accounts ADD COLUMN balance INTEGER DEFAULT 0"),
    ]

    @Test func appliesPendingMigrationsInOrderOnce() throws {
        let database = try open()
        #expect(try database.schemaVersion == 0)
        #expect(try database.migrate(Self.first) == [1, 2])
        #expect(try database.schemaVersion == 2)
        try database.execute("INSERT INTO accounts (name, balance) VALUES ('a', 5)")
        // Running again applies nothing; a new migration applies alone.
        #expect(try database.migrate(Self.first) == [])
        let more =
            Self.first + [
                Migration(version: 3, name: "index") { database in
                    try database.executeScript("CREATE INDEX accounts_name ON accounts (name)")
                }
            ]
        let reopened = try open()
        #expect(try reopened.migrate(more) == [3])
        #expect(try reopened.schemaVersion == 3)
        #expect(try reopened.queryFirst("SELECT balance FROM accounts") { try $0.int(0) } == 5)
    }

    @Test func failingMigrationRollsBackAndKeepsTheVersion() throws {
        let database = try open()
        try database.migrate(Self.first)
        let broken =
            Self.first + [
                Migration(
                    version: 3, name: "half done",
                    sql: "CREATE TABLE audit (id INTEGER PRIMARY KEY); INSERT INTO no_such_table VALUES (1)"
                )
            ]
        let error = expectStoreError(.migration) { try database.migrate(broken) }
        #expect(error?.message.contains("half done") == true)
        #expect(try database.schemaVersion == 2)
        // The table the failed migration created before failing is gone with it.
        #expect(
            try database.queryFirst("SELECT count(*) FROM sqlite_master WHERE name = 'audit'") { try $0.int(0) } == 0)
    }

    @Test func malformedListsAreRejected() throws {
        let database = try open()
        let gap = [Self.first[0], Migration(version: 3, name: "skips two", sql: "SELECT 1")]
        expectStoreError(.migration) { try database.migrate(gap) }
        let reversed = Array(Self.first.reversed())
        expectStoreError(.migration) { try database.migrate(reversed) }
        let zero = [Migration(version: 0, name: "zero", sql: "SELECT 1")]
        expectStoreError(.migration) { try database.migrate(zero) }
        #expect(try database.schemaVersion == 0)
    }

    @Test func aFileFromANewerProgramIsRefused() throws {
        let database = try open()
        try database.migrate(Self.first)
        let error = expectStoreError(.migration) { try database.migrate(Array(Self.first.prefix(1))) }
        #expect(error?.message.contains("newer") == true)
    }
}
