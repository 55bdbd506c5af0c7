internal import CHTTPShims
import Foundation

/// Which CPUs threads run on, for benchmarks that keep a load generator and a server on cores of their own.
package enum ThreadAffinity {
    /// Runs `body` with the calling thread restricted to `cpus` (so the threads it starts, which inherit the
    /// restriction, stay there too), then gives the calling thread its CPUs back. With an empty `cpus`, or where the
    /// restriction cannot be set, `body` just runs.
    package static func withThreads<T>(on cpus: [Int], _ body: () throws -> T) rethrows -> T {
        var saved: UInt64 = 0
        let mask = cpus.filter { (0..<64).contains($0) }.reduce(UInt64(0)) { $0 | (1 << UInt64($1)) }
        guard mask != 0, orchard_get_thread_cpus(&saved) == 0, orchard_set_thread_cpus(mask) == 0 else {
            return try body()
        }
        defer { _ = orchard_set_thread_cpus(saved) }
        return try body()
    }

    /// How many CPUs the calling thread may run on: fewer than the machine's when the process was started with
    /// `taskset`, in a cpuset, or by a benchmark that keeps a core for its load generator. A server sizes its event
    /// loops by it.
    package static var usableCPUCount: Int {
        var mask: UInt64 = 0
        let cores = ProcessInfo.processInfo.activeProcessorCount
        // The mask covers 64 CPUs; beyond that (or when it cannot be read) every CPU counts.
        guard cores <= 64, orchard_get_thread_cpus(&mask) == 0, mask != 0 else { return max(cores, 1) }
        return min(mask.nonzeroBitCount, cores)
    }

    /// Restricts every thread of this process to `cpus` (threads started later inherit it from their creator),
    /// and answers whether it could. A benchmark's load generator uses it to leave the other cores to the server
    /// under test; ``releaseProcess()`` gives the threads every CPU back.
    @discardableResult
    package static func pinProcess(to cpus: [Int]) -> Bool {
        let mask = cpus.filter { (0..<64).contains($0) }.reduce(UInt64(0)) { $0 | (1 << UInt64($1)) }
        guard mask != 0 else { return false }
        return setEveryThread(mask)
    }

    /// Every thread of this process back on every CPU.
    @discardableResult
    package static func releaseProcess() -> Bool {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        return setEveryThread(cores >= 64 ? UInt64.max : (UInt64(1) << UInt64(cores)) - 1)
    }

    private static func setEveryThread(_ mask: UInt64) -> Bool {
        // A thread that ends between the listing and the call is not an error (ESRCH).
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return false }
        var pinned = true
        for task in tasks.compactMap({ Int32($0) }) {
            let rc = orchard_set_task_cpus(task, mask)
            if rc != 0 && rc != ESRCH { pinned = false }
        }
        return pinned
    }
}
