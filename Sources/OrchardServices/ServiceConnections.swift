import Foundation
public import OrchardHTTP
public import OrchardRuntime

/// The services a command needs, found or started: the process contract's "use the ones running for DIR,
/// else start them in-process for the command's own duration".
///
/// For each service: a live `DIR/run/<service>.json` (an `orchard serve` or `orchard up` process) is used as
/// it is; otherwise the service is built and started in this process on a free port, without a run record,
/// and stopped by ``close()``.
public final class ServiceConnections: Sendable {
    /// Where each needed service listens.
    public let endpoints: [ServiceName: ServiceEndpoint]
    /// The services this process started (the rest were already running elsewhere).
    public let startedInProcess: [ServiceName]
    /// The Orchard root CA (PEM), the only root a client of these services trusts; for a party deployed on its own,
    /// its root first, then the other parties' roots it imported.
    public let rootCertificatePEM: String
    private let directory: DeploymentDirectory
    private let host: ServiceHost?

    private init(
        endpoints: [ServiceName: ServiceEndpoint], startedInProcess: [ServiceName], rootCertificatePEM: String,
        directory: DeploymentDirectory, host: ServiceHost?
    ) {
        self.endpoints = endpoints
        self.startedInProcess = startedInProcess
        self.rootCertificatePEM = rootCertificatePEM
        self.directory = directory
        self.host = host
    }

    /// The one root (PEM) a client of `service` trusts (``PeerAddresses/trustedRootPEM(for:in:)``): the
    /// deployment's own, or for another party's service the root of the party serving it, so that an address
    /// answering with another party's certificate is refused.
    public func rootCertificatePEM(for service: ServiceName) throws(ServicesError) -> String {
        try PeerAddresses.trustedRootPEM(for: service, in: directory)
    }

    /// Finds or starts `names` for `directory`.
    public static func connect(
        _ names: [ServiceName], directory: DeploymentDirectory, registry: ServiceRegistry,
        environment: ServiceEnvironment = ServiceEnvironment()
    ) async throws(ServicesError) -> ServiceConnections {
        _ = try registry.loadConfiguration(from: directory, environment: environment.variables)
        var endpoints: [ServiceName: ServiceEndpoint] = [:]
        var missing: [ServiceName] = []
        let party = try PartyManifest.read(from: directory)?.party
        let peers = PeerAddresses.read(from: directory)
        for name in names {
            _ = try registry.service(named: name.rawValue)
            let record: ServiceRecord?
            do {
                record = try directory.runningService(name)
            } catch {
                throw ServicesError(.invalidConfiguration, "cannot read the run record of \(name)", underlying: error)
            }
            if let record {
                endpoints[name] = ServiceEndpoint(host: record.host, port: record.port, ports: record.ports)
            } else if let party, !party.services.contains(name) {
                // A party deployed on its own starts only its own services; the others are peers.
                guard let peer = peers.endpoint(of: name) else {
                    throw ServicesError(
                        .notReady,
                        "\(name) is another party's service and \(directory) knows no address for it: import that "
                            + "party's bundle (`orchard pki import`)")
                }
                endpoints[name] = peer
            } else {
                missing.append(name)
            }
        }
        var host: ServiceHost?
        if !missing.isEmpty {
            let started = try await ServiceHost.start(
                missing, directory: directory, registry: registry, environment: environment, publish: false,
                anyPort: true)
            for running in started.services { endpoints[running.name] = running.endpoint }
            host = started
        }
        let root: String
        do {
            root = try directory.trustedRootsPEM()
        } catch {
            await host?.stop()
            throw ServicesError(.pkiFailure, "cannot read the Orchard root CA", underlying: error)
        }
        return ServiceConnections(
            endpoints: endpoints, startedInProcess: host?.services.map(\.name) ?? [], rootCertificatePEM: root,
            directory: directory, host: host)
    }

    /// `https://host:port` of `name`'s main port (IPv6 hosts in brackets).
    public func baseURL(of name: ServiceName) throws(ServicesError) -> String {
        try connected(name).baseURL
    }

    private func connected(_ name: ServiceName) throws(ServicesError) -> ServiceEndpoint {
        guard let endpoint = endpoints[name] else {
            throw ServicesError(.notReady, "\(name) was not among the services connected")
        }
        return endpoint
    }

    /// `https://host:port` of `name` as connected, then of its further running instances in `directory`
    /// (`orchard serve --instance N`), for a client that fails over between them.
    public func baseURLs(of name: ServiceName, in directory: DeploymentDirectory) throws(ServicesError) -> [String] {
        ServiceEndpoint.instances(of: name, in: directory, after: try connected(name)).map(\.baseURL)
    }

    /// An HTTPS client that trusts only the Orchard root CA, optionally presenting a client identity (for
    /// routes that need mutual TLS).
    public func client(identity: TLSIdentity? = nil) throws(ServicesError) -> HTTPClient {
        do {
            return try HTTPClient(
                configuration: HTTPClientConfiguration(
                    trustedRootsPEM: rootCertificatePEM, clientCertificateChainPEM: identity?.certificateChainPEM,
                    clientPrivateKeyPEM: identity?.privateKeyPEM))
        } catch {
            throw ServicesError(.internalFailure, "cannot make an HTTPS client", underlying: error)
        }
    }

    /// Stops what this process started; services found running elsewhere are left alone.
    public func close() async { await host?.stop() }
}
