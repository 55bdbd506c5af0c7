internal import CShims
internal import Dispatch
internal import Foundation

/// A party's SQLite file, shared safely between tasks: one writer connection on a dedicated thread, and a
/// small pool of reader connections.
///
/// Writes are closures submitted to the writer thread and run there one after another, each atomic: its changes
/// are kept when the closure returns and undone when it throws. Writes that are waiting together commit together
/// (group commit): one `BEGIN IMMEDIATE` transaction, each closure in a savepoint of its own, one `COMMIT`, so
/// one WAL sync serves many writers. No caller hears of its write before that `COMMIT` has returned (durable
/// with `synchronous=FULL`); if the `COMMIT` fails, every write of the group fails and none is kept. Reads run
/// on reader connections in a read transaction, so they see one consistent snapshot and never wait for a
/// writer (WAL). A write's closure always runs to its end once started, even if the awaiting task is
/// cancelled, so no half-done money movement is abandoned mid-way.
///
/// At a PostgreSQL location (``init(location:options:migrations:)``) the same holds with the server's
/// transactions: the group runs in one SERIALIZABLE transaction, and when a concurrent transaction (another
/// instance of the party) makes it fail with a serialization failure, the whole group is rolled back and applied
/// again, up to eight times, before its writes fail with ``StoreError/Code/serializationFailure``. A write's
/// closure may therefore run more than once, but its changes commit at most once.
public final class Store: Sendable {
    /// The database file (on PostgreSQL: the URL and schema).
    public let path: String
    /// Where the data lives.
    public let location: StoreLocation
    /// The settings every connection of this store uses.
    public let options: StoreOptions
    private let writer: WriterThread
    private let readers: ReaderPool

    /// Opens (creating if needed) the database at `path` and applies `migrations` before anything else runs.
    public convenience init(path: String, options: StoreOptions, migrations: [Migration] = []) throws(StoreError) {
        try self.init(location: .file(path), options: options, migrations: migrations)
    }

    /// Opens the store at `location` (an SQLite file, created if needed, or a PostgreSQL schema, created if needed)
    /// and applies `migrations` before anything else runs.
    public init(location: StoreLocation, options: StoreOptions, migrations: [Migration] = []) throws(StoreError) {
        let database = try Database(location: location, options: options, access: .readWrite)
        try database.migrate(migrations)
        self.path = location.description
        self.location = location
        self.options = options
        writer = WriterThread(database: database)
        readers = ReaderPool(location: location, options: options)
    }

    deinit {
        readers.close()
        writer.stop()
    }

    /// Runs `body` on the writer connection inside a write transaction (shared with the writes queued with it,
    /// `body` in a savepoint of its own) and returns its result once the transaction has committed.
    ///
    /// Errors `body` throws are rethrown unchanged after its changes were undone; the other writes of the group
    /// are not affected. Nested `Database.transaction` calls inside `body` become savepoints.
    @discardableResult
    public func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let outcome = WriteOutcome<T>()
            writer.submit(
                .write(
                    GroupedWrite(
                        apply: { database in
                            outcome.result = Result { try database.transaction(.immediate, body) }
                            guard case .failure(let error as StoreError) = outcome.result else { return false }
                            return error.code == .serializationFailure
                        },
                        complete: { groupFailure in
                            if let groupFailure {
                                continuation.resume(throwing: groupFailure)
                            } else if let result = outcome.result {
                                continuation.resume(with: result)
                            } else {
                                continuation.resume(throwing: StoreError(.internalFailure, "a write was never applied"))
                            }
                        },
                        closed: {
                            continuation.resume(throwing: StoreError(.closed, "the store \(self.path) is closed"))
                        })))
        }
    }

    /// Runs `body` on the writer connection without opening a transaction (for `VACUUM`, checkpoints, or
    /// code that manages its own transactions).
    @discardableResult
    public func onWriter<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            writer.submit(
                .raw { database in
                    guard let database else {
                        continuation.resume(throwing: StoreError(.closed, "the store \(self.path) is closed"))
                        return
                    }
                    continuation.resume(with: Result { try body(database) })
                })
        }
    }

    /// Runs `body` on a reader connection inside a read transaction: it sees the state of one instant and
    /// none of the writes that commit meanwhile. Writing through the connection fails with
    /// ``StoreError/Code/readOnly``.
    ///
    /// On an SQLite file with a reader connection idle, `body` runs at once on the calling thread: a WAL read
    /// never waits for the writer (it reads its snapshot from the file's pages, which the kernel caches), and the
    /// hop to another thread and back cost more than the indexed lookups the parties' reads are (docs/performance.md,
    /// "Store reads on the caller's thread"). A read that would open a connection or wait for one, and every read
    /// on PostgreSQL (a network round trip), runs on a Dispatch thread instead, as before.
    @discardableResult
    public func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        if !location.isPostgreSQL, let database = readers.idleReader() {
            defer { readers.checkIn(database) }
            return try database.transaction(.deferred, body)
        }
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            DispatchQueue.global(qos: .userInitiated).async {
                continuation.resume(
                    with: Result {
                        try self.readers.withReader { database in try database.transaction(.deferred, body) }
                    }
                )
            }
        }
    }

    /// Finishes the writes already submitted, then closes every connection. Later calls throw
    /// ``StoreError/Code/closed``.
    public func close() async {
        readers.close()
        await writer.stopAndWait()
    }
}

