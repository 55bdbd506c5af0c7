import CommandTestSupport
import Foundation
import OrchardRuntime
import OrchardStore
import PayServer
import Testing

/// `orchard device approve` as a user runs it: the services started for the command, both devices' Secure Enclaves
/// reached through their stores.
@Suite("orchard device approve", .serialized)
struct RelayCommandTests {
    @Test("approve: each device vouches for the keys the other shows, after its passcode; a wrong one vouches nothing")
    func approve() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-relay-\(UUID().uuidString)")
            .path
        defer {
            LogScan.expectCleanLogs(of: path)  // V2
            try? FileManager.default.removeItem(atPath: path)
        }
        #expect(try await orchard(["init", "--data-dir", path]).status == 0)
        for (name, kind, biometry, passcode) in [
            ("phone", "phone", "face", "123456"), ("mac", "mac", "touch", "654321"),
            ("other", "mac", "touch", "111111"),
        ] {
            var arguments = [
                "device", "create", "--data-dir", path, "--name", name, "--kind", kind, "--biometry", biometry,
                "--passcode-file", "-",
            ]
            if name == "other" { arguments += ["--account", "mallory"] }
            let created = try await orchard(arguments, stdin: passcode + "\n")
            #expect(created.status == 0, "\(created.stderr)")
        }
        let wrong = try await orchard(
            ["device", "approve", "--data-dir", path, "--name", "phone", "--new", "mac"], stdin: "000000\n654321\n")
        #expect(wrong.status == 1 && wrong.stdout.isEmpty)
        #expect(wrong.stderr.split(separator: "\n").last?.hasPrefix("error: ") == true, "\(wrong.stderr)")
        #expect(try await Self.vouches(path).isEmpty)

        let across = try await orchard(
            ["device", "approve", "--data-dir", path, "--name", "phone", "--new", "other"], stdin: "123456\n111111\n")
        #expect(across.status != 0 && across.stderr.contains("different accounts"), "\(across.stderr)")

        let approved = try await orchard(
            ["device", "approve", "--data-dir", path, "--name", "phone", "--new", "mac"], stdin: "123456\n654321\n")
        #expect(approved.status == 0, "\(approved.stderr)")
        let body = try JSONSerialization.jsonObject(with: Data(approved.stdout.utf8)) as? [String: Any]
        #expect(body?["vouches"] as? [String] == ["phone>mac", "mac>phone"])
        #expect(!(approved.stdout + approved.stderr).contains("123456"))
        #expect(try await Self.vouches(path) == ["mac>phone", "phone>mac"])
    }

    /// The vouches in the Pay server's directory, as `voucher>device`.
    static func vouches(_ path: String) async throws -> [String] {
        let store = try PayStore.open(in: DeploymentDirectory(path: path))
        let rows = try await store.read { db in
            try db.query("SELECT voucher, device_id FROM relay_vouches ORDER BY voucher") { row in
                "\(try row.string(0))>\(try row.string(1))"
            }
        }
        await store.close()
        return rows
    }
}
