public import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A configuration value, as stored in `config.json`.
public enum ConfigurationValue: Sendable, Hashable {
    case integer(Int)
    case boolean(Bool)
    case string(String)
    case strings([String])
}

/// A configuration key with its type, default and validation, in one section of `config.json`.
///
/// Keys are made with the typed factories (``port(_:_:default:)``, ``string(_:_:default:allowed:validate:)``
/// …) and collected into a ``ConfigurationSchema``. The environment variable that overrides a key is
/// `ORCHARD_<SECTION>_<KEY>`, the key's camelCase split into upper-case words: `pay.logLevel` is
/// `ORCHARD_PAY_LOG_LEVEL`.
public struct ConfigurationKey<Value: Sendable & Hashable>: Sendable {
    /// The section (a service name, e.g. `pay`).
    public let section: String
    /// The key inside its section (camelCase, e.g. `port`).
    public let name: String
    /// The value when neither the file nor the environment sets one.
    public let defaultValue: Value
    let kind: ConfigurationKind
    let wrap: @Sendable (Value) -> ConfigurationValue
    let unwrap: @Sendable (ConfigurationValue) -> Value?
    let check: @Sendable (Value) -> String?

    /// The type-erased key a schema holds.
    public var erased: AnyConfigurationKey {
        let unwrap = self.unwrap
        let check = self.check
        return AnyConfigurationKey(
            section: section, name: name, kind: kind, defaultValue: wrap(defaultValue),
            check: { value in unwrap(value).flatMap(check) }
        )
    }

    /// `section.name`, as error messages show it.
    public var path: String { "\(section).\(name)" }
}

extension ConfigurationKey where Value == Int {
    /// An integer in `range`.
    public static func integer(
        _ section: String, _ name: String, default defaultValue: Int, range: ClosedRange<Int>
    ) -> ConfigurationKey<Int> {
        ConfigurationKey(
            section: section, name: name, defaultValue: defaultValue, kind: .integer,
            wrap: { .integer($0) }, unwrap: { if case .integer(let v) = $0 { v } else { nil } },
            check: { range.contains($0) ? nil : "\($0) is out of range \(range.lowerBound)...\(range.upperBound)" }
        )
    }

    /// A TCP port, 1 to 65535, or 0 for "any free port" (the bound port is then published in `DIR/run/`).
    public static func port(_ section: String, _ name: String, default defaultValue: Int = 0) -> ConfigurationKey<Int> {
        ConfigurationKey(
            section: section, name: name, defaultValue: defaultValue, kind: .integer,
            wrap: { .integer($0) }, unwrap: { if case .integer(let v) = $0 { v } else { nil } },
            check: {
                (0...65535).contains($0) ? nil : "\($0) is out of range 0...65535 for a port (0 picks a free one)"
            }
        )
    }
}

extension ConfigurationKey where Value == Bool {
    /// `true` or `false` (in the environment also `1`/`0`, `yes`/`no`, `on`/`off`).
    public static func boolean(_ section: String, _ name: String, default defaultValue: Bool) -> ConfigurationKey<Bool>
    {
        ConfigurationKey(
            section: section, name: name, defaultValue: defaultValue, kind: .boolean,
            wrap: { .boolean($0) }, unwrap: { if case .boolean(let v) = $0 { v } else { nil } }, check: { _ in nil }
        )
    }
}

extension ConfigurationKey where Value == String {
    /// A string, optionally limited to `allowed` values and checked by `validate` (which returns a problem
    /// description, or nil when the value is fine).
    public static func string(
        _ section: String, _ name: String, default defaultValue: String, allowed: [String]? = nil,
        validate: (@Sendable (String) -> String?)? = nil
    ) -> ConfigurationKey<String> {
        ConfigurationKey(
            section: section, name: name, defaultValue: defaultValue, kind: .string,
            wrap: { .string($0) }, unwrap: { if case .string(let v) = $0 { v } else { nil } },
            check: { value in
                if let allowed, !allowed.contains(value) {
                    return "\"\(value)\" is not one of \(allowed.joined(separator: ", "))"
                }
                return validate?(value)
            }
        )
    }

