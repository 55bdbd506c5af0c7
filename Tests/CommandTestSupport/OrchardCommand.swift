import Foundation

// Running the `orchard` executable from tests: one place for the test targets that start it as a process.

/// Why the `orchard` executable could not be run.
public struct CommandTestFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The `orchard` executable built next to the test bundle (a test target that runs it depends on it, so
/// `swift build --build-tests` and `swift test` build it).
public func orchardExecutable() throws -> String {
    let me = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    let path = me.deletingLastPathComponent().appendingPathComponent("orchard").path
    guard FileManager.default.isExecutableFile(atPath: path) else {
        throw CommandTestFailure("no orchard executable at \(path); build the package first")
    }
    return path
}

/// What a finished `orchard` command printed.
public struct CommandOutput: Sendable {
    public let status: Int32
    public let stdout: String
    public let stderr: String

    /// stdout as a JSON object.
    public func json() throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: Any] else {
            throw CommandTestFailure("not a JSON object: \(stdout.prefix(200))")
        }
        return object
    }
}

/// Runs `orchard arguments` to completion, stdin empty (so it never prompts), `environment` added to this
/// process's. Waits on threads of its own, never the concurrency pool's: the command may be talking to services
/// this test process serves. Both pipes are drained at once, so a command that writes much to one of them
/// cannot block on the other.
public func orchard(_ arguments: [String], environment: [String: String] = [:]) async throws -> CommandOutput {
    try await withCheckedThrowingContinuation { continuation in
        Thread {
            continuation.resume(with: Result { try runToCompletion(arguments, environment: environment) })
        }.start()
    }
}

private func runToCompletion(_ arguments: [String], environment: [String: String]) throws -> CommandOutput {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: try orchardExecutable())
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
    process.standardInput = FileHandle.nullDevice
    let out = Pipe()
    let err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let errors = Drain(err.fileHandleForReading)
    let output = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return CommandOutput(
        status: process.terminationStatus, stdout: String(decoding: output, as: UTF8.self),
        stderr: String(decoding: errors.wait(), as: UTF8.self))
}

/// Reads a pipe to its end on a thread of its own.
private final class Drain: @unchecked Sendable {
    // @unchecked: `data` is written by the reading thread before `done` is signalled and read after.
    private var data = Data()
    private let done = DispatchSemaphore(value: 0)

    init(_ handle: FileHandle) {
        Thread { [self] in
            data = handle.readDataToEndOfFile()
            done.signal()
        }.start()
    }

    func wait() -> Data {
        done.wait()
        return data
    }
}
