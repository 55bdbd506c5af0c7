import CommandTestSupport
import Foundation
import Testing

@testable import OrchardCLI

/// Collects what a command writes, so tests can check the stdout/stderr contract.
final class Capture: @unchecked Sendable {
    private let lock = NSLock()
    private var out = ""
    private var err = ""
    var stdout: String { lock.withLock { out } }
    var stderr: String { lock.withLock { err } }
    var writeOut: @Sendable (String) -> Void { { text in self.lock.withLock { self.out += text } } }
    var writeErr: @Sendable (String) -> Void { { text in self.lock.withLock { self.err += text } } }

    func run(_ arguments: [String], environment: [String: String] = ["HOME": "/tmp/orchard-home"]) async -> Int32 {
        await CommandRunner.run(
            arguments, environment: environment, isInteractive: false, stdout: writeOut, stderr: writeErr)
    }
}

@Suite("Command runner")
struct RunnerTests {
    @Test func version() async {
        let capture = Capture()
        #expect(await capture.run(["--version"]) == 0)
        #expect(capture.stdout == "orchard \(orchardVersion)\n")
        #expect(capture.stderr.isEmpty)
    }

    @Test func unknownCommandIsAUsageError() async {
        let capture = Capture()
        #expect(await capture.run(["no-such-command"]) == 2)
        #expect(capture.stdout.isEmpty)
        #expect(capture.stderr.hasPrefix("error: unknown command 'no-such-command'"))
    }

    @Test func everyCommandHasHelp() async {
        func visit(_ command: Command, _ path: [String]) async {
            let capture = Capture()
            #expect(await capture.run(path + ["--help"]) == 0, "help of \(path)")
            #expect(capture.stdout.hasPrefix("usage: orchard"), "help of \(path)")
            for sub in command.subcommands { await visit(sub, path + [sub.name]) }
        }
        for group in CommandRegistry.groups { await visit(group, [group.name]) }
    }

    /// The demo's web rows: in headless Chromium (a Mac with Touch ID, then a Mac without it paying with the phone and
    /// with the watch, Handoff) when Chromium is installed (with CI=true it must be), else one without a browser (the
    /// phone).
    static var demoWebRows: [(channel: String, device: String)] {
        DemoWeb.locateChromium([:]) != nil || ProcessInfo.processInfo.environment["CI"] == "true"
            ? [("web", "demo-mac"), ("web-handoff", "demo-phone"), ("web-handoff", "demo-watch")]
            : [("web (no browser)", "demo-phone")]
    }

    @Test("orchard demo without Chromium on PATH: the web row without a browser, and how to install Chromium")
    func demoPrintsResultsOnStdoutAndTraceOnStderr() async throws {
        let capture = Capture()
        #expect(
            await capture.run(["demo"], environment: ["HOME": "/tmp/orchard-home", "PATH": "/nonexistent"]) == 0,
            "\(capture.stderr.suffix(3000))")
        let report = try JSONSerialization.jsonObject(with: Data(capture.stdout.utf8)) as? [String: Any]
        #expect(report?["failed"] as? Int == 0)
        #expect((report?["passed"] as? Int ?? 0) >= 10)
        #expect(capture.stderr.contains("known answers match"))
        #expect((report?["payments"] as? [[String: Any]])?.count == 4)
        #expect((report?["provisioning"] as? [[String: Any]])?.count == 2)
        #expect(!capture.stdout.contains("4111111111111111") && !capture.stderr.contains("4111111111111111"))
        let payments = report?["payments"] as? [[String: Any]]
        #expect(payments?.last?["channel"] as? String == "web (no browser)")
        #expect(capture.stderr.contains("Chromium was not found") && capture.stderr.contains("scripts/bootstrap"))
        #expect(capture.stderr.contains("no web-handoff rows"))
    }

    @Test func demoInitialisesAnEmptyDataDirectoryAndKeepsIt() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-demo-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let first = Capture()
        // Every service at debug level: the demo is the widest end-to-end run, and its logs are scanned (V2).
        #expect(
            await first.run(
                ["demo", "--data-dir", dir.path],
                environment: LogScan.debugLogEnvironment.merging(["HOME": "/tmp/orchard-home"]) { $1 }) == 0,
            "\(first.stderr)")
        #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("config.json").path))
        let second = Capture()
        #expect(await second.run(["demo", "--data-dir", dir.path]) == 0)
        #expect(second.stderr.contains("deployment ready"))
        #expect(!second.stderr.contains("initialising"))
        // Both runs paid in store with the phone and the watch, then in an app on the phone, then on the web (the
        // second run approves the kept Mac without Touch ID again); the rows are in DIR/demo-summary.json.
        let summary =
            try JSONSerialization.jsonObject(
                with: Data(contentsOf: dir.appendingPathComponent("demo-summary.json"))) as? [[String: String]]
        // The web rows: a Mac in headless Chromium, then a Mac without Touch ID paying with the phone and with the
        // watch (Chromium installed; required with CI=true), or the phone without a browser.
        let web = Self.demoWebRows
        #expect(summary?.map { $0["device"] ?? "" } == ["demo-phone", "demo-watch", "demo-phone"] + web.map(\.device))
        #expect(summary?.map { $0["channel"] ?? "" } == ["in-store", "in-store", "in-app"] + web.map(\.channel))
        #expect(summary?.allSatisfy { $0["result"] == "approved" && $0["responseCode"] == "00" } == true)
        #expect(summary?.allSatisfy { ($0["card"] ?? "").contains("******") } == true)
        // U4: the demo's Chromium is driven over its DevTools pipe, with no chromedriver (and so no port) at all.
        if web.contains(where: { $0.channel == "web" }) {
            #expect(first.stderr.contains("headless Chromium (DevTools over a pipe, no port)"))
            #expect(!first.stderr.contains("chromedriver"))
        }
        // No card number, DPAN, CVV, cryptogram, key or address in any party's log (the CVV by its field names: three
        // digits alone turn up in random identifiers); debug lines were written.
        let scanned = LogScan.expectCleanLogs(
            of: dir.path, secrets: LogScan.Secrets(texts: ["4111111111111111"]), requireDebug: true)
        #expect(scanned > 0)
        // A directory holding other files is refused, not overwritten.
        let occupied = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-occ-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: occupied, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: occupied) }
        try Data("x".utf8).write(to: occupied.appendingPathComponent("notes.txt"))
        let refused = Capture()
        #expect(await refused.run(["demo", "--data-dir", occupied.path]) == 1)
        #expect(refused.stderr.hasPrefix("== deployment ==\nerror:"))
    }

    @Test func dataDirectoryResolution() {
        let explicit = CommandContext(
            environment: ["ORCHARD_DATA_DIR": "/env", "HOME": "/home/u"], dataDirectory: "/flag",
            isInteractive: false, stdout: { _ in }, stderr: { _ in })
        #expect(explicit.dataDirectory.path == "/flag")
        let fromEnv = CommandContext(
            environment: ["ORCHARD_DATA_DIR": "/env", "HOME": "/home/u"], dataDirectory: nil, isInteractive: false,
            stdout: { _ in }, stderr: { _ in })
        #expect(fromEnv.dataDirectory.path == "/env")
        let fallback = CommandContext(
            environment: ["HOME": "/home/u"], dataDirectory: nil, isInteractive: false, stdout: { _ in },
            stderr: { _ in })
        #expect(fallback.dataDirectory.path == "/home/u/.orchard")
    }
}
