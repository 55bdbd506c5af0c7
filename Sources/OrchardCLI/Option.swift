import Foundation

/// A typed command-line option, declared once: its name, the type of its value, its default or that it is
/// required, the values it allows and its help text.
///
/// A command lists its options (`Command(name:summary:options:...)`); the runner checks every one of them
/// (unknown, repeated, missing, of the wrong type, out of range) before the command's body runs, and `--help` is
/// written from the declarations. In the body, `arguments[option]` gives the value, already checked.
public struct Option<Value: Sendable>: Sendable {
    /// The declaration the parser and `--help` read.
    public let spec: OptionSpec

    public var name: String { spec.name }

    /// Reads a single-valued option. `whenAbsent` is the value when the option is not given; nil makes the option
    /// required. `convert`'s ``CLIError`` is the command's error as it is (a usage error, or a failure where the
    /// command's contract makes bad input one).
    init(
        _ name: String, _ valueName: String, help: String, whenAbsent: Value?, defaultText: String?,
        convert: @escaping @Sendable (String) throws(CLIError) -> Value
    ) {
        spec = OptionSpec(
            name: name, kind: .single, valueName: valueName, help: help, required: whenAbsent == nil,
            defaultText: defaultText
        ) { arguments throws(CLIError) in
            guard let text = arguments.value(name) else {
                guard let whenAbsent else { throw CLIError.usage("missing required option --\(name)") }
                return whenAbsent
            }
            return try convert(text)
        }
    }

    init(spec: OptionSpec) { self.spec = spec }

    /// `convert`, with its nil made the usage error `--NAME EXPECTED` (e.g. `--kind is phone or watch`); the
    /// refused value is never echoed (it may be a passcode).
    static func refusing<Converted>(
        _ name: String, _ expected: String, _ convert: @escaping @Sendable (String) -> Converted?
    ) -> @Sendable (String) throws(CLIError) -> Converted {
        { text throws(CLIError) in
            guard let value = convert(text) else { throw CLIError.usage("--\(name) \(expected)") }
            return value
        }
    }
}

extension Option where Value == String {
    /// A required text value.
    public static func required(_ name: String, _ valueName: String, help: String) -> Option<String> {
        Option(name, valueName, help: help, whenAbsent: nil, defaultText: nil) { text throws(CLIError) in text }
    }

    /// A text value with a default.
    public static func text(
        _ name: String, _ valueName: String, default value: String, help: String
    )
        -> Option<String>
    {
        Option(name, valueName, help: help, whenAbsent: value, defaultText: value) { text throws(CLIError) in text }
    }
}

extension Option where Value == String? {
    /// An optional text value: nil when not given.
    public static func optional(_ name: String, _ valueName: String, help: String) -> Option<String?> {
        .optional(name, valueName, help: help) { text throws(CLIError) in text }
    }
}

extension Option where Value == Int {
    /// A whole number in `range`, `value` when not given.
    public static func integer(
        _ name: String, _ valueName: String = "N", default value: Int, range: ClosedRange<Int>, help: String
    ) -> Option<Int> {
        Option(
            name, valueName, help: help, whenAbsent: value, defaultText: String(value),
            convert: wholeNumber(name, range))
    }
}

extension Option where Value == Int {
    /// A whole number in `range`.
    static func wholeNumber(_ name: String, _ range: ClosedRange<Int>) -> @Sendable (String) throws(CLIError) -> Int {
        refusing(name, "takes a whole number from \(range.lowerBound) to \(range.upperBound)") { text in
            Int(text).flatMap { range.contains($0) ? $0 : nil }
        }
    }
}

extension Option where Value == Int? {
    /// A whole number in `range`, nil when not given.
    public static func integer(
        _ name: String, _ valueName: String = "N", range: ClosedRange<Int>, help: String
    )
        -> Option<Int?>
    {
        .optional(name, valueName, help: help, parse: Option<Int>.wholeNumber(name, range))
    }
}

extension Option where Value == Duration {
    /// A whole number of seconds in `range`, `value` when not given.
    public init(
        _ name: String, default value: Duration, range: ClosedRange<Int>, help: String
    ) {
        let seconds = Option<Int>.refusing(
            name, "takes a whole number of seconds from \(range.lowerBound) to \(range.upperBound)"
        ) { text in Int(text).flatMap { range.contains($0) ? $0 : nil } }
        self.init(name, "SECONDS", help: help, whenAbsent: value, defaultText: "\(value.components.seconds)") {
            text throws(CLIError) in .seconds(try seconds(text))
        }
    }
}

extension Option where Value == Bool {
    /// `--NAME`, no value: true when given.
    public static func flag(_ name: String, help: String) -> Option<Bool> {
        Option(
            spec: OptionSpec(name: name, kind: .flag, valueName: "", help: help, required: false, defaultText: nil) {
                arguments throws(CLIError) in arguments.flag(name)
            })
    }
}

