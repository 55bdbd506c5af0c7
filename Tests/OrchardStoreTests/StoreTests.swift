import Dispatch
import Foundation
import OrchardStore
import Testing

@Suite("Store: one writer thread, reader connections, busy handling")
struct StoreTests {
    let directory: TemporaryDirectory
    init() throws { directory = try TemporaryDirectory() }

    static let migrations = [
        Migration(
            version: 1, name: "counters",
            sql: """
                CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
                INSERT INTO counters VALUES ('c', 0);
                """
        )
    ]

    func open(busyTimeout: Duration = .seconds(5)) throws -> Store {
        try Store(
            path: directory.file("s.sqlite"), options: StoreOptions(durability: .full, busyTimeout: busyTimeout),
            migrations: Self.migrations
        )
    }

    static func counter(_ database: Database) throws -> Int {
        try database.queryFirst("SELECT value FROM counters WHERE name = 'c'") { try $0.int(0) } ?? -1
    }

    @Test func concurrentWritesAreSerialized() async throws {
        let store = try open()
        // Read-modify-write in separate statements: lost updates would show if two writes interleaved.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<200 {
                group.addTask {
                    try await store.write { database in
                        let value = try Self.counter(database)
                        try database.execute("UPDATE counters SET value = ? WHERE name = 'c'", [.int(value + 1)])
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try await store.read(Self.counter) == 200)
    }

    @Test func aThrowingWriteRollsBackAndRethrowsItsError() async throws {
        let store = try open()
        struct Declined: Error, Equatable { let reason: String }
        await #expect(throws: Declined(reason: "limit")) {
            try await store.write { database in
                try database.execute("UPDATE counters SET value = 99")
                throw Declined(reason: "limit")
            }
        }
        #expect(try await store.read(Self.counter) == 0)
        // A failing statement rolls back what the write did before it.
        await expectStoreError(.constraint) {
            try await store.write { database in
                try database.execute("UPDATE counters SET value = 5")
                try database.execute("INSERT INTO counters VALUES ('c', 1)")
            }
        }
        #expect(try await store.read(Self.counter) == 0)
    }

    /// Writes queued while the writer is busy share one transaction (one commit in the WAL instead of one per
    /// write); one that throws is undone alone, and each caller hears of its write only after the commit.
    @Test func waitingWritesCommitTogetherAndAFailingOneIsUndoneAlone() async throws {
        let store = try open()
        struct Declined: Error, Equatable { let index: Int }
        try await store.onWriter { database in _ = try database.query("PRAGMA wal_checkpoint(TRUNCATE)") { _ in 0 } }
        let hold = DispatchSemaphore(value: 0)
        let held = Counter()
        let holding = Task {
            try await store.onWriter { _ in
                held.increment()
                hold.wait()
            }
        }
        while held.value == 0 { try await Task.sleep(for: .milliseconds(5)) }
        let submitted = Counter()
        let writes = (0..<50).map { index in
            Task { () -> Result<Int, any Error> in
                submitted.increment()
                do {
                    return .success(
                        try await store.write { database in
                            guard index != 25 else {
                                try database.execute("UPDATE counters SET value = value + 1000 WHERE name = 'c'")
                                throw Declined(index: index)
                            }
                            try database.execute("UPDATE counters SET value = value + 1 WHERE name = 'c'")
                            return index
                        })
                } catch {
                    return .failure(error)
                }
            }
        }
        while submitted.value < 50 { try await Task.sleep(for: .milliseconds(5)) }
        try await Task.sleep(for: .milliseconds(100))  // the last ones from counting to queueing
        hold.signal()
        try await holding.value
        for (index, write) in writes.enumerated() {
            switch await write.value {
            case .success(let value): #expect(value == index && index != 25)
            case .failure(let error): #expect(error as? Declined == Declined(index: 25))
            }
        }
        #expect(try await store.read(Self.counter) == 49)
        // Separate commits would have written at least one WAL frame each.
        let frames = try await store.onWriter { database in
            try database.queryFirst("PRAGMA wal_checkpoint(PASSIVE)") { try $0.int(1) } ?? -1
        }
        #expect((1..<10).contains(frames), "WAL frames: \(frames)")
    }

    @Test func readsSeeASnapshotAndNeverUncommittedWrites() async throws {
        let store = try open()
        let inside = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let write = Task {
            try await store.write { database in
                try database.execute("UPDATE counters SET value = 1")
                inside.signal()
                release.wait()  // hold the transaction open on the writer thread
            }
        }
        try await blocking { inside.wait() }
        #expect(try await store.read(Self.counter) == 0)
        release.signal()
        try await write.value
        #expect(try await store.read(Self.counter) == 1)
    }

