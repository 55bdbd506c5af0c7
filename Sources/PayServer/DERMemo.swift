import Synchronization

/// What was worked out from a certificate's DER bytes alone (parsed, its issuer's signature verified, its issuer
/// compared), for the next request that presents the same bytes: a keep-alive connection presents them on every
/// request. Whatever depends on the time or on pay.sqlite is still checked by the caller each time. Bounded:
/// emptied when full.
final class DERMemo<Value: Sendable>: Sendable {
    private let entries = Mutex<[DERKey: Value]>([:])
    private let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    /// The answer remembered for `der`, else `compute`'s, remembered unless it is nil.
    func value(for der: [UInt8], _ compute: () throws -> Value?) rethrows -> Value? {
        let key = DERKey(der)
        if let known = entries.withLock({ $0[key] }) { return known }
        guard let value = try compute() else { return nil }
        entries.withLock { entries in
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[key] = value
        }
        return value
    }

    /// The answer remembered for `der`, else `compute`'s, which has one or throws (and then nothing is remembered).
    func value(for der: [UInt8], always compute: () throws -> Value) rethrows -> Value {
        // `compute` never answers nil, so neither does the lookup.
        try value(for: der, { try compute() })!
    }
}

/// A certificate's DER as a dictionary key, hashed as one block of bytes: `[UInt8]` hashes byte by byte, which cost
/// about 1 µs per lookup of a certificate-sized key (1 % of an in-app exchange's CPU, docs/performance.md).
struct DERKey: Hashable, Sendable {
    let bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    func hash(into hasher: inout Hasher) { bytes.withUnsafeBytes { hasher.combine(bytes: $0) } }
}
