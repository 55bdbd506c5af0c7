import Foundation
public import OrchardCrypto
public import OrchardRuntime
import OrchardStore
import OrchardX509

/// `orchard init`: creates a complete local deployment in a directory.
///
/// Order: check the directory (missing or empty, or anything with `force` while none of its services runs);
/// create it (0700); the Orchard root CA; the device CA; ports; for each service its TLS server certificate,
/// then its own step; finally `config.json`. The configuration is written last, so a directory whose init
/// failed half-way is never taken for a deployment.
///
/// With ``Options/party`` the directory holds that party alone: its services, a root of its own, the device CA
/// only for the Pay side, and `party.json` (what it asks of the other parties) just before `config.json`
/// (docs/deployment.md, "Each party on its own").
public enum DeploymentInitializer {
    /// How to initialise.
    public struct Options: Sendable {
        /// Replace whatever the directory holds (never while one of its services runs).
        public var force: Bool
        /// Fixed ports: the services get `basePort`, `basePort + 1`, … in registry order; nil picks free ones.
        public var basePort: Int?
        /// The PostgreSQL database (a `postgresql://` URL without a password) of each server service that keeps
        /// its state there instead of SQLite files (see ``StoreSettings``).
        public var databases: [ServiceName: String]
        /// A libpq password file copied (mode 0600) into the key folder of every service in ``databases``, as
        /// `pki/<service>/pgpass`.
        public var passfile: String?
        /// The one party the directory holds (`orchard init --party`): its services only (the registry must hold
        /// exactly them), a root CA of its own, and `party.json` with what it asks of the others. Nil: every party,
        /// under one Orchard root.
        public var party: DeploymentParty?

        public init(
            force: Bool = false, basePort: Int? = nil, databases: [ServiceName: String] = [:], passfile: String? = nil,
            party: DeploymentParty? = nil
        ) {
            self.party = party
            self.force = force
            self.basePort = basePort
            self.databases = databases
            self.passfile = passfile
        }
    }

    /// What `init` made, for the command's JSON output.
    public struct Summary: Sendable, Encodable {
        public let directory: String
        /// Each service's main port (and further named ports), by service name.
        public let services: [String: ServicePorts]
        /// The root clients trust: `DIR/pki/root/root-ca.pem`.
        public let rootCertificate: String
        /// Facts the steps reported: `merchantIdentifier`, `demoApplication`, `demoAccount`, …
        public let facts: [String: String]
    }

    /// A service's ports in the summary.
    public struct ServicePorts: Sendable, Encodable, Hashable {
        public let port: Int
        public let additional: [String: Int]
    }

    /// Initialises `directory` with `registry`'s services. See the type's documentation for the order.
    public static func initialize(
        _ directory: DeploymentDirectory, registry: ServiceRegistry, options: Options = Options(),
        clock: any WallClock = SystemClock(), random: any RandomSource = SystemRandom(),
        trace: @escaping @Sendable (String) -> Void = { _ in }
    ) async throws(ServicesError) -> Summary {
        if let party = options.party, registry.names != party.services {
            throw ServicesError(
                .invalidConfiguration,
                "the \(party) party runs \(party.services.map(\.rawValue).joined(separator: ", ")), not "
                    + registry.names.map(\.rawValue).joined(separator: ", "))
        }
        // A database URL that cannot be used safely is refused before anything is written.
        for (service, url) in options.databases.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            do throws(StoreError) {
                try PostgreSQLLocation.validate(url: url)
            } catch {
                throw ServicesError(.invalidConfiguration, "--database for \(service): \(error.message)")
            }
        }
        try prepare(directory, options: options)
        var configuration = Configuration(schema: registry.schema)
        try assignPorts(
            &configuration, registry: registry, basePort: options.basePort,
            owner: URL(fileURLWithPath: directory.configurationPath).standardizedFileURL.path)
        try mapHostNames(&configuration, registry: registry)
        try configureDatabases(&configuration, directory: directory, registry: registry, options: options)