/// The result of one grouped write, set on the writer thread before its completion runs there.
private final class WriteOutcome<T>: @unchecked Sendable {
    // @unchecked: written and then read by the writer thread only.
    var result: Result<T, any Error>?
}

/// A ``Store/write(_:)`` waiting for the writer: applied in a savepoint of the group's transaction, completed
/// (with nil, or the failure that undid the whole group) after the group's `COMMIT`.
private struct GroupedWrite: Sendable {
    /// Returns whether the write failed on a serialization failure (PostgreSQL), which dooms the transaction.
    let apply: @Sendable (Database) -> Bool
    let complete: @Sendable ((any Error)?) -> Void
    let closed: @Sendable () -> Void
}

/// A dedicated thread that owns the writer connection and runs submitted jobs in order.
///
/// `@unchecked Sendable`: `pending`, `stopping`, `finished` and `waiters` are guarded by `condition`;
/// `database` is set before the thread starts and from then on touched only by that thread.
private final class WriterThread: @unchecked Sendable {
    enum Job: Sendable {
        /// Runs with the connection outside any transaction, or with nil when the store is closed.
        case raw(@Sendable (Database?) -> Void)
        case write(GroupedWrite)
    }

    /// At most this many writes share one transaction, bounding what one failed `COMMIT` takes down and how long
    /// the first write of a group waits for the last.
    static let maximumGroup = 64

    private let condition = NSCondition()
    private var pending: [Job] = []
    private var stopping = false
    private var finished = false
    private var waiters: [CheckedContinuation<Void, Never>] = []
    private var database: Database?

    init(database: Database) {
        self.database = database
        Thread { [self] in run() }.start()
    }

    /// Queues `job`; when the store is closed it is answered at once (a raw job with nil, a write as closed).
    func submit(_ job: Job) {
        condition.lock()
        guard !stopping else {
            condition.unlock()
            switch job {
            case .raw(let body): body(nil)
            case .write(let write): write.closed()
            }
            return
        }
        pending.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Asks the thread to finish the queued jobs and close the connection.
    func stop() {
        condition.withLock {
            stopping = true
            condition.signal()
        }
    }

    func stopAndWait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            condition.lock()
            stopping = true
            condition.signal()
            if finished {
                condition.unlock()
                continuation.resume()
            } else {
                waiters.append(continuation)
                condition.unlock()
            }
        }
    }

    private func run() {
        // Named for `top`, `perf` and the tests (Linux takes 15 bytes at most).
        orchard_name_current_thread(Self.threadName)
        Self.yieldToRequestHandlers()
        while true {
            condition.lock()
            while pending.isEmpty && !stopping { condition.wait() }
            let batch = pending
            pending.removeAll()
            let done = batch.isEmpty && stopping
            condition.unlock()
            if done { break }
            guard let database else {
                for job in batch {
                    switch job {
                    case .raw(let body): body(nil)
                    case .write(let write): write.closed()
                    }
                }
                continue
            }
            let stoppedBefore = database.diskFailure != nil
            defer {
                if !stoppedBefore, let stopped = database.diskFailure { Self.report(stopped) }
            }
            var index = 0
            while index < batch.count {
                switch batch[index] {
                case .raw(let body):
                    body(database)
                    index += 1
                case .write:
                    var group: [GroupedWrite] = []
                    while index < batch.count, group.count < Self.maximumGroup, case .write(let write) = batch[index] {
                        group.append(write)
                        index += 1
                    }
                    if database.isPostgreSQL {
                        Self.commitSerializable(group, on: database)
                    } else {
                        Self.commit(group, on: database)
                    }
                }
            }
        }
        self.database = nil  // closes the connection on its own thread
        condition.lock()
        finished = true
        let resumed = waiters
        waiters.removeAll()
        condition.unlock()
        for waiter in resumed { waiter.resume() }
    }
}

