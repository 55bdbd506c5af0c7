import Foundation

/// A command or a group of subcommands. Command groups live one per file in `Commands/` and are
/// listed once in ``CommandRegistry/groups``.
public struct Command: Sendable {
    public typealias Run = @Sendable (ParsedArguments, CommandContext) async throws -> Void

    public let name: String
    public let summary: String
    /// Extra help text shown by `--help` below the usage line.
    public let discussion: String
    public let options: [OptionSpec]
    /// Names of positional arguments, for the usage line; at most this many are accepted.
    public let positionals: [String]
    public let subcommands: [Command]
    public let run: Run?

    /// A leaf command that runs, with typed options: the runner converts and checks each of them before `run`,
    /// which reads them as `arguments[option]`.
    public init(
        name: String, summary: String, discussion: String = "", options: [any CommandOption] = [],
        positionals: [String] = [], run: @escaping Run
    ) {
        self.init(
            name: name, summary: summary, discussion: discussion, options: options.map(\.spec),
            positionals: positionals, run: run)
    }

    /// A leaf command from option declarations already made (a command offered under a second name).
    init(
        name: String, summary: String, discussion: String = "", options: [OptionSpec],
        positionals: [String] = [], run: @escaping Run
    ) {
        self.name = name
        self.summary = summary
        self.discussion = discussion
        self.options = options
        self.positionals = positionals
        self.subcommands = []
        self.run = run
    }

    /// A group that only dispatches to subcommands.
    public init(name: String, summary: String, discussion: String = "", subcommands: [Command]) {
        self.name = name
        self.summary = summary
        self.discussion = discussion
        self.options = []
        self.positionals = []
        self.subcommands = subcommands
        self.run = nil
    }

    /// The help text for this command, reached through `path` (e.g. `["orchard", "bench"]`).
    func help(path: [String]) -> String {
        var lines: [String] = []
        let invocation = path.joined(separator: " ")
        if subcommands.isEmpty {
            let positional = positionals.map { " <\($0)>" }.joined()
            lines.append("usage: \(invocation) [options]\(positional)")
        } else {
            lines.append("usage: \(invocation) <command> [options]")
        }
        lines.append("")
        lines.append(summary)
        if !discussion.isEmpty {
            lines.append("")
            lines.append(discussion)
        }
        if !subcommands.isEmpty {
            lines.append("")
            lines.append("commands:")
            let width = subcommands.map(\.name.count).max() ?? 0
            for sub in subcommands {
                lines.append("  \(sub.name.padding(toLength: width, withPad: " ", startingAt: 0))  \(sub.summary)")
            }
        }
        let allOptions = options + CommandContext.commonOptions + [Option.flag("help", help: "Show this help.").spec]
        if subcommands.isEmpty {
            lines.append("")
            lines.append("options:")
            let rendered = allOptions.map { ($0.usage, $0.helpText) }
            let width = rendered.map(\.0.count).max() ?? 0
            for (left, right) in rendered {
                lines.append("  \(left.padding(toLength: width, withPad: " ", startingAt: 0))  \(right)")
            }
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

/// What a command's `options:` list holds: a typed ``Option`` of any value type.
public protocol CommandOption: Sendable {
    var spec: OptionSpec { get }
}

extension Option: CommandOption {}
