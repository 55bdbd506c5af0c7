import Foundation
import MerchantKit
import OrchardX509

/// One verifier for the whole run, trusting Apple's root, as a merchant would.
private let verifier: CMSVerifier? = try? CMSVerifier(
    trustRoots: [AppleRootCertificates.rootCAG3], policy: .applePaymentTokenSigning)

/// Any byte string must give a value or a typed error from every DER/BER entry point: never a crash or hang.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCMS(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    _ = try? ASN1.validate(bytes[...], rules: .ber)
    _ = try? ASN1.validate(bytes[...], rules: .der)
    if let certificate = try? Certificate(derEncoded: bytes) {
        // Whatever parses must keep its bytes.
        precondition(certificate.derRepresentation == bytes, "a parsed certificate changed its bytes")
    }
    _ = try? CertificateSigningRequest(derEncoded: bytes)
    _ = try? CMSSignedData(berEncoded: bytes)
    _ = try? verifier?.verifyDetachedSignature(bytes, content: [1, 2, 3], at: .signingTime)
    return 0
}
