import Foundation
import OrchardRuntime
import Testing

@Suite("Configuration: config.json validated, ORCHARD_<SERVICE>_<KEY> overrides")
struct ConfigurationTests {
    func parse(
        _ json: String, environment: [String: String] = [:], schema: ConfigurationSchema = .standard
    )
        throws(RuntimeError) -> Configuration
    {
        try Configuration.parse(Data(json.utf8), schema: schema, environment: environment)
    }

    /// The problems a configuration is rejected with (empty when it is accepted).
    func problems(
        _ json: String, environment: [String: String] = [:], schema: ConfigurationSchema = .standard
    )
        -> [String]
    {
        do {
            _ = try parse(json, environment: environment, schema: schema)
            return []
        } catch {
            #expect(error.code == .invalidConfiguration)
            return error.problems.isEmpty ? [error.message] : error.problems
        }
    }

    @Test func defaultsApplyToAnEmptyFile() throws {
        let configuration = try parse("{}")
        #expect(configuration[ServiceSettings.port(.pay)] == 0)
        #expect(configuration[ServiceSettings.host(.merchant)] == "127.0.0.1")
        #expect(configuration[ServiceSettings.logLevel(.network)] == "info")
        #expect(!configuration.isSet(ServiceSettings.port(.pay)))
    }

    @Test func aValidFileIsRead() throws {
        let configuration = try parse(
            """
            {"version": 1,
             "pay": {"port": 8441, "host": "::1"},
             "network": {"port": 8442, "logLevel": "debug"},
             "merchant": {}}
            """
        )
        #expect(configuration[ServiceSettings.port(.pay)] == 8441)
        #expect(configuration[ServiceSettings.host(.pay)] == "::1")
        #expect(configuration[ServiceSettings.port(.network)] == 8442)
        #expect(configuration[ServiceSettings.logLevel(.network)] == "debug")
        #expect(configuration[ServiceSettings.port(.merchant)] == 0)
        #expect(configuration.isSet(ServiceSettings.port(.pay)))
    }

    @Test func everyProblemIsReportedWithItsLocation() {
        let found = problems(
            """
            {"version": 2,
             "pya": {"port": 1},
             "pay": {"prot": 8441, "port": "8441", "host": "localhost"},
             "network": {"port": 70000, "logLevel": "loud"},
             "issuer": {"port": -1},
             "acquirer": {"port": 8443.5},
             "merchant": 5}
            """
        )
        let expected = [
            "config.json: acquirer.port: expected an integer, found a number with a fraction",
            "config.json: issuer.port: -1 is out of range 0...65535 for a port (0 picks a free one)",
            "config.json: merchant: expected an object, found an integer",
            "config.json: network.logLevel: \"loud\" is not one of trace, debug, info, notice, warning, error",
            "config.json: network.port: 70000 is out of range 0...65535 for a port (0 picks a free one)",
            "config.json: pay.host: \"localhost\" is not an IPv4 or IPv6 address",
            "config.json: pay.port: expected an integer, found a string",
            "config.json: pay.prot: unknown key (known: host, instancePorts, logLevel, port)",
            "config.json: unknown section \"pya\" (known: version, acquirer, issuer, merchant, network, pay)",
            "config.json: version: expected 1, found 2",
        ]
        #expect(found.sorted() == expected.sorted())
    }

