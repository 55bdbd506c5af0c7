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

/// Runs `orchard arguments` to completion, stdin `stdin` or empty (so it never prompts), `environment` added to this
/// process's. The child's output is read and its exit awaited on threads of their own (``ChildProcess``), never
/// the concurrency pool's: the command may be talking to services this test process serves.
public func orchard(
    _ arguments: [String], environment: [String: String] = [:], stdin: String? = nil
) async throws -> CommandOutput {
    let child = try ChildProcess(
        try orchardExecutable(), arguments, environment: environment, stdin: stdin.map { Array($0.utf8) },
        stdout: .capture, stderr: .capture)
    let ended = await child.exit()
    return CommandOutput(status: ended.status ?? -1, stdout: child.stdout, stderr: child.stderr)
}

/// Writes a card file for `orchard device add-card --card-file` (the JSON form, mode 0600) outside any data
/// directory, so at-rest scans of the deployment never see it; the caller removes it.
public func writeCardFile(number: String, cvv: String) throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-card-\(UUID().uuidString).json")
        .path
    guard
        FileManager.default.createFile(
            atPath: path, contents: Data(#"{"number": "\#(number)", "cvv": "\#(cvv)"}"#.utf8),
            attributes: [.posixPermissions: 0o600])
    else { throw CommandTestFailure("cannot write \(path)") }
    return path
}
