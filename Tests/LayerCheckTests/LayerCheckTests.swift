import CommandTestSupport
import Foundation
import Testing

/// `scripts/check-layers`, which CI runs on the real package, refuses each kind of violation. Each test starts from
/// the real manifest (`swift package dump-package`), the real `Sources/layers.json` and docs/ARCHITECTURE.md's
/// module map, changes one thing and expects the check to fail naming the rule, or to pass where nothing is wrong.
@Suite("Layer check: the build refuses what the layers forbid, however it is reached")
struct LayerCheckTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    struct Outcome {
        let status: Int32
        let output: String

        func says(_ parts: String...) -> Bool {
            output.split(separator: "\n").contains { line in parts.allSatisfy { line.contains($0) } }
        }
    }

    /// A folder of the test's own, removed when the test ends.
    final class Scratch {
        let url: URL
        init() throws {
            url = FileManager.default.temporaryDirectory.appendingPathComponent("layer-check-\(UUID())")
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        }
        deinit { try? FileManager.default.removeItem(at: url) }

        func write(_ text: String, to path: String) throws -> String {
            let file = url.appendingPathComponent(path)
            try FileManager.default.createDirectory(
                at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(text.utf8).write(to: file)
            return file.path
        }
    }

    struct DumpFailed: Error, CustomStringConvertible {
        let stderr: String
        var description: String { "swift package dump-package failed: \(stderr)" }
    }

    /// The package's manifest as `swift package dump-package` prints it, read once for the suite. A scratch path of
    /// its own: the package's `.build` is locked by the `swift test` running this.
    static let realManifestJSON = Task<Data, any Error> {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("layer-check-swiftpm-\(UUID())")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let process = try ChildProcess(
            "/usr/bin/env",
            ["swift", "package", "--package-path", root.path, "--scratch-path", scratch.path, "dump-package"],
            stdout: .capture, stderr: .capture)
        let ended = await process.exit()
        guard ended.status == 0 else { throw DumpFailed(stderr: process.stderr) }
        return Data(process.stdout.utf8)
    }

    static func realManifest() async throws -> [String: Any] {
        let data = try await realManifestJSON.value
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// The real manifest with `adding` dependencies added and the `removing` targets taken out.
    static func manifest(
        in scratch: Scratch, adding extra: [String: [String]] = [:], removing: Set<String> = [],
        extraTargets: [String] = []
    ) async throws -> String {
        var manifest = try await realManifest()
        var targets = try #require(manifest["targets"] as? [[String: Any]])
        targets.removeAll { removing.contains($0["name"] as? String ?? "") }
        for index in targets.indices {
            let name = targets[index]["name"] as? String ?? ""
            var dependencies = targets[index]["dependencies"] as? [Any] ?? []
            dependencies += (extra[name] ?? []).map { ["byName": [$0, NSNull()]] }
            targets[index]["dependencies"] = dependencies
        }
        targets += extraTargets.map { ["name": $0, "type": "regular", "dependencies": [Any]()] }
        manifest["targets"] = targets
        let data = try JSONSerialization.data(withJSONObject: manifest)
        return try scratch.write(String(decoding: data, as: UTF8.self), to: "manifest.json")
    }

    /// The real layer map, changed by `edit`.
    static func layers(in scratch: Scratch, _ edit: (inout [String: Any]) -> Void) throws -> String {
        let data = try Data(contentsOf: root.appendingPathComponent("Sources/layers.json"))
        var layers = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        edit(&layers)
        let written = try JSONSerialization.data(withJSONObject: layers)
        return try scratch.write(String(decoding: written, as: UTF8.self), to: "layers.json")
    }

    static func run(_ arguments: [String]) async throws -> Outcome {
        let process = try ChildProcess(
            "/usr/bin/env", ["python3", root.appendingPathComponent("scripts/check-layers").path] + arguments,
            stdout: .capture, stderr: .capture)
        let ended = await process.exit()
        return Outcome(status: ended.status ?? -1, output: process.stdout + process.stderr)
    }

    @Test func theRealPackageWithItsSourcesPasses() async throws {
        let scratch = try Scratch()
        let manifest = try await Self.manifest(in: scratch)
        let outcome = try await Self.run(["--manifest", manifest, "--sources", Self.root.path])
        #expect(outcome.status == 0, "\(outcome.output)")
    }

    @Test(
        "A rule broken through a dependency's dependency fails the check",
        arguments: [
            // A party reaching another through a party-less module.
            (["NFCLink": ["SecureElement"]], ["Terminal", "SecureElement", "party rule"]),
            // A domain module reaching HTTP and SQL through the services.
            (["TokenService": ["OrchardServices"]], ["TokenService", "OrchardHTTP", "domain rule"]),
            // A contract on the transport.
            (["PayAPI": ["OrchardHTTP"]], ["PayAPI", "OrchardHTTP", "contract rule"]),
            // The app linking servers.
            (["DemoApp": ["MerchantServer", "PayServer"]], ["DemoApp", "PayServer", "app rule"]),
        ])
    func transitiveViolation(adding: [String: [String]], says: [String]) async throws {
        let scratch = try Scratch()
        let outcome = try await Self.run(["--manifest", Self.manifest(in: scratch, adding: adding)])
        #expect(outcome.status == 1)
        #expect(outcome.says(says[0], says[1], says[2]), "\(outcome.output)")
    }

    @Test(
        "Each kind of direct violation fails the check",
        arguments: [
            ("TokenService", "PayServer", "layer rule"),
            ("Terminal", "Device", "party rule"),
            ("PayServer", "TokenService", "party rule"),
            ("TokenService", "OrchardStore", "domain rule"),
            ("Wallet", "COpenSSL", "C rule"),
            ("PayServer", "NetworkTestSupport", "test support rule"),
            ("PayAPI", "PayServer", "layer rule"),
        ])
    func violation(from: String, to: String, says: String) async throws {
        let scratch = try Scratch()
        let outcome = try await Self.run(["--manifest", Self.manifest(in: scratch, adding: [from: [to]])])
        #expect(outcome.status == 1)
        #expect(outcome.says(from, to, says), "\(outcome.output)")
    }

    @Test(
        "An import of a module the target does not declare fails, in every spelling",
        arguments: [
            "import COpenSSL", "internal import COpenSSL", "@_implementationOnly import COpenSSL",
            "@preconcurrency import COpenSSL", "  public import struct COpenSSL.EVP_MD", "@testable import COpenSSL",
        ])
    func undeclaredImport(line: String) async throws {
        let scratch = try Scratch()
        let manifest = try await Self.manifest(in: scratch)
        _ = try scratch.write("import CardBasics\n\(line)\nimport Foundation\n", to: "tree/Sources/Wallet/Wallet.swift")
        let outcome = try await Self.run([
            "--manifest", manifest, "--sources", scratch.url.appendingPathComponent("tree").path,
        ])
        #expect(outcome.status == 1)
        #expect(
            outcome.says("Sources/Wallet/Wallet.swift:2", "Wallet imports COpenSSL", "imports rule"),
            "\(outcome.output)")
        #expect(!outcome.says("CardBasics"), "a declared dependency is not reported: \(outcome.output)")
    }

    @Test func importsOfDeclaredAndToolchainModulesPass() async throws {
        let scratch = try Scratch()
        let manifest = try await Self.manifest(in: scratch)
        let source = """
            import CardBasics
            public import OrchardCrypto
            @preconcurrency import Dispatch
            #if canImport(Glibc)
                import Glibc
            #endif
            import Synchronization
            // import COpenSSL, in a comment, is no import
            let text = "import COpenSSL"
            """
        _ = try scratch.write(source, to: "tree/Sources/Wallet/Wallet.swift")
        let outcome = try await Self.run([
            "--manifest", manifest, "--sources", scratch.url.appendingPathComponent("tree").path,
        ])
        #expect(outcome.status == 0, "\(outcome.output)")
    }

    @Test func aDeclaredCModuleOutsideAWrapperFailsEvenWhenImported() async throws {
        let scratch = try Scratch()
        let manifest = try await Self.manifest(in: scratch, adding: ["Wallet": ["COpenSSL"]])
        _ = try scratch.write("import COpenSSL\n", to: "tree/Sources/Wallet/Wallet.swift")
        let outcome = try await Self.run([
            "--manifest", manifest, "--sources", scratch.url.appendingPathComponent("tree").path,
        ])
        #expect(outcome.status == 1)
        #expect(outcome.says("Wallet", "COpenSSL", "C rule"), "\(outcome.output)")
    }

    @Test func aTestDirectoryThatIsNoTargetFailsTheCheck() async throws {
        // The manifest without CardBasicsTests: its directory under Tests/ is then no target's.
        let scratch = try Scratch()
        let manifest = try await Self.manifest(in: scratch, removing: ["CardBasicsTests"])
        let outcome = try await Self.run(["--manifest", manifest, "--sources", Self.root.path])
        #expect(outcome.status == 1)
        #expect(outcome.says("Tests/CardBasicsTests", "directories rule"), "\(outcome.output)")
    }

    @Test func aDirectoryIsExcludedOnlyWithItsReason() async throws {
        let scratch = try Scratch()
        let manifest = try await Self.manifest(in: scratch)
        _ = try scratch.write("notes\n", to: "tree/Tests/Notes/README.md")
        let tree = scratch.url.appendingPathComponent("tree").path

        let unlisted = try await Self.run(["--manifest", manifest, "--sources", tree])
        #expect(unlisted.status == 1)
        #expect(unlisted.says("Tests/Notes", "directories rule"), "\(unlisted.output)")

        let withReason = try Self.layers(in: scratch) { $0["excluded"] = ["Tests/Notes": "the suite's notes, no code"] }
        let excluded = try await Self.run(["--manifest", manifest, "--layers", withReason, "--sources", tree])
        #expect(excluded.status == 0, "\(excluded.output)")

        let noReason = try Self.layers(in: scratch) { $0["excluded"] = ["Tests/Notes": " "] }
        let refused = try await Self.run(["--manifest", manifest, "--layers", noReason, "--sources", tree])
        #expect(refused.status == 1)
        #expect(refused.says("Tests/Notes", "directories rule"), "\(refused.output)")
    }

    @Test func aTargetWithoutALayerFailsTheCheck() async throws {
        let scratch = try Scratch()
        let outcome = try await Self.run(["--manifest", Self.manifest(in: scratch, extraTargets: ["SomethingNew"])])
        #expect(outcome.status == 1)
        #expect(outcome.says("SomethingNew: no entry in Sources/layers.json"), "\(outcome.output)")
    }

    @Test func aLayerOrFlagChangedInOneFileOnlyFailsTheMapRule() async throws {
        let scratch = try Scratch()
        let manifest = try await Self.manifest(in: scratch)
        // A bumped layer would let TokenService reach the Pay server; a wrapsC flag would let Wallet declare C.
        let bumped = try Self.layers(in: scratch) { layers in
            var targets = layers["targets"] as? [String: Any] ?? [:]
            targets["TokenService"] = ["layer": 5, "party": "network"]
            layers["targets"] = targets
        }
        let outcome = try await Self.run(["--manifest", manifest, "--layers", bumped])
        #expect(outcome.status == 1)
        #expect(outcome.says("TokenService", "map rule"), "\(outcome.output)")

        let flagged = try Self.layers(in: scratch) { layers in
            var targets = layers["targets"] as? [String: Any] ?? [:]
            targets["Wallet"] = ["layer": 4, "party": "device", "wrapsC": true]
            layers["targets"] = targets
        }
        let flaggedOutcome = try await Self.run(["--manifest", manifest, "--layers", flagged])
        #expect(flaggedOutcome.status == 1)
        #expect(flaggedOutcome.says("Wallet", "map rule"), "\(flaggedOutcome.output)")
        // Even with the map changed too, wrapsC needs a declared C module.
        #expect(
            flaggedOutcome.says("Wallet is marked wrapsC but declares no C module", "C rule"),
            "\(flaggedOutcome.output)")
    }
}