    @Test func malformedDocumentsAreRejected() {
        #expect(problems("{\"pay\": ")[0].hasPrefix("config.json is not valid JSON"))
        #expect(problems("[1, 2]") == ["config.json must hold a JSON object, found an array"])
        #expect(
            problems("{\"pay\": {\"port\": true}}") == ["config.json: pay.port: expected an integer, found a boolean"])
        #expect(problems("{\"pay\": {\"port\": null}}") == ["config.json: pay.port: expected an integer, found null"])
    }

    /// A setting given twice is refused, not resolved silently to one of the two.
    @Test("S9: config.json giving a key twice is refused")
    func aKeyGivenTwiceIsRefused() {
        #expect(
            problems(#"{"pay": {"port": 8441, "host": "127.0.0.1", "port": 9000}}"#) == [
                "config.json gives 'pay.port' twice; keep one"
            ])
        #expect(
            problems(#"{"pay": {"port": 8441}, "pay": {"port": 9000}}"#) == ["config.json gives 'pay' twice; keep one"])
    }

    @Test func environmentOverridesTheFile() throws {
        let configuration = try parse(
            "{\"pay\": {\"port\": 8441, \"logLevel\": \"warning\"}}",
            environment: [
                "ORCHARD_PAY_PORT": "9000", "ORCHARD_MERCHANT_LOG_LEVEL": "trace",
                "ORCHARD_DATA_DIR": "/elsewhere",  // not configuration: ignored
                "PAY_PORT": "1",  // not ours
            ]
        )
        #expect(configuration[ServiceSettings.port(.pay)] == 9000)
        #expect(configuration[ServiceSettings.logLevel(.pay)] == "warning")
        #expect(configuration[ServiceSettings.logLevel(.merchant)] == "trace")
        // Overrides are never written back to the file.
        let written = try parse(String(decoding: configuration.jsonData(), as: UTF8.self))
        #expect(written[ServiceSettings.port(.pay)] == 8441)
        #expect(!written.isSet(ServiceSettings.logLevel(.merchant)))
        #expect(ServiceSettings.logLevel(.pay).erased.environmentVariable == "ORCHARD_PAY_LOG_LEVEL")
    }

    @Test func badEnvironmentValuesAreReported() {
        let found = problems(
            "{}",
            environment: [
                "ORCHARD_PAY_PORT": "eighty", "ORCHARD_NETWORK_PORT": "65536", "ORCHARD_PAY_PROT": "1",
                "ORCHARD_ISSUER_HOST": "example.com",
            ]
        )
        #expect(
            found.sorted() == [
                "ORCHARD_ISSUER_HOST: \"example.com\" is not an IPv4 or IPv6 address",
                "ORCHARD_NETWORK_PORT: 65536 is out of range 0...65535 for a port (0 picks a free one)",
                "ORCHARD_PAY_PORT: \"eighty\" is not an integer",
                "ORCHARD_PAY_PROT: pay has no such key "
                    + "(known: ORCHARD_PAY_HOST, ORCHARD_PAY_INSTANCE_PORTS, ORCHARD_PAY_LOG_LEVEL, ORCHARD_PAY_PORT)",
            ]
        )
    }

    static let merchantIdentifier = ConfigurationKey.string(
        "merchant", "merchantIdentifier", default: "merchant.dev.orchard.demo",
        validate: { $0.hasPrefix("merchant.") ? nil : "must start with \"merchant.\"" }
    )
    static let sandbox = ConfigurationKey.boolean("merchant", "sandbox", default: false)
    static let networks = ConfigurationKey.strings("merchant", "supportedNetworks", default: ["visa"])
    static let retries = ConfigurationKey.integer("terminal", "retries", default: 3, range: 0...10)
    static let extended = ConfigurationSchema.standard.adding(
        [merchantIdentifier.erased, sandbox.erased, networks.erased, retries.erased]
    )

    @Test func servicesExtendTheSchemaWithTypedKeys() throws {
        let configuration = try parse(
            """
            {"merchant": {"merchantIdentifier": "merchant.com.example", "supportedNetworks": ["visa", "masterCard"]},
             "terminal": {"retries": 5}}
            """,
            environment: ["ORCHARD_MERCHANT_SANDBOX": "yes"], schema: Self.extended
        )
        #expect(configuration[Self.merchantIdentifier] == "merchant.com.example")
        #expect(configuration[Self.networks] == ["visa", "masterCard"])
        #expect(configuration[Self.sandbox] == true)
        #expect(configuration[Self.retries] == 5)
        let fromEnvironment = try parse(
            "{}", environment: ["ORCHARD_MERCHANT_SUPPORTED_NETWORKS": "amex, discover,"], schema: Self.extended
        )
        #expect(fromEnvironment[Self.networks] == ["amex", "discover"])
        #expect(
            problems(
                "{\"merchant\": {\"merchantIdentifier\": \"shop\", \"supportedNetworks\": [\"visa\", 1]}}",
                environment: ["ORCHARD_MERCHANT_SANDBOX": "maybe", "ORCHARD_TERMINAL_RETRIES": "11"],
                schema: Self.extended
            ).sorted() == [
                "ORCHARD_MERCHANT_SANDBOX: \"maybe\" is not true or false",
                "ORCHARD_TERMINAL_RETRIES: 11 is out of range 0...10",
                "config.json: merchant.merchantIdentifier: must start with \"merchant.\"",
                "config.json: merchant.supportedNetworks: expected an array of strings, found an array",
            ]
        )
        // The standard schema does not know these keys.
        #expect(problems("{\"terminal\": {\"retries\": 1}}").count == 1)
    }

    @Test func settingValuesValidatesThemAndRoundTrips() throws {
        var configuration = Configuration(schema: Self.extended)
        try configuration.set(ServiceSettings.port(.pay), 8441)
        try configuration.set(Self.merchantIdentifier, "merchant.dev.orchard.demo")
        try configuration.set(Self.networks, ["visa"])
        #expect(throws: RuntimeError.self) { try configuration.set(ServiceSettings.port(.pay), 65536) }
        #expect(throws: RuntimeError.self) { try configuration.set(Self.merchantIdentifier, "shop") }
        // A key outside the schema cannot be set.
        var standard = Configuration()
        #expect(throws: RuntimeError.self) { try standard.set(Self.sandbox, true) }
        let reread = try parse(String(decoding: configuration.jsonData(), as: UTF8.self), schema: Self.extended)
        #expect(reread[ServiceSettings.port(.pay)] == 8441)
        #expect(reread[Self.networks] == ["visa"])
        #expect(reread[Self.merchantIdentifier] == "merchant.dev.orchard.demo")
    }
}
