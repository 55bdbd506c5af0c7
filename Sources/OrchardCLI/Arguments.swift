import Foundation

/// One option a command accepts, as the parser and `--help` see it. Typed options (``Option``) make one, with a
/// reader that converts and checks the value.
public struct OptionSpec: Sendable {
    public enum Kind: Sendable {
        /// `--name`, no value.
        case flag
        /// `--name VALUE` or `--name=VALUE`, at most once.
        case single
        /// `--name VALUE`, any number of times, values kept in order.
        case repeatable
    }

    public let name: String
    public let kind: Kind
    public let valueName: String
    public let help: String
    /// Whether the command refuses to run without it.
    public let required: Bool
    /// The default as `--help` shows it, if there is one to show.
    public let defaultText: String?
    /// Converts and checks the option's value in parsed arguments (a usage error when it is wrong).
    let read: @Sendable (ParsedArguments) throws(CLIError) -> any Sendable

    init(
        name: String, kind: Kind, valueName: String, help: String, required: Bool = false,
        defaultText: String? = nil, read: @escaping @Sendable (ParsedArguments) throws(CLIError) -> any Sendable
    ) {
        self.name = name
        self.kind = kind
        self.valueName = valueName
        self.help = help
        self.required = required
        self.defaultText = defaultText
        self.read = read
    }

    /// The left column of `--help`.
    var usage: String {
        switch kind {
        case .flag: "--\(name)"
        case .single: "--\(name) \(valueName)"
        case .repeatable: "--\(name) \(valueName) (repeatable)"
        }
    }

    /// The right column of `--help`: the help text, then whether it is required or its default.
    var helpText: String {
        if required { return help.isEmpty ? "Required." : "\(help) Required." }
        guard let defaultText else { return help }
        return help.isEmpty ? "Default: \(defaultText)." : "\(help) Default: \(defaultText)."
    }
}

/// The parsed arguments of one command invocation.
public struct ParsedArguments: Sendable {
    public private(set) var values: [String: [String]] = [:]
    public private(set) var flags: Set<String> = []
    public private(set) var positionals: [String] = []
    /// The converted values of the typed options, by name (see ``check(_:)``).
    private(set) var typed: [String: any Sendable] = [:]

    // The raw reading below is what typed options convert from; commands read ``subscript(_:)``.

    /// The raw value of a single-valued option, if given.
    func value(_ name: String) -> String? { values[name]?.last }
    /// All raw values of a repeatable option, in order.
    func values(_ name: String) -> [String] { values[name] ?? [] }
    /// Whether a flag was given.
    func flag(_ name: String) -> Bool { flags.contains(name) }

    /// Converts and checks every typed option of `options` in declaration order, keeping the values for
    /// ``subscript(_:)``; the first wrong one is the command's error (a usage error, unless its declaration says
    /// otherwise).
    mutating func check(_ options: [OptionSpec]) throws(CLIError) {
        for option in options { typed[option.name] = try option.read(self) }
    }

    /// Parses `arguments` against `options`: syntax first (unknown, repeated, a value missing), then every typed
    /// option's value (missing when required, wrong type, out of range). `--` ends options; everything after it
    /// is positional.
    static func parse(
        _ arguments: [String], options: [OptionSpec], maxPositionals: Int
    ) throws(CLIError)
        -> ParsedArguments
    {
        var result = ParsedArguments()
        var index = 0
        var onlyPositionals = false
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if onlyPositionals || !argument.hasPrefix("--") || argument == "-" {
                if argument.hasPrefix("-"), argument != "-", !onlyPositionals {
                    throw CLIError.usage("unknown option \(argument)")
                }
                result.positionals.append(argument)
                continue
            }
            if argument == "--" {
                onlyPositionals = true
                continue
            }
            let body = argument.dropFirst(2)
            let name: String
            var inlineValue: String?
            if let eq = body.firstIndex(of: "=") {
                name = String(body[..<eq])
                inlineValue = String(body[body.index(after: eq)...])
            } else {
                name = String(body)
            }
            guard let spec = options.first(where: { $0.name == name }) else {
                throw CLIError.usage("unknown option --\(name)")
            }
            switch spec.kind {
            case .flag:
                if inlineValue != nil { throw CLIError.usage("--\(name) takes no value") }
                guard result.flags.insert(name).inserted else {
                    throw CLIError.usage("--\(name) may be given only once")
                }
            case .single, .repeatable:
                let value: String
                if let inlineValue {
                    value = inlineValue
                } else {
                    guard index < arguments.count, !arguments[index].hasPrefix("--") else {
                        throw CLIError.usage("--\(name) needs a value (\(spec.valueName))")
                    }
                    value = arguments[index]
                    index += 1
                }
                if spec.kind == .single, result.values[name] != nil {
                    throw CLIError.usage("--\(name) may be given only once")
                }
                result.values[name, default: []].append(value)
            }
        }
        if result.positionals.count > maxPositionals {
            throw CLIError.usage("unexpected argument \(result.positionals[maxPositionals])")
        }
        try result.check(options)
        return result
    }
}

/// A command-line failure: `usage` exits 2, `failure` exits 1. The message is one line, never a secret.
public struct CLIError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public let exitCode: Int32
    /// The command wrote its own `error:` line already (followed by a report line that must stay last).
    public var alreadyReported = false

    public static func usage(_ message: String) -> CLIError { CLIError(message: message, exitCode: 2) }
    public static func failure(_ message: String) -> CLIError { CLIError(message: message, exitCode: 1) }
    /// Exit 1 without another line: the command traced `error: <message>` itself, then its closing report.
    static func reportedFailure(_ message: String) -> CLIError {
        CLIError(message: message, exitCode: 1, alreadyReported: true)
    }

    public var description: String { message }
}
