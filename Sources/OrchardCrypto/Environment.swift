internal import COpenSSL
public import Foundation

/// A source of random bytes. Everything in Orchard that draws randomness takes one, so tests can fix it.
public protocol RandomSource: Sendable {
    /// Fills `buffer` completely.
    func fill(_ buffer: UnsafeMutableRawBufferPointer)
}

extension RandomSource {
    /// `count` random bytes.
    public func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { fill($0) }
        return out
    }
}

/// OpenSSL's CSPRNG (`RAND_bytes`).
public struct SystemRandom: RandomSource {
    /// OpenSSL's CSPRNG; it has no state of its own.
    public init() {}
    public func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        // RAND_bytes fails only when the OS entropy source is broken; continuing would be unsafe.
        guard RAND_bytes(base.assumingMemoryBound(to: UInt8.self), Int32(buffer.count)) == 1 else {
            fatalError("RAND_bytes failed: no entropy source available")
        }
    }
}

/// A deterministic generator for tests and reproducible demos: SHA-256 in counter mode over a seed.
/// Loudly named because its output is predictable to anyone who knows the seed.
public final class InsecureDeterministicRandom: RandomSource, @unchecked Sendable {
    private let seed: [UInt8]
    private var counter: UInt64 = 0
    private let lock = NSLock()

    /// A generator whose output is fixed by `seed`: the same seed gives the same bytes.
    public init(seed: some DataProtocol) { self.seed = Array(seed) }

    public func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        lock.lock()
        defer { lock.unlock() }
        var offset = 0
        while offset < buffer.count {
            var block = seed
            withUnsafeBytes(of: counter.bigEndian) { block.append(contentsOf: $0) }
            counter += 1
            let digest = SHA256.hash(block)
            let n = min(digest.count, buffer.count - offset)
            for i in 0..<n { buffer[offset + i] = digest[i] }
            offset += n
        }
    }
}

/// Wall-clock time: for validity periods, signing times and anything compared with other parties.
public protocol WallClock: Sendable {
    /// The current wall-clock time.
    func now() -> Date
}

/// Monotonic time in nanoseconds: for TTLs and timeouts, which must not move when the wall clock is set.
public protocol MonotonicClock: Sendable {
    /// Nanoseconds since an arbitrary start; never decreases.
    func nanoseconds() -> UInt64
}

/// The machine's clocks (`CLOCK_REALTIME` via `Date`, `CLOCK_MONOTONIC`).
public struct SystemClock: WallClock, MonotonicClock {
    /// The machine's clocks; it has no state of its own.
    public init() {}
    /// The current time from `CLOCK_REALTIME`.
    public func now() -> Date { Date() }
    /// `CLOCK_MONOTONIC` in nanoseconds; unaffected by setting the wall clock.
    public func nanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}

/// A clock that moves only when told to: tests fix time with it.
public final class ManualClock: WallClock, MonotonicClock, @unchecked Sendable {
    private let lock = NSLock()
    private var wall: Date
    private var mono: UInt64

    /// A clock reading `now` and `monotonicNanoseconds` until a test moves it.
    public init(now: Date, monotonicNanoseconds: UInt64 = 1_000_000_000) {
        wall = now
        mono = monotonicNanoseconds
    }

    /// The wall-clock time the clock was last set to.
    public func now() -> Date { lock.withLock { wall } }
    /// The monotonic time the clock was last set to.
    public func nanoseconds() -> UInt64 { lock.withLock { mono } }

    /// Moves both clocks forward.
    public func advance(by seconds: Double) {
        lock.withLock {
            wall += seconds
            mono += UInt64(seconds * 1e9)
        }
    }

    /// Sets the wall clock alone (a skewed or corrected clock); the monotonic clock is unaffected.
    public func setWall(_ date: Date) { lock.withLock { wall = date } }
}
