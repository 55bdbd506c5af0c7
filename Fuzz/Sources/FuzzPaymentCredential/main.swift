import OrchardCrypto
import PaymentCredential

/// The Pay server's credential key for the whole run (a fixed test key: the fuzzer reaches the parsers behind the
/// envelope by sealing its input to it).
private let payServerKey = try! P256.KeyAgreement.PrivateKey(
    rawRepresentation: [UInt8](repeating: 0, count: 31) + [7])

/// Any byte string must give a credential or a typed error: never a crash, a hang or unbounded memory.
/// The first byte picks the layer: 0 the credential's encoding, 1 the signed layout inside the envelope (the
/// rest sealed to the Pay server's key first, as a device would), otherwise the envelope itself.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzPaymentCredential(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let mode = bytes.first else { return 0 }
    let rest = Array(bytes.dropFirst())
    switch mode {
    case 0:
        if let credential = try? PaymentCredential(encoded: SecureBytes(rest)) {
            // Whatever parses must round-trip.
            let again = try? PaymentCredential(encoded: credential.encoded())
            precondition(again?.encoded() == credential.encoded(), "a parsed credential did not round-trip")
        }
    case 1:
        guard rest.count <= SealedPaymentCredential.maximumByteCount - 200,
            let sealed = try? SealedEnvelope.seal(
                rest, to: payServerKey.publicKey, purpose: SealedPaymentCredential.purpose)
        else { return 0 }
        _ = try? SealedPaymentCredential.open(sealed, with: payServerKey)
    default:
        _ = try? SealedPaymentCredential.open(rest, with: payServerKey)
    }
    return 0
}
