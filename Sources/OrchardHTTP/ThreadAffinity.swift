internal import CHTTPShims

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
}
