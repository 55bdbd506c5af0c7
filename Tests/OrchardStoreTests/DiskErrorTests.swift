import Foundation
import OrchardStore
import SQLiteCrashVFS
import Testing

/// Disk errors injected by the crash VFS (SQLiteCrashVFS) under a store: EIO and ENOSPC on write and on fsync.
/// The store acknowledges nothing that may be lost, keeps no partial write, writes nothing more after the error,
/// and recovers when it is opened again. Serialized: the tests of the suite share their directory's fault.
@Suite("R4: disk errors under the store", .serialized)
struct DiskErrorTests {
    let directory: TemporaryDirectory
    init() throws {
        directory = try TemporaryDirectory()
        CrashVFS.install(under: directory.path)
    }

    static func open(_ path: String) throws -> Store {
        try Store(path: path, options: StoreOptions(durability: .full), migrations: CrashTests.migrations)
    }

    static func transfer(_ store: Store, _ number: Int) async throws {
        try await store.write { database in
            for (account, sign) in [("A", -1), ("B", 1)] {
                try database.execute(
                    "INSERT INTO ledger (transfer, account, amount, memo) VALUES (?, ?, ?, x'00')",
                    [.int(number), .text(account), .integer(Int64(sign * number))])
            }
        }
    }

    static func transfers(_ store: Store) async throws -> [Int] {
        try await store.read { database in
            #expect(try database.integrityCheck() == [])
            let incomplete = try database.queryFirst(
                "SELECT count(*) FROM (SELECT transfer FROM ledger GROUP BY transfer HAVING count(*) != 2)"
            ) { try $0.int(0) }
            #expect(incomplete == 0, "a transfer was kept in part")
            return try database.query("SELECT DISTINCT transfer FROM ledger ORDER BY transfer") { try $0.int(0) }
        }
    }

    @Test(
        "R4: EIO or ENOSPC on write or fsync during a commit: no ack, no partial row, no write after it, restart recovers",
        arguments: [
            (CrashVFS.Operation.write, CrashVFS.DiskError.io), (.write, .noSpace), (.sync, .io), (.sync, .noSpace),
        ])
    func diskErrorDuringCommit(operation: CrashVFS.Operation, error: CrashVFS.DiskError) async throws {
        let path = directory.file("ledger-\(operation)-\(error).sqlite")
        let store = try Self.open(path)
        try await Self.transfer(store, 1)
        try await Self.transfer(store, 2)

        CrashVFS.fail(operation, with: error, under: directory.path)
        defer { CrashVFS.clearFault(under: directory.path) }
        // The commit that hits the error is not acknowledged.
        let failed = await expectStoreError(.io) { try await Self.transfer(store, 3) }
        #expect(failed?.message.contains("not acknowledged") == true, "\(String(describing: failed))")
        #expect(CrashVFS.faultHits(under: directory.path) == 1)
        // Later writes are refused without touching the file: no write and no sync after a failed one.
        let refused = await expectStoreError(.unavailable) { try await Self.transfer(store, 4) }
        #expect(refused?.message.contains("restart") == true)
        await expectStoreError(.unavailable) {
            try await store.onWriter { database in try database.execute("DELETE FROM ledger") }
        }
        #expect(
            CrashVFS.operationsAfterFault(under: directory.path) == 0, "the store went on writing after the disk error")
        // Reads still work, and see only acknowledged transfers.
        #expect(try await Self.transfers(store) == [1, 2])
        await store.close()
        // Closing did not checkpoint either.
        #expect(
            CrashVFS.operationsAfterFault(under: directory.path) == 0, "closing the store wrote after the disk error")

        // The machine restarts (power cycle: what never reached the disk is gone) and the store recovers.
        CrashVFS.clearFault(under: directory.path)
        CrashVFS.powerLoss(under: directory.path)
        let reopened = try Self.open(path)
        #expect(try await Self.transfers(reopened) == [1, 2])
        try await Self.transfer(reopened, 5)
        #expect(try await Self.transfers(reopened) == [1, 2, 5])
        await reopened.close()
    }

    @Test("R4: restarted without a power cycle after a failed fsync, the unacknowledged commit is whole or absent")
    func restartWithoutPowerCycle() async throws {
        let path = directory.file("warm.sqlite")
        let store = try Self.open(path)
        try await Self.transfer(store, 1)
        CrashVFS.fail(.sync, with: .io, under: directory.path)
        await expectStoreError(.io) { try await Self.transfer(store, 2) }
        await store.close()
        CrashVFS.clearFault(under: directory.path)
        // The kernel may still hold the pages it failed to write (they read back, clean): the commit reported as
        // not acknowledged can come back whole on a warm restart, which is why its error says to retry with the
        // same idempotency key. It never comes back in part.
        let reopened = try Self.open(path)
        let kept = try await Self.transfers(reopened)
        #expect(kept == [1] || kept == [1, 2], "\(kept)")
        try await Self.transfer(reopened, 3)
        await reopened.close()
    }

    @Test("R4: the writes grouped with the one that hit a disk error all fail; none is kept")
    func groupedWritesFailTogether() async throws {
        let path = directory.file("group.sqlite")
        let store = try Self.open(path)
        try await Self.transfer(store, 1)
        CrashVFS.fail(.sync, with: .io, under: directory.path)
        defer { CrashVFS.clearFault(under: directory.path) }
        let outcomes = await withTaskGroup(of: Bool.self) { group in
            for number in 2...9 {
                group.addTask { (try? await Self.transfer(store, number)) != nil }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(!outcomes.contains(true), "a write was acknowledged after the failed sync")
        #expect(CrashVFS.operationsAfterFault(under: directory.path) == 0)
        await store.close()
        CrashVFS.clearFault(under: directory.path)
        CrashVFS.powerLoss(under: directory.path)
        let reopened = try Self.open(path)
        #expect(try await Self.transfers(reopened) == [1])
        await reopened.close()
    }

    @Test("R4: a power loss that tears the unsynced pages of an abandoned transaction loses nothing acknowledged")
    func tornPowerLossInProcess() async throws {
        for seed in UInt32(1)...4 {
            let path = directory.file("power-\(seed).sqlite")
            let store = try Self.open(path)
            for number in 1...30 { try await Self.transfer(store, number) }
            // A tiny page cache spills the pages of a large transaction into the log before it commits; the
            // transaction is then rolled back, so those pages are never synced.
            try await store.onWriter { database in
                try database.executeScript("PRAGMA cache_size = 2")
                try database.execute("BEGIN IMMEDIATE")
                for number in 100...400 {
                    try database.execute(
                        "INSERT INTO ledger (transfer, account, amount, memo) VALUES (?, 'A', 0, zeroblob(600))",
                        [.int(number)])
                }
                try database.execute("ROLLBACK")
            }
            #expect(CrashVFS.unsyncedBytes(under: path) > 0, "seed \(seed): nothing was left to tear")
            CrashVFS.powerLoss(under: path, tear: true, seed: seed)
            await store.close()
            let reopened = try Self.open(path)
            #expect(try await Self.transfers(reopened) == Array(1...30), "seed \(seed)")
            try await Self.transfer(reopened, 31)
            await reopened.close()
        }
    }
}
