import CommandTestSupport
import Foundation
import Testing

/// `orchard chaos --database URL --instances 2`: two instances of each server party on one
/// PostgreSQL database, one instance of a party killed each cycle, the invariants read through the store API from
/// the database's schemas (and the terminal's SQLite file).
@Suite("orchard chaos with several instances", .serialized)
struct ChaosPostgreSQLTests {
    static let serverFiles = [
        "pay.sqlite", "network.sqlite", "issuer.sqlite", "acquirer.sqlite", "merchant.sqlite",
    ]

    @Test(
        "R1: two instances of each server party on PostgreSQL, one killed each cycle: 0 lost, 0 duplicated, 0 unreconciled",
        .enabled(if: TestPostgreSQL.enabled))
    func twoInstancesOnPostgreSQL() async throws {
        let url = try await TestPostgreSQL.shared().freshDatabase()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-chaos-pg-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let run = try await orchard([
            "chaos", "--data-dir", directory, "--database", url, "--instances", "2", "--cycles", "4", "--payments",
            "2", "--seed", "33",
        ])
        #expect(run.status == 0, "\(run.stderr.suffix(3000))")
        let last = run.stderr.split(separator: "\n").last.map(String.init) ?? ""
        #expect(last == "chaos: 4 cycles, 8 payments, 0 lost, 0 duplicated, 0 unreconciled (seed 33)", "\(last)")
        let summary = try run.json()
        #expect((summary["kills"] as? [String: Int])?.values.reduce(0, +) == 4, "\(summary["kills"] ?? "")")
        #expect(summary["violations"] as? [String] == [])
        #expect(run.stderr.contains("2 instances of each server party"))
        // The second instances ran (each wrote its stderr file), and no server party wrote an SQLite file.
        let files = try FileManager.default.contentsOfDirectory(atPath: directory)
        for name in Self.serverFiles { #expect(!files.contains(name), "\(name) was written") }
        let chaos = try FileManager.default.contentsOfDirectory(atPath: directory + "/chaos")
        for name in ["network.2.stderr", "pay.2.stderr", "merchant.2.stderr"] {
            #expect(chaos.contains(name), "\(chaos)")
        }
    }

    @Test("--instances 2 on SQLite files is refused: one process owns a file")
    func instancesNeedPostgreSQL() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-chaos-sq-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let run = try await orchard(["chaos", "--data-dir", directory, "--instances", "2", "--cycles", "1"])
        #expect(run.status != 0)
        let last = run.stderr.split(separator: "\n").last.map(String.init) ?? ""
        #expect(last.hasPrefix("error: --instances 2 needs every server party on PostgreSQL"), "\(last)")
        #expect(!FileManager.default.fileExists(atPath: directory + "/chaos"))
    }
}
