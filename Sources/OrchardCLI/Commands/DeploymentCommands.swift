import Foundation
import MerchantServer
import NetworkServer
import OrchardHTTP
import OrchardLogging
import OrchardRuntime
import OrchardServices
import PayServer

/// `orchard init`, `orchard serve <service>` and `orchard up`: create a deployment and run its services.
enum DeploymentCommands {
    /// The services of a deployment, one line each, in init and start order (the network first, as the Pay
    /// server calls it; the Pay server before the merchant, whose init step asks it for certificates).
    static func registry() throws(CLIError) -> ServiceRegistry {
        do {
            return try ServiceRegistry([
                NetworkServerService(),
                PayService(),
                MerchantService(),
            ])
        } catch {
            throw CLIError.failure(error.message)
        }
    }

    /// The registry of the services `directory` runs: the party's own (`init --party`), else every service.
    static func registry(for directory: DeploymentDirectory) throws(CLIError) -> ServiceRegistry {
        let all = try registry()
        let party: DeploymentParty?
        do {
            party = try PartyManifest.read(from: directory)?.party
        } catch {
            throw CLIError.failure(error.message)
        }
        guard let party else { return all }
        return try registry(of: party, from: all)
    }

    /// `all`'s services of `party`.
    static func registry(of party: DeploymentParty, from all: ServiceRegistry) throws(CLIError) -> ServiceRegistry {
        do {
            return try ServiceRegistry(all.services.filter { party.services.contains($0.name) })
        } catch {
            throw CLIError.failure(error.message)
        }
    }

    /// The services `names` of `deployment` for one command, as the process contract says: the running ones, the
    /// others started in this process (stopped with the returned connections).
    static func connect(
        _ names: [ServiceName], of deployment: DeploymentDirectory, context: CommandContext
    ) async throws -> ServiceConnections {
        let registry = try registry()
        do throws(ServicesError) {
            return try await ServiceConnections.connect(
                names, directory: deployment, registry: registry,
                environment: ServiceEnvironment(variables: context.environment))
        } catch {
            throw CLIError.failure(error.message)
        }
    }

    static let initCommand = Command(
        name: "init",
        summary: "Create a complete local deployment in --data-dir (keys, certificates, demo data, ports).",
        discussion: """
            DIR must be missing or empty; a non-empty DIR is replaced only with --force (never while one of its
            services runs). Creates the Orchard root CA, a TLS certificate per service for 127.0.0.1/localhost,
            the Pay server's token-signing chain, the device CA, the demo account, the demo merchant
            merchant.dev.orchard.demo with its payment processing and identity certificates, the demo app
            dev.orchard.demo-app entitled for it, and free ports (or --base-port N, N+1, ...) in config.json.
            Keys are written 0600 and DIR is 0700. Prints a JSON summary on stdout.

            --party pay|network|merchant makes one party's directory only: its services, a root CA of its own
            (the Pay side also the device CA), its keys, config.json, and party.json with what it asks of the
            other parties (certificate signing requests, onboarding). Certificates then travel as files:
            `orchard pki export` and `orchard pki import` (docs/deployment.md, "Each party on its own"). The store
            (store.orchard.test) is the merchant's website, a listener of the merchant service: --party merchant.

            --database postgresql://USER@HOST:PORT/DB keeps the server parties' state (pay, network with its
            issuer and acquirer, merchant; one schema each) in that PostgreSQL database instead of SQLite files
            in DIR; --database pay=URL (repeatable) sets one service's database. The URL never holds a password:
            --pgpass FILE copies a libpq password file into each such service's key folder (pki/<service>/pgpass).
            """,
        options: [forceOption, basePortOption, databaseOption, pgpassOption, partyOption]
    ) { arguments, context in
        let directory = DeploymentDirectory(path: context.dataDirectory.path)
        let summary = try await initialize(
            directory,
            options: .init(
                force: arguments[forceOption], basePort: arguments[basePortOption],
                databases: try databases(arguments[databaseOption]), passfile: arguments[pgpassOption],
                party: arguments[partyOption]),
            context: context)
        try context.outputJSON(summary)
    }

    static let databaseOption = Option.repeatable(
        "database", "URL|SERVICE=URL",
        help: "Keep the server parties' state in PostgreSQL (postgresql://…), all of them or one service's.")
    static let pgpassOption = Option.optional(
        "pgpass", "FILE", help: "A libpq password file for the --database URLs, copied into the key folders.")

