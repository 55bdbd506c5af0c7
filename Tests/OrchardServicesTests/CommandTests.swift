import Foundation
import OrchardCLI
import OrchardRuntime
import Testing

/// The deployment commands' usage through the command runner (in process, nothing started).
@Suite("orchard init, serve, up: usage")
struct CommandTests {
    final class Capture: @unchecked Sendable {
        private let lock = NSLock()
        private var out = ""
        private var err = ""
        var stdout: String { lock.withLock { out } }
        var stderr: String { lock.withLock { err } }

        func run(_ arguments: [String]) async -> Int32 {
            await CommandRunner.run(
                arguments, environment: ["HOME": "/nonexistent"], isInteractive: false,
                stdout: { text in self.lock.withLock { self.out += text } },
                stderr: { text in self.lock.withLock { self.err += text } })
        }
    }

    @Test(arguments: [
        ["init", "--base-port", "0"], ["init", "--base-port", "http"], ["init", "--force=yes"], ["serve"],
        ["serve", "bank"], ["serve", "pay", "merchant"], ["up", "pay"],
    ])
    func usageErrorsExit2(arguments: [String]) async throws {
        let temporary = try TemporaryDirectory()
        let capture = Capture()
        let code = await capture.run(arguments + ["--data-dir", temporary.child("d")])
        #expect(code == 2, "\(capture.stderr)")
        #expect(capture.stderr.hasPrefix("error: "))
        #expect(capture.stdout.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: temporary.child("d")))
    }

    @Test func helpNamesTheOptions() async {
        let capture = Capture()
        #expect(await capture.run(["init", "--help"]) == 0)
        #expect(capture.stdout.contains("--force"))
        #expect(capture.stdout.contains("--base-port N"))
        #expect(capture.stdout.contains("--data-dir DIR"))
    }

    @Test func upRefusesADirectoryWithOtherFiles() async throws {
        let temporary = try TemporaryDirectory()
        let directory = temporary.child("d")
        try SecureFile.createDirectory(directory)
        try SecureFile.write(Array("x".utf8), to: directory + "/other.txt", mode: 0o600)
        let capture = Capture()
        #expect(await capture.run(["up", "--data-dir", directory]) == 1)
        #expect(capture.stderr.contains("no deployment"))
        #expect(!FileManager.default.fileExists(atPath: directory + "/config.json"))
    }
}
