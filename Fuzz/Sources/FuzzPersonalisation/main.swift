import Foundation
import OrchardCrypto
import PaymentCredential

/// Any byte string must give a value or a typed error from the Secure Element's parsers: the signed install
/// (`OPI1`, binary and as JSON) and the personalisation inside the envelope. Never a crash.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPersonalisation(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let install = try? SignedPersonalisation(serialized: bytes) {
        precondition(install.serialized == bytes, "a parsed install changed its bytes")
    }
    _ = try? JSONDecoder().decode(SignedPersonalisation.self, from: Data(bytes))
    if let personalisation = try? PersonalisationData(decoding: SecureBytes(bytes)) {
        let encoded = try? personalisation.encoded()
        precondition(
            encoded.flatMap { try? PersonalisationData(decoding: $0) } != nil, "a personalisation did not round-trip")
    }
    return 0
}
