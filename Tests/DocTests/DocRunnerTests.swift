import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The parser and the runner on sample Markdown: each check fails on what it must refuse.
@Suite("Doc runner: the parser, the runner and the output comparison")
struct DocRunnerTests {
    static let fence = "```"

    func parse(_ text: String) throws(DocFormatError) -> [DocBlock] {
        try MarkdownBlocks.parse(text, file: "sample.md")
    }

    func run(_ text: String, environment: [String: String] = [:]) async throws -> DocRunReport {
        try await DocRunner(binDirectory: "/nonexistent", environment: environment).run(parse(text))
    }

    @Test("a fence without a tag is refused, naming file:line")
    func untagged() throws {
        let text = "# T\n\n\(Self.fence)\necho hi\n\(Self.fence)\n"
        #expect(throws: DocFormatError(location: "sample.md:3", message: MarkdownBlocks.untaggedMessage)) {
            try parse(text)
        }
        let tagged = try parse("# T\n\n\(Self.fence)sh\necho hi\n\(Self.fence)\n")
        #expect(tagged == [DocBlock(file: "sample.md", line: 3, tag: "sh", body: "echo hi", marker: RunMarker())])
    }

    @Test("an unknown tag, an unclosed fence and a skip without its reason are refused")
    func malformed() {
        #expect(throws: DocFormatError.self) { try parse("\(Self.fence)bash\nls\n\(Self.fence)\n") }
        #expect(throws: DocFormatError.self) { try parse("\(Self.fence)sh\nls\n") }
        #expect(throws: DocFormatError.self) { try parse("<!-- run: skip -->\n\(Self.fence)sh\nls\n\(Self.fence)\n") }
        #expect(throws: DocFormatError.self) {
            try parse("<!-- run: skip (x) -->\nprose\n\(Self.fence)sh\nls\n\(Self.fence)\n")
        }
        #expect(throws: DocFormatError.self) { try parse("<!-- run: later -->\n\(Self.fence)sh\nls\n\(Self.fence)\n") }
        #expect(throws: DocFormatError.self) {
            try parse("<!-- run: skip (x) -->\n\(Self.fence)json\n{}\n\(Self.fence)\n")
        }
    }

    @Test("run markers apply to the next fence; an indented fence loses its indentation")
    func markers() throws {
        let text = """
            <!-- run: background -->
            <!-- run: timeout 5 -->
            \(Self.fence)sh
            serve
            \(Self.fence)

            1. a list item:
               \(Self.fence)json
               {"a": 1}
               \(Self.fence)
            """
        let blocks = try parse(text)
        #expect(blocks.map(\.marker) == [RunMarker(skip: nil, background: true, timeout: 5), RunMarker()])
        #expect(blocks.map(\.line) == [3, 8])
        #expect(blocks[1].body == #"{"a": 1}"#)
    }

    @Test("DIR is replaced as a word only")
    func placeholders() {
        #expect(
            DocRunner.substitute("ls DIR/pki DIR2 $ORCHARD_DATA_DIR --data-dir DIR", directory: "/d")
                == "ls /d/pki DIR2 $ORCHARD_DATA_DIR --data-dir /d")
    }

    @Test("a failing block is reported with its file:line and stderr, and stops nothing after it")
    func failure() async throws {
        let text = """
            \(Self.fence)sh
            echo fine
            \(Self.fence)

            \(Self.fence)sh
            echo "no such file" >&2
            false
            echo never
            \(Self.fence)
            """
        let report = try await run(text)
        #expect(report.ran == ["sample.md:1", "sample.md:5"])
        #expect(report.failures.count == 1)
        #expect(report.failures.first?.location == "sample.md:5")
        #expect(report.failures.first?.stderr.contains("no such file") == true)
        #expect(report.failures.first?.description.contains("sample.md:5: exited 1") == true)
    }

    @Test("pipefail: a failure inside a pipeline fails the block")
    func pipefail() async throws {
        let report = try await run("\(Self.fence)sh\nfalse | cat\n\(Self.fence)\n")
        #expect(report.failures.map(\.location) == ["sample.md:1"])
    }

    @Test("an output block is compared with the sh block's stdout, normalized; a mismatch is reported")
    func output() async throws {
        let matching = """
            \(Self.fence)sh
            echo '{"port": 61234, "id": "3F2504E0-4F89-41D3-9A0C-0305E82C3301", "at": "2026-12-04T21:00:00Z"}'
            echo "listening on 127.0.0.1:61234, key 00A1B2C3D4E5F607"
            echo "ignored on stderr" >&2
            \(Self.fence)

            \(Self.fence)output
            {"port": 8441, "id": "9B1DEB4D-3B7D-4BAD-9BDD-2B0D7B3DCB6D", "at": "2025-01-01T00:00:00.123Z"}
            listening on 127.0.0.1:8441, key …
            \(Self.fence)
            """
        #expect(try await run(matching).failures.isEmpty)

        let different = matching.replacingOccurrences(of: "echo \"listening on", with: "echo \"serving on")
        let report = try await run(different)
        #expect(report.failures.map(\.location) == ["sample.md:7"])
        #expect(report.failures.first?.message.contains("serving on 127.0.0.1:<port>") == true)

        let longer = try await run(
            "\(Self.fence)sh\necho a; echo b\n\(Self.fence)\n\(Self.fence)output\na\n\(Self.fence)\n")
        #expect(longer.failures.count == 1)
        #expect(try await run("\(Self.fence)output\na\n\(Self.fence)\n").failures.count == 1)
    }

    @Test("the normalization keeps what is not an identifier")
    func normalization() {
        #expect(OutputMatch.normalize("total 9.99 USD, 3 items") == "total 9.99 USD, 3 items")
        #expect(OutputMatch.normalize("serial 1A2B3C4D5E6F") == "serial <hex>")
        #expect(OutputMatch.normalize("created 1796141715987 ms") == "created <time> ms")
        #expect(OutputMatch.mismatch(expected: "a … c", actual: "a b c") == nil)
        #expect(OutputMatch.mismatch(expected: "a … c", actual: "a b d") != nil)
    }

    @Test("skipped blocks are counted with their reason, and never run")
    func skipped() async throws {
        let text = "<!-- run: skip (needs a display) -->\n\(Self.fence)sh\nexit 1\n\(Self.fence)\n"
        let report = try await run(text)
        #expect(report.failures.isEmpty)
        #expect(report.ran.isEmpty)
        #expect(report.skipped.map(\.reason) == ["needs a display"])
    }

    @Test("a background block is ready at its first line, runs beside the next blocks, and ends with the file")
    func background() async throws {
        let pidFile = FileManager.default.temporaryDirectory.appendingPathComponent("doc-bg-\(UUID()).pid").path
        defer { try? FileManager.default.removeItem(atPath: pidFile) }
        let text = """
            <!-- run: background -->
            \(Self.fence)sh
            echo $$ > \(pidFile); echo ready; exec sleep 300
            \(Self.fence)

            \(Self.fence)sh
            kill -0 "$(cat \(pidFile))"
            \(Self.fence)
            """
        let report = try await run(text)
        #expect(report.failures.isEmpty, "\(report.failures)")
        let pid = Int32(
            try String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines))!
        #expect(kill(pid, 0) != 0, "the background block still runs after its file")

        let silent = try await run(
            "<!-- run: background -->\n<!-- run: timeout 1 -->\n\(Self.fence)sh\nexec sleep 30\n\(Self.fence)\n")
        #expect(silent.failures.first?.message.contains("printed no line") == true)
    }

    @Test("a block past its timeout is ended and fails")
    func timeout() async throws {
        let report = try await run("<!-- run: timeout 1 -->\n\(Self.fence)sh\nsleep 30\n\(Self.fence)\n")
        #expect(report.failures.first?.message.contains("still running after 1 s") == true)
    }

    @Test("each block is a shell of its own in the file's working directory; DIR is the file's deployment")
    func sharedDirectory() async throws {
        let text = """
            \(Self.fence)sh
            mkdir DIR && echo kept > DIR/note
            \(Self.fence)

            \(Self.fence)sh
            test "$(cat DIR/note)" = kept && test "$(basename "$PWD")" = work && test -z "${ORCHARD_PASSCODE:-}"
            \(Self.fence)
            """
        #expect(try await run(text, environment: ["ORCHARD_PASSCODE": "1"]).failures.isEmpty == false)
        #expect(try await run(text).failures.isEmpty)
    }

    @Test("a missing tool skips its block, or fails it when CI=true")
    func missingTool() async throws {
        let text = "\(Self.fence)sh\njq .port DIR/run/pay.json\n\(Self.fence)\n"
        // Outside CI (whatever this test run has: CI is set here as the run would).
        let local = try await run(text, environment: ["PATH": "/nonexistent", "CI": "false"])
        #expect(local.failures.isEmpty)
        #expect(local.skipped.map(\.reason) == ["jq is not installed"])
        let ci = try await run(text, environment: ["PATH": "/nonexistent", "CI": "true"])
        #expect(ci.failures.first?.message.contains("`jq` is not installed") == true)
    }
}
