import Foundation
import OrchardX509

/// One verifier for the whole run, trusting Apple's root, as a merchant would.
private let verifier: CMSVerifier? = {
    let pem = """
        -----BEGIN CERTIFICATE-----
        MIICQzCCAcmgAwIBAgIILcX8iNLFS5UwCgYIKoZIzj0EAwMwZzEbMBkGA1UEAwwS
        QXBwbGUgUm9vdCBDQSAtIEczMSYwJAYDVQQLDB1BcHBsZSBDZXJ0aWZpY2F0aW9u
        IEF1dGhvcml0eTETMBEGA1UECgwKQXBwbGUgSW5jLjELMAkGA1UEBhMCVVMwHhcN
        MTQwNDMwMTgxOTA2WhcNMzkwNDMwMTgxOTA2WjBnMRswGQYDVQQDDBJBcHBsZSBS
        b290IENBIC0gRzMxJjAkBgNVBAsMHUFwcGxlIENlcnRpZmljYXRpb24gQXV0aG9y
        aXR5MRMwEQYDVQQKDApBcHBsZSBJbmMuMQswCQYDVQQGEwJVUzB2MBAGByqGSM49
        AgEGBSuBBAAiA2IABJjpLz1AcqTtkyJygRMc3RCV8cWjTnHcFBbZDuWmBSp3ZHtf
        TjjTuxxEtX/1H7YyYl3J6YRbTzBPEVoA/VhYDKX1DyxNB0cTddqXl5dvMVztK517
        IDvYuVTZXpmkOlEKMaNCMEAwHQYDVR0OBBYEFLuw3qFYM4iapIqZ3r6966/ayySr
        MA8GA1UdEwEB/wQFMAMBAf8wDgYDVR0PAQH/BAQDAgEGMAoGCCqGSM49BAMDA2gA
        MGUCMQCD6cHEFl4aXTQY2e3v9GwOAEZLuN+yRhHFD/3meoyhpmvOwgPUnPWTxnS4
        at+qIxUCMG1mihDK1A3UT82NQz60imOlM27jbdoXt2QfyFMm+YhidDkLF1vLUagM
        6BgD56KyKA==
        -----END CERTIFICATE-----
        """
    guard let root = try? Certificate(pemEncoded: pem) else { return nil }
    return try? CMSVerifier(trustRoots: [root], policy: .applePaymentTokenSigning)
}()

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