    /// An IPv4 or IPv6 address literal to bind to (services bind 127.0.0.1 by default).
    public static func host(
        _ section: String, _ name: String, default defaultValue: String = "127.0.0.1"
    )
        -> ConfigurationKey<String>
    {
        string(section, name, default: defaultValue) { value in
            isIPAddress(value) ? nil : "\"\(value)\" is not an IPv4 or IPv6 address"
        }
    }
}

extension ConfigurationKey where Value == [String] {
    /// A list of strings (in the environment: comma-separated).
    public static func strings(
        _ section: String, _ name: String, default defaultValue: [String]
    )
        -> ConfigurationKey<[String]>
    {
        ConfigurationKey(
            section: section, name: name, defaultValue: defaultValue, kind: .strings,
            wrap: { .strings($0) }, unwrap: { if case .strings(let v) = $0 { v } else { nil } }, check: { _ in nil }
        )
    }
}

/// What is wrong with one value.
struct ConfigurationProblem: Error {
    let text: String
    init(_ text: String) { self.text = text }
}

/// The JSON type a key takes.
enum ConfigurationKind: Sendable {
    case integer, boolean, string, strings

    var expected: String {
        switch self {
        case .integer: "an integer"
        case .boolean: "true or false"
        case .string: "a string"
        case .strings: "an array of strings"
        }
    }
}

/// A ``ConfigurationKey`` without its Swift type, as a ``ConfigurationSchema`` holds it.
public struct AnyConfigurationKey: Sendable {
    public let section: String
    public let name: String
    let kind: ConfigurationKind
    let defaultValue: ConfigurationValue
    let check: @Sendable (ConfigurationValue) -> String?

    /// The environment variable that overrides this key: `ORCHARD_<SECTION>_<KEY>`.
    public var environmentVariable: String {
        "ORCHARD_" + section.uppercased().replacingOccurrences(of: "-", with: "_") + "_" + screamingSnake(name)
    }

    /// Converts a JSON value, or says what is wrong with it.
    func convert(_ json: JSONValue) -> Result<ConfigurationValue, ConfigurationProblem> {
        let value: ConfigurationValue?
        switch (kind, json) {
        case (.integer, .integer(let number)): value = .integer(number)
        case (.boolean, .boolean(let flag)): value = .boolean(flag)
        case (.string, .string(let text)): value = .string(text)
        case (.strings, .array(let items)):
            let texts = items.compactMap { if case .string(let text) = $0 { text } else { nil } }
            value = texts.count == items.count ? .strings(texts) : nil
        default: value = nil
        }
        guard let value else {
            return .failure(ConfigurationProblem("expected \(kind.expected), found \(json.typeName)"))
        }
        return validated(value)
    }

    /// Parses an environment variable's text, or says what is wrong with it.
    func parse(environment text: String) -> Result<ConfigurationValue, ConfigurationProblem> {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let value: ConfigurationValue?
        switch kind {
        case .integer: value = Int(trimmed).map { .integer($0) }
        case .boolean:
            switch trimmed.lowercased() {
            case "true", "1", "yes", "on": value = .boolean(true)
            case "false", "0", "no", "off": value = .boolean(false)
            default: value = nil
            }
        case .string: value = .string(text)
        case .strings:
            value = .strings(
                text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            )
        }
        guard let value else { return .failure(ConfigurationProblem("\"\(text)\" is not \(kind.expected)")) }
        return validated(value)
    }

    private func validated(_ value: ConfigurationValue) -> Result<ConfigurationValue, ConfigurationProblem> {
        if let problem = check(value) { return .failure(ConfigurationProblem(problem)) }
        return .success(value)
    }
}

/// The sections and keys a `config.json` may hold. Unknown sections and keys are errors, so a typo
/// (`"prot"`) is reported instead of silently ignored.
public struct ConfigurationSchema: Sendable {
    /// Keys by section, then by name.
    private(set) var sections: [String: [String: AnyConfigurationKey]] = [:]

    /// A schema of `keys`; a later key with the same section and name replaces an earlier one.
    public init(_ keys: [AnyConfigurationKey]) {
        for key in keys { sections[key.section, default: [:]][key.name] = key }
    }

