import Foundation

/// One option a command accepts.
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

    public static func flag(_ name: String, help: String) -> OptionSpec {
        OptionSpec(name: name, kind: .flag, valueName: "", help: help)
    }
    public static func single(_ name: String, _ valueName: String = "VALUE", help: String) -> OptionSpec {
        OptionSpec(name: name, kind: .single, valueName: valueName, help: help)
    }
    public static func repeatable(_ name: String, _ valueName: String = "VALUE", help: String) -> OptionSpec {
        OptionSpec(name: name, kind: .repeatable, valueName: valueName, help: help)
    }
}

/// The parsed arguments of one command invocation.
public struct ParsedArguments: Sendable {
    public private(set) var values: [String: [String]] = [:]
    public private(set) var flags: Set<String> = []
    public private(set) var positionals: [String] = []

    /// The value of a single-valued option, if given.
    public func value(_ name: String) -> String? { values[name]?.last }
    /// All values of a repeatable option, in order.
    public func values(_ name: String) -> [String] { values[name] ?? [] }
    public func flag(_ name: String) -> Bool { flags.contains(name) }

    /// The value of a required option, or a usage error naming it.
    public func require(_ name: String) throws(CLIError) -> String {
        guard let value = value(name) else { throw CLIError.usage("missing required option --\(name)") }
        return value
    }

    /// An integer option within `range`, or `defaultValue` when absent.
    public func integer(_ name: String, default defaultValue: Int, in range: ClosedRange<Int>) throws(CLIError) -> Int {
        guard let text = value(name) else { return defaultValue }
        guard let n = Int(text), range.contains(n) else {
            throw CLIError.usage("--\(name) takes a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return n
    }

    /// Parses `arguments` against `options`. `--` ends options; everything after it is positional.
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
                result.flags.insert(name)
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
        return result
    }
}

/// A command-line failure: `usage` exits 2, `failure` exits 1. The message is one line, never a secret.
public struct CLIError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public let exitCode: Int32

    public static func usage(_ message: String) -> CLIError { CLIError(message: message, exitCode: 2) }
    public static func failure(_ message: String) -> CLIError { CLIError(message: message, exitCode: 1) }

    public var description: String { message }
}
