internal import CLibPQ
internal import Foundation

/// Where a store keeps its data: an SQLite file (the default, for every party) or a schema of a PostgreSQL
/// database (for server parties that run several instances on one replicated database).
public enum StoreLocation: Sendable, Hashable, CustomStringConvertible {
    /// An SQLite file at this path.
    case file(String)
    /// A schema of a PostgreSQL database.
    case postgreSQL(PostgreSQLLocation)

    /// Whether the data lives on PostgreSQL (shared by several instances of a party, on the database's clock).
    public var isPostgreSQL: Bool {
        if case .postgreSQL = self { true } else { false }
    }

    /// The path, or the PostgreSQL URL and schema (never a password: a URL with one is refused).
    public var description: String {
        switch self {
        case .file(let path): path
        case .postgreSQL(let location): location.description
        }
    }
}

/// A PostgreSQL database and the schema one party's tables live in.
///
/// The URL is a libpq connection URI (`postgresql://user@host:port/database`, `?host=/socket/dir` for a Unix
/// socket). It never carries a password: the password, if any, comes from ``passfile``, a libpq password file
/// (`host:port:database:user:password` lines, mode 0600) kept in the party's key folder.
public struct PostgreSQLLocation: Sendable, Hashable, CustomStringConvertible {
    /// The connection URI, without a password.
    public let url: String
    /// The schema that holds this store's tables (created when missing), so that several parties can share one
    /// database without their tables meeting.
    public let schema: String
    /// The libpq password file to read the password from, if any.
    public let passfile: String?

    /// Validates `url` (a `postgresql://` or `postgres://` URI that libpq parses and that has no password) and
    /// `schema` (lowercase letters, digits and `_`, starting with a letter, at most 63 bytes).
    public init(url: String, schema: String, passfile: String? = nil) throws(StoreError) {
        try Self.validate(url: url)
        let bytes = Array(schema.utf8)
        guard (1...63).contains(bytes.count), let first = bytes.first, (0x61...0x7A).contains(first),
            bytes.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x5F })
        else {
            throw StoreError(
                .invalidArgument,
                "\"\(schema)\" is not a schema name: use lowercase letters, digits and '_', starting with a letter")
        }
        self.url = url
        self.schema = schema
        self.passfile = passfile
    }

    public var description: String { "\(url) (schema \(schema))" }

    /// Throws ``StoreError/Code/invalidArgument`` unless `url` is a PostgreSQL URI libpq accepts, without a
    /// password.
    public static func validate(url: String) throws(StoreError) {
        guard url.hasPrefix("postgresql://") || url.hasPrefix("postgres://") else {
            throw StoreError(.invalidArgument, "a PostgreSQL database is given as a postgresql://… URL")
        }
        var message: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(url, &message) else {
            let detail = message.map { String(cString: $0) } ?? "out of memory"
            if let message { PQfreemem(message) }
            throw StoreError(
                .invalidArgument,
                "the PostgreSQL URL is not valid: \(detail.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
        defer { PQconninfoFree(options) }
        var option = options
        while let keyword = option.pointee.keyword {
            if String(cString: keyword) == "password", let value = option.pointee.val, value.pointee != 0 {
                throw StoreError(
                    .invalidArgument,
                    "the PostgreSQL URL carries a password: remove it and put it in the party's passfile "
                        + "(pki/<party>/pgpass, mode 0600)")
            }
            option += 1
        }
    }
}

extension PostgreSQLLocation {
    /// How many tables the schema holds (0 when it does not exist yet): whether `orchard init` would replace a
    /// deployment's data.
    public func tableCount() throws(StoreError) -> Int {
        let database = try Database(location: .postgreSQL(self), options: StoreOptions(durability: .full))
        let count = try database.firstValue(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = ?", [.text(schema)])
        guard case .integer(let tables) = count else { return 0 }
        return Int(tables)
    }

    /// Drops the schema with every table in it (`orchard init --force`).
    public func dropSchema() throws(StoreError) {
        let database = try Database(location: .postgreSQL(self), options: StoreOptions(durability: .full))
        try database.executeScript("DROP SCHEMA IF EXISTS \"\(schema)\" CASCADE")
    }
}
