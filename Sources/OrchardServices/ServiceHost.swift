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
    private let peers: ServicePeers

    private init(directory: DeploymentDirectory, registry: ServiceRegistry, services: [Running], peers: ServicePeers) {
        self.directory = directory
        self.registry = registry
        self.services = services
        self.peers = peers
    }

    /// Starts `names` (in registry order) from `directory`'s configuration.
    ///
    /// - Parameters:
    ///   - publish: write `DIR/run/<service>.json` for each; a service that already has a live record (another
    ///     process serves it) is refused with ``ServicesError/Code/servicesRunning``.
    ///   - anyPort: listen on free ports instead of the configured ones (for services a command starts for its
    ///     own duration, which must not take the ports a later `serve` will want).
    /// If one service fails to start, those already started are stopped again and the error is thrown.
    public static func start(
        _ names: [ServiceName], directory: DeploymentDirectory, registry: ServiceRegistry,
        environment: ServiceEnvironment = ServiceEnvironment(), publish: Bool, anyPort: Bool = false
    ) async throws(ServicesError) -> ServiceHost {
        var configuration = try registry.loadConfiguration(from: directory, environment: environment.variables)
        let wanted = registry.services.filter { names.contains($0.name) }
        for name in names where !wanted.contains(where: { $0.name == name }) {
            _ = try registry.service(named: name.rawValue)  // throws unknownService
        }
        if publish {
            for service in wanted {
                if let record = try? directory.runningService(service.name) {
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
                        try directory.publish(made)
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
            await ServiceHost(directory: directory, registry: registry, services: started, peers: environment.peers)
                .stop()
            throw error
        }
        return ServiceHost(directory: directory, registry: registry, services: started, peers: environment.peers)
    }

    /// Stops every service gracefully (in reverse start order), removing their run records first so no
    /// command picks a stopping service.
    public func stop() async {
        for running in services.reversed() {
            peers.remove(running.name)
            if running.record != nil { directory.withdraw(running.name) }
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
