public import Foundation

/// Which clock the state that several instances of a party share (nonces, sessions, idempotency records)
/// expires by.
///
/// On PostgreSQL every instance of a party reads the database server's clock (`clock_timestamp()`), so a nonce
/// issued by one instance is redeemable by another on another host, and expires at the same instant for both,
/// whatever their own clocks say. On SQLite one process owns the file and its injected clocks apply.
public enum ExpiryClock: Sendable, Hashable {
    /// The database's clock on PostgreSQL; the injected clock on SQLite. The default.
    case database
    /// Always the injected clock (a test that moves time by hand on either backend).
    case injected
}

extension Database {
    /// The database server's clock (`clock_timestamp()`) in microseconds since 1970 on PostgreSQL; nil on SQLite.
    ///
    /// It reads the clock when called, not at the start of the transaction, so a write that waited for a lock
    /// sees the time it runs at.
    public func databaseClockMicroseconds() throws(StoreError) -> Int64? {
        guard isPostgreSQL else { return nil }
        let value = try firstValue("SELECT CAST(floor(extract(epoch FROM clock_timestamp()) * 1000000) AS BIGINT)")
        guard case .integer(let microseconds) = value else {
            throw StoreError(.internalFailure, "the database did not return its clock")
        }
        return microseconds
    }

    /// The current time in milliseconds since 1970 by `clock`: the database's (``databaseClockMicroseconds()``)
    /// on PostgreSQL, else `injected`.
    public func expiryMilliseconds(_ clock: ExpiryClock, injected: () -> Date) throws(StoreError) -> Int64 {
        if clock == .database, let microseconds = try databaseClockMicroseconds() {
            return microseconds / 1000
        }
        return injected().orchardMilliseconds
    }
}

extension Store {
    /// The database's clock (``Database/databaseClockMicroseconds()``) when the store is on PostgreSQL, read on a
    /// reader connection; nil on SQLite, where this process's own clocks decide.
    public func databaseClock() async throws -> Date? {
        guard location.isPostgreSQL else { return nil }
        return try await read { database in
            try database.databaseClockMicroseconds().map { Date(timeIntervalSince1970: Double($0) / 1e6) }
        }
    }
}