    /// `--database` values: a URL for every server service, or `SERVICE=URL` for one.
    static func databases(_ values: [String]) throws(CLIError) -> [ServiceName: String] {
        var databases: [ServiceName: String] = [:]
        // A URL for all first, so that SERVICE=URL wins wherever it stands.
        for value in values where value.hasPrefix("postgresql://") || value.hasPrefix("postgres://") {
            for service in StoreSettings.serverServices { databases[service] = value }
        }
        for value in values where !(value.hasPrefix("postgresql://") || value.hasPrefix("postgres://")) {
            guard let equals = value.firstIndex(of: "="),
                let service = try? ServiceName(String(value[..<equals])),
                StoreSettings.serverServices.contains(service)
            else {
                throw CLIError.usage(
                    "--database takes postgresql://… or SERVICE=postgresql://… with SERVICE pay, network or merchant")
            }
            databases[service] = String(value[value.index(after: equals)...])
        }
        return databases
    }

    static let partyOption: Option<DeploymentParty?> = .optional(
        "party", "pay|network|merchant", help: "Make one party's directory only (its keys and configuration)."
    ) { text throws(CLIError) in
        do throws(ServicesError) {
            return try DeploymentParty.parse(text)
        } catch {
            throw CLIError.usage("--party: \(error.message)")
        }
    }

    static let forceOption = Option.flag("force", help: "Replace what DIR holds (its keys and databases are lost).")
    static let basePortOption: Option<Int?> = .integer(
        "base-port", range: 1...65535, help: "Give the services fixed ports N, N+1, ... instead of free ones.")

    /// Initialises `directory` with the standard services, tracing each step on stderr.
    static func initialize(
        _ directory: DeploymentDirectory, options: DeploymentInitializer.Options, context: CommandContext
    ) async throws -> DeploymentInitializer.Summary {
        var registry = try registry()
        if let party = options.party { registry = try self.registry(of: party, from: registry) }
        do {
            context.trace("initialising \(directory)\(options.party.map { " (the \($0) party alone)" } ?? "")")
            return try await DeploymentInitializer.initialize(
                directory, registry: registry, options: options, trace: { context.trace("  " + $0) })
        } catch {
            throw CLIError.failure(error.message)
        }
    }

    static let serve = Command(
        name: "serve",
        summary: "Run one service of the deployment in --data-dir until SIGTERM or SIGINT.",
        discussion: """
            Services: network (token service, issuer, acquirer), pay, merchant. The service binds the host and
            port of its config.json section (ORCHARD_<SERVICE>_PORT overrides), publishes DIR/run/<service>.json
            with its address while it runs, and stops gracefully on SIGTERM or SIGINT (a second signal cuts
            in-flight requests short). Prints the run record as JSON on stdout once it listens; logs go to
            DIR/logs/<service>.log. --instance N (2 and up) runs a further instance of a service whose state is on
            PostgreSQL (`init --database`): its port is listed in config.json (<service>.instancePorts, any free
            port when not listed, then listed), its run record is DIR/run/<service>.<N>.json.
            """,
        options: [instanceOption],
        positionals: ["service"]
    ) { arguments, context in
        guard let name = arguments.positionals.first else {
            throw CLIError.usage(
                "name the service to run (\(try registry().names.map(\.rawValue).joined(separator: ", ")))")
        }
        let registry = try registry()
        let service: any OrchardService
        do throws(ServicesError) {
            service = try registry.service(named: name)
        } catch {
            throw CLIError.usage(error.message)
        }
        let directory = DeploymentDirectory(path: context.dataDirectory.path)
        guard try DeploymentCommands.registry(for: directory).names.contains(service.name) else {
            throw CLIError.usage(
                "\(directory) holds another party alone (party.json), which does not run \(service.name): serve it "
                    + "from its own party's directory")
        }
        try await host(
            [service.name], directory: directory, registry: registry, context: context,
            instance: arguments[instanceOption])
    }

    static let instanceOption = Option<Int>.integer(
        "instance", default: 1, range: 1...ServiceSettings.maximumInstances,
        help: "Which instance of the service to run (2 and up: further instances on one PostgreSQL database).")

