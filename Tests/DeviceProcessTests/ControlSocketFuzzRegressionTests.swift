import DeviceProcess
import Foundation
import OrchardFixtures
import Testing

/// Replays Tests/Fixtures/fuzz-regressions/FuzzControlHTTP through the control socket's HTTP parser, as the fuzz
/// target does (the first byte sets the read size): each is refused with the status the socket answers.
@Suite("Control socket fuzz regressions")
struct ControlSocketFuzzRegressionTests {
    static let expected: [String: String] = [
        "head-without-end": "431", "chunked-body": "501", "repeated-content-length": "400",
        "negative-content-length": "400", "huge-content-length": "400", "body-over-limit": "413",
        "body-longer-than-length": "400", "body-ends-early": "400", "non-ascii-head": "400",
        "header-without-colon": "400", "short-start-line": "400", "unicode-digits-length": "400",
    ]

    @Test("F1: the control socket's fuzz corpus is refused with the status the socket answers")
    func controlSocketInputs() throws {
        let directory = "fuzz-regressions/FuzzControlHTTP"
        let names = try FileManager.default.contentsOfDirectory(atPath: Fixtures.path(directory)).sorted()
        #expect(Set(names) == Set(Self.expected.keys))
        for name in names {
            let bytes = Array(try Fixtures.data("\(directory)/\(name)"))
            do {
                _ = try ControlSocketParser.parse(Array(bytes.dropFirst()), chunkSize: Int(bytes[0]) + 1)
                Issue.record("\(name) was accepted")
            } catch {
                #expect(error.code == .protocolError, "\(name)")
                #expect(error.message.hasPrefix(Self.expected[name] ?? "?"), "\(name): \(error.message)")
            }
        }
        // A well-formed request read one byte at a time is whole.
        let request = Array("POST /v1/x HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}".utf8)
        let message = try ControlSocketParser.parse(request, chunkSize: 1)
        #expect(message.startLine == ["POST", "/v1/x", "HTTP/1.1"] && message.body == Array("{}".utf8))
    }
}
