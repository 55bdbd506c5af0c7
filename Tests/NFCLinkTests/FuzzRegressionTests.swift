import Foundation
import NFCLink
import OrchardFixtures
import Testing

/// Replays Tests/Fixtures/fuzz-regressions/FuzzNFCFrame through what the fuzz target drives: the frame splitter and
/// the JSON payloads of poll, joined and refused frames.
@Suite("NFC link fuzz regressions")
struct NFCLinkFuzzRegressionTests {
    static func inputs() throws -> [(String, [UInt8])] {
        let directory = "fuzz-regressions/FuzzNFCFrame"
        let names = try FileManager.default.contentsOfDirectory(atPath: Fixtures.path(directory))
        return try names.sorted().map { ($0, Array(try Fixtures.data("\(directory)/\($0)"))) }
    }

    @Test("F1: the NFC frame fuzz corpus gives typed errors, a partial frame waits for more")
    func frameInputs() throws {
        let inputs = Dictionary(uniqueKeysWithValues: try Self.inputs())
        #expect(inputs.count >= 6)
        let oversized = try #require(inputs["oversized-length"])
        #expect(throws: NFCLinkError(.frameTooLarge, "")) { try NFCFrame.decode(prefixOf: oversized) }
        let unknown = try #require(inputs["unknown-type"])
        #expect(throws: NFCLinkError(.protocolViolation, "")) { try NFCFrame.decode(prefixOf: unknown) }
        let truncated = try #require(inputs["truncated-payload"])
        #expect(try NFCFrame.decode(prefixOf: truncated) == nil)
        let decoder = JSONDecoder()
        for (name, type) in [
            ("poll-bad-aid", NFCPolling.self as any Decodable.Type), ("join-wrong-types", NFCJoin.self),
            ("refusal-not-json", NFCRefusal.self),
        ] {
            let bytes = try #require(inputs[name])
            let decoded = try NFCFrame.decode(prefixOf: bytes)
            let frame = try #require(decoded?.frame, "\(name)")
            #expect(throws: DecodingError.self, "\(name)") { try decoder.decode(type, from: Data(frame.payload)) }
        }
    }
}
