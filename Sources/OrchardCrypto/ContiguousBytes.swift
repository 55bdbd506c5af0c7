public import Foundation

/// Runs `body` with a contiguous view of `data`, copying only when `data` has no contiguous storage
/// (`[UInt8]`, `ArraySlice` and `Data` are lent as they are).
@inlinable @inline(__always)
package func withContiguousBytes<R, E: Error>(
    _ data: some DataProtocol, _ body: (UnsafeRawBufferPointer) throws(E) -> R
) throws(E) -> R {
    var result: Result<R, E>?
    _ = data.withContiguousStorageIfAvailable { b in
        result = Result { () throws(E) -> R in try body(UnsafeRawBufferPointer(b)) }
    }
    if result == nil {
        Array(data).withUnsafeBytes { b in result = Result { () throws(E) -> R in try body(b) } }
    }
    return try result!.get()
}

/// The largest scratch buffer taken on the stack: `withUnsafeTemporaryAllocation` stays on the stack up to
/// 1 KB without asking the system how much stack is left.
package let stackScratchByteCount = 1024

// Why small outputs (digests, MACs) are written into stack scratch and then copied into an array, rather
// than written straight into `Array(unsafeUninitializedCapacity:)`: on Linux that initializer allocates
// through an unspecialized path of the standard library that looks up the array storage's generic metadata
// on every call, which costs more than copying a few dozen bytes (profiled: about 40 % of the allocation).
// An array made from a buffer allocates through specialized code. For a kilobyte the extra copy (and, for
// plaintext, a wipe) cost as much as they save, so AES-GCM writes straight into its result.

/// A `[UInt8]` holding the first `body(scratch)` bytes that `body` wrote into a stack scratch buffer of
/// `capacity` bytes (at most ``stackScratchByteCount``). Only for outputs that are not secret: the scratch
/// is not wiped.
package func bytesFromScratch<E: Error>(
    capacity: Int, _ body: (UnsafeMutableRawBufferPointer) throws(E) -> Int
) throws(E) -> [UInt8] {
    precondition(capacity <= stackScratchByteCount, "scratch buffers are at most 1 KB")
    var result: Result<[UInt8], E>?
    withUnsafeTemporaryAllocation(byteCount: max(capacity, 1), alignment: 16) { scratch in
        result = Result { () throws(E) -> [UInt8] in
            let written = try body(UnsafeMutableRawBufferPointer(rebasing: scratch[..<capacity]))
            return Array(UnsafeRawBufferPointer(rebasing: scratch[..<min(written, capacity)]))
        }
    }
    return try result!.get()
}
