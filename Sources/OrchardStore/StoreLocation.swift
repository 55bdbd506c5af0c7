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
    /// password, that reaches its server safely: over a Unix socket (no host, or `host=/path`), or over TCP only with
    /// TLS that verifies the server's certificate and name (`sslmode=verify-full` and `sslrootcert`) and a login
    /// bound to that channel (`channel_binding=require`, or a client certificate with `sslcert` and `sslkey`).
    /// libpq's default (`sslmode=prefer`) would accept plaintext or an unauthenticated server, and a party's
    /// rows (a token vault's among them) would cross the network unprotected.
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
        var given: [String: String] = [:]
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val, value.pointee != 0 {
                given[String(cString: keyword)] = String(cString: value)
            }
            option += 1
        }
        guard given["password"] == nil else {
            throw StoreError(
                .invalidArgument,
                "the PostgreSQL URL carries a password: remove it and put it in the party's passfile "
                    + "(pki/<party>/pgpass, mode 0600)")
        }
        try checkTransport(given)
    }

    /// The TLS rule of ``validate(url:)`` on the URL's libpq options.
    static func checkTransport(_ given: [String: String]) throws(StoreError) {
        // libpq reads a host starting with '/' (or '@', Linux's abstract namespace) as a socket directory; no host
        // and no hostaddr is its default socket. Any other host, or any hostaddr, is TCP.
        let hosts = (given["host"] ?? "").split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        let tcpHosts = hosts.filter { !$0.isEmpty && !$0.hasPrefix("/") && !$0.hasPrefix("@") }
        let tcp = tcpHosts + (given["hostaddr"].map { [$0] } ?? [])
        guard let first = tcp.first else { return }
        var missing: [String] = []
        if given["sslmode"] != "verify-full" { missing.append("sslmode=verify-full") }
        if given["sslrootcert"] == nil {
            missing.append("sslrootcert=FILE (the CA that issued the server's certificate)")
        }
        let certificateLogin = given["sslcert"] != nil && given["sslkey"] != nil
        if given["channel_binding"] != "require" && !certificateLogin {
            missing.append(
                "channel_binding=require (scram-sha-256), or sslcert=FILE&sslkey=FILE (a client certificate)")
        }
        guard missing.isEmpty else {
            throw StoreError(
                .invalidArgument,
                "the PostgreSQL URL reaches \(first) over TCP without verified TLS: add "
                    + missing.joined(separator: " and ") + ", or connect over a Unix socket (?host=/run/postgresql)")
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
