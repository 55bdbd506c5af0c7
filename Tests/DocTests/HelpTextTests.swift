import CommandTestSupport
import Foundation
import Testing

@testable import OrchardCLI

/// The `--help` texts and the docs' command lines against the command tree and the deployment `init` writes.
@Suite("Help texts and usage blocks: every path and option they name exists")
struct HelpTextTests {
    /// The files and folders a fresh `orchard init` writes, relative to its directory.
    static func writtenByInit() async throws -> Set<String> {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-help-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let result = try await orchard(["init", "--data-dir", directory])
        try #require(result.status == 0, "orchard init: \(result.stderr)")
        let enumerator = FileManager.default.enumerator(atPath: directory)
        var paths: Set<String> = []
        while let next = enumerator?.nextObject() as? String { paths.insert(next) }
        return paths
    }

    /// ``writtenByInit()`` once for the suite.
    static let written = Task { try await writtenByInit() }

    static func layout() throws -> [CommandLineCheck.LayoutEntry] {
        CommandLineCheck.documentedLayout(try Docs.text("docs/deployment.md"))
    }

    @Test("every command's --help names only paths init writes or docs/deployment.md lists, and its own options")
    func helpTexts() async throws {
        let written = try await Self.written.value
        #expect(written.contains("pki/root/root-ca.pem"))
        let layout = try Self.layout()
        let commands = CommandLineCheck.walk()
        #expect(commands.count > 50)
        for command in commands {
            for problem in CommandLineCheck.helpProblems(command, written: written, layout: layout) {
                Issue.record("\(problem)")
            }
        }
    }

    @Test("a --help naming a path init does not write, or an option its command does not take, is caught")
    func helpNegative() throws {
        let written: Set<String> = [
            "pki", "pki/root", "pki/merchant", "pki/root/root-ca.pem", "pki/merchant/merchant-identity.pem",
        ]
        let layout = try Self.layout()
        let option = Option.flag("json", help: "Print JSON.")
        func problems(_ discussion: String) -> [String] {
            let command = Command(name: "probe", summary: "A probe.", discussion: discussion, options: [option]) {
                _, _ in
            }
            return CommandLineCheck.helpProblems(
                .init(path: ["probe"], command: command), written: written, layout: layout)
        }
        #expect(problems("Reads DIR/pki/root/root-ca.pem and writes run/<service>.json; --json prints JSON.").isEmpty)
        #expect(problems("The root is DIR/pki/root-ca.pem.").count == 1)
        #expect(problems("Reads pki/merchant/merchant-identity.pem|.key.").count == 1)
        #expect(problems("With --verbose it says more.").count == 1)
        #expect(problems("As `device run --auto-auth face-id` does.").isEmpty)
        // The same check of the docs' prose: a stale or misspelt path fails, a documented runtime file passes.
        #expect(!CommandLineCheck.isKnown("pki/token-root.pem", written: written, layout: layout))
        #expect(!CommandLineCheck.isKnown("pki/merchant/merchant-identty.pem", written: written, layout: layout))
        #expect(CommandLineCheck.isKnown("run/pay.json", written: written, layout: layout))
        #expect(CommandLineCheck.isKnown("devices/phone/control.sock", written: written, layout: layout))
        #expect(
            CommandLineCheck.deploymentPaths(in: "`DIR/devices/NAME/client.pem|key`") == [
                "devices/NAME/client.pem", "devices/NAME/client.key",
            ])
    }

    @Test("the file names only deployment paths init writes or docs/deployment.md lists", arguments: Docs.files)
    func docPaths(file: String) async throws {
        let written = try await Self.written.value
        let layout = try Self.layout()
        let lines = try Docs.text(file).split(separator: "\n", omittingEmptySubsequences: false)
        for (number, line) in lines.enumerated() {
            for path in CommandLineCheck.deploymentPaths(in: String(line))
            where !CommandLineCheck.isKnown(path, written: written, layout: layout) {
                Issue.record(
                    "\(file):\(number + 1) names \(path), which `orchard init` does not write and docs/deployment.md does not list"
                )
            }
        }
    }

    @Test("the usage and sh blocks of the file name existing commands and their options", arguments: Docs.files)
    func usageBlocks(file: String) throws {
        for block in try Docs.blocks(file) where block.tag == "usage" || block.tag == "sh" {
            for problem in CommandLineCheck.problems(inBlock: block.body, strict: block.tag == "usage") {
                Issue.record("\(block.location): \(problem)")
            }
        }
    }

    @Test("a usage block naming an unknown command or option is caught")
    func usageNegative() {
        #expect(CommandLineCheck.problems(inBlock: "orchard status --data-dir DIR", strict: true).isEmpty)
        #expect(
            CommandLineCheck.problems(
                inBlock: "orchard device add-card --data-dir DIR --name NAME \\\n    --expiry MM/YY   # --pan refused",
                strict: true
            ).isEmpty)
        #expect(CommandLineCheck.problems(inBlock: "orchard status --colour", strict: true).count == 1)
        #expect(CommandLineCheck.problems(inBlock: "orchard stattus --data-dir DIR", strict: true).count == 1)
        #expect(CommandLineCheck.problems(inBlock: "cd /tmp/orchard && ls", strict: false).isEmpty)
        #expect(
            CommandLineCheck.problems(inBlock: "echo 1 | orchard device resume --name p --passcode 1", strict: false)
                .count == 1)
    }
}
