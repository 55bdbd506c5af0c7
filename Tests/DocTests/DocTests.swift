import CommandTestSupport
import Foundation
import Testing

/// The package's README.md and docs/*.md, read from the package root.
enum Docs {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// README.md and every docs/*.md, as paths relative to the root.
    static let files: [String] = {
        let docs =
            (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("docs").path)) ?? []
        return ["README.md"] + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/\($0)" }
    }()

    static func text(_ file: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
    }

    static func blocks(_ file: String) throws -> [DocBlock] {
        try MarkdownBlocks.parse(try text(file), file: file)
    }
}

@Suite("Docs: every fenced block of README.md and docs/*.md is tagged")
struct DocTagTests {
    @Test("the file's fences are tagged, closed and their run markers well-formed", arguments: Docs.files)
    func tagged(file: String) throws {
        #expect(throws: Never.self) { _ = try Docs.blocks(file) }
    }

    @Test("the docs are found: README.md and the docs/ files")
    func found() {
        #expect(Docs.files.first == "README.md")
        #expect(Docs.files.contains("docs/deployment.md"))
    }
}

/// Each file's `sh` blocks in a deployment of its own, one file after the other (the deployments start servers).
@Suite("Docs: every sh block runs as printed", .serialized)
struct DocRunTests {
    @Test("its sh blocks run in order and print what its output blocks show", arguments: Docs.files)
    func runs(file: String) async throws {
        let blocks = try Docs.blocks(file)
        guard blocks.contains(where: { $0.tag == "sh" }) else { return }
        let binDirectory = URL(fileURLWithPath: try orchardExecutable()).deletingLastPathComponent().path
        let report = await DocRunner(binDirectory: binDirectory).run(blocks)
        let slowest = report.seconds.sorted { $0.seconds > $1.seconds }.prefix(3)
            .map { "\($0.location) \(String(format: "%.1f", $0.seconds)) s" }
        print(
            "\(file): \(report.ran.count) sh block(s) run, \(report.skipped.count) skipped"
                + (slowest.isEmpty ? "" : "; slowest: " + slowest.joined(separator: ", ")))
        for skip in report.skipped { print("  skipped \(skip.location): \(skip.reason)") }
        for failure in report.failures { Issue.record("\(failure)") }
    }
}