    static let up = Command(
        name: "up",
        summary: "Run every service of the deployment in --data-dir in this process until SIGTERM or SIGINT.",
        discussion: """
            A DIR that holds no deployment (missing or empty) is initialised first, as `orchard init` would.
            Each service listens on its own port with its own SQLite file and publishes DIR/run/<service>.json;
            SIGTERM or SIGINT stops them all gracefully. Prints the run records as JSON on stdout once all listen.
            """
    ) { _, context in
        let directory = DeploymentDirectory(path: context.dataDirectory.path)
        try await initializeIfEmpty(directory, context: context)
        // A party's directory runs the party's services; the registry keeps every service (peers are resolved by
        // name).
        let names = try registry(for: directory).names
        try await host(names, directory: directory, registry: try registry(), context: context)
    }

    /// The process contract for `up` and `demo`: a DIR that is missing or empty is initialised; one that
    /// holds other files but no deployment is refused.
    static func initializeIfEmpty(
        _ directory: DeploymentDirectory, options: DeploymentInitializer.Options = .init(), context: CommandContext
    ) async throws {
        let state: DeploymentDirectory.State
        do {
            state = try directory.state()
        } catch {
            throw CLIError.failure(error.message)
        }
        switch state {
        case .deployment: return
        case .missing, .empty: _ = try await initialize(directory, options: options, context: context)
        case .occupied:
            throw CLIError.failure(
                "\(directory) holds files but no deployment; run `orchard init --force` or pick another DIR")
        }
    }

    /// Starts `names`, prints their run records, and runs until a signal.
    static func host(
        _ names: [ServiceName], directory: DeploymentDirectory, registry: ServiceRegistry, context: CommandContext,
        instance: Int = 1
    ) async throws {
        // Handlers first: a SIGTERM right after the records appear must already stop gracefully.
        let signals = ShutdownSignals.shared
        _ = signals
        let host: ServiceHost
        do {
            host = try await ServiceHost.start(
                names, directory: directory, registry: registry,
                environment: ServiceEnvironment(variables: context.environment), publish: true, instance: instance)
        } catch {
            throw CLIError.failure(error.message)
        }
        var records: [String: ServiceRecord] = [:]
        for running in host.services {
            records[running.name.rawValue] = running.record
            context.trace(
                "\(running.name) listening on https://\(running.endpoint.host):\(running.endpoint.port) "
                    + "(DIR/run/\(running.name)\(instance > 1 ? ".\(instance)" : "").json)")
        }
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // `serve` prints its one record, `up` the records by service name: one line either way.
        if names.count == 1, let only = records.values.first {
            context.output(String(decoding: try encoder.encode(only), as: UTF8.self))
        } else {
            context.output(String(decoding: try encoder.encode(records), as: UTF8.self))
        }
        await host.runUntilSignalled(logger: Logger(label: "orchard", sink: StandardErrorLogSink.shared))
        context.trace("stopped")
    }

    static let status = Command(
        name: "status",
        summary: "Check every service of the deployment in --data-dir over HTTPS (GET /health).",
        discussion: """
            Uses the services running for DIR (DIR/run/); those not running are started in this process for the
            check and stopped again, as every command that needs services does. Prints one JSON object per
            service: how it was reached (running elsewhere, with its pid, or started here), its URL and the
            /health answer. Exits 1 if a service does not answer 200.
            """
    ) { _, context in
        let directory = DeploymentDirectory(path: context.dataDirectory.path)
        let registry = try registry(for: directory)
        let connections = try await connect(registry.names, of: directory, context: context)
        var report: [String: [String: String]] = [:]
        var failed: [String] = []
        do {
            let client = try connections.client()
            defer { client.shutdown() }
            for name in registry.names {
                let url = try connections.baseURL(of: name) + "/health"
                let startedHere = connections.startedInProcess.contains(name)
                var entry = ["url": url, "reached": startedHere ? "started in this process" : "running"]
                if !startedHere, let record = try? directory.runningService(name) { entry["pid"] = "\(record.pid)" }
                do {
                    let response = try await client.get(url)
                    entry["status"] = "\(response.status.code)"
                    if response.status != .ok { failed.append(name.rawValue) }
                } catch {
                    entry["status"] = "unreachable: \(error)"
                    failed.append(name.rawValue)
                }
                context.trace("\(name): \(entry["status"] ?? "") (\(entry["reached"] ?? ""))")
                report[name.rawValue] = entry
            }
        } catch {
            await connections.close()
            throw CLIError.failure("\(error)")
        }
        await connections.close()
        try context.outputJSON(report)
        if !failed.isEmpty { throw CLIError.failure("not healthy: \(failed.joined(separator: ", "))") }
    }
}