extension WriterThread {
    static let threadName = "orchard-writer"
    /// How much lower the writer's priority is than its creator's (nice, which Linux keeps per thread).
    static let niceIncrement: Int32 = 5

    /// Lowers this thread's priority by ``niceIncrement`` and puts it under SCHED_BATCH. Where the writer shares a
    /// CPU with the threads that handle requests, they then run first, and the writes they submit meanwhile gather
    /// into one group: one `COMMIT`, one `fdatasync` and one copy of each shared page for all of them, instead of
    /// the writer waking for each write. On the Pay server on one core the nice level more than halved the commits
    /// per token (docs/performance.md, `bench inapp`); SCHED_BATCH stops the writer from preempting a handler each
    /// time a write wakes it (a context switch and cold caches for both), so it runs when the handler waits or
    /// its time slice ends. Where the writer has a CPU of its own nothing changes, and it is never
    /// starved: against one busy thread it still gets about a quarter of a CPU, and when every request waits on a
    /// write the handlers are idle and it runs at once. Durability is unchanged.
    fileprivate static func yieldToRequestHandlers() {
        // PRIO_PROCESS with 0 is the calling thread on Linux; a failure leaves the priority as it was.
        errno = 0
        let current = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
        guard errno == 0 else { return }
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, min(current + niceIncrement, 19))
        _ = orchard_current_thread_batch()
    }

    /// Says once, on standard error (the process's trace), that the store stopped writing; the service's log
    /// has the same error with every request it answers 503.
    fileprivate static func report(_ stopped: StoreError) {
        FileHandle.standardError.write(Data("orchard-store: \(stopped.message)\n".utf8))
    }

    /// Applies `group` in one transaction and completes every write after the `COMMIT`. When SQLite itself
    /// abandons the transaction (an I/O error, a full disk), the writes applied so far fail with a `transaction`
    /// error (nothing of theirs was kept; the caller may retry) and the rest start a new transaction.
    fileprivate static func commit(_ group: [GroupedWrite], on database: Database) {
        var next = 0
        while next < group.count {
            // After a disk error the writer writes nothing more: the group fails without touching the file.
            if let stopped = database.diskFailure {
                for write in group[next...] { write.complete(stopped) }
                return
            }
            do throws(StoreError) {
                try database.execute("BEGIN IMMEDIATE")
            } catch {
                for write in group[next...] { write.complete(error) }
                return
            }
            let start = next
            var abandoned = false
            var stopped: StoreError?
            while next < group.count, !abandoned, stopped == nil {
                _ = group[next].apply(database)
                next += 1
                abandoned = !database.isInTransaction
                stopped = database.diskFailure
            }
            let applied = group[start..<next]
            if let stopped {
                // A write hit a disk error: none of the group is committed (the COMMIT would write).
                if database.isInTransaction { _ = try? database.execute("ROLLBACK") }
                for write in applied { write.complete(stopped) }
                continue
            }
            if abandoned {
                let failure = StoreError(.transaction, "SQLite rolled back the write transaction; retry the request")
                for write in applied { write.complete(failure) }
                continue
            }
            do throws(StoreError) {
                try database.execute("COMMIT")
                for write in applied { write.complete(nil) }
            } catch {
                if database.isInTransaction { _ = try? database.execute("ROLLBACK") }
                let failure =
                    database.diskFailure == nil
                    ? StoreError(
                        error.code, "the transaction was rolled back: \(error.message)", sqliteCode: error.sqliteCode)
                    : StoreError(
                        .io,
                        "the commit hit a disk error and was not acknowledged (\(error.message)); the store stopped "
                            + "writing: retry after the restart, with the same idempotency key",
                        sqliteCode: error.sqliteCode)
                for write in applied { write.complete(failure) }
            }
        }
    }
}

