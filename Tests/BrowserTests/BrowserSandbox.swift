import CommandTestSupport
import Foundation
import Testing
import WebDriverClient

#if canImport(Glibc)
    import Glibc
#endif

/// Debian's Chromium, chromedriver and certutil (scripts/bootstrap installs them).
enum Chromium {
    static let binary = WebDriverClient.Chromium.binary
    static let driver = WebDriverClient.Chromium.driver
    static let certutil = "/usr/bin/certutil"
    static var installed: Bool {
        [binary, driver, certutil].allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }
    }
    /// With CI=true a missing Chromium fails the run; elsewhere the browser tests are skipped.
    static var required: Bool { ProcessInfo.processInfo.environment["CI"] == "true" }
    static let hint: Comment =
        "Chromium is not installed: run scripts/bootstrap (apt-get install chromium chromium-driver libnss3-tools)"
}

/// A deployment for the browser tests: `orchard up`, devices with the issuer's approve card, their `orchard device
/// run` (each with its browser agent), chromedriver, and one Chromium session per device (set up as `orchard
/// browser setup` says), shared by the suite.
final class BrowserSandbox: Sendable {
    /// The device the tests buy with: a phone with Face ID, and a Mac with Touch ID.
    static let phone = "web-phone"
    static let mac = "web-mac"
    /// In a paired sandbox: a Mac without Touch ID and without a card, approved by the phone (it pays with it).
    static let handoffMac = "web-mac-handoff"
    static let passcode = "246810"

    let path: String
    let up: ChildProcess
    let devices: [String: ChildProcess]
    let driver: ChildProcess
    let driverPort: Int
    private let browsers = Browsers()

    /// The suite's sandbox (``BrowserScope``).
    @TaskLocal static var current: BrowserSandbox?

    /// - Parameter paired: the phone and the Mac approve each other (Handoff: relay keys, advertising keys, their
    ///   wallets' addresses synced) before their processes start.
    static func start(paired: Bool = false) async throws -> BrowserSandbox {
        guard Chromium.installed else {
            throw BrowserTestFailure("\(Chromium.hint) (CI=true: the browser tests are required)")
        }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-web-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let data = path + "/data"
        let initialised = try await orchard(["init", "--data-dir", data])
        guard initialised.status == 0 else { throw BrowserTestFailure("init failed: \(initialised.stderr)") }
        let up = try ChildProcess(
            try orchardExecutable(), ["up", "--data-dir", data], stdout: .capture, stderr: .file(path + "/up.log"))
        do {
            try await waitFor("orchard up", seconds: 60) { up.stdout.contains("\"merchant\"") || up.ended != nil }
            guard up.ended == nil else { throw BrowserTestFailure("orchard up ended: \(up.ended!)") }
            for (name, kind, biometry) in [(phone, "phone", "face"), (mac, "mac", "touch")] {
                let created = try await orchard(
                    [
                        "device", "create", "--data-dir", data, "--name", name, "--kind", kind, "--biometry", biometry,
                        "--passcode-file", "-",
                    ], stdin: passcode + "\n")
                guard created.status == 0 else { throw BrowserTestFailure("device create: \(created.stderr)") }
                let card = try await orchard(
                    [
                        "device", "add-card", "--data-dir", data, "--name", name, "--expiry", "12/34", "--cardholder",
                        "Alice Appleseed",
                    ], stdin: "4111111111111111\n266\n")
                guard card.status == 0 else { throw BrowserTestFailure("add-card: \(card.stderr)") }
            }
            if paired {
                let created = try await orchard(
                    [
                        "device", "create", "--data-dir", data, "--name", handoffMac, "--kind", "mac", "--biometry",
                        "none", "--passcode-file", "-",
                    ], stdin: passcode + "\n")
                guard created.status == 0 else { throw BrowserTestFailure("device create: \(created.stderr)") }
                for new in [mac, handoffMac] {
                    let approved = try await orchard(
                        ["device", "approve", "--data-dir", data, "--name", phone, "--new", new],
                        stdin: "\(passcode)\n\(passcode)\n")
                    guard approved.status == 0 else { throw BrowserTestFailure("approve: \(approved.stderr)") }
                }
            }
        } catch {
            up.terminate()
            _ = await up.exit()
            throw error
        }
        var devices: [String: ChildProcess] = [:]
        // One after the other: the first issues the agent's TLS certificate (pki/devices/device-agent-tls).
        for name in [phone, mac] + (paired ? [handoffMac] : []) {
            let log = path + "/\(name).log"
            let device = try ChildProcess(
                try orchardExecutable(),
                ["device", "run", "--data-dir", data, "--name", name, "--web-handler-timeout", "4"],
                stdout: .file(log), stderr: .file(log))
            devices[name] = device
            do {
                try await waitFor("\(name)'s browser agent", seconds: 30) {
                    FileManager.default.fileExists(atPath: data + "/devices/\(name)/agent.json") || device.ended != nil
                }
                guard device.ended == nil else { throw BrowserTestFailure("device run ended") }
            } catch {
                let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                for (_, started) in devices { started.terminate() }
                up.terminate()
                throw BrowserTestFailure("\(error); \(name)'s log: \(output)")
            }
        }
        // Its output to a file, not a pipe: the browsers it starts inherit it and outlive a pipe's reader. Started
        // again if it ends before it listens (its port taken; it exited 1 once in a loaded full run, its log then
        // lost), on the next port to try: with ORCHARD_CHROMEDRIVER_PORTS, a port of the range .ci/run closes to
        // other users of the machine.
        let driverLog = path + "/chromedriver.log"
        var driver: ChildProcess?
        var port = 0
        let portArguments = WebDriverClient.Chromium.driverPortArguments(
            environment: ProcessInfo.processInfo.environment)
        do {
            for (attempt, portArgument) in portArguments.enumerated() where port == 0 {
                let started = try ChildProcess(
                    Chromium.driver, [portArgument], environment: ["HOME": path + "/profile"],
                    stdout: .file(driverLog), stderr: .file(driverLog))
                driver = started
                try await waitFor("chromedriver", seconds: 20) {
                    let text = (try? String(contentsOfFile: driverLog, encoding: .utf8)) ?? ""
                    port = WebDriverClient.Chromium.driverPort(inLog: text) ?? 0
                    return port != 0 || started.ended != nil
                }
                guard port == 0 else { break }
                let text = (try? String(contentsOfFile: driverLog, encoding: .utf8)) ?? ""
                let reason = "chromedriver ended: \(started.ended.map { "\($0)" } ?? "?"); its log: \(text.suffix(600))"
                guard attempt < portArguments.count - 1 else { throw BrowserTestFailure(reason) }
                print("BrowserSandbox: \(reason); starting it again")
            }
        } catch {
            driver?.send(SIGKILL)
            for (_, device) in devices { device.terminate() }
            up.terminate()
            throw error
        }
        guard let driver else { throw BrowserTestFailure("chromedriver was not started") }
        return BrowserSandbox(path: path, up: up, devices: devices, driver: driver, driverPort: port)
    }

