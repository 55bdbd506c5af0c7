import Foundation
import OrchardCrypto
import OrchardFixtures
import PaymentCredential
import Testing

/// Replays Tests/Fixtures/fuzz-regressions/FuzzPaymentCredential, FuzzCardData and FuzzPersonalisation through what
/// the fuzz targets of Fuzz/ drive: hand-made hostile inputs (and any input that once crashed a target). Each is
/// refused with a typed error.
@Suite("PaymentCredential fuzz regressions")
struct PaymentCredentialFuzzRegressionTests {
    static func inputs(_ target: String) throws -> [(String, [UInt8])] {
        let names = try FileManager.default.contentsOfDirectory(atPath: Fixtures.path("fuzz-regressions/\(target)"))
        return try names.sorted().map { ($0, Array(try Fixtures.data("fuzz-regressions/\(target)/\($0)"))) }
    }

    /// The fuzz target's Pay server key.
    static let payServerKey = try! P256.KeyAgreement.PrivateKey(
        rawRepresentation: [UInt8](repeating: 0, count: 31) + [7])

    @Test("F1: the sealed payment credential's fuzz corpus gives typed errors at every layer")
    func sealedCredentialInputs() throws {
        let inputs = try Self.inputs("FuzzPaymentCredential")
        #expect(inputs.count >= 8)
        for (name, bytes) in inputs {
            let rest = Array(bytes.dropFirst())
            switch bytes.first {
            case 0:
                #expect(throws: PaymentCredentialError.self, "\(name)") {
                    try PaymentCredential(encoded: SecureBytes(rest))
                }
            case 1:
                let sealed = try SealedEnvelope.seal(
                    rest, to: Self.payServerKey.publicKey, purpose: SealedPaymentCredential.purpose)
                #expect(throws: PaymentCredentialError(.malformed, ""), "\(name)") {
                    try SealedPaymentCredential.open(sealed, with: Self.payServerKey)
                }
            default:
                #expect(throws: PaymentCredentialError.self, "\(name)") {
                    try SealedPaymentCredential.open(rest, with: Self.payServerKey)
                }
            }
        }
    }

    @Test("F1: the card-data payload's fuzz corpus gives typed errors")
    func cardDataInputs() throws {
        let inputs = try Self.inputs("FuzzCardData")
        #expect(inputs.count >= 6)
        for (name, bytes) in inputs {
            #expect(throws: PaymentCredentialError.self, "\(name)") {
                try CardDataPayload(decoding: SecureBytes(bytes))
            }
        }
    }

    @Test("F1: the personalisation's fuzz corpus (signed install and envelope contents) gives typed errors")
    func personalisationInputs() throws {
        let inputs = try Self.inputs("FuzzPersonalisation")
        #expect(inputs.count >= 7)
        for (name, bytes) in inputs {
            if name.hasPrefix("install-") {
                #expect(throws: PaymentCredentialError(.malformed, ""), "\(name)") {
                    try SignedPersonalisation(serialized: bytes)
                }
            } else {
                #expect(throws: PaymentCredentialError.self, "\(name)") {
                    try PersonalisationData(decoding: SecureBytes(bytes))
                }
            }
        }
    }
}
