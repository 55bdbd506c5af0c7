import Foundation
import OrchardCrypto
import OrchardFixtures
import Testing

@Suite("PEM")
struct PEMTests {
    @Test func appleRootCertificateBlock() throws {
        let pem = try Fixtures.string("apple-pay/AppleRootCA-G3.pem")
        let blocks = try pemBlocks(pem)
        #expect(blocks.count == 1)
        #expect(blocks[0].label == "CERTIFICATE")
        #expect(blocks[0].der.first == 0x30)
        // SHA-256 fingerprint from the fixture README.
        #expect(
            SHA256.hash(blocks[0].der).map { String(format: "%02X", $0) }.joined()
                == "63343ABFB89A6A03EBB57E9B3F5FA7BE7C4F5C756F3017B3A8C488C3653E9179")
    }

    @Test func malformedBlocksAreTypedErrors() {
        #expect(throws: CryptoError.self) { try pemBlocks("-----BEGIN X-----\nAAAA\n") }
        #expect(throws: CryptoError.self) { try pemBlocks("-----BEGIN X-----\n!!!!\n-----END X-----\n") }
        #expect(throws: CryptoError.self) { try pemDecode("nothing here", label: "CERTIFICATE") }
    }
}
