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
    public var schemaVersion: Int {
        get throws(StoreError) { Int(try pragmaInteger("user_version") ?? 0) }
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
        let current = try schemaVersion
        guard current <= known else { throw newerError(current, known) }
        var applied: [Int] = []
        for migration in migrations where migration.version > current {
            do {
                let ran = try transaction(.immediate) { database -> Bool in
                    let version = try database.schemaVersion
                    guard version < migration.version else { return false }
                    try migration.apply(database)
                    try database.executeScript("PRAGMA user_version = \(migration.version)")
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
