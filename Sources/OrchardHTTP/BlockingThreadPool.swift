internal import CHTTPShims
internal import CShims
import Foundation

/// Dedicated threads for work that blocks (fsync'ing SQLite writes, bulk key generation, file I/O),
/// bridged to `async` callers with continuations.
///
/// Blocking an event loop stalls every connection on it, and blocking Swift's cooperative pool (two
/// threads on this machine) stalls every task in the process; these threads exist so neither happens.
/// Jobs run in submission order on the first free thread.
public final class BlockingThreadPool: @unchecked Sendable {
    // Thread-safety: `jobs` and `running` are guarded by `condition`.
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var running = true
    private let name: String

    /// Four threads shared by the process.
    public static let shared = BlockingThreadPool(threads: 4, name: "orch-blocking")

    /// Starts `threads` threads named `name-N` (the name is cut to 15 bytes by the kernel).
    public init(threads: Int, name: String) {
        precondition(threads > 0, "a blocking pool needs at least one thread")
        self.name = name
        for index in 0..<threads {
            let thread = Thread { [self] in
                orchard_name_current_thread("\(name)-\(index)")
                work()
            }
            thread.start()
        }
    }

    /// Runs `body` on one of the pool's threads and returns its result; the caller's task is suspended
    /// meanwhile, not blocked.
    public func run<T: Sendable, E: Error>(_ body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let result: Result<T, E> = await withCheckedContinuation { continuation in
            submit {
                continuation.resume(returning: Result { () throws(E) -> T in try body() })
            }
        }
        return try result.get()
    }

    /// Stops the threads once the queued jobs are done. Later `run` calls never complete, so call it
    /// only when nothing uses the pool any more.
    public func shutdown() {
        condition.withLock {
            running = false
            condition.broadcast()
        }
    }

    private func submit(_ job: @escaping @Sendable () -> Void) {
        condition.withLock {
            jobs.append(job)
            condition.signal()
        }
    }

    private func work() {
        while true {
            let job: (@Sendable () -> Void)? = condition.withLock {
                while jobs.isEmpty && running { condition.wait() }
                return jobs.isEmpty ? nil : jobs.removeFirst()
            }
            guard let job else { return }
            job()
        }
    }

    /// Runs `body` on a new thread of its own (for rare, long waits such as joining threads).
    static func run(onNewThread name: String, _ body: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                orchard_name_current_thread(name)
                body()
                continuation.resume()
            }
            thread.start()
        }
    }
}
