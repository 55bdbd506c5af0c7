import Foundation
import OrchardFixtures
import RelayAPI
import Testing

/// Replays Tests/Fixtures/fuzz-regressions/FuzzRelayFrame through what the fuzz target drives: the relay frame
/// parser, which must give a frame that encodes back to the same bytes or its typed format error.
@Suite("Relay frame fuzz regressions")
struct RelayFuzzRegressionTests {
    @Test("F1: the relay frame fuzz corpus gives typed errors; the one valid frame round-trips")
    func relayFrameInputs() throws {
        let directory = "fuzz-regressions/FuzzRelayFrame"
        let names = try FileManager.default.contentsOfDirectory(atPath: Fixtures.path(directory)).sorted()
        #expect(names.count >= 12)
        for name in names {
            let bytes = Array(try Fixtures.data("\(directory)/\(name)"))
            if name == "valid" {
                #expect(try RelayFrame(parsing: bytes).encoded == bytes)
            } else {
                #expect(throws: RelayFrame.FormatError.self, "\(name)") { try RelayFrame(parsing: bytes) }
            }
        }
    }
}