extension Option where Value == Bool {
    /// `on` or `off` (also `yes`/`no`, `true`/`false`), required.
    public static func requiredOnOff(_ name: String, _ valueName: String = "on|off", help: String) -> Option<Bool> {
        Option(
            name, valueName, help: help, whenAbsent: nil, defaultText: nil,
            convert: refusing(name, "is on or off", Option<Bool?>.onOffValue))
    }
}

extension Option where Value == Bool? {
    /// `on` or `off` (also `yes`/`no`, `true`/`false`); nil when not given.
    public static func onOff(_ name: String, _ valueName: String = "on|off", help: String) -> Option<Bool?> {
        .optional(name, valueName, help: help, parse: refusing(name, "is on or off", onOffValue))
    }

    @Sendable static func onOffValue(_ text: String) -> Bool? {
        switch text {
        case "on", "yes", "true": true
        case "off", "no", "false": false
        default: nil
        }
    }
}

extension Option where Value == [String] {
    /// `--NAME VALUE`, any number of times; the values in order.
    public static func repeatable(_ name: String, _ valueName: String, help: String) -> Option<[String]> {
        Option(
            spec: OptionSpec(
                name: name, kind: .repeatable, valueName: valueName, help: help, required: false, defaultText: nil
            ) { arguments throws(CLIError) in arguments.values(name) })
    }
}

extension Option where Value: RawRepresentable & CaseIterable, Value.RawValue == String {
    /// One of an enumeration's raw values, required.
    public static func choice(_ name: String, help: String) -> Option<Value> {
        let values = Value.allCases.map(\.rawValue)
        return Option(
            name, values.joined(separator: "|"), help: help, whenAbsent: nil, defaultText: nil,
            convert: refusing(name, "is " + alternatives(values), Value.init(rawValue:)))
    }

    /// One of an enumeration's raw values, `value` when not given.
    public static func choice(_ name: String, default value: Value, help: String) -> Option<Value> {
        let values = Value.allCases.map(\.rawValue)
        return Option(
            name, values.joined(separator: "|"), help: help, whenAbsent: value, defaultText: value.rawValue,
            convert: refusing(name, "is " + alternatives(values), Value.init(rawValue:)))
    }
}

extension Option {
    /// One of an enumeration's raw values, nil when not given.
    public static func choice<Choice: RawRepresentable & CaseIterable & Sendable>(
        _ name: String, help: String
    ) -> Option<Choice?> where Choice.RawValue == String, Value == Choice? {
        let values = Choice.allCases.map(\.rawValue)
        return .optional(
            name, values.joined(separator: "|"), help: help,
            parse: refusing(name, "is " + alternatives(values), Choice.init(rawValue:)))
    }

    /// A value `parse` reads, required. `parse` throws the ``CLIError`` the command fails with (it must not put
    /// the value in its message when the value may be a secret).
    public static func required(
        _ name: String, _ valueName: String, help: String,
        parse: @escaping @Sendable (String) throws(CLIError) -> Value
    ) -> Option<Value> {
        Option(name, valueName, help: help, whenAbsent: nil, defaultText: nil, convert: parse)
    }

    /// A value `parse` reads, `value` when not given (shown as `defaultText` in `--help`). `parse` throws the
    /// ``CLIError`` the command fails with.
    public static func withDefault(
        _ name: String, _ valueName: String, default value: Value, defaultText: String, help: String,
        parse: @escaping @Sendable (String) throws(CLIError) -> Value
    ) -> Option<Value> {
        Option(name, valueName, help: help, whenAbsent: value, defaultText: defaultText, convert: parse)
    }

    /// A value `parse` reads, nil when not given. `parse` throws the ``CLIError`` the command fails with (it must
    /// not put the value in its message when the value may be a secret).
    public static func optional<Parsed: Sendable>(
        _ name: String, _ valueName: String, help: String,
        parse: @escaping @Sendable (String) throws(CLIError) -> Parsed
    ) -> Option<Parsed?> where Value == Parsed? {
        Option(name, valueName, help: help, whenAbsent: .some(nil), defaultText: nil) { text throws(CLIError) in
            try parse(text)
        }
    }

    /// `a, b or c`.
    static func alternatives(_ values: [String]) -> String {
        values.count < 2
            ? values.joined() : values.dropLast().joined(separator: ", ") + " or " + values[values.count - 1]
    }
}

extension ParsedArguments {
    /// The checked value of `option`. Reading an option the command does not declare is a programming error.
    public subscript<Value>(option: Option<Value>) -> Value {
        guard let value = typed[option.name], let value = value as? Value else {
            preconditionFailure("--\(option.name) is not among the command's declared options")
        }
        return value
    }
}
