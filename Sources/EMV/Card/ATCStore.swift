import Foundation

/// Where a card application keeps its application transaction counter (ATC).
///
/// The card calls ``incrementATC()`` before it computes a cryptogram and releases nothing unless the call
/// returns: an implementation must make the new value durable before returning it, so a crash between
/// storing and answering burns a counter value but never reuses one.
public protocol ATCStore: Sendable {
    /// The last ATC used, 0 before the first transaction.
    func currentATC() throws(EMVError) -> UInt16

    /// Increments the counter, stores the new value durably, and returns it. Returns nil and changes
    /// nothing when the counter is already at `FFFF` (the application is exhausted).
    func incrementATC() throws(EMVError) -> UInt16?
}

/// An ATC store in memory, for tests, simulations and benchmarks (not durable across processes).
public final class InMemoryATCStore: ATCStore, @unchecked Sendable {
    // @unchecked: the one mutable field is guarded by `lock`.
    private let lock = NSLock()
    private var last: UInt16

    /// A store whose last used ATC is `lastUsed` (the next transaction uses `lastUsed + 1`).
    public init(lastUsed: UInt16 = 0) { last = lastUsed }

    public func currentATC() throws(EMVError) -> UInt16 { lock.withLock { last } }

    public func incrementATC() throws(EMVError) -> UInt16? {
        lock.withLock {
            guard last < 0xFFFF else { return nil }
            last += 1
            return last
        }
    }
}
