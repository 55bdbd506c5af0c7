import Foundation

/// Runs critical sections one at a time per key, in arrival order, across `await`s.
///
/// Actors re-enter at every `await`, so two requests for the same token, account or idempotency key could
/// otherwise interleave between a read and the write that depends on it. Callers write
/// `await serializer.acquire(key); defer { serializer.release(key) }`. Shared by the network's parties
/// (`package` access).
package final class KeyedSerializer: @unchecked Sendable {
    // All state is guarded by `lock`; continuations are resumed outside it.
    private let lock = NSLock()
    private var busy: Set<String> = []
    private var waiters: [String: [CheckedContinuation<Void, Never>]] = [:]

    package init() {}

    /// Waits until no other holder has `key`, then holds it.
    package func acquire(_ key: String) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let runNow: Bool = lock.withLock {
                if busy.contains(key) {
                    waiters[key, default: []].append(continuation)
                    return false
                }
                busy.insert(key)
                return true
            }
            if runNow { continuation.resume() }
        }
    }

    /// Releases `key`, handing it straight to the next waiter if there is one.
    package func release(_ key: String) {
        let next: CheckedContinuation<Void, Never>? = lock.withLock {
            if var queue = waiters[key], !queue.isEmpty {
                let first = queue.removeFirst()
                waiters[key] = queue.isEmpty ? nil : queue
                return first
            }
            busy.remove(key)
            return nil
        }
        next?.resume()
    }
}
