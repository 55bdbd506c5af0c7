public import Foundation
import OrchardCrypto

/// How important an event is. Ordered: `trace < debug < info < notice < warning < error < critical`.
public struct LogLevel: Hashable, Sendable, Comparable, CustomStringConvertible {
    private let rank: Int
    public let name: String
    private init(_ rank: Int, _ name: String) {
        self.rank = rank
        self.name = name
    }

    public static let trace = LogLevel(0, "trace")
    public static let debug = LogLevel(1, "debug")
    public static let info = LogLevel(2, "info")
    public static let notice = LogLevel(3, "notice")
    public static let warning = LogLevel(4, "warning")
    public static let error = LogLevel(5, "error")
    public static let critical = LogLevel(6, "critical")

    public static let all: [LogLevel] = [.trace, .debug, .info, .notice, .warning, .error, .critical]

    /// Parses a level name (`"info"`, case-insensitive), as given in `--log-level` or `ORCHARD_LOG_LEVEL`.
    public init(parsing text: String) throws(LoggingError) {
        guard let level = LogLevel.all.first(where: { $0.name == text.lowercased() }) else {
            throw LoggingError(
                .invalidLevel, "unknown log level; use one of \(LogLevel.all.map(\.name).joined(separator: ", "))")
        }
        self = level
    }

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rank < rhs.rank }
    public static func == (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rank == rhs.rank }
    public func hash(into hasher: inout Hasher) { hasher.combine(rank) }
    public var description: String { name }
}

/// A structured metadata value. Strings (and long integers) pass through ``CardNumberScrubber``
/// before they are written; values of other types enter as their `description`, which the typed
/// redaction (``PrimaryAccountNumber``, ``Redacted``) keeps masked.
public indirect enum LogValue: Sendable, Equatable {
    case string(String)
    case integer(Int)
    case double(Double)
    case bool(Bool)
    case array([LogValue])
    case object([String: LogValue])

    /// A UUID in its canonical lower-case form: identifiers in logs are UUIDs.
    public static func uuid(_ id: UUID) -> LogValue { .string(id.uuidString.lowercased()) }

    /// Any value by its `description` (so redacting types stay redacted).
    public static func describing(_ value: some Any) -> LogValue { .string(String(describing: value)) }

    /// The value with card-number-like text masked.
    func scrubbed() -> LogValue {
        switch self {
        case .string(let text): return .string(CardNumberScrubber.scrub(text))
        case .integer(let n) where n >= 100_000_000_000 || n <= -100_000_000_000:
            let text = String(n)
            let scrubbed = CardNumberScrubber.scrub(text)
            return scrubbed == text ? self : .string(scrubbed)
        case .integer, .double, .bool: return self
        case .array(let values): return .array(values.map { $0.scrubbed() })
        case .object(let values): return .object(Self.scrubbed(values))
        }
    }

    /// `values` with card-number-like text masked in the keys as well as the values (a key made from data, such
    /// as a card number used as a dictionary key, is as visible in the line as a value). Keys that become equal
    /// once masked keep the last value.
    static func scrubbed(_ values: [String: LogValue]) -> [String: LogValue] {
        Dictionary(
            values.map { (CardNumberScrubber.scrub($0.key), $0.value.scrubbed()) },
            uniquingKeysWith: { _, last in last })
    }
}

