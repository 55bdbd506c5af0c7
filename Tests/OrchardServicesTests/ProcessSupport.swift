import CommandTestSupport
import Foundation
import OrchardHTTP
import Testing

#if canImport(Glibc)
    import Glibc
#endif

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A child `orchard` process with its stdout and stderr collected.
final class OrchardChild: Sendable {
    let process: ChildProcess

    init(_ arguments: [String], environment: [String: String] = [:]) throws {
        // The child reads no configuration overrides from the test's environment, only `environment`'s.
        var variables: [String: String?] = [:]
        for key in ProcessInfo.processInfo.environment.keys where key.hasPrefix("ORCHARD_") { variables[key] = nil }
        for (key, value) in environment { variables[key] = value }
        process = try ChildProcess(
            try orchardExecutable(), arguments, environment: variables, stdout: .capture, stderr: .capture)
    }

    var pid: Int32 { process.pid }
    var standardOutput: String { process.stdout }
    var standardError: String { process.stderr }

    /// The first complete stdout line, waiting up to `seconds`; fails if the process ends first.
    func firstLine(within seconds: Double = 60) async throws -> String {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let newline = standardOutput.firstIndex(of: "\n") { return String(standardOutput[..<newline]) }
            if let ended = process.ended {
                throw TestFailure("orchard ended (\(ended)) before printing: \(standardError)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw TestFailure("orchard printed nothing within \(seconds) s; stderr: \(standardError)")
    }

    /// Sends `signal`.
    func send(_ signal: Int32) { process.send(signal) }

    /// The exit status, waiting up to `seconds` (then SIGKILL and a failure); a signal's end is -signal.
    func exitStatus(within seconds: Double = 60) async throws -> Int32 {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning {
            if Date() > deadline {
                process.kill()
                throw TestFailure("orchard did not exit within \(seconds) s; stderr: \(standardError)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        switch process.waitUntilExit() {
        case .exited(let status): return status
        case .signalled(let signal): return -signal
        }
    }

    deinit { process.send(SIGKILL) }
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

/// The backends a party's guarantees are proven on: SQLite files always, the test run's PostgreSQL server when it
/// is installed (always with `CI=true`).
enum PartyBackend: String, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgreSQL

    static let all: [PartyBackend] = TestPostgreSQL.enabled ? [.sqlite, .postgreSQL] : [.sqlite]

    var testDescription: String { rawValue }

    /// A fresh PostgreSQL database for the server parties, or nil for SQLite files.
    func database() async throws -> String? {
        self == .postgreSQL ? try await TestPostgreSQL.shared().freshDatabase() : nil
    }

    /// `orchard init` arguments that put the server parties there.
    func initArguments() async throws -> [String] { try await database().map { ["--database", $0] } ?? [] }
}
