import Foundation
import OrchardHTTP
public import OrchardLogging
public import OrchardRuntime

/// Runs services of a deployment in this process: builds each from the configuration, starts it and (for
/// `serve` and `up`) publishes `DIR/run/<service>.json`, removed again when it stops.
public final class ServiceHost: Sendable {
    /// A started service.
    public struct Running: Sendable {
        public let name: ServiceName
        public let instance: any ServiceInstance
        public let endpoint: ServiceEndpoint
        /// The record published in `DIR/run/`, if it was published.
        public let record: ServiceRecord?
    }

    public let directory: DeploymentDirectory
    public let registry: ServiceRegistry
    /// The services started, in start order.
    public let services: [Running]
    /// Which instance of its services this host runs (1 unless `orchard serve --instance N`).
    public let instance: Int
    private let peers: ServicePeers

    private init(
        directory: DeploymentDirectory, registry: ServiceRegistry, services: [Running], peers: ServicePeers,
        instance: Int = 1
    ) {
        self.directory = directory
        self.registry = registry
        self.services = services
        self.peers = peers
        self.instance = instance
    }

    /// Starts `names` (in registry order) from `directory`'s configuration.
    ///
    /// - Parameters:
    ///   - publish: write `DIR/run/<service>.json` for each; a service that already has a live record (another
    ///     process serves it) is refused with ``ServicesError/Code/servicesRunning``.
    ///   - anyPort: listen on free ports instead of the configured ones (for services a command starts for its
    ///     own duration, which must not take the ports a later `serve` will want).
    ///   - instance: N ≥ 2 runs a further instance of each service (`orchard serve --instance N`) on the port
    ///     listed for it (``ServiceSettings/instancePorts(_:)``, else a free one, then listed), publishing
    ///     `DIR/run/<service>.<N>.json`. Several instances share one store, so each service must keep its state
    ///     on PostgreSQL: a service on SQLite files is refused with ``ServicesError/Code/invalidConfiguration``.
    /// If one service fails to start, those already started are stopped again and the error is thrown.
    public static func start(
        _ names: [ServiceName], directory: DeploymentDirectory, registry: ServiceRegistry,
        environment: ServiceEnvironment = ServiceEnvironment(), publish: Bool, anyPort: Bool = false,
        instance number: Int = 1
    ) async throws(ServicesError) -> ServiceHost {
        var configuration = try registry.loadConfiguration(from: directory, environment: environment.variables)
        let wanted = registry.services.filter { names.contains($0.name) }
        for name in names where !wanted.contains(where: { $0.name == name }) {
            _ = try registry.service(named: name.rawValue)  // throws unknownService
        }
        guard (1...ServiceSettings.maximumInstances).contains(number) else {
            throw ServicesError(
                .invalidConfiguration, "the instance number is 1 to \(ServiceSettings.maximumInstances)")
        }
        if number >= 2 {
            try configuration.prepareInstance(number, of: wanted)
        }
        if publish {
            for service in wanted {
                if let record = try? directory.runningService(service.name, instance: number) {
                    throw ServicesError(
                        .servicesRunning,
                        "\(service.name) already runs for \(directory) (pid \(record.pid), port \(record.port))")
                }
            }
        }
        if anyPort {
            for service in wanted {
                for key in [ServiceSettings.port(service.name)] + service.additionalPorts {
                    do {
                        try configuration.set(key, 0)
                    } catch {
                        throw ServicesError(.internalFailure, "cannot clear \(key.path)", underlying: error)
                    }
                }
            }
        }
        var started: [Running] = []
        do throws(ServicesError) {
            for service in wanted {
                let instance: any ServiceInstance
                let endpoint: ServiceEndpoint
                do {
                    instance = try await service.build(
                        configuration: configuration, directory: directory, environment: environment)
                } catch {
                    throw ServicesError(.startFailed, "cannot build \(service.name)", underlying: error)
                }
                do {
                    endpoint = try await instance.start()
                } catch {
                    await instance.shutdown()
                    throw ServicesError(.startFailed, "cannot start \(service.name)", underlying: error)
                }
                var record: ServiceRecord?
                if publish {
                    let made = ServiceRecord(
                        service: service.name, host: endpoint.host, port: endpoint.port, ports: endpoint.ports)
                    do {
                        try directory.publish(made, instance: number)
                        if number >= 2 {
                            try directory.listInstancePort(
                                endpoint.port, service: service.name, instance: number, schema: registry.schema)
                        }
                    } catch {
                        await instance.shutdown()
                        throw ServicesError(
                            .startFailed, "cannot publish the run record of \(service.name)", underlying: error)
                    }
                    record = made
                }
                environment.peers.register(service.name, at: endpoint)
                started.append(Running(name: service.name, instance: instance, endpoint: endpoint, record: record))
            }
        } catch {
            await ServiceHost(
                directory: directory, registry: registry, services: started, peers: environment.peers,
                instance: number
            )
            .stop()
            throw error
        }
        return ServiceHost(
            directory: directory, registry: registry, services: started, peers: environment.peers, instance: number)
    }

    /// Stops every service gracefully (in reverse start order), removing their run records first so no
    /// command picks a stopping service.
    public func stop() async {
        for running in services.reversed() {
            peers.remove(running.name)
            if running.record != nil { directory.withdraw(running.name, instance: instance) }
        }
        for running in services.reversed() { await running.instance.shutdown() }
    }

    /// Waits for SIGTERM or SIGINT, then stops every service gracefully (a second signal cuts in-flight
    /// requests short) and removes the run records.
    public func runUntilSignalled(logger: Logger) async {
        await ServiceRunner.runUntilSignalled([HostedServices(host: self)], logger: logger)
    }

    /// The endpoint of `name`, if it runs here.
    public func endpoint(of name: ServiceName) -> ServiceEndpoint? {
        services.first { $0.name == name }?.endpoint
    }
}

/// The services of one host as one managed service: records withdrawn first, then a graceful stop.
private final class HostedServices: ManagedService {
    let host: ServiceHost
    init(host: ServiceHost) { self.host = host }
    func shutdown() async { await host.stop() }
    func forceShutdown() { for running in host.services { running.instance.forceShutdown() } }
}

extension Configuration {
    /// Readies the configuration of instance `instance` (≥ 2) of `services`: each must keep its state on
    /// PostgreSQL (one database the instances share); the main port becomes the instance's listed port (0: any
    /// free port), further ports any free port.
    fileprivate mutating func prepareInstance(_ instance: Int, of services: [any OrchardService]) throws(ServicesError)
    {
        for service in services {
            guard StoreSettings.serverServices.contains(service.name),
                !self[StoreSettings.database(service.name)].isEmpty
            else {
                throw ServicesError(
                    .invalidConfiguration,
                    "several instances of \(service.name) share one database: initialise the deployment with "
                        + "`orchard init --database postgresql://…` to run instance \(instance)")
            }
            guard
                let port = ServiceSettings.instancePort(instance, in: self[ServiceSettings.instancePorts(service.name)])
            else {
                throw ServicesError(
                    .invalidConfiguration,
                    "\(service.name).instancePorts in config.json lists a value that is not a port for instance \(instance)"
                )
            }
            do {
                try set(ServiceSettings.port(service.name), port)
                for key in service.additionalPorts { try set(key, 0) }
            } catch {
                throw ServicesError(.internalFailure, "cannot set the ports of instance \(instance)", underlying: error)
            }
        }
    }
}