    /// This schema plus `keys` (how a service module contributes its settings).
    public func adding(_ keys: [AnyConfigurationKey]) -> ConfigurationSchema {
        var copy = self
        for key in keys { copy.sections[key.section, default: [:]][key.name] = key }
        return copy
    }

    /// The section names, sorted.
    public var sectionNames: [String] { sections.keys.sorted() }

    /// Every service's `host`, `port` and `logLevel`.
    public static let standard = ConfigurationSchema(ServiceName.all.flatMap { ServiceSettings.keys(for: $0) })
}

/// The settings every service has.
public enum ServiceSettings {
    /// The log levels `logLevel` accepts.
    public static let logLevels = ["trace", "debug", "info", "notice", "warning", "error"]

    /// The address the service binds (default 127.0.0.1).
    public static func host(_ service: ServiceName) -> ConfigurationKey<String> { .host(service.rawValue, "host") }
    /// The service's main HTTPS port (default 0: any free port).
    public static func port(_ service: ServiceName) -> ConfigurationKey<Int> { .port(service.rawValue, "port") }
    /// How much the service logs (default `info`).
    public static func logLevel(_ service: ServiceName) -> ConfigurationKey<String> {
        .string(service.rawValue, "logLevel", default: "info", allowed: logLevels)
    }

    /// The keys above, for a schema.
    public static func keys(for service: ServiceName) -> [AnyConfigurationKey] {
        [host(service).erased, port(service).erased, logLevel(service).erased, instancePorts(service).erased]
    }
}

/// A deployment's configuration: `config.json` validated against a schema, then `ORCHARD_<SERVICE>_<KEY>`
/// environment overrides on top.
///
/// `config.json` is one JSON object with an optional `"version": 1` and one object per section:
/// `{"version": 1, "pay": {"port": 8441}, "merchant": {"port": 8443, "logLevel": "debug"}}`. Missing keys
/// take their defaults. Every problem (unknown section or key, wrong type, value out of range, bad
/// environment value) is collected into one ``RuntimeError`` of code ``RuntimeError/Code/invalidConfiguration``.
public struct Configuration: Sendable {
    /// The format version this program writes and reads.
    public static let formatVersion = 1

    public let schema: ConfigurationSchema
    /// Values from the file or set in code; written back by ``jsonData()``.
    private var stored: [String: [String: ConfigurationValue]] = [:]
    /// Values from the environment; they win over `stored` and are never written back.
    private var overrides: [String: [String: ConfigurationValue]] = [:]

    /// What a reading does with a section or key its schema does not hold.
    public enum UnknownKeys: Sendable {
        /// An error: the schema is the whole configuration, so a typo is reported (a service at its start).
        case refused
        /// Passed over, as another module's schema checks them: for a reader that needs only a few keys and has
        /// only their schema (a command opening a party's store). The file must still be a valid configuration
        /// (JSON, no key given twice, its version) and the known keys valid.
        case passedOver
    }

    /// Every key at its default.
    public init(schema: ConfigurationSchema = .standard) { self.schema = schema }

    /// Reads and validates the file at `path`, then applies `environment` overrides.
    public static func load(
        from path: String, schema: ConfigurationSchema = .standard,
        environment: [String: String] = ProcessInfo.processInfo.environment, unknownKeys: UnknownKeys = .refused
    ) throws(RuntimeError) -> Configuration {
        let data: [UInt8]
        do throws(RuntimeError) {
            data = try SecureFile.read(path, limit: 1 << 20)
        } catch  where error.code == .notFound {
            throw RuntimeError(.notFound, "no configuration at \(path): run `orchard init` for this directory first")
        }
        return try parse(
            Data(data), source: (path as NSString).lastPathComponent, schema: schema, environment: environment,
            unknownKeys: unknownKeys)
    }

