import CommandTestSupport
import Foundation
import Testing

/// `scripts/check-layers`, which CI runs on the real manifest, refuses each kind of violation: fed a manifest
/// with every target of `Sources/layers.json` and one forbidden dependency added, it exits 1 and names it.
@Suite("Layer check: the build refuses a dependency the layers forbid")
struct LayerCheckTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    struct Outcome {
        let status: Int32
        let output: String
    }

    /// The layer map's targets as a `dump-package` manifest with the given dependencies.
    func check(adding extra: [String: [String]] = [:], extraTargets: [String] = []) async throws -> Outcome {
        let layersURL = Self.root.appendingPathComponent("Sources/layers.json")
        let layers = try JSONSerialization.jsonObject(with: Data(contentsOf: layersURL)) as? [String: Any]
        let entries = try #require(layers?["targets"] as? [String: Any])
        let targets: [[String: Any]] = (Array(entries.keys) + extraTargets).map { name in
            [
                "name": name, "type": "regular",
                "dependencies": (extra[name] ?? []).map { ["byName": [$0, NSNull()]] },
            ]
        }
        let manifest = FileManager.default.temporaryDirectory.appendingPathComponent("layers-\(UUID()).json")
        try JSONSerialization.data(withJSONObject: ["targets": targets]).write(to: manifest)
        defer { try? FileManager.default.removeItem(at: manifest) }

        let process = try ChildProcess(
            "/usr/bin/env",
            ["python3", Self.root.appendingPathComponent("scripts/check-layers").path, "--manifest", manifest.path],
            stdout: .capture)
        let ended = await process.exit()
        return Outcome(status: ended.status ?? -1, output: process.stdout)
    }

    @Test func theMapWithNoForbiddenDependencyPasses() async throws {
        let outcome = try await check(adding: [
            "PayServer": ["PayAPI", "OrchardHTTP"], "Terminal": ["NFCLink", "AcquirerAPI"],
        ])
        #expect(outcome.status == 0, "\(outcome.output)")
    }

    @Test(
        "Each kind of violation fails the check",
        arguments: [
            ("TokenService", "PayServer", "a higher layer"),
            ("Terminal", "Device", "parties meet only through a contract module"),
            ("PayServer", "TokenService", "parties meet only through a contract module"),
            ("TokenService", "OrchardStore", "domain modules take protocols"),
            ("Wallet", "COpenSSL", "only wrapper modules import C"),
            ("PayServer", "NetworkTestSupport", "depends on test support"),
            ("PayAPI", "PayServer", "a higher layer"),
        ])
    func violation(from: String, to: String, says: String) async throws {
        let outcome = try await check(adding: [from: [to]])
        #expect(outcome.status == 1)
        #expect(outcome.output.contains(from) && outcome.output.contains(says), "\(outcome.output)")
    }

    @Test func aTargetWithoutALayerFailsTheCheck() async throws {
        let outcome = try await check(extraTargets: ["SomethingNew"])
        #expect(outcome.status == 1)
        #expect(outcome.output.contains("SomethingNew: no entry in Sources/layers.json"))
    }
}
