public import Foundation

/// What a running command may touch: its output streams, the environment and the deployment directory.
///
/// Results go alone to ``output`` (stdout); traces and warnings to ``trace(_:)`` (stderr). Commands
/// never prompt unless ``isInteractive`` is true.
public final class CommandContext: @unchecked Sendable {
    /// Options every command accepts.
    static let dataDirectoryOption = Option.optional(
        "data-dir", "DIR", help: "Deployment directory (default $ORCHARD_DATA_DIR, else ~/.orchard).")
    static let commonOptions: [OptionSpec] = [dataDirectoryOption.spec]

    public let environment: [String: String]
    /// The deployment directory after applying `--data-dir`, `$ORCHARD_DATA_DIR` and the default.
    public let dataDirectory: URL
    /// Whether standard input is a terminal (only then may a command prompt).
    public let isInteractive: Bool
    private let writeOut: @Sendable (String) -> Void
    private let writeErr: @Sendable (String) -> Void

    public init(
        environment: [String: String], dataDirectory: String?, isInteractive: Bool,
        stdout: @escaping @Sendable (String) -> Void, stderr: @escaping @Sendable (String) -> Void
    ) {
        self.environment = environment
        let path =
            dataDirectory ?? environment["ORCHARD_DATA_DIR"]
            ?? ((environment["HOME"] ?? NSHomeDirectory()) + "/.orchard")
        self.dataDirectory = URL(fileURLWithPath: path, isDirectory: true)
        self.isInteractive = isInteractive
        self.writeOut = stdout
        self.writeErr = stderr
    }

    /// Writes a result line to stdout.
    public func output(_ text: String) { writeOut(text.hasSuffix("\n") ? text : text + "\n") }

    /// Writes a JSON value to stdout with sorted keys and unescaped slashes.
    public func outputJSON(_ value: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes, .prettyPrinted]
        output(String(decoding: try encoder.encode(value), as: UTF8.self))
    }

    /// Writes a trace line to stderr.
    public func trace(_ text: String) { writeErr(text.hasSuffix("\n") ? text : text + "\n") }
}