    /// Validates `json` (named `source` in messages), then applies `environment` overrides.
    public static func parse(
        _ json: Data, source: String = "config.json", schema: ConfigurationSchema = .standard,
        environment: [String: String] = [:], unknownKeys: UnknownKeys = .refused
    ) throws(RuntimeError) -> Configuration {
        if let duplicate = DuplicateJSONKeys.first(in: json) {
            throw RuntimeError(.invalidConfiguration, "\(source) gives '\(duplicate)' twice; keep one")
        }
        let document: JSONValue
        do {
            document = try JSONDecoder().decode(JSONValue.self, from: json)
        } catch {
            throw RuntimeError(.invalidConfiguration, "\(source) is not valid JSON: \(describe(error))")
        }
        guard case .object(let top) = document else {
            throw RuntimeError(.invalidConfiguration, "\(source) must hold a JSON object, found \(document.typeName)")
        }
        var configuration = Configuration(schema: schema)
        var problems: [String] = []
        let known = schema.sectionNames.joined(separator: ", ")
        for (sectionName, sectionValue) in top.sorted(by: { $0.key < $1.key }) {
            if sectionName == "version" {
                if sectionValue != .integer(formatVersion) {
                    problems.append("\(source): version: expected \(formatVersion), found \(sectionValue.summary)")
                }
                continue
            }
            guard let keys = schema.sections[sectionName] else {
                if unknownKeys == .passedOver { continue }
                problems.append("\(source): unknown section \"\(sectionName)\" (known: version, \(known))")
                continue
            }
            guard case .object(let entries) = sectionValue else {
                problems.append("\(source): \(sectionName): expected an object, found \(sectionValue.typeName)")
                continue
            }
            for (name, value) in entries.sorted(by: { $0.key < $1.key }) {
                guard let key = keys[name] else {
                    if unknownKeys == .passedOver { continue }
                    let names = keys.keys.sorted().joined(separator: ", ")
                    problems.append("\(source): \(sectionName).\(name): unknown key (known: \(names))")
                    continue
                }
                switch key.convert(value) {
                case .success(let converted): configuration.stored[sectionName, default: [:]][name] = converted
                case .failure(let problem): problems.append("\(source): \(sectionName).\(name): \(problem.text)")
                }
            }
        }
        problems += configuration.applyOverrides(environment, unknownKeys: unknownKeys)
        guard problems.isEmpty else {
            let count = problems.count == 1 ? "1 problem" : "\(problems.count) problems"
            throw RuntimeError(.invalidConfiguration, "invalid configuration (\(count))", problems: problems)
        }
        return configuration
    }

    /// Applies `ORCHARD_<SECTION>_<KEY>` variables; returns the problems. Variables whose middle part is not
    /// a section (such as `ORCHARD_DATA_DIR`) are not configuration and are left alone.
    private mutating func applyOverrides(_ environment: [String: String], unknownKeys: UnknownKeys) -> [String] {
        var problems: [String] = []
        // Longest section prefix first, so a section named "pay-x" is not mistaken for "pay".
        let sections = schema.sections.sorted { $0.key.count > $1.key.count }
        for (variable, text) in environment.sorted(by: { $0.key < $1.key }) where variable.hasPrefix("ORCHARD_") {
            let rest = variable.dropFirst("ORCHARD_".count)
            guard
                let (sectionName, keys) = sections.first(where: { section in
                    rest.hasPrefix(section.key.uppercased().replacingOccurrences(of: "-", with: "_") + "_")
                })
            else { continue }
            guard let key = keys.values.first(where: { $0.environmentVariable == variable }) else {
                if unknownKeys == .passedOver { continue }
                let names = keys.values.map(\.environmentVariable).sorted().joined(separator: ", ")
                problems.append("\(variable): \(sectionName) has no such key (known: \(names))")
                continue
            }
            switch key.parse(environment: text) {
            case .success(let value): overrides[sectionName, default: [:]][key.name] = value
            case .failure(let problem): problems.append("\(variable): \(problem.text)")
            }
        }
        return problems
    }

    /// The value of `key`: from the environment, else the file, else its default.
    public subscript<Value>(key: ConfigurationKey<Value>) -> Value {
        let value = overrides[key.section]?[key.name] ?? stored[key.section]?[key.name]
        return value.flatMap(key.unwrap) ?? key.defaultValue
    }

