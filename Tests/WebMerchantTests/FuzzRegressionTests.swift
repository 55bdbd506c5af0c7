import Foundation
import OrchardFixtures
import Testing
import WebMerchantAPI

/// Replays Tests/Fixtures/fuzz-regressions for the web parsers with the invariants their fuzz targets check: bad
/// bytes are a typed error, and whatever parses is canonical (encodes back to what parses to the same value).
struct WebFuzzRegressionTests {
    /// The well-formed inputs (a flipped bit can leave a value valid: the parsers check form, the signature checks the
    /// rest); every other input is malformed and must be refused.
    static let mayParse: Set<String> = ["valid-seed", "one-byte-flipped"]

    static func inputs(_ target: String) throws -> [(String, [UInt8])] {
        let names = try FileManager.default.contentsOfDirectory(atPath: Fixtures.path("fuzz-regressions/\(target)"))
        return try names.sorted().map { ($0, Array(try Fixtures.data("fuzz-regressions/\(target)/\($0)"))) }
    }

    @Test("F1: the merchant session fuzz corpus gives typed errors; the valid seed round-trips")
    func merchantSessions() throws {
        var parsed: [String] = []
        for (name, bytes) in try Self.inputs("FuzzMerchantSession") {
            do {
                let session = try MerchantSession(json: bytes)
                #expect(try MerchantSession(json: session.json) == session, "\(name) did not round-trip")
                parsed.append(name)
            } catch {
                #expect(!error.message.isEmpty, "\(name)")
            }
        }
        #expect(parsed.contains("valid-seed") && Set(parsed).isSubset(of: Self.mayParse))
    }

    @Test("F1: the capability statement fuzz corpus gives typed errors; the valid seed is canonical")
    func capabilityStatements() throws {
        var parsed: [String] = []
        for (name, bytes) in try Self.inputs("FuzzCapabilityStatement") {
            do {
                let statement = try CapabilityStatement(json: bytes)
                #expect(statement.json == bytes, "\(name) is not canonical")
                parsed.append(name)
            } catch {
                #expect(!error.message.isEmpty, "\(name)")
            }
        }
        #expect(parsed.contains("valid-seed") && Set(parsed).isSubset(of: Self.mayParse))
    }

    @Test("F1: the association file fuzz corpus gives typed errors; the valid seed is canonical")
    func associationFiles() throws {
        var parsed: [String] = []
        for (name, bytes) in try Self.inputs("FuzzAssociationFile") {
            do {
                let file = try DomainAssociationFile(fileContents: bytes)
                #expect(try DomainAssociationFile(fileContents: Array(file.fileContents.utf8)) == file, "\(name)")
                #expect(Array(bytes.prefix(file.fileContents.utf8.count)) == Array(file.fileContents.utf8), "\(name)")
                parsed.append(name)
            } catch {
                #expect(!error.message.isEmpty, "\(name)")
            }
        }
        #expect(parsed.contains("valid-seed") && Set(parsed).isSubset(of: Self.mayParse))
    }
}
