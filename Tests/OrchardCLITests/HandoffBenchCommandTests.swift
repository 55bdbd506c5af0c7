import Foundation
import Testing

@Suite("orchard bench handoff")
struct HandoffBenchCommandTests {
    @Test(
        "Three payments: a Mac's request over the relay, the phone's token back at the Mac; a bad count is a usage error"
    )
    func shortRun() async throws {
        let capture = Capture()
        let rc = await capture.run(["bench", "handoff", "--payments", "3"])
        #expect(rc == 0, "\(capture.stderr.suffix(3000))")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(capture.stdout.utf8)) as? [String: Any])
        #expect(report["payments"] as? Int == 3)
        let figure = try #require(report["figure"] as? [String: Any])
        #expect(figure["samples"] as? Int == 3)
        #expect(figure["targetP99Milliseconds"] as? Double == 100)
        #expect((figure["p50Milliseconds"] as? Double ?? 0) > 0)
        #expect(!capture.stdout.contains("4111111111111111") && !capture.stderr.contains("4111111111111111"))
        for bad in [["--payments", "0"], ["--payments", "ten"]] {
            #expect(await Capture().run(["bench", "handoff"] + bad) == 2)
        }
    }
}
