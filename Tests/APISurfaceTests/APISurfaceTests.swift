import CommandTestSupport
import Foundation
import Testing

/// `scripts/api-surface` and `scripts/check-doc-comments`, which CI runs on the four documented modules' symbol
/// graphs, refuse what they exist to refuse: fed symbol graphs in the format `swift symbolgraph-extract` writes,
/// the API check fails on a changed signature, an added or a removed symbol until it is recorded, and the
/// doc-comment check fails on a public symbol without a comment.
@Suite("API surface: an unrecorded change of the public API or an undocumented public symbol fails CI")
struct APISurfaceTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let modules = ["MerchantKit", "PaymentToken", "EMV", "OrchardCrypto"]

    struct Symbol {
        var path: [String]
        var declaration: String
        var documented = true
        var access = "public"
    }

    struct Outcome {
        let status: Int32
        let output: String
    }

    /// A directory of symbol graphs: `symbols` for MerchantKit, one documented function for each other module.
    func graphs(merchantKit symbols: [Symbol]) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("graphs-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for module in Self.modules {
            let members =
                module == "MerchantKit" ? symbols : [Symbol(path: ["f()"], declaration: "func f() -> \(module)")]
            let entries: [[String: Any]] = members.enumerated().map { index, symbol in
                var entry: [String: Any] = [
                    "kind": ["identifier": "swift.func", "displayName": "Function"],
                    "identifier": ["precise": "s:\(module)\(index)", "interfaceLanguage": "swift"],
                    "pathComponents": symbol.path,
                    "declarationFragments": [["kind": "text", "spelling": symbol.declaration]],
                    "accessLevel": symbol.access,
                    "location": ["uri": "file:///src/\(module).swift", "position": ["line": index, "character": 0]],
                ]
                if symbol.documented { entry["docComment"] = ["lines": [["text": "What it guarantees."]]] }
                return entry
            }
            let graph: [String: Any] = [
                "metadata": [:], "module": ["name": module], "symbols": entries, "relationships": [],
            ]
            try JSONSerialization.data(withJSONObject: graph).write(
                to: directory.appendingPathComponent("\(module).symbols.json"))
        }
        return directory
    }

    func run(_ script: String, _ arguments: [String]) async throws -> Outcome {
        let process = try ChildProcess(
            "/usr/bin/env", ["python3", Self.root.appendingPathComponent("scripts/\(script)").path] + arguments,
            stdout: .capture)
        let ended = await process.exit()
        return Outcome(status: ended.status ?? -1, output: process.stdout)
    }

    static let recorded = [
        Symbol(path: ["decrypt(_:)"], declaration: "func decrypt(_ token: PaymentToken) throws -> Result"),
        Symbol(path: ["Result"], declaration: "struct Result"),
    ]

    @Test(
        "A change of the public API fails the check until it is recorded",
        arguments: [
            (
                "a changed signature",
                [
                    Symbol(
                        path: ["decrypt(_:)"], declaration: "func decrypt(_ token: PaymentToken) async throws -> Result"
                    ),
                    Symbol(path: ["Result"], declaration: "struct Result"),
                ]
            ),
            ("a removed symbol", [Symbol(path: ["Result"], declaration: "struct Result")]),
            ("an added symbol", recorded + [Symbol(path: ["verify(_:)"], declaration: "func verify(_ token: Token)")]),
        ])
    func unrecordedChange(change: String, symbols: [Symbol]) async throws {
        let api = FileManager.default.temporaryDirectory.appendingPathComponent("api-\(UUID())")
        let before = try graphs(merchantKit: Self.recorded)
        let after = try graphs(merchantKit: symbols)
        defer { for url in [api, before, after] { try? FileManager.default.removeItem(at: url) } }

        let record = try await run("api-surface", ["--record", "--graphs", before.path, "--api-dir", api.path])
        #expect(record.status == 0, "\(record.output)")
        let unchanged = try await run("api-surface", ["--graphs", before.path, "--api-dir", api.path])
        #expect(unchanged.status == 0, "\(unchanged.output)")

        let changed = try await run("api-surface", ["--graphs", after.path, "--api-dir", api.path])
        #expect(changed.status == 1, "\(change): \(changed.output)")
        #expect(changed.output.contains("--- api/MerchantKit.txt (recorded)"), "\(changed.output)")
        #expect(changed.output.contains("scripts/api-surface --record"), "\(changed.output)")
        #expect(!changed.output.contains("api/EMV.txt"), "only the changed module is listed: \(changed.output)")

        let rerecord = try await run("api-surface", ["--record", "--graphs", after.path, "--api-dir", api.path])
        #expect(rerecord.status == 0, "\(rerecord.output)")
        let accepted = try await run("api-surface", ["--graphs", after.path, "--api-dir", api.path])
        #expect(accepted.status == 0, "\(change), once recorded: \(accepted.output)")
    }

    @Test func aChangedSignatureShowsBothDeclarations() async throws {
        let api = FileManager.default.temporaryDirectory.appendingPathComponent("api-\(UUID())")
        let before = try graphs(merchantKit: Self.recorded)
        let after = try graphs(merchantKit: [
            Symbol(path: ["decrypt(_:)"], declaration: "func decrypt(_ token: PaymentToken) async throws -> Result"),
            Symbol(path: ["Result"], declaration: "struct Result"),
        ])
        defer { for url in [api, before, after] { try? FileManager.default.removeItem(at: url) } }
        _ = try await run("api-surface", ["--record", "--graphs", before.path, "--api-dir", api.path])
        let changed = try await run("api-surface", ["--graphs", after.path, "--api-dir", api.path])
        #expect(changed.output.contains("-decrypt(_:) [func] func decrypt(_ token: PaymentToken) throws -> Result"))
        #expect(
            changed.output.contains("+decrypt(_:) [func] func decrypt(_ token: PaymentToken) async throws -> Result"))
    }

    @Test func anInternalSymbolIsNotPartOfTheSurface() async throws {
        let api = FileManager.default.temporaryDirectory.appendingPathComponent("api-\(UUID())")
        let before = try graphs(merchantKit: Self.recorded)
        let after = try graphs(
            merchantKit: Self.recorded + [Symbol(path: ["helper()"], declaration: "func helper()", access: "internal")])
        defer { for url in [api, before, after] { try? FileManager.default.removeItem(at: url) } }
        _ = try await run("api-surface", ["--record", "--graphs", before.path, "--api-dir", api.path])
        let outcome = try await run("api-surface", ["--graphs", after.path, "--api-dir", api.path])
        #expect(outcome.status == 0, "\(outcome.output)")
    }

    @Test func anUndocumentedPublicSymbolFailsTheDocCheck() async throws {
        let documented = try graphs(merchantKit: Self.recorded)
        let undocumented = try graphs(merchantKit: [
            Symbol(path: ["decrypt(_:)"], declaration: "func decrypt(_ token: PaymentToken) throws -> Result"),
            Symbol(path: ["Result"], declaration: "struct Result", documented: false),
            Symbol(path: ["helper()"], declaration: "func helper()", documented: false, access: "internal"),
        ])
        defer { for url in [documented, undocumented] { try? FileManager.default.removeItem(at: url) } }

        let passing = try await run("check-doc-comments", ["--graphs", documented.path])
        #expect(passing.status == 0, "\(passing.output)")
        let failing = try await run("check-doc-comments", ["--graphs", undocumented.path])
        #expect(failing.status == 1)
        #expect(failing.output.contains("MerchantKit.Result (function) has no doc comment"), "\(failing.output)")
        #expect(!failing.output.contains("helper"), "internal symbols need no comment: \(failing.output)")
        #expect(failing.output.contains("1 of "), "\(failing.output)")
    }
}
