public import Foundation
public import OrchardRuntime
public import OrchardStore

/// Where each server party keeps its state: `DIR/<party>.sqlite` by default, or a schema of a PostgreSQL database
/// named by the `database` key of the party's service section of `config.json` (`orchard init --database`).
///
/// The `pay` service keeps the `pay` schema, `merchant` the `merchant` schema, and `network` the `network` (token
/// vault), `issuer` and `acquirer` schemas. The URL never carries a password: libpq reads it from `pki/<party>/pgpass`
/// (mode 0600, `host:port:database:user:password` lines) when that file exists.
public enum StoreSettings {
    /// The services whose stores may live on PostgreSQL.
    public static let serverServices: [ServiceName] = [.pay, .network, .merchant]

    /// The `database` key of `service`: empty (SQLite files in DIR) or a `postgresql://` URL without a password.
    public static func database(_ service: ServiceName) -> ConfigurationKey<String> {
        .string(service.rawValue, "database", default: "") { value in
            guard !value.isEmpty else { return nil }
            do throws(StoreError) {
                try PostgreSQLLocation.validate(url: value)
                return nil
            } catch {
                return error.message
            }
        }
    }

    /// Where `service` keeps its Idempotency-Key records: `DIR/<service>-idempotency.sqlite`, or the
    /// `<service>_idempotency` schema of its PostgreSQL database.
    public static func idempotencyLocation(
        for service: ServiceName, configuration: Configuration, directory: DeploymentDirectory
    ) throws(StoreError) -> StoreLocation {
        let file = StoreLocation.file(directory.path + "/" + service.rawValue + "-idempotency.sqlite")
        guard serverServices.contains(service) else { return file }
        let url = configuration[database(service)]
        guard !url.isEmpty else { return file }
        let passfile = "\(directory.pkiFolderPath(service.rawValue))/pgpass"
        return .postgreSQL(
            try PostgreSQLLocation(
                url: url, schema: service.rawValue + "_idempotency",
                passfile: FileManager.default.fileExists(atPath: passfile) ? passfile : nil))
    }

    /// The parties whose stores `service` keeps.
    public static func parties(of service: ServiceName) -> [Party] {
        switch service {
        case .pay: [.pay]
        case .merchant: [.merchant]
        case .network: [.network, .issuer, .acquirer]
        default: []
        }
    }

    /// The service whose `database` setting decides where `party`'s store lives.
    static func service(of party: Party) -> ServiceName? {
        switch party {
        case .pay: .pay
        case .merchant: .merchant
        case .network, .issuer, .acquirer: .network
        default: nil
        }
    }

    /// Where `party`'s store lives under `configuration`: its PostgreSQL schema when its service has a `database`,
    /// else `DIR/<party>.sqlite`.
    public static func location(
        for party: Party, configuration: Configuration, directory: DeploymentDirectory
    ) throws(StoreError) -> StoreLocation {
        guard let service = service(of: party) else { return .file(directory.databasePath(for: party)) }
        return try location(for: party, url: configuration[database(service)], directory: directory)
    }

    static func location(
        for party: Party, url: String, directory: DeploymentDirectory
    ) throws(StoreError) -> StoreLocation {
        guard let service = service(of: party), !url.isEmpty else { return .file(directory.databasePath(for: party)) }
        let passfile = "\(directory.pkiFolderPath(service.rawValue))/pgpass"
        return .postgreSQL(
            try PostgreSQLLocation(
                url: url, schema: party.rawValue,
                passfile: FileManager.default.fileExists(atPath: passfile) ? passfile : nil))
    }

    /// ``location(for:configuration:directory:)`` with the `database` key read from `DIR/config.json` (and its
    /// `ORCHARD_<SERVICE>_DATABASE` override), for commands that open a party's store without its service's
    /// configuration at hand. The file is read through ``Configuration`` with only this key's schema (the other
    /// keys are their services' to check); a file that is no valid configuration (not JSON, a key given twice, a
    /// `database` that is not a string or not a `postgresql://` URL) throws ``RuntimeError`` rather than reading as
    /// "no database". Without a `config.json`, the store is `DIR/<party>.sqlite` unless the environment names one.
    public static func location(
        for party: Party, in directory: DeploymentDirectory,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> StoreLocation {
        guard let service = service(of: party) else { return .file(directory.databasePath(for: party)) }
        let schema = ConfigurationSchema([database(service).erased])
        let configuration: Configuration
        do throws(RuntimeError) {
            configuration = try Configuration.load(
                from: directory.configurationPath, schema: schema, environment: environment,
                unknownKeys: .passedOver)
        } catch  where error.code == .notFound {
            configuration = try Configuration.parse(
                Data("{}".utf8), schema: schema, environment: environment, unknownKeys: .passedOver)
        }
        return try location(for: party, configuration: configuration, directory: directory)
    }
}