        let rootCA = try CertificateAuthority.create(
            subject: DistinguishedName([
                .organization("Orchard"), .commonName(options.party?.rootCommonName ?? "Orchard Root CA"),
            ]), issuer: nil, lifetime: DeploymentPKI.caLifetime, clock: clock, random: random)
        try rootCA.write(named: PKIFiles.rootCA, to: directory)
        trace("root CA: pki/\(PKIFiles.rootCA).pem (\(rootCA.certificate.subject))")
        // The device factory is the Pay side's (Apple makes the devices): a party directory of another has none.
        if options.party == nil || options.party == .pay {
            let deviceCA = try CertificateAuthority.create(
                subject: DistinguishedName([.organization("Orchard"), .commonName("Orchard Device CA")]),
                issuer: rootCA, lifetime: DeploymentPKI.caLifetime, clock: clock, random: random)
            try deviceCA.write(named: PKIFiles.deviceCA, to: directory)
            trace("device CA: pki/\(PKIFiles.deviceCA).pem (issued by the root)")
        }

        let context = InitializationContext(
            directory: directory, rootCA: rootCA, configuration: configuration, clock: clock, random: random,
            party: options.party, trace: trace)
        do throws(ServicesError) {
            for service in registry.services {
                let names = service.hostNames.map(\.name)
                try DeploymentPKI.issueTLSServerIdentity(
                    for: service.name, by: rootCA, to: directory, hostNames: names, clock: clock, random: random)
                let file = PKIFiles.tlsServer(service.name)
                trace(
                    "\(service.name): TLS certificate pki/\(file).pem "
                        + "(\((["127.0.0.1", "localhost"] + names).joined(separator: ", ")))")
                do {
                    try await service.initialize(context)
                } catch {
                    throw ServicesError(.internalFailure, "the init step of \(service.name) failed", underlying: error)
                }
            }
        } catch {
            await context.runCleanups()
            throw error
        }
        await context.runCleanups()
        let final = context.currentConfiguration
        if let party = options.party {
            try PartyManifest(party: party, requests: context.partyRequests).write(to: directory)
            trace(
                "party: \(directory.path)/\(PartyManifest.fileName) (\(party), \(context.partyRequests.count) requests)"
            )
        }
        do {
            try directory.writeConfiguration(final)
        } catch {
            throw ServicesError(.internalFailure, "cannot write \(directory.configurationPath)", underlying: error)
        }
        trace("configuration: \(directory.configurationPath)")
        var ports: [String: ServicePorts] = [:]
        for service in registry.services {
            var additional: [String: Int] = [:]
            for key in service.additionalPorts { additional[key.name] = final[key] }
            ports[service.name.rawValue] = ServicePorts(
                port: final[ServiceSettings.port(service.name)], additional: additional)
        }
        return Summary(
            directory: directory.path, services: ports,
            rootCertificate: (try? directory.certificatePath(named: PKIFiles.rootCA)) ?? "",
            facts: context.reportedFacts)
    }

    /// Checks the directory's state, clears a replaced deployment, creates the layout.
    static func prepare(_ directory: DeploymentDirectory, options: Options) throws(ServicesError) {
        let state: DeploymentDirectory.State
        do {
            state = try directory.state()
        } catch {
            throw ServicesError(.invalidConfiguration, "cannot use \(directory)", underlying: error)
        }
        switch state {
        case .missing, .empty:
            break
        case .deployment, .occupied:
            guard options.force else {
                if state == .deployment {
                    throw ServicesError(
                        .alreadyInitialized,
                        "\(directory) already holds a deployment; pass --force to replace it (its keys are lost)")
                }
                throw ServicesError(
                    .directoryNotEmpty, "\(directory) is not empty; choose an empty directory or pass --force")
            }
            let running = (try? directory.runningServices()) ?? []
            guard running.isEmpty else {
                let names = running.map { "\($0.service) (pid \($0.pid))" }.joined(separator: ", ")
                throw ServicesError(.servicesRunning, "\(directory) has running services: \(names); stop them first")
            }
            try clear(directory)
        }
        do {
            try directory.create()
        } catch {
            throw ServicesError(.invalidConfiguration, "cannot create \(directory)", underlying: error)
        }
    }

    /// Removes what a deployment consists of (configuration, PKI files, party databases, run records), and
    /// nothing else the directory holds.
    static func clear(_ directory: DeploymentDirectory) throws(ServicesError) {
        let manager = FileManager.default
        var doomed: [String] = [
            directory.configurationPath, "\(directory.path)/\(PartyManifest.fileName)",
            "\(directory.path)/\(PeerAddresses.fileName)",
        ]
        for folder in [directory.pkiPath, directory.runPath] {
            let names = (try? manager.contentsOfDirectory(atPath: folder)) ?? []
            doomed += names.map { "\(folder)/\($0)" }
        }
        let top = (try? manager.contentsOfDirectory(atPath: directory.path)) ?? []
        doomed += top.filter { $0.hasSuffix(".sqlite") || $0.hasSuffix(".sqlite-wal") || $0.hasSuffix(".sqlite-shm") }
            .map { "\(directory.path)/\($0)" }
        for path in doomed where manager.fileExists(atPath: path) {
            do {
                try manager.removeItem(atPath: path)
            } catch {
                throw ServicesError(.invalidConfiguration, "cannot remove \(path): \(error.localizedDescription)")
            }
        }
    }

    /// Records each service's database, copies the password file into its key folder, and clears (with `force`)
    /// or refuses the schemas an earlier deployment left in the database.
    static func configureDatabases(
        _ configuration: inout Configuration, directory: DeploymentDirectory, registry: ServiceRegistry,
        options: Options
    ) throws(ServicesError) {
        for (service, url) in options.databases.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            guard StoreSettings.serverServices.contains(service), registry.names.contains(service) else {
                throw ServicesError(
                    .invalidConfiguration,
                    "\(service) keeps no database of its own: --database takes pay, network or merchant")
            }
            do {
                try configuration.set(StoreSettings.database(service), url)
                if let passfile = options.passfile {
                    let folder = directory.pkiFolderPath(service.rawValue)
                    try SecureFile.createDirectory(directory.pkiPath, mode: 0o700)
                    try SecureFile.createDirectory(folder, mode: 0o700)
                    try SecureFile.writeSecret(try SecureFile.readSecret(passfile), to: "\(folder)/pgpass")
                }
                for party in StoreSettings.parties(of: service) {
                    guard
                        case .postgreSQL(let location) = try StoreSettings.location(
                            for: party, configuration: configuration, directory: directory)
                    else { continue }
                    guard try location.tableCount() > 0 else { continue }
                    guard options.force else {
                        throw ServicesError(
                            .alreadyInitialized,
                            "the PostgreSQL database already holds the \(location.schema) schema of a deployment; "
                                + "pass --force to replace it (its data is lost)")
                    }
                    try location.dropSchema()
                }
            } catch let error as ServicesError {
                throw error
            } catch {
                throw ServicesError(
                    .invalidConfiguration, "cannot use the database of \(service)", underlying: error)
            }
        }
    }

    /// Fills every service's main and additional ports: consecutive from `basePort`, else free ones reserved for
    /// the deployment whose configuration is `owner`.
    static func assignPorts(
        _ configuration: inout Configuration, registry: ServiceRegistry, basePort: Int?, owner: String
    ) throws(ServicesError) {
        let keys = registry.services.flatMap { [ServiceSettings.port($0.name)] + $0.additionalPorts }
        let ports: [Int]
        if let basePort {
            guard basePort >= 1, basePort + keys.count - 1 <= 65535 else {
                throw ServicesError(
                    .invalidConfiguration,
                    "--base-port \(basePort) leaves no room for \(keys.count) ports below 65536")
            }
            ports = Array(basePort..<(basePort + keys.count))
        } else {
            ports = try PortAllocator().freePorts(keys.count, owner: owner)
        }
        for (key, port) in zip(keys, ports) {
            do {
                try configuration.set(key, port)
            } catch {
                throw ServicesError(.invalidConfiguration, "cannot set \(key.path)", underlying: error)
            }
        }
    }

    /// Maps every host name a service answers for to the port of its listener (`names` in `config.json`).
    static func mapHostNames(_ configuration: inout Configuration, registry: ServiceRegistry) throws(ServicesError) {
        for service in registry.services {
            for host in service.hostNames {
                guard HostNames.isHostName(host.name) else {
                    throw ServicesError(.invalidConfiguration, "\"\(host.name)\" is not a host name")
                }
                do {
                    try configuration.set(HostNames.port(host.name), configuration[host.port])
                } catch {
                    throw ServicesError(.invalidConfiguration, "cannot map \(host.name)", underlying: error)
                }
            }
        }
    }

    /// `count` distinct ports free on 127.0.0.1 now, outside the kernel's ephemeral range and reserved for ten
    /// minutes for a caller that binds one later (see ``PortAllocator``).
    package static func freePorts(_ count: Int) throws(ServicesError) -> [Int] {
        try PortAllocator().freePorts(count, owner: nil)
    }
}
