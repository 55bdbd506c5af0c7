/// One step of a store's schema history.
///
/// A store's migrations are numbered 1, 2, 3, … without gaps; the number of the last one applied is kept
/// in the file's `user_version`. Applied migrations must never change: add a new one instead.
public struct Migration: Sendable {
    /// The schema version this migration produces (1 for the first).
    public let version: Int
    /// What it does, for error messages.
    public let name: String
    let apply: @Sendable (Database) throws -> Void

    /// A migration that runs `apply` on the connection (inside the migration's transaction).
    public init(version: Int, name: String, apply: @escaping @Sendable (Database) throws -> Void) {
        self.version = version
        self.name = name
        self.apply = apply
    }

    /// A migration that runs the `;`-separated statements of `sql`.
    public init(version: Int, name: String, sql: String) {
        self.init(version: version, name: name) { database in try database.executeScript(sql) }
    }
}

extension Database {
    /// The schema version recorded in the file (`PRAGMA user_version`).
    /// On PostgreSQL the version is kept in the schema's `orchard_schema_version` table (0 before it exists).
    public var schemaVersion: Int {
        get throws(StoreError) {
            guard isPostgreSQL else { return Int(try pragmaInteger("user_version") ?? 0) }
            guard case .text = try firstValue("SELECT to_regclass('orchard_schema_version')::text") else { return 0 }
            guard case .integer(let version) = try firstValue("SELECT version FROM orchard_schema_version WHERE id = 1")
            else { return 0 }
            return Int(version)
        }
    }

    /// Whether the table `name` exists (in the store's schema, on PostgreSQL): the portable form of a look into
    /// `sqlite_master`.
    public func tableExists(_ name: String) throws(StoreError) -> Bool {
        let sql =
            isPostgreSQL
            ? "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?"
            : "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?"
        guard case .integer(let count) = try firstValue(sql, [.text(name)]) else { return false }
        return count > 0
    }

    /// Creates PostgreSQL's version table; a concurrent creation by another instance is no failure.
    private func createVersionTable() throws(StoreError) {
        do throws(StoreError) {
            try executeScript(
                """
                CREATE TABLE IF NOT EXISTS orchard_schema_version (
                    id INTEGER NOT NULL PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL);
                INSERT INTO orchard_schema_version (id, version) VALUES (1, 0) ON CONFLICT DO NOTHING
                """)
        } catch  where error.sqlState == "23505" || error.sqlState == "42P07" {
            // Another instance created it at the same moment.
        }
    }

    /// Records `version`: `PRAGMA user_version` on SQLite, the version table on PostgreSQL.
    private func setSchemaVersion(_ version: Int) throws(StoreError) {
        if isPostgreSQL {
            try execute("UPDATE orchard_schema_version SET version = ? WHERE id = 1", [.int(version)])
        } else {
            try executeScript("PRAGMA user_version = \(version)")
        }
    }

    /// Applies the migrations the file has not seen yet, each in its own `BEGIN IMMEDIATE` transaction that
    /// also records its version, so a crash leaves the file at one version or the next, never between.
    ///
    /// Another process migrating the same file at the same time is safe: the version is read again under
    /// the write lock. Throws ``StoreError/Code/migration`` when the list is not numbered 1...n, when the
    /// file is newer than the list (written by a newer program), or when a migration fails (its changes
    /// are rolled back). Returns the versions applied.
    @discardableResult
    public func migrate(_ migrations: [Migration]) throws(StoreError) -> [Int] {
        for (offset, migration) in migrations.enumerated() where migration.version != offset + 1 {
            throw StoreError(
                .migration,
                "migration \"\(migration.name)\" has version \(migration.version), expected \(offset + 1): "
                    + "versions must run 1, 2, 3, ... in order"
            )
        }
        let known = migrations.count
        if isPostgreSQL && !migrations.isEmpty { try createVersionTable() }
        let current = try schemaVersion
        guard current <= known else { throw newerError(current, known) }
        var applied: [Int] = []
        for migration in migrations where migration.version > current {
            do {
                let ran = try transaction(.immediate) { database -> Bool in
                    if database.isPostgreSQL {
                        // Instances migrating at once queue here; the later ones then see the new version.
                        try database.execute("SELECT version FROM orchard_schema_version WHERE id = 1 FOR UPDATE")
                    }
                    let version = try database.schemaVersion
                    guard version < migration.version else { return false }
                    try migration.apply(database)
                    try database.setSchemaVersion(migration.version)
                    return true
                }
                if ran { applied.append(migration.version) }
            } catch let error as StoreError where error.code == .migration {
                throw error
            } catch {
                throw StoreError(
                    .migration,
                    "migration \(migration.version) (\(migration.name)) failed and was rolled back: \(error)"
                )
            }
        }
        return applied
    }

    private func newerError(_ found: Int, _ known: Int) -> StoreError {
        StoreError(
            .migration,
            "\(path) has schema version \(found) but this program knows only versions up to \(known): "
                + "it was written by a newer Orchard"
        )
    }
}
