public import Foundation
public import OrchardCrypto
public import OrchardHTTP
public import OrchardRuntime
public import OrchardX509

/// What every Orchard service implements: its configuration section, its step of `orchard init`, and a pure
/// function from configuration to a runnable service.
///
/// The three parts share the same library calls, so what `init` writes is exactly what the service reads:
/// a service's init step writes its keys, certificates and seed data with the functions its `build` uses to
/// read them. `build` binds nothing and starts no thread; ``ServiceInstance/start()`` does.
public protocol OrchardService: Sendable {
    /// The service's name: its configuration section, its run record `DIR/run/<name>.json`, its SQLite file.
    var name: ServiceName { get }

    /// Keys this service adds to its section beyond `host`, `port` and `logLevel` (``ServiceSettings``).
    var configurationKeys: [AnyConfigurationKey] { get }

    /// Further ports (beyond ``ServiceSettings/port(_:)``) that `init` fills with free ports, such as a
    /// listener that requires a client certificate. Each key is also listed in ``configurationKeys``.
    var additionalPorts: [ConfigurationKey<Int>] { get }
    /// Host names this service answers for (`config.json` `names`), each with the port key of the listener
    /// that serves it. `init` puts them in the service's TLS certificate and maps each to that port.
    var hostNames: [ServiceHostName] { get }

    /// Writes this service's keys, certificates and seed data into a new deployment. Runs after the
    /// deployment-wide steps (root CA, device CA, this service's TLS certificate) and after the steps of
    /// the services before it in the ``ServiceRegistry``.
    func initialize(_ context: InitializationContext) async throws

    /// Builds the service from `configuration` and the files in `directory`, without binding a socket.
    func build(
        configuration: Configuration, directory: DeploymentDirectory, environment: ServiceEnvironment
    ) async throws -> any ServiceInstance

    /// Answers another party's request at `orchard pki import` (a party deployed on its own): onboards the
    /// requester and issues certificates from its signing requests. Nil when the request is not for this service.
    func answer(_ request: PartyRequest, context: PartyRequestContext) async throws -> [PartyIssued]?

    /// Host names this service proved for the party of `bundle`, which its bundle may then name beside its own
    /// services' (the Pay side: the domains it validated for the merchant the bundle registers).
    func provenHostNames(
        of bundle: PartyBundle, directory: DeploymentDirectory, configuration: Configuration
    ) async throws -> Set<String>

    /// At a re-key of `party` (`orchard pki import --replace`): revokes, in this service's own records, what it
    /// issued to that party's old root for `identities` (``PartyRegistrations/Identity``), except the
    /// certificates `except` just issued to the new one.
    func revokeIssued(
        to party: DeploymentParty, identities: [String], except: [Certificate], context: PartyRequestContext
    ) async throws
}

extension OrchardService {
    public func answer(_ request: PartyRequest, context: PartyRequestContext) async throws -> [PartyIssued]? { nil }
    public func provenHostNames(
        of bundle: PartyBundle, directory: DeploymentDirectory, configuration: Configuration
    ) async throws -> Set<String> { [] }
    public func revokeIssued(
        to party: DeploymentParty, identities: [String], except: [Certificate], context: PartyRequestContext
    ) async throws {}
    public var configurationKeys: [AnyConfigurationKey] { [] }
    public var additionalPorts: [ConfigurationKey<Int>] { [] }
    public var hostNames: [ServiceHostName] { [] }
}

/// A host name a service answers for, and the port key of the listener behind it.
public struct ServiceHostName: Sendable {
    /// A DNS name such as `store.orchard.test`.
    public let name: String
    /// The service's port key whose value the name maps to.
    public let port: ConfigurationKey<Int>

    public init(_ name: String, port: ConfigurationKey<Int>) {
        self.name = name
        self.port = port
    }
}

/// Where a started service listens (and, in a party's bundle and `peers.json`, where a peer's does).
public struct ServiceEndpoint: Codable, Sendable, Hashable {
    /// The address bound (127.0.0.1 unless configured).
    public var host: String
    /// The main HTTPS port: `/health` and every route that needs no client certificate.
    public var port: Int
    /// Further named ports (for example `mtls`, a listener that requires a client certificate).
    public var ports: [String: Int]

    public init(host: String, port: Int, ports: [String: Int] = [:]) {
        self.host = host
        self.port = port
        self.ports = ports
    }
}

/// A built service: started once, then stopped gracefully (``ManagedService/shutdown()``: no new
/// connections, in-flight requests finished within the service's deadline, stores closed) or cut short
/// (``ManagedService/forceShutdown()``, on a second signal).
public protocol ServiceInstance: ManagedService {
    /// Binds its listeners and starts serving; returns where it listens.
    func start() async throws -> ServiceEndpoint
}

/// What a service takes from its surroundings besides configuration: time, randomness and the environment,
/// injected so tests can fix them.
public struct ServiceEnvironment: Sendable {
    public var wallClock: any WallClock
    public var monotonicClock: any MonotonicClock
    public var random: any RandomSource
    /// The process environment (`ORCHARD_*` overrides were applied to the configuration already).
    public var variables: [String: String]
    /// Where the deployment's other services listen (shared by every copy of this environment).
    public var peers: ServicePeers

    public init(
        wallClock: any WallClock = SystemClock(), monotonicClock: any MonotonicClock = SystemClock(),
        random: any RandomSource = SystemRandom(), variables: [String: String] = ProcessInfo.processInfo.environment,
        peers: ServicePeers = ServicePeers()
    ) {
        self.wallClock = wallClock
        self.monotonicClock = monotonicClock
        self.random = random
        self.variables = variables
        self.peers = peers
    }
}
