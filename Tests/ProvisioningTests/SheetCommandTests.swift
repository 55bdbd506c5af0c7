import CommandTestSupport
import Device
import DeviceControlAPI
import DeviceProcess
import Foundation
import OrchardRuntime
import Testing

/// `orchard device run` as a child process, its log in a file (the services it starts for a sheet may log more than
/// a pipe holds).
final class DeviceProcessChild: Sendable {
    let process: ChildProcess
    let log: String
    let socket: String

    init(dataDirectory: String, name: String, options: [String] = []) async throws {
        log = dataDirectory + "/device-run-\(UUID().uuidString).log"
        process = try ChildProcess(
            try orchardExecutable(), ["device", "run", "--data-dir", dataDirectory, "--name", name] + options,
            stdout: .file(log), stderr: .file(log))
        socket = Device.controlSocketPath(of: name, in: DeploymentDirectory(path: dataDirectory))
        // A loop that stops once it listens: `for … where` would go on probing the socket (connect and close)
        // on every remaining iteration without the sleep, a burst that filled the device's 32 connections.
        var attempts = 0
        while !ControlSocketClient.isRunning(at: socket), attempts < 400 {
            attempts += 1
            try await Task.sleep(for: .milliseconds(25))
        }
    }

    /// SIGTERM, then waits for the exit; returns its exit status.
    func stop() async throws -> Int32 {
        process.terminate()
        let ended = await process.exit()
        return ended.status ?? -1
    }

    var output: String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }

    /// Waits (bounded) until an app's sheet waits for the user, and returns `GET /payment-sheets/current`.
    func sheetWaitingForUser() async throws -> PaymentSheetStatusAnswer? {
        for _ in 0..<1200 {
            // 404 until the app presented its sheet.
            if case .success(let answer) = await ControlSocketClient.send(GetPaymentSheet(), to: socket),
                answer.sheet?.waitingFor == "user"
            {
                return answer
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("no sheet waited for the user")
        return nil
    }
}

/// The payment sheet across processes, as a user runs it: `orchard device run` owns the device, `orchard app buy`
/// presents its sheet over the device's control socket, and the user acts with `orchard device sheet ...`.
@Suite("orchard app buy with the device's process running", .serialized)
struct SheetCommandTests {
    @Test("Attended: the user gives a contact and authenticates with `device sheet`; unattended with --auto-auth")
    func attendedAndAutomatic() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-sheet-\(UUID().uuidString)")
            .path
        defer {
            LogScan.expectCleanLogs(of: path)  // V2
            try? FileManager.default.removeItem(atPath: path)
        }
        #expect(try await orchard(["init", "--data-dir", path]).status == 0)
        // demo-phone with the approve card, bought in process (no device process yet).
        let first = try await orchard(["app", "buy", "--data-dir", path, "--item", "Coffee", "--amount", "9.99"])
        #expect(first.status == 0, "\(first.stderr)")
        // A sheet lives only in a running device process.
        let none = try await orchard(["device", "sheet", "show", "--data-dir", path, "--name", "demo-phone"])
        #expect(none.status == 1 && none.stdout.isEmpty && none.stderr.contains("not running"), "\(none.stderr)")

        let attended = try await DeviceProcessChild(dataDirectory: path, name: "demo-phone")
        let buying = Task {
            try await orchard([
                "app", "buy", "--data-dir", path, "--device", "demo-phone", "--item", "Tea", "--amount", "4.50",
            ])
        }
        let shown = try await attended.sheetWaitingForUser()
        #expect(shown?.sheet?.total == "4.50")
        let show = try await orchard(["device", "sheet", "show", "--data-dir", path, "--name", "demo-phone"])
        #expect(show.status == 0 && show.stdout.contains("\"Tea\""), "\(show.stderr)")
        let early = try await orchard([
            "device", "sheet", "authenticate", "--data-dir", path, "--name", "demo-phone", "--method", "face-id",
        ])
        #expect(early.status == 1 && early.stderr.contains("invalidAction"), "\(early.stderr)")
        // The contact command's own checks: an address is whole, a role is shipping or billing.
        for partial in [["--city", "Springfield"], ["--contact-name", "Bob", "--role", "gift"], []] {
            let refused = try await orchard(
                ["device", "sheet", "contact", "--data-dir", path, "--name", "demo-phone"] + partial)
            #expect(refused.status != 0 && refused.stderr.contains("error: "), "\(refused.stderr)")
        }
        let contact = try await orchard([
            "device", "sheet", "contact", "--data-dir", path, "--name", "demo-phone", "--contact-name", "Bob Appleseed",
            "--street", "2 Main St", "--city", "Springfield", "--state", "IL", "--postal-code", "62701", "--country",
            "US",
        ])
        #expect(contact.status == 0, "\(contact.stderr)")
        let authenticated = try await orchard([
            "device", "sheet", "authenticate", "--data-dir", path, "--name", "demo-phone", "--method", "face-id",
        ])
        #expect(authenticated.status == 0 && authenticated.stdout.contains("\"completed\""), "\(authenticated.stderr)")
        let bought = try await buying.value
        #expect(bought.status == 0, "\(bought.stderr)\n\(attended.output)")
        #expect(bought.stderr.contains("waits for the user on the device's control API"))
        let result = try JSONSerialization.jsonObject(with: Data(bought.stdout.utf8)) as? [String: Any]
        #expect(result?["outcome"] as? String == "approved" && result?["amount"] as? String == "4.50 USD")
        #expect(!bought.stdout.contains("4111111111111111") && !attended.output.contains("4111111111111111"))
        #expect(try await attended.stop() == 0)
        #expect(attended.output.contains(#""event":"sheet-presented""#), "\(attended.output)")
        #expect(attended.output.contains(#""detail":"success","event":"sheet-ended""#), "\(attended.output)")

        let unattended = try await DeviceProcessChild(
            dataDirectory: path, name: "demo-phone", options: ["--auto-auth", "face-id"])
        let automatic = try await orchard([
            "app", "buy", "--data-dir", path, "--device", "demo-phone", "--item", "Scone", "--amount", "3.25",
        ])
        #expect(automatic.status == 0, "\(automatic.stderr)\n\(unattended.output)")
        #expect(automatic.stderr.contains("--auto-auth"))
        let answer = try JSONSerialization.jsonObject(with: Data(automatic.stdout.utf8)) as? [String: Any]
        #expect(answer?["outcome"] as? String == "approved" && answer?["amount"] as? String == "3.25 USD")
        #expect(try await unattended.stop() == 0)
    }
}
