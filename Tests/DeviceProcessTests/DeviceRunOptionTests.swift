import CommandTestSupport
import Device
import DeviceProcess
import Foundation
import OrchardRuntime
import Testing

/// `orchard device run` checks its options before it starts anything: a bad value is one usage error and leaves
/// no socket, no antenna and no run record behind.
@Suite("orchard device run: options checked before any side effect", .serialized)
struct DeviceRunOptionTests {
    /// Runs `orchard arguments`, killed after `seconds` (a device process that started would never end by itself):
    /// returns (exit status, stdout, stderr, whether it was killed).
    static func bounded(_ arguments: [String], seconds: Double = 30) async throws -> (Int32, String, String, Bool) {
        let process = try ChildProcess(try orchardExecutable(), arguments, stdout: .capture, stderr: .capture)
        let deadline = ContinuousClock.now + .seconds(seconds)
        while process.isRunning, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(25)) }
        let killed = process.isRunning
        if killed { process.terminate() }
        let ended = await process.exit()
        return (ended.status ?? -1, process.stdout, process.stderr, killed)
    }

    @Test(
        "A bad value exits 2 with one error line and starts nothing",
        arguments: [
            (["--sync-interval", "0"], "--sync-interval takes a whole number of seconds from 1 to 3600"),
            (["--sync-interval", "3601"], "--sync-interval takes a whole number of seconds from 1 to 3600"),
            (["--sheet-timeout", "soon"], "--sheet-timeout takes a whole number of seconds from 1 to 3600"),
            (["--auto-auth", "retina"], "--auto-auth takes face-id, touch-id, passcode or double-click"),
            (["--auto-auth", "double-click,passcode:8642"], "--auto-auth passcode:CODE is refused"),
            (["--sync-interval", "5", "--sync-interval", "6"], "--sync-interval may be given only once"),
        ])
    func badValueStartsNothing(options: [String], message: String) async throws {
        let directory = try TemporaryDirectory()
        let made = try await orchard([
            "device", "create", "--data-dir", directory.path, "--name", "p", "--kind", "phone", "--biometry", "face",
        ])
        #expect(made.status == 0, "\(made.stderr)")
        let before = try FileManager.default.subpathsOfDirectory(atPath: directory.path).sorted()

        let (status, stdout, stderr, killed) = try await Self.bounded(
            ["device", "run", "--data-dir", directory.path, "--name", "p"] + options)
        #expect(!killed, "the device process started")
        #expect(status == 2)
        #expect(stdout.isEmpty, "it announced something: \(stdout)")
        let errors = stderr.split(separator: "\n").filter { $0.hasPrefix("error:") }
        #expect(errors.count == 1, "\(stderr)")
        #expect(errors.first?.hasPrefix("error: \(message)") == true, "\(stderr)")
        // Nothing was made: no control socket, no antenna, no run record, no other file.
        let deployment = directory.deployment
        #expect(!FileManager.default.fileExists(atPath: Device.controlSocketPath(of: "p", in: deployment)))
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/devices/p/nfc.sock"))
        let records = (try? FileManager.default.contentsOfDirectory(atPath: directory.path + "/run")) ?? []
        #expect(records.isEmpty, "run records: \(records)")
        #expect(try FileManager.default.subpathsOfDirectory(atPath: directory.path).sorted() == before)
    }

    @Test("Options are checked before the device is looked up")
    func optionsBeforeTheDevice() async throws {
        let directory = try TemporaryDirectory()
        let (status, _, stderr, killed) = try await Self.bounded(
            ["device", "run", "--data-dir", directory.path, "--name", "absent", "--sync-interval", "0"])
        #expect(!killed)
        #expect(status == 2)
        #expect(stderr.hasPrefix("error: --sync-interval takes a whole number of seconds from 1 to 3600"))
    }

    @Test("The configuration refuses durations out of range")
    func configurationRefusesOutOfRange() {
        let deployment = DeploymentDirectory(path: "/tmp/unused")
        for (sheet, sync) in [(0, 5), (120, 0), (3601, 5), (120, 3601)] {
            #expect(throws: DeviceError.self) {
                try DeviceProcessConfiguration(
                    deployment: deployment, name: "p", sheetTimeout: .seconds(sheet), syncInterval: .seconds(sync))
            }
        }
        #expect(throws: Never.self) {
            try DeviceProcessConfiguration(
                deployment: deployment, name: "p", sheetTimeout: .seconds(1), syncInterval: .seconds(3600))
        }
    }
}