    private init(path: String, up: ChildProcess, devices: [String: ChildProcess], driver: ChildProcess, driverPort: Int)
    {
        self.path = path
        self.up = up
        self.devices = devices
        self.driver = driver
        self.driverPort = driverPort
    }

    var dataDirectory: String { path + "/data" }

    /// A genuine merchant session for store.orchard.test, as its JSON (`orchard merchant session`).
    func merchantSession() async throws -> String {
        let session = try await orchard([
            "merchant", "session", "--data-dir", dataDirectory, "--domain", "store.orchard.test",
        ])
        try #require(session.status == 0, "\(session.stderr)")
        return session.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The device process's log (stdout and stderr).
    func log(of device: String) -> String {
        (try? String(contentsOfFile: path + "/\(device).log", encoding: .utf8)) ?? ""
    }

    /// The Chromium session whose agent.orchard.test is `device`'s agent (one per device, kept for the suite).
    func browser(for device: String) async throws -> WebDriver {
        if let existing = browsers.get(device) {
            try await existing.closeOtherWindows()
            return existing
        }
        // Every browser of the suite shares one profile home (one NSS database); each session has its own
        // user-data-dir.
        let setup = try await orchard([
            "browser", "setup", "--data-dir", dataDirectory, "--device", device, "--profile", path + "/profile",
        ])
        guard setup.status == 0 else { throw BrowserTestFailure("browser setup: \(setup.stderr)") }
        let arguments = setup.stdout.split(separator: "\n").map(String.init).map {
            $0.hasPrefix("--user-data-dir=") ? $0 + "-" + device : $0
        }
        let browser = try await WebDriver.start(
            driverPort: driverPort, binary: Chromium.binary, arguments: arguments)
        browsers.set(device, browser)
        return browser
    }

    func close() async {
        for browser in browsers.all { await browser.quit() }
        driver.send(SIGKILL)
        _ = await driver.exit()
        for (_, device) in devices { device.terminate() }
        for (_, device) in devices { _ = await device.exit() }
        up.terminate()
        _ = await up.exit()
        try? FileManager.default.removeItem(atPath: path)
    }

    static func waitFor(_ what: String, seconds: Double, _ condition: () throws -> Bool) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try condition() { return }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw BrowserTestFailure("timed out waiting for \(what)")
    }
}

/// The suite's browsers by device.
private final class Browsers: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = NSLock()
    private var byDevice: [String: WebDriver] = [:]
    func get(_ device: String) -> WebDriver? { lock.withLock { byDevice[device] } }
    func set(_ device: String, _ browser: WebDriver) { lock.withLock { byDevice[device] = browser } }
    var all: [WebDriver] { lock.withLock { Array(byDevice.values) } }
}

/// Starts one ``BrowserSandbox`` around the whole suite and stops it after (Swift Testing's test scoping).
struct BrowserScope: SuiteTrait, TestScoping {
    /// Whether the phone and the Mac approve each other (``BrowserSandbox/start(paired:)``).
    var paired = false
    var isRecursive: Bool { false }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        let sandbox = try await BrowserSandbox.start(paired: paired)
        do {
            try await BrowserSandbox.$current.withValue(sandbox) { try await function() }
        } catch {
            await sandbox.close()
            throw error
        }
        await sandbox.close()
    }
}

extension Trait where Self == BrowserScope {
    /// One deployment, its devices and Chromium for the whole suite.
    static var browserSandbox: BrowserScope { BrowserScope() }
    /// As ``browserSandbox``, the phone and the Mac approved for each other (Handoff).
    static var pairedBrowserSandbox: BrowserScope { BrowserScope(paired: true) }
}

struct BrowserTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