extension LogValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral,
    ExpressibleByStringInterpolation
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(stringInterpolation: DefaultStringInterpolation) {
        self = .string(String(stringInterpolation: stringInterpolation))
    }
    public init(integerLiteral value: Int) { self = .integer(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: LogValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, LogValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}

/// A log message. Interpolated values enter through their `description`, so a ``PrimaryAccountNumber``
/// prints masked and a ``Redacted`` value prints `<redacted>`.
public struct LogMessage: Sendable, ExpressibleByStringInterpolation, CustomStringConvertible {
    public let text: String
    public init(stringLiteral value: String) { text = value }
    public init(stringInterpolation: DefaultStringInterpolation) {
        text = String(stringInterpolation: stringInterpolation)
    }
    public init(_ text: String) { self.text = text }
    public var description: String { text }
}

/// One event, after redaction: what a ``LogSink`` receives.
public struct LogRecord: Sendable {
    public let time: Date
    public let level: LogLevel
    public let label: String
    /// The message with card-number-like text masked.
    public let message: String
    /// The logger's metadata merged with the event's (the event's wins), strings masked.
    public let metadata: [String: LogValue]

    /// Fields every line has; metadata with the same name is written with a leading underscore.
    static let reservedKeys: Set<String> = ["time", "level", "logger", "message"]

    /// The record as one line of JSON with sorted keys and no trailing newline:
    /// `{"level":"info","logger":"http","message":"…","request_id":"…","time":"2026-01-02T03:04:05.678Z"}`.
    public var jsonLine: String {
        var fields: [(String, LogValue)] = [
            ("time", .string(Self.timestamp(time))), ("level", .string(level.name)), ("logger", .string(label)),
            ("message", .string(message)),
        ]
        for (key, value) in metadata {
            fields.append((Self.reservedKeys.contains(key) ? "_" + key : key, value))
        }
        fields.sort { $0.0 < $1.0 }
        var out = "{"
        for (index, field) in fields.enumerated() {
            if index > 0 { out += "," }
            JSON.appendString(field.0, to: &out)
            out += ":"
            JSON.append(field.1, to: &out)
        }
        out += "}"
        return out
    }

    /// RFC 3339 in UTC with milliseconds.
    static func timestamp(_ date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        var seconds = time_t(milliseconds / 1000)
        var millis = Int32(milliseconds % 1000)
        if millis < 0 {
            millis += 1000
            seconds -= 1
        }
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ n: Int32, _ width: Int) -> String {
            let text = String(n)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(millis, 3))Z"
    }
}

/// A small JSON writer for log lines (sorted keys, unescaped slashes, RFC 8259 string escaping).
enum JSON {
    static func append(_ value: LogValue, to out: inout String) {
        switch value {
        case .string(let text): appendString(text, to: &out)
        case .integer(let n): out += String(n)
        case .double(let d): out += d.isFinite ? String(d) : "null"
        case .bool(let b): out += b ? "true" : "false"
        case .array(let values):
            out += "["
            for (index, element) in values.enumerated() {
                if index > 0 { out += "," }
                append(element, to: &out)
            }
            out += "]"
        case .object(let values):
            out += "{"
            for (index, key) in values.keys.sorted().enumerated() {
                if index > 0 { out += "," }
                appendString(key, to: &out)
                out += ":"
                append(values[key]!, to: &out)
            }
            out += "}"
        }
    }

    static func appendString(_ text: String, to out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x2028 || scalar.value == 0x2029:
                out += "\\u" + Hex.encode([UInt8(scalar.value >> 8), UInt8(scalar.value & 0xFF)], lowercase: true)
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}

/// Where records go. Implementations must be safe to call from any thread.
public protocol LogSink: Sendable {
    func emit(_ record: LogRecord)
}

/// Writes one JSON line per record to standard error, each with a single `write(2)` so lines from
/// different threads never interleave.
public final class StandardErrorLogSink: LogSink {
    public static let shared = StandardErrorLogSink()
    private let lock = NSLock()

    public init() {}

    public func emit(_ record: LogRecord) {
        let line = record.jsonLine + "\n"
        lock.withLock {
            var bytes = Array(line.utf8)
            var offset = 0
            while offset < bytes.count {
                let written = bytes.withUnsafeMutableBytes { buffer in
                    write(2, buffer.baseAddress! + offset, buffer.count - offset)
                }
                if written > 0 {
                    offset += written
                } else if written < 0 && errno == EINTR {
                    continue
                } else {
                    return  // stderr is gone; dropping a log line is better than stopping the service
                }
            }
            bytes.removeAll()
        }
    }
}

/// Keeps records in memory: for tests that check what was logged.
public final class InMemoryLogSink: LogSink, @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [LogRecord] = []

