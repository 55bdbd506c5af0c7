public import Foundation
public import OrchardCrypto

/// Step 5 of Apple's reference: refuse a transactionId seen before within the freshness window.
///
/// A token older than the window is refused by the signing-time check, so a guard only has to remember
/// identifiers for the window's length.
public protocol TransactionReplayGuard: Sendable {
    /// Records `transactionId` and returns true if it was not seen within the window, false if it was.
    func recordFirstUse(of transactionId: [UInt8], signedAt signingTime: Date) -> Bool
}

/// A replay guard held in memory (one process). Entries expire after `window` on the injected clock.
public final class InMemoryReplayGuard: TransactionReplayGuard, @unchecked Sendable {
    private let lock = NSLock()
    private var seen: [[UInt8]: Date] = [:]
    private let window: TimeInterval
    private let clock: any WallClock

    /// `window` should be at least twice the decryptor's freshness window (a signing time may lie that far
    /// on either side of now).
    public init(window: TimeInterval = 600, clock: any WallClock = SystemClock()) {
        self.window = window
        self.clock = clock
    }

    public func recordFirstUse(of transactionId: [UInt8], signedAt signingTime: Date) -> Bool {
        let now = clock.now()
        return lock.withLock {
            seen = seen.filter { now.timeIntervalSince($0.value) < window }
            if seen[transactionId] != nil { return false }
            seen[transactionId] = now
            return true
        }
    }
}
