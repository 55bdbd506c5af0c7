public import Foundation

/// A value bound to a statement parameter or read from a column: SQLite's five storage classes.
///
/// Literals make argument lists short: `[42, "text", nil, .blob(bytes)]`.
public enum SQLiteValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    /// An integer.
    public static func int(_ value: Int) -> SQLiteValue { .integer(Int64(value)) }
    /// A boolean, stored as 0 or 1.
    public static func bool(_ value: Bool) -> SQLiteValue { .integer(value ? 1 : 0) }
    /// Bytes from any collection.
    public static func bytes(_ value: some DataProtocol) -> SQLiteValue { .blob(Array(value)) }
    /// A point in time as whole milliseconds since 1970 (the unit every Orchard table uses).
    public static func milliseconds(_ date: Date) -> SQLiteValue { .integer(date.orchardMilliseconds) }
    /// `value`, or NULL when it is nil.
    public static func optional(_ value: String?) -> SQLiteValue { value.map { .text($0) } ?? .null }
    /// `value`, or NULL when it is nil.
    public static func optional(_ value: Int64?) -> SQLiteValue { value.map { .integer($0) } ?? .null }
    /// `value`, or NULL when it is nil.
    public static func optional(_ value: [UInt8]?) -> SQLiteValue { value.map { .blob($0) } ?? .null }

    /// The storage class's name, for error messages (never the value: it may be secret).
    var typeName: String {
        switch self {
        case .null: "NULL"
        case .integer: "INTEGER"
        case .real: "REAL"
        case .text: "TEXT"
        case .blob: "BLOB"
        }
    }
}

extension SQLiteValue: ExpressibleByIntegerLiteral, ExpressibleByStringLiteral, ExpressibleByNilLiteral,
    ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral
{
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(stringLiteral value: String) { self = .text(value) }
    public init(nilLiteral: ()) { self = .null }
    public init(floatLiteral value: Double) { self = .real(value) }
    public init(booleanLiteral value: Bool) { self = .integer(value ? 1 : 0) }
}

extension Date {
    /// Whole milliseconds since 1970, rounded down: how Orchard tables store time.
    public var orchardMilliseconds: Int64 { Int64((timeIntervalSince1970 * 1000).rounded(.down)) }

    /// The date `milliseconds` after 1970.
    public init(orchardMilliseconds milliseconds: Int64) {
        self.init(timeIntervalSince1970: Double(milliseconds) / 1000)
    }
}