extension WriterThread {
    /// PostgreSQL's group commit: the group in one SERIALIZABLE transaction, each write in its savepoint, one
    /// `COMMIT`. A serialization failure (in a write or at the `COMMIT`) rolls back the whole group, whose writes are
    /// then applied again one by one, each in its own transaction retried up to `Database.serializationAttempts`
    /// times.
    fileprivate static func commitSerializable(_ group: [GroupedWrite], on database: Database) {
        var attempt = 1
        while true {
            var failure: StoreError?
            do throws(StoreError) {
                try database.execute("BEGIN IMMEDIATE")
                var conflicted = false
                for write in group where write.apply(database) { conflicted = true }
                if conflicted {
                    failure = StoreError(
                        .serializationFailure, "a concurrent transaction conflicted with this write; retry the request")
                } else {
                    try database.execute("COMMIT")
                    for write in group { write.complete(nil) }
                    return
                }
            } catch {
                failure = error
            }
            if database.isInTransaction { _ = try? database.execute("ROLLBACK") }
            guard let failure else { return }
            if failure.code == .serializationFailure, group.count > 1 {
                // A group that conflicted is applied again one write at a time, each with its own retries: a
                // smaller transaction meets fewer of another instance's, and one write's conflict no longer takes the
                // others with it.
                for write in group { commitSerializable([write], on: database) }
                return
            }
            if failure.code == .serializationFailure, attempt < Database.serializationAttempts {
                Database.backOff(attempt)
                attempt += 1
                continue
            }
            let reported = StoreError(
                failure.code, "the transaction was rolled back: \(failure.message)", sqlState: failure.sqlState)
            for write in group { write.complete(reported) }
            return
        }
    }
}

/// Read-only connections, opened on demand up to `options.maximumReaders` and lent to one thread at a time.
///
/// `@unchecked Sendable`: all state is guarded by `condition`, and a connection is used only by the thread
/// that checked it out.
private final class ReaderPool: @unchecked Sendable {
    private let condition = NSCondition()
    private var idle: [Database] = []
    private var opened = 0
    private var closed = false
    private let location: StoreLocation
    private var path: String { location.description }
    private let options: StoreOptions

    init(location: StoreLocation, options: StoreOptions) {
        self.location = location
        self.options = options
    }

    func withReader<T>(_ body: (Database) throws -> T) throws -> T {
        let database = try checkOut()
        defer { checkIn(database) }
        return try body(database)
    }

    private func checkOut() throws(StoreError) -> Database {
        condition.lock()
        while idle.isEmpty && opened >= options.maximumReaders && !closed { condition.wait() }
        if closed {
            condition.unlock()
            throw StoreError(.closed, "the store \(path) is closed")
        }
        if let database = idle.popLast() {
            condition.unlock()
            return database
        }
        opened += 1
        condition.unlock()
        do throws(StoreError) {
            return try Database(location: location, options: options, access: .readOnly)
        } catch {
            condition.withLock {
                opened -= 1
                condition.signal()
            }
            throw error
        }
    }

    /// An idle connection, if one is: never opens one and never waits (nil then).
    func idleReader() -> Database? {
        condition.withLock { closed ? nil : idle.popLast() }
    }

    func checkIn(_ database: Database) {
        condition.withLock {
            if closed { opened -= 1 } else { idle.append(database) }
            condition.signal()
        }
    }

    func close() {
        condition.withLock {
            closed = true
            idle.removeAll()
            condition.broadcast()
        }
    }
}
