import Foundation
import OrchardRuntime
import OrchardServices
import OrchardStore
import Testing

/// Where a command finds a party's store: `config.json` read through `Configuration` with only the `database`
/// key's schema, so another service's keys pass but a broken file is an error, never "no database".
@Suite("Store settings from config.json")
struct StoreSettingsTests {
    let temporary: TemporaryDirectory
    let directory: DeploymentDirectory

    init() throws {
        temporary = try TemporaryDirectory()
        directory = DeploymentDirectory(path: temporary.path)
    }

    func write(_ json: String) throws {
        try Data(json.utf8).write(to: URL(fileURLWithPath: directory.configurationPath))
    }

    func location(_ party: Party, environment: [String: String] = [:]) throws -> StoreLocation {
        try StoreSettings.location(for: party, in: directory, environment: environment)
    }

    @Test("Without a database key, or without config.json, each party's store is its SQLite file in DIR")
    func sqliteByDefault() throws {
        #expect(try location(.pay) == .file(directory.databasePath(for: .pay)))
        // Other services' keys belong to their schemas: passed over here, not refused.
        try write(#"{"version":1,"pay":{"port":8441,"logLevel":"debug"},"network":{"database":""},"other":{"x":1}}"#)
        #expect(try location(.pay) == .file(directory.databasePath(for: .pay)))
        #expect(try location(.issuer) == .file(directory.databasePath(for: .issuer)))
    }

    @Test("A database key, or its environment override, names the party's PostgreSQL schema")
    func postgreSQL() throws {
        try write(#"{"version":1,"network":{"database":"postgresql://@/orchard?host=/run/postgresql"}}"#)
        guard case .postgreSQL(let issuer) = try location(.issuer) else {
            Issue.record("the issuer's store is not on PostgreSQL")
            return
        }
        #expect(issuer.url == "postgresql://@/orchard?host=/run/postgresql" && issuer.schema == "issuer")
        #expect(try location(.pay) == .file(directory.databasePath(for: .pay)))
        let overridden = try location(
            .pay, environment: ["ORCHARD_PAY_DATABASE": "postgresql://@/other?host=/run/postgresql"])
        guard case .postgreSQL(let pay) = overridden else {
            Issue.record("the override did not apply")
            return
        }
        #expect(pay.url == "postgresql://@/other?host=/run/postgresql" && pay.schema == "pay")
    }

    @Test(
        "A broken config.json is an invalidConfiguration error, never read as SQLite: not JSON, a key given twice, a wrong type, a wrong version",
        arguments: [
            #"{"network":{"database":"postgresql://@/orchard?host=/run/postgresql"}"#,
            #"{"network":{"database":"","database":"postgresql://@/orchard?host=/run/postgresql"}}"#,
            #"{"network":{"database":5}}"#,
            #"{"network":{"database":"mysql://localhost/orchard"}}"#,
            #"{"version":2,"network":{"database":""}}"#,
            #"{"network":"postgresql://@/orchard?host=/run/postgresql"}"#,
            #"["network"]"#,
        ])
    func brokenFile(json: String) throws {
        try write(json)
        #expect(throws: RuntimeError(.invalidConfiguration, "")) { try location(.network) }
        // Also with an environment override: the file is read, not skipped.
        #expect(throws: RuntimeError(.invalidConfiguration, "")) {
            try location(
                .network, environment: ["ORCHARD_NETWORK_DATABASE": "postgresql://@/orchard?host=/run/postgresql"])
        }
    }
}
