public import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The version `orchard --version` prints.
public let orchardVersion = "0.1.0"

/// Parses the command line, dispatches to a command and maps every failure to one `error:` line.
public enum CommandRunner {
    /// Runs `arguments` (without the program name) and returns the process exit code.
    public static func run(
        _ arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment,
        isInteractive: Bool = isatty(0) == 1,
        stdout: @escaping @Sendable (String) -> Void = { FileHandle.standardOutput.write(Data($0.utf8)) },
        stderr: @escaping @Sendable (String) -> Void = { FileHandle.standardError.write(Data($0.utf8)) }
    ) async -> Int32 {
        var command = CommandRegistry.root
        var path = ["orchard"]
        var rest = arguments[...]
        // Descend through groups.
        while !command.subcommands.isEmpty {
            guard let next = rest.first else {
                stderr(command.help(path: path))
                return 2
            }
            if next == "--help" || next == "-h" || next == "help" {
                stdout(command.help(path: path))
                return 0
            }
            if next == "--version", path.count == 1 {
                stdout("orchard \(orchardVersion)\n")
                return 0
            }
            guard let sub = command.subcommands.first(where: { $0.name == next }) else {
                stderr("error: unknown command '\(next)'; see '\(path.joined(separator: " ")) --help'\n")
                return 2
            }
            command = sub
            path.append(next)
            rest = rest.dropFirst()
        }
        if rest.contains("--help") || rest.contains("-h") {
            stdout(command.help(path: path))
            return 0
        }
        do {
            let parsed = try ParsedArguments.parse(
                Array(rest), options: command.options + CommandContext.commonOptions,
                maxPositionals: command.positionals.count)
            let context = CommandContext(
                environment: environment, dataDirectory: parsed[CommandContext.dataDirectoryOption],
                isInteractive: isInteractive,
                stdout: stdout, stderr: stderr)
            try await command.run!(parsed, context)
            return 0
        } catch let error as CLIError {
            if error.alreadyReported { return error.exitCode }
            stderr("error: \(oneLine(error.message))\n")
            if error.exitCode == 2 { stderr("see '\(path.joined(separator: " ")) --help'\n") }
            return error.exitCode
        } catch {
            stderr("error: \(oneLine(String(describing: error)))\n")
            return 1
        }
    }

    private static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).joined(separator: " ")
    }
}