    /// Whether `key` was set by the file, in code or by the environment (rather than defaulted).
    public func isSet<Value>(_ key: ConfigurationKey<Value>) -> Bool {
        overrides[key.section]?[key.name] != nil || stored[key.section]?[key.name] != nil
    }

    /// Sets `key` to `value` (as `orchard init` does before writing the file), validated like the file.
    public mutating func set<Value>(_ key: ConfigurationKey<Value>, _ value: Value) throws(RuntimeError) {
        guard let known = schema.sections[key.section]?[key.name] else {
            throw RuntimeError(.invalidConfiguration, "\(key.path) is not in this configuration's schema")
        }
        if let problem = known.check(key.wrap(value)) {
            throw RuntimeError(.invalidConfiguration, "\(key.path): \(problem)", problems: ["\(key.path): \(problem)"])
        }
        stored[key.section, default: [:]][key.name] = key.wrap(value)
    }

    /// The file form: the version and every value set in code or read from the file (not the environment
    /// overrides), pretty-printed with sorted keys.
    public func jsonData() -> Data {
        var top: [String: JSONValue] = ["version": .integer(Self.formatVersion)]
        for (section, values) in stored {
            top[section] = .object(values.mapValues(JSONValue.init))
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        // Encoding a tree of strings, numbers and booleans cannot fail.
        return (try? encoder.encode(JSONValue.object(top))) ?? Data("{}".utf8)
    }

    /// Writes ``jsonData()`` to `path` atomically with mode 0600.
    public func write(to path: String) throws(RuntimeError) {
        try SecureFile.write(jsonData() + Data("\n".utf8), to: path, mode: 0o600)
    }

    private static func describe(_ error: any Error) -> String {
        if case DecodingError.dataCorrupted(let context) = error {
            return (context.underlyingError as NSError?)?.localizedDescription ?? context.debugDescription
        }
        return "\(error)"
    }
}

/// A JSON document, decoded without losing the difference between integers, reals and booleans.
enum JSONValue: Codable, Hashable, Sendable {
    case null
    case boolean(Bool)
    case integer(Int)
    case real(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let flag = try? container.decode(Bool.self) {
            self = .boolean(flag)
        } else if let number = try? container.decode(Int.self) {
            self = .integer(number)
        } else if let number = try? container.decode(Double.self) {
            self = .real(number)
        } else if let text = try? container.decode(String.self) {
            self = .string(text)
        } else if let items = try? container.decode([JSONValue].self) {
            self = .array(items)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    init(_ value: ConfigurationValue) {
        switch value {
        case .integer(let number): self = .integer(number)
        case .boolean(let flag): self = .boolean(flag)
        case .string(let text): self = .string(text)
        case .strings(let texts): self = .array(texts.map { .string($0) })
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .boolean(let flag): try container.encode(flag)
        case .integer(let number): try container.encode(number)
        case .real(let number): try container.encode(number)
        case .string(let text): try container.encode(text)
        case .array(let items): try container.encode(items)
        case .object(let entries): try container.encode(entries)
        }
    }

    var typeName: String {
        switch self {
        case .null: "null"
        case .boolean: "a boolean"
        case .integer: "an integer"
        case .real: "a number with a fraction"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    /// The value for an error message: scalars as written, containers by type.
    var summary: String {
        switch self {
        case .null: "null"
        case .boolean(let flag): "\(flag)"
        case .integer(let number): "\(number)"
        case .real(let number): "\(number)"
        case .string(let text): "\"\(text)\""
        case .array, .object: typeName
        }
    }
}

/// `logLevel` → `LOG_LEVEL`; `store.orchard.test` → `STORE_ORCHARD_TEST`.
func screamingSnake(_ camel: String) -> String {
    var out = ""
    for character in camel {
        if character.isUppercase && !out.isEmpty { out.append("_") }
        out.append(contentsOf: character.uppercased())
    }
    return out.replacingOccurrences(of: "-", with: "_").replacingOccurrences(of: ".", with: "_")
}

/// Whether `text` is an IPv4 or IPv6 address literal.
func isIPAddress(_ text: String) -> Bool {
    var v4 = in_addr()
    var v6 = in6_addr()
    return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
}
