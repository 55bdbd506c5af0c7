import CommandTestSupport
import Foundation
import Testing

/// `orchard init --database` and `orchard demo --database` against the real PostgreSQL server of the test run.
@Suite("The server parties on PostgreSQL", .serialized, .enabled(if: TestPostgreSQL.enabled))
struct PostgreSQLDeploymentTests {
    static let serverFiles = [
        "pay.sqlite", "network.sqlite", "issuer.sqlite", "acquirer.sqlite", "merchant.sqlite",
        "pay-idempotency.sqlite", "network-idempotency.sqlite", "merchant-idempotency.sqlite",
    ]

    static func temporaryPath(_ prefix: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
    }

    @Test("orchard demo --database: the whole demo with the server parties on PostgreSQL, no server SQLite file")
    func demoRunsOnPostgreSQL() async throws {
        let url = try await TestPostgreSQL.shared().freshDatabase()
        let dir = Self.temporaryPath("orchard-pg-demo")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let capture = Capture()
        #expect(
            await capture.run(
                ["demo", "--data-dir", dir, "--database", url],
                environment: LogScan.debugLogEnvironment.merging(["HOME": "/tmp/orchard-home"]) { $1 }) == 0,
            "\(capture.stderr.suffix(3000))")
        let report = try JSONSerialization.jsonObject(with: Data(capture.stdout.utf8)) as? [String: Any]
        #expect(report?["failed"] as? Int == 0)
        let payments = report?["payments"] as? [[String: Any]]
        #expect(
            payments?.map { $0["channel"] as? String ?? "" }
                == ["in-store", "in-store", "in-app"] + RunnerTests.demoWebRows.map(\.channel))
        #expect(payments?.allSatisfy { $0["result"] as? String == "approved" } == true)
        let files = try FileManager.default.contentsOfDirectory(atPath: dir)
        for name in Self.serverFiles { #expect(!files.contains(name), "\(name) was written") }
        // The devices and the terminal keep their SQLite files.
        #expect(files.contains("terminal.sqlite"))
        let configuration = try String(contentsOfFile: dir + "/config.json", encoding: .utf8)
        #expect(configuration.contains("\"database\""))
        // No card number in any log, the PostgreSQL errors included.
        #expect(LogScan.expectCleanLogs(of: dir, secrets: LogScan.Secrets(texts: ["4111111111111111"])) > 0)
        // The kept deployment runs again on the same database.
        let again = Capture()
        #expect(await again.run(["demo", "--data-dir", dir]) == 0, "\(again.stderr.suffix(2000))")
        #expect(!again.stderr.contains("initialising"))
    }

    @Test("orchard init --database: a URL with a password is refused; another deployment's schemas need --force")
    func initRefusesPasswordsAndForeignSchemas() async throws {
        let url = try await TestPostgreSQL.shared().freshDatabase()
        let withPassword = url.replacingOccurrences(of: "postgres@", with: "postgres:hunter2@")
        let refused = Capture()
        let dir = Self.temporaryPath("orchard-pg-init")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(await refused.run(["init", "--data-dir", dir, "--database", withPassword]) == 1)
        #expect(refused.stderr.contains("passfile") && !refused.stderr.contains("hunter2"), "\(refused.stderr)")
        let badService = Capture()
        #expect(await badService.run(["init", "--data-dir", dir, "--database", "terminal=" + url]) == 2)
        // Over TCP without verified TLS: one error line naming what to add, and no directory made.
        let plaintext = Capture()
        #expect(
            await plaintext.run([
                "init", "--data-dir", dir, "--database", "postgresql://orchard@127.0.0.1:5432/orchard?sslmode=require",
            ]) == 1)
        let errors = plaintext.stderr.split(separator: "\n").filter { $0.hasPrefix("error:") }
        #expect(errors.count == 1 && errors[0].contains("sslmode=verify-full"), "\(plaintext.stderr)")
        #expect(!plaintext.stderr.contains("  - "), "\(plaintext.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dir))

        // pay alone on PostgreSQL: the others keep their files.
        let first = Capture()
        #expect(await first.run(["init", "--data-dir", dir, "--force", "--database", "pay=" + url]) == 0)
        let files = try FileManager.default.contentsOfDirectory(atPath: dir)
        #expect(!files.contains("pay.sqlite") && files.contains("network.sqlite") && files.contains("merchant.sqlite"))
        // A second deployment on the same database would take over the first one's pay schema.
        let other = Self.temporaryPath("orchard-pg-other")
        defer { try? FileManager.default.removeItem(atPath: other) }
        let second = Capture()
        #expect(await second.run(["init", "--data-dir", other, "--database", "pay=" + url]) == 1)
        #expect(second.stderr.contains("already holds the pay schema"), "\(second.stderr)")
        let forced = Capture()
        #expect(await forced.run(["init", "--data-dir", other, "--force", "--database", "pay=" + url]) == 0)
    }

    @Test("orchard init --pgpass: the password comes from pki/<party>/pgpass (0600), never from the command line")
    func passwordComesFromThePassfile() async throws {
        let server = try await TestPostgreSQL.shared()
        let url = try await server.freshDatabase(role: TestPostgreSQL.passwordRole)
        let dir = Self.temporaryPath("orchard-pg-pass")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // Without the password the server refuses the role.
        let refused = Capture()
        #expect(await refused.run(["init", "--data-dir", dir, "--database", "merchant=" + url]) == 1)
        #expect(refused.stderr.contains("password"), "\(refused.stderr)")
        let passfile = Self.temporaryPath("pgpass")
        defer { try? FileManager.default.removeItem(atPath: passfile) }
        try "*:*:*:\(TestPostgreSQL.passwordRole):\(TestPostgreSQL.password)\n".write(
            toFile: passfile, atomically: false, encoding: .utf8)
        chmod(passfile, 0o600)
        let capture = Capture()
        #expect(
            await capture.run([
                "init", "--data-dir", dir, "--force", "--database", "merchant=" + url, "--pgpass", passfile,
            ])
                == 0, "\(capture.stderr.suffix(2000))")
        let copy = dir + "/pki/merchant/pgpass"
        let attributes = try FileManager.default.attributesOfItem(atPath: copy)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        #expect(!FileManager.default.fileExists(atPath: dir + "/merchant.sqlite"))
        let configuration = try String(contentsOfFile: dir + "/config.json", encoding: .utf8)
        #expect(!configuration.contains(TestPostgreSQL.password))
    }
}
