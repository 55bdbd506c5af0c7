import CommandTestSupport
import Foundation
import OrchardStore
import SQLiteCrashVFS
import Testing

/// A child process (`orchard-store-crasher`) writes transfers and is killed with SIGKILL, or loses power under the
/// crash VFS (SQLiteCrashVFS: what it wrote but did not sync is lost or torn); the file must hold whole
/// transactions only, every acknowledged one, and open cleanly afterwards.
@Suite("Crash: SIGKILL and power loss in the middle of a transaction", .serialized)
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

        /// `vfs`: the value of ``CrashVFS/environmentKey`` for the child (nil: no crash VFS, a SIGKILL keeps what
        /// the kernel holds).
        init(database: String, mode: String, off: Bool = false, vfs: String? = nil) throws {
            process = try ChildProcess(
                try CrashTests.crasherPath(), [database, mode] + (off ? ["off"] : []),
                environment: [CrashVFS.environmentKey: vfs], stdout: .capture)
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

    @Test(
        "Killed inside an open transaction (SIGKILL, then power loss), only the committed transfers are kept",
        arguments: [false, true])
    func killedInsideAnOpenTransactionLeavesOnlyCommittedTransfers(powerLoss: Bool) async throws {
        let path = directory.file("ledger-\(powerLoss).sqlite")
        let child = try Child(database: path, mode: "hold", vfs: powerLoss ? "1" : nil)
        let lines = try await blocking { child.lines { $0 == "READY" } }
        #expect(lines == ["COMMITTED 10", "READY"])
        child.killHard()
        #expect(child.process.waitUntilExit() == .signalled(SIGKILL))
        // The 200 transfers of the open transaction reached the WAL uncommitted; none of them may count. Under
        // power loss they were never synced, so they are not on disk at all.
        if !powerLoss {
            let wal = try FileManager.default.attributesOfItem(atPath: path + "-wal")
            let walSize = (wal[.size] as? NSNumber)?.intValue ?? 0
            #expect(walSize > 100 * 1024, "the open transaction should have spilled into the WAL")
        }
        let ledger = try await inspect(path)
        #expect(ledger.rows == 20)
        #expect(ledger.transfers == 10)
        #expect(ledger.sum == 0)
        #expect(ledger.incomplete == 0)
    }

    @Test("R1: power lost at random moments (SIGKILL under the crash VFS), whole acknowledged transfers are kept")
    func killedAtRandomMomentsKeepsWholeAcknowledgedTransfers() async throws {
        let path = directory.file("loop.sqlite")
        var acknowledged = 0
        for round in 1...4 {
            let child = try Child(database: path, mode: "loop", vfs: "1")
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

    @Test("R1: power lost in the middle of a sync, the unsynced writes torn, whole acknowledged transfers are kept")
    func tornAtRandomSyncsKeepsWholeAcknowledgedTransfers() async throws {
        let path = directory.file("torn.sqlite")
        var acknowledged = 0
        var random = SystemRandomNumberGenerator()
        for round in 1...6 {
            let syncs = Int.random(in: 5...2_500, using: &random)
            let seed = UInt32.random(in: 1...UInt32.max, using: &random)
            let child = try Child(
                database: path, mode: "loop", vfs: CrashVFS.crashEnvironment(at: .sync, after: syncs, seed: seed))
            let lines = try await blocking { () -> [String] in
                var seen: [String] = []
                while let line = child.process.nextLine() { seen.append(line) }
                return seen
            }
            let reported = try await blocking { child.process.waitUntilExit() }
            #expect(reported == .exited(137), "round \(round): the crash VFS should have crashed the child")
            if let last = lines.last(where: { $0.hasPrefix("COMMITTED ") }), let number = Int(last.dropFirst(10)) {
                acknowledged = number
            }
            let ledger = try await inspect(path)
            #expect(ledger.sum == 0 && ledger.incomplete == 0 && ledger.rows == 2 * ledger.transfers)
            // Every acknowledged transfer survived, and at most the one in flight besides.
            #expect(ledger.transfers >= acknowledged, "round \(round), seed \(seed), sync \(syncs)")
            #expect(ledger.transfers <= acknowledged + 1, "round \(round), seed \(seed), sync \(syncs)")
            acknowledged = ledger.transfers
        }
    }

    /// Runs the loop crasher under the crash VFS until it acknowledged 30 transfers, cuts the power (SIGKILL: its
    /// unsynced writes are lost) and returns how many it acknowledged and how many the file kept.
    func powerLossAfterAcknowledgedTransfers(off: Bool, vfs: String?) async throws -> (acknowledged: Int, kept: Int) {
        let path = directory.file("durability-\(off)-\(vfs ?? "none").sqlite")
        let child = try Child(database: path, mode: "loop", off: off, vfs: vfs)
        let lines = try await blocking { child.lines { $0 == "COMMITTED 30" } }
        #expect(lines != nil, "the crasher stopped early")
        child.killHard()
        _ = try await blocking { child.process.waitUntilExit() }
        return (30, try await inspect(path).transfers)
    }

    @Test("R4: the power-loss check keeps every acknowledged transfer with synchronous=FULL")
    func powerLossKeepsAcknowledgedTransfersWithFullSync() async throws {
        let result = try await powerLossAfterAcknowledgedTransfers(off: false, vfs: "1")
        #expect(result.kept >= result.acknowledged)
    }

    /// The negative case: the same check must catch a store that never syncs, which a plain SIGKILL cannot (the
    /// kernel keeps the written pages).
    @Test("R4: the power-loss check catches synchronous=OFF losing acknowledged transfers; a plain SIGKILL does not")
    func powerLossCatchesSynchronousOff() async throws {
        let powerLoss = try await powerLossAfterAcknowledgedTransfers(off: true, vfs: "1")
        #expect(powerLoss.kept < powerLoss.acknowledged, "the crash VFS should lose what was never synced")
        let killed = try await powerLossAfterAcknowledgedTransfers(off: true, vfs: nil)
        #expect(killed.kept >= killed.acknowledged)
    }
}
