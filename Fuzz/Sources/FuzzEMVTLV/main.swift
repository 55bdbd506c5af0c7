import EMV

/// Decodes arbitrary bytes as BER-TLV and as a DOL. Must never crash, and whatever decodes must survive
/// re-encoding unchanged.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEMVTLV(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []
    if let objects = try? TLV.decode(bytes) {
        guard let again = try? TLV.decode(objects.encoded), again == objects else {
            fatalError("TLV re-encoding changed the objects")
        }
        _ = objects.treeDescription()
        _ = objects.primitives.count
    }
    if let dol = try? DataObjectList(bytes: bytes) {
        guard (try? DataObjectList(bytes: dol.encoded)) == dol else { fatalError("DOL re-encoding changed the list") }
        let built = dol.build { _ in bytes }
        guard built.count == dol.dataLength, (try? dol.split(built)) != nil else {
            fatalError("DOL build/split disagree")
        }
    }
    return 0
}
