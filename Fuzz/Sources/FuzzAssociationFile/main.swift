import WebMerchantAPI

/// Any byte string must give an association file or a typed error: never a crash, a hang or unbounded memory.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAssociationFile(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    if let file = try? DomainAssociationFile(fileContents: bytes) {
        // Whatever parses is canonical: encoding it again gives the same file.
        let again = try? DomainAssociationFile(fileContents: Array(file.fileContents.utf8))
        precondition(again == file, "a parsed association file did not round-trip")
        precondition(
            Array(file.fileContents.utf8) == Array(bytes.prefix(file.fileContents.utf8.count)),
            "a parsed association file is not in canonical form")
    }
    return 0
}
