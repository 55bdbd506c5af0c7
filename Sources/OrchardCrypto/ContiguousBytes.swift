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

/// A `[UInt8]` of exactly `count` bytes that `body` writes in place. `body` must initialize all of them
/// (on failure it should zero them and report the failure through a variable it captures).
///
/// Why not `Array(unsafeUninitializedCapacity:)`: on Linux that initializer allocates through an
/// unspecialized path of the standard library that looks up the array storage's generic metadata on every
/// call (`swift_getGenericMetadata`), a measurable share of a 1 KB AES-GCM operation. `append(contentsOf:)`
/// on an empty array allocates through specialized code and then asks the appended sequence to initialize
/// the new storage itself (`_copyContents(initializing:)`), which is where `body` runs: one allocation, no
/// copy, no metadata lookup. `body` is passed along as it is (not wrapped in a new closure) so that no
/// closure context is allocated either.
package func makeBytes(count: Int, initializingWith body: (UnsafeMutableRawBufferPointer) -> Void) -> [UInt8] {
    precondition(count >= 0, "a byte count is never negative")
    return withoutActuallyEscaping(body) { body in
        var bytes: [UInt8] = []
        bytes.append(contentsOf: InPlaceBytes(count: count, write: body))
        return bytes
    }
}

/// A sequence of `count` bytes produced by writing straight into the storage it is copied into.
private struct InPlaceBytes: Sequence {
    let count: Int
    let write: (UnsafeMutableRawBufferPointer) -> Void

    struct Iterator: IteratorProtocol {
        mutating func next() -> UInt8? { nil }
    }

    func makeIterator() -> Iterator { Iterator() }

    var underestimatedCount: Int { count }

    func _copyContents(initializing buffer: UnsafeMutableBufferPointer<UInt8>) -> (Iterator, Int) {
        precondition(buffer.count >= count, "the array reserved less than the underestimated count")
        if count == 0 {
            // Hand the body a valid (empty) pointer: OpenSSL refuses NULL even for zero bytes.
            var empty: UInt8 = 0
            withUnsafeMutableBytes(of: &empty) { write(UnsafeMutableRawBufferPointer(rebasing: $0[0..<0])) }
        } else {
            write(UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buffer)[..<count]))
        }
        return (Iterator(), count)
    }
}