    public init() {}

    public func emit(_ record: LogRecord) { lock.withLock { stored.append(record) } }

    /// Every record so far, in order.
    public var records: [LogRecord] { lock.withLock { stored } }
    /// Every record as its JSON line.
    public var lines: [String] { records.map(\.jsonLine) }
}

/// Discards everything.
public struct NullLogSink: LogSink {
    public init() {}
    public func emit(_ record: LogRecord) {}
}

/// A structured logger: one JSON line per event, with a level threshold and metadata.
///
/// Libraries take a `Logger` and add their own metadata (``with(_:)``); the process decides the
/// sink and level once. Everything written passes through the typed redaction of the values it
/// describes and then through ``CardNumberScrubber``, so a card number cannot reach a line unmasked.
/// Identifiers in logs are UUIDs (``LogValue/uuid(_:)``). A value type: copies are cheap and
/// independent.
public struct Logger: Sendable {
    public let label: String
    /// Events below this level are dropped before their message is built.
    public var level: LogLevel
    /// Fields added to every event of this logger.
    public var metadata: [String: LogValue]
    public let sink: any LogSink
    private let clock: @Sendable () -> Date

    /// - Parameters:
    ///   - clock: the wall clock for timestamps (inject a fixed one in tests).
    public init(
        label: String, level: LogLevel = .info, metadata: [String: LogValue] = [:],
        sink: any LogSink = StandardErrorLogSink.shared, clock: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.label = label
        self.level = level
        self.metadata = metadata
        self.sink = sink
        self.clock = clock
    }

    /// A logger that writes nothing.
    public static var disabled: Logger { Logger(label: "disabled", level: .critical, sink: NullLogSink()) }

    /// Whether an event at `level` would be written.
    @inline(__always)
    public func isEnabled(_ level: LogLevel) -> Bool { level >= self.level }

    /// This logger with more metadata (for example a request id) on every event.
    public func with(_ extra: [String: LogValue]) -> Logger {
        var copy = self
        copy.metadata.merge(extra) { _, new in new }
        return copy
    }

    /// This logger with another label.
    public func labeled(_ label: String) -> Logger {
        Logger(label: label, level: level, metadata: metadata, sink: sink, clock: clock)
    }

    /// Writes one event if `level` is enabled. The message and metadata are built only then.
    public func log(
        _ level: LogLevel, _ message: @autoclosure () -> LogMessage,
        metadata extra: @autoclosure () -> [String: LogValue] = [:]
    ) {
        guard isEnabled(level) else { return }
        var fields = metadata
        fields.merge(extra()) { _, new in new }
        sink.emit(
            LogRecord(
                time: clock(), level: level, label: label, message: CardNumberScrubber.scrub(message().text),
                metadata: LogValue.scrubbed(fields)))
    }

    public func trace(_ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> [String: LogValue] = [:]) {
        log(.trace, message(), metadata: metadata())
    }
    public func debug(_ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> [String: LogValue] = [:]) {
        log(.debug, message(), metadata: metadata())
    }
    public func info(_ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> [String: LogValue] = [:]) {
        log(.info, message(), metadata: metadata())
    }
    public func notice(_ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> [String: LogValue] = [:])
    {
        log(.notice, message(), metadata: metadata())
    }
    public func warning(
        _ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> [String: LogValue] = [:]
    ) {
        log(.warning, message(), metadata: metadata())
    }
    public func error(_ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> [String: LogValue] = [:]) {
        log(.error, message(), metadata: metadata())
    }
    public func critical(
        _ message: @autoclosure () -> LogMessage, metadata: @autoclosure () -> [String: LogValue] = [:]
    ) {
        log(.critical, message(), metadata: metadata())
    }
}
