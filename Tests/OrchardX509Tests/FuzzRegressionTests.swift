import Foundation
import OrchardFixtures
import OrchardX509
import Testing

/// Replays Tests/Fixtures/fuzz-regressions/FuzzCMS through every entry point the FuzzCMS target drives.
@Suite("Fuzz regressions (DER/BER, X.509, CMS)")
struct FuzzRegressionTests {
    @Test("F1: the DER/X.509/CMS fuzz corpus gives typed errors")
    func hostileInputsGiveTypedErrors() throws {
        let folder = try Fixtures.path("fuzz-regressions/FuzzCMS")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder).sorted()
        #expect(!names.isEmpty)
        let verifier = try CMSVerifier(
            trustRoots: [try Certificate(pemEncoded: Fixtures.string("apple-pay/AppleRootCA-G3.pem"))],
            policy: .applePaymentTokenSigning)
        for name in names {
            let bytes = Array(try Fixtures.data("fuzz-regressions/FuzzCMS/\(name)"))
            #expect(throws: X509Error.self, "\(name)") { try ASN1.validate(bytes[...], rules: .ber) }
            #expect(throws: X509Error.self, "\(name)") { try Certificate(derEncoded: bytes) }
            #expect(throws: X509Error.self, "\(name)") { try CMSSignedData(berEncoded: bytes) }
            #expect(throws: X509Error.self, "\(name)") {
                try verifier.verifyDetachedSignature(bytes, content: [1], at: .signingTime)
            }
        }
    }
}
