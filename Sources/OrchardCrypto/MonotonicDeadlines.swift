/// Deadlines on this process's monotonic clock, by key (security case R6): setting the wall clock an hour either
/// way moves none of them, and a key this process did not start (after a restart, or in another instance) has
/// none, so it counts as expired: failing closed. Amortised O(1): passed deadlines are swept when the table
/// doubles. Package API (the issuer and the token service share it), beside the clocks it reads.
package struct MonotonicDeadlines: Sendable {
    /// How long a deadline lasts after ``start(_:now:)``.
    package let lifetimeNanoseconds: UInt64
    private var deadlines: [String: UInt64] = [:]
    private var sweepAt = 1024

    package init(lifetimeSeconds: Double) {
        lifetimeNanoseconds = UInt64(max(0, lifetimeSeconds) * 1e9)
    }

    /// Starts `key`'s lifetime at monotonic time `now`.
    package mutating func start(_ key: String, now: UInt64) {
        if deadlines.count >= sweepAt {
            deadlines = deadlines.filter { $0.value > now }
            sweepAt = max(1024, 2 * deadlines.count)
        }
        deadlines[key] = now &+ lifetimeNanoseconds
    }

    /// Whether `key` was started in this process and its lifetime has not passed at monotonic time `now`.
    package func isLive(_ key: String, now: UInt64) -> Bool {
        guard let deadline = deadlines[key] else { return false }
        return now < deadline
    }
}
