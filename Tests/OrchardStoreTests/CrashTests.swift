import CommandTestSupport
import Foundation
import OrchardStore
import Testing

/// A child process (`orchard-store-crasher`) writes transfers and is killed with SIGKILL; the file must hold
/// whole transactions only and open cleanly afterwards.
@Suite("Crash: SIGKILL in the middle of a transaction", .serialized)
struct CrashTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    /// Must match the crasher's schema.
    static let migrations = [
        Migration(
            version: 1, name: "ledger",
            sql: """
                CREATE TABLE ledger (
                    id INTEGER PRIMARY KEY,
                    transfer INTEGER NOT NULL,
                    account TEXT NOT NULL,
                    amount INTEGER NOT NULL,
                    memo BLOB NOT NULL
                );
                """
        )
    ]

    /// The crasher is built next to the test binary (the test target depends on it).
    static func crasherPath() throws -> String {
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let path = URL(fileURLWithPath: executable).deletingLastPathComponent()
            .appendingPathComponent("orchard-store-crasher").path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw StoreError(.internalFailure, "orchard-store-crasher not found at \(path)")
        }
        return path
    }

    /// A running crasher and the lines it printed.
    final class Child: Sendable {
        let process: ChildProcess

        init(database: String, mode: String) throws {
            process = try ChildProcess(try CrashTests.crasherPath(), [database, mode], stdout: .capture)
        }

        /// Reads lines until one satisfies `done`; returns them all. Nil when the child's output ended first.
        func lines(until done: (String) -> Bool) -> [String]? {
            var seen: [String] = []
            while let line = process.nextLine() {
                seen.append(line)
                if done(line) { return seen }
            }
            return nil
        }

        // A test that failed half-way must not leave the child running.
        deinit { process.send(SIGKILL) }

        func killHard() { process.kill() }
    }

    struct Ledger {
        let rows: Int
        let sum: Int64
        let transfers: Int
        let incomplete: Int
    }

    /// Opens the file as a fresh process would, checks its integrity and reads the ledger's invariants.
    func inspect(_ path: String) async throws -> Ledger {
        let store = try Store(path: path, options: StoreOptions(durability: .full), migrations: Self.migrations)
        let ledger = try await store.read { database in
            #expect(try database.integrityCheck() == [])
            return try database.queryFirst(
                """
                SELECT count(*), coalesce(sum(amount), 0), count(DISTINCT transfer),
                    (SELECT count(*) FROM (SELECT transfer FROM ledger GROUP BY transfer HAVING count(*) != 2))
                FROM ledger
                """
            ) { row in
                Ledger(
                    rows: try row.int(0), sum: try row.int64(1), transfers: try row.int(2), incomplete: try row.int(3))
            }
        }
        // The store also accepts new writes after the crash.
        try await store.write { database in
            try database.execute("INSERT INTO ledger (transfer, account, amount, memo) VALUES (-1, 'C', 0, x'')")
            try database.execute("DELETE FROM ledger WHERE transfer = -1")
        }
        await store.close()
        return try #require(ledger)
    }

    @Test func killedInsideAnOpenTransactionLeavesOnlyCommittedTransfers() async throws {
        let path = directory.file("ledger.sqlite")
        let child = try Child(database: path, mode: "hold")
        let lines = try await blocking { child.lines { $0 == "READY" } }
        #expect(lines == ["COMMITTED 10", "READY"])
        child.killHard()
        #expect(child.process.waitUntilExit() == .signalled(SIGKILL))
        // The 200 transfers of the open transaction reached the WAL uncommitted; none of them may count.
        let wal = try FileManager.default.attributesOfItem(atPath: path + "-wal")
        let walSize = (wal[.size] as? NSNumber)?.intValue ?? 0
        #expect(walSize > 100 * 1024, "the open transaction should have spilled into the WAL")
        let ledger = try await inspect(path)
        #expect(ledger.rows == 20)
        #expect(ledger.transfers == 10)
        #expect(ledger.sum == 0)
        #expect(ledger.incomplete == 0)
    }

    @Test("R1: killed at random moments, whole acknowledged transfers are kept")
    func killedAtRandomMomentsKeepsWholeAcknowledgedTransfers() async throws {
        let path = directory.file("loop.sqlite")
        var acknowledged = 0
        for round in 1...4 {
            let child = try Child(database: path, mode: "loop")
            let target = acknowledged + 20 + round * 7
            let lines = try await blocking { child.lines { $0 == "COMMITTED \(target)" } }
            #expect(lines != nil, "the crasher stopped early in round \(round)")
            acknowledged = target
            // Let it run on for a moment that lands anywhere in a transaction, then kill it.
            try await Task.sleep(for: .microseconds(UInt64.random(in: 0...20_000)))
            child.killHard()
            let ledger = try await inspect(path)
            #expect(ledger.sum == 0)
            #expect(ledger.incomplete == 0)
            #expect(ledger.rows == 2 * ledger.transfers)
            // Every transfer the child reported as committed survived (synchronous=FULL).
            #expect(ledger.transfers >= acknowledged)
            acknowledged = ledger.transfers
        }
    }
}
