import Foundation
import OrchardFixtures
import PaymentToken
import Testing

/// Replays the inputs kept in Tests/Fixtures/fuzz-regressions through the parsers the fuzz targets drive.
@Suite("Fuzz regressions")
struct FuzzRegressionTests {
    static func inputs(_ target: String) throws -> [(String, Data)] {
        let names = try FileManager.default.contentsOfDirectory(atPath: Fixtures.path("fuzz-regressions/\(target)"))
        return try names.sorted().map { ($0, try Fixtures.data("fuzz-regressions/\(target)/\($0)")) }
    }

    @Test("F1: the token JSON fuzz corpus gives typed errors")
    func tokenJSON() throws {
        let inputs = try Self.inputs("FuzzTokenJSON")
        #expect(!inputs.isEmpty)
        for (name, data) in inputs {
            // Each must be refused with a typed error (none of the kept inputs is a valid token).
            #expect(throws: PaymentTokenError.self, "\(name)") { try PaymentToken(jsonBytes: data) }
            #expect(throws: PaymentTokenError.self, "\(name)") { try DecryptedPaymentData(plaintext: data) }
        }
    }
}
