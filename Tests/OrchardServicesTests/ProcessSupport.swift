import CommandTestSupport
import Foundation
import OrchardHTTP

#if canImport(Glibc)
    import Glibc
#endif

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A child `orchard` process with its stdout and stderr collected.
final class OrchardChild: @unchecked Sendable {
    // Thread-safety: `out` and `err` are guarded by `lock`; the pipes' handlers run on their own threads.
    let process = Process()
    private let lock = NSLock()
    private var out = Data()
    private var err = Data()

    init(_ arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = URL(fileURLWithPath: try orchardExecutable())
        process.arguments = arguments
        // The child reads no configuration overrides from the test's environment, only `environment`'s.
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("ORCHARD_") }
            .merging(environment) { _, new in new }
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = FileHandle.nullDevice
        stdout.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            self?.lock.withLock { self?.out.append(data) }
        }
        stderr.fileHandleForReading.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            self?.lock.withLock { self?.err.append(data) }
        }
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }
    var standardOutput: String { lock.withLock { String(decoding: out, as: UTF8.self) } }
    var standardError: String { lock.withLock { String(decoding: err, as: UTF8.self) } }

    /// The first complete stdout line, waiting up to `seconds`; fails if the process ends first.
    func firstLine(within seconds: Double = 60) async throws -> String {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let newline = standardOutput.firstIndex(of: "\n") { return String(standardOutput[..<newline]) }
            if !process.isRunning {
                throw TestFailure("orchard exited (\(process.terminationStatus)) before printing: \(standardError)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestFailure("orchard printed nothing within \(seconds) s; stderr: \(standardError)")
    }

    /// Sends `signal`.
    func send(_ signal: Int32) { kill(process.processIdentifier, signal) }

    /// The exit status, waiting up to `seconds` (then SIGKILL and a failure).
    func exitStatus(within seconds: Double = 60) async throws -> Int32 {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning {
            if Date() > deadline {
                kill(process.processIdentifier, SIGKILL)
                throw TestFailure("orchard did not exit within \(seconds) s; stderr: \(standardError)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        // Let the pipe handlers collect the last bytes.
        try await Task.sleep(for: .milliseconds(100))
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }
}

/// Runs `orchard arguments` to completion.
func runOrchard(
    _ arguments: [String], environment: [String: String] = [:]
) async throws -> (status: Int32, stdout: String, stderr: String) {
    let child = try OrchardChild(arguments, environment: environment)
    let status = try await child.exitStatus()
    return (status, child.standardOutput, child.standardError)
}

/// An HTTPS client that trusts only `rootPEM`, with no retries (a refusal must show at once).
func client(trusting rootPEM: String) throws -> HTTPClient {
    try HTTPClient(
        configuration: HTTPClientConfiguration(
            trustedRootsPEM: rootPEM, connectTimeout: .seconds(5), requestTimeout: .seconds(10), maxAttempts: 1))
}
