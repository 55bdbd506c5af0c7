import CommandTestSupport
import Foundation
import Testing

/// `orchard bench inapp --database URL --instances 2`: the exchange through two Pay server instances
/// on PostgreSQL, beside the one-instance SQLite figure of the same run.
@Suite("orchard bench inapp on several instances", .serialized)
struct ScaleOutBenchCommandTests {
    @Test(
        "A short run through two Pay server instances on PostgreSQL reports its tokens/s beside the SQLite figure",
        .enabled(if: TestPostgreSQL.enabled, Comment(rawValue: TestPostgreSQL.installHint)))
    func twoInstances() async throws {
        let url = try await TestPostgreSQL.shared().freshDatabase()
        let capture = Capture()
        let rc = await capture.run([
            "bench", "inapp", "--requests", "24", "--connections", "4", "--ceiling-seconds", "1", "--database", url,
            "--instances", "2", "--scale-out-connections", "6",
        ])
        #expect(rc == 0, "\(capture.stderr.suffix(2000))")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(capture.stdout.utf8)) as? [String: Any])
        let sqlite = try #require(report["tokensPerSecond"] as? Double)
        let scaled = try #require(report["scaleOut"] as? [String: Any])
        #expect(scaled["backend"] as? String == "postgresql" && scaled["instances"] as? Int == 2)
        #expect(report["connections"] as? Int == 4)
        #expect(scaled["requests"] as? Int == 24 && scaled["connections"] as? Int == 6)
        #expect((scaled["tokensPerSecond"] as? Double ?? 0) > 0)
        #expect(scaled["sqliteOneInstanceTokensPerSecond"] as? Double == sqlite)
        #expect(capture.stderr.contains("through 2 Pay server instance(s) on PostgreSQL"))
        #expect(capture.stderr.contains("2 Pay server instances on PostgreSQL: https://127.0.0.1:"))
    }

    @Test("--instances 2 without --database is refused before anything runs")
    func instancesNeedADatabase() async throws {
        let capture = Capture()
        #expect(await capture.run(["bench", "inapp", "--requests", "24", "--instances", "2"]) == 2)
        #expect(capture.stderr.contains("error: --instances 2 needs --database postgresql://"), "\(capture.stderr)")
        #expect(capture.stdout.isEmpty)
    }
}
