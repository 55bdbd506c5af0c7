import Foundation
import Testing

@Suite("orchard bench scale")
struct ScaleBenchCommandTests {
    @Test("Tiny sizes: every size filled and measured, the growth reported; bad sizes are a usage error")
    func shortRun() async throws {
        let parent = FileManager.default.temporaryDirectory.path + "/orchard-scale-cli-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: parent) }
        let capture = Capture()
        let rc = await capture.run(["bench", "scale", "--sizes", "20,50", "--samples", "3", "--dir", parent])
        #expect(rc == 0, "\(capture.stderr)")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(capture.stdout.utf8)) as? [String: Any])
        let levels = try #require(report["levels"] as? [[String: Any]])
        #expect(levels.map { $0["rows"] as? Int } == [20, 50])
        #expect((report["growth"] as? [String: Double])?.count == 4)
        // The throw-away stores are gone.
        #expect(try FileManager.default.contentsOfDirectory(atPath: parent).isEmpty)
        for bad in [["--sizes", "50,20"], ["--sizes", "0"], ["--sizes", "ten"]] {
            #expect(await Capture().run(["bench", "scale"] + bad) == 2)
        }
    }
}