    @Test func moreConcurrentReadsThanReaderConnectionsAllSeeTheCommittedState() async throws {
        // Two connections for 200 reads: a read that finds one idle runs where it is called, the others wait for
        // one on a Dispatch thread; every read sees the last committed value, and each connection is lent back.
        let store = try Store(
            path: directory.file("s.sqlite"),
            options: StoreOptions(durability: .full, busyTimeout: .seconds(5), maximumReaders: 2),
            migrations: Self.migrations)
        try await store.write { database in try database.execute("UPDATE counters SET value = 5") }
        let values = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<200 { group.addTask { try await store.read(Self.counter) } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        #expect(values.count == 200 && values.allSatisfy { $0 == 5 })
        try await store.write { database in try database.execute("UPDATE counters SET value = 6") }
        #expect(try await store.read(Self.counter) == 6)
    }

    @Test func readersCannotWrite() async throws {
        let store = try open()
        await expectStoreError(.readOnly) {
            try await store.read { database in try database.execute("UPDATE counters SET value = 7") }
        }
    }

    @Test func aClosedStoreRefusesWork() async throws {
        let store = try open()
        try await store.write { database in try database.execute("UPDATE counters SET value = 3") }
        await store.close()
        await expectStoreError(.closed) { try await store.write { _ in } }
        await expectStoreError(.closed) { try await store.read { _ in } }
        // Everything was committed before the close.
        let reopened = try open()
        #expect(try await reopened.read(Self.counter) == 3)
    }

    @Test func anotherWriterHoldingTheLockYieldsBusyAfterTheTimeout() async throws {
        let first = try open()
        let second = try open(busyTimeout: .milliseconds(50))
        let inside = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holder = Task {
            try await first.write { _ in
                inside.signal()
                release.wait()
            }
        }
        try await blocking { inside.wait() }
        await expectStoreError(.busy) {
            try await second.write { database in try database.execute("UPDATE counters SET value = 1") }
        }
        release.signal()
        try await holder.value
        // Once the lock is free the same write goes through.
        try await second.write { database in try database.execute("UPDATE counters SET value = 1") }
        #expect(try await first.read(Self.counter) == 1)
    }

    @Test func aWriterWaitsForTheLockWithinTheTimeout() async throws {
        let first = try open()
        let second = try open(busyTimeout: .seconds(30))
        let inside = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holder = Task {
            try await first.write { database in
                try database.execute("UPDATE counters SET value = 10")
                inside.signal()
                release.wait()
            }
        }
        try await blocking { inside.wait() }
        let waiter = Task {
            try await second.write { database in
                try database.execute("UPDATE counters SET value = value + 1")
            }
        }
        // Give the waiter time to find the lock taken (it succeeds either way: no timing is asserted).
        try await Task.sleep(for: .milliseconds(100))
        release.signal()
        try await holder.value
        _ = try await waiter.value
        #expect(try await first.read(Self.counter) == 11)
    }

    @Test func aNewerFileIsRefusedAtOpen() throws {
        _ = try open()
        let older: [Migration] = []
        expectStoreError(.migration) {
            _ = try Store(path: directory.file("s.sqlite"), options: StoreOptions(durability: .full), migrations: older)
        }
    }

    @Test("The writer thread runs five nice levels below the thread that opened the store, under SCHED_BATCH")
    func writerRunsBelowItsOpener() async throws {
        // Request handlers sharing a CPU with the writer then run first, and their writes gather into one group.
        let before = Self.writerThreads()
        let path = directory.file("s.sqlite")
        // Opened from a thread of its own at nice 3, so this writer (8) is told apart from other tests' writers.
        let store: Store = try await withCheckedThrowingContinuation { continuation in
            Thread {
                _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 3)
                continuation.resume(
                    with: Result {
                        try Store(path: path, options: StoreOptions(durability: .full), migrations: Self.migrations)
                    })
            }.start()
        }
        // The writer sets its level before it takes its first write.
        try await store.write { db in try db.execute("UPDATE counters SET value = value + 1") }
        let opened = Self.writerThreads().filter { before[$0.key] == nil }
        // SCHED_BATCH is policy 3: a write that wakes the writer does not preempt the thread that submitted it.
        #expect(opened.values.contains { $0 == 8 && $1 == 3 }, "new writer threads (nice, policy): \(opened)")
        await store.close()
    }

    /// The store writer threads of this process: thread ID → nice level and scheduling policy
    /// (`/proc/self/task/*/stat`, fields 19 and 41).
    static func writerThreads() -> [Int: (nice: Int, policy: Int)] {
        var threads: [Int: (nice: Int, policy: Int)] = [:]
        for task in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? [] {
            guard let tid = Int(task),
                let name = try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8),
                name.trimmingCharacters(in: .whitespacesAndNewlines) == "orchard-writer",
                let stat = try? String(contentsOfFile: "/proc/self/task/\(task)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            // Fields after the command name start at field 3.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 38, let nice = Int(fields[16]), let policy = Int(fields[38]) {
                threads[tid] = (nice, policy)
            }
        }
        return threads
    }
}
