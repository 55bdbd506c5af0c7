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
