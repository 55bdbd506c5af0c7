public import OrchardRuntime

/// The services of a deployment, in the order `init` runs their steps and `up` starts them.
///
/// The executable lists the concrete services once (one line each); libraries and tests build their own.
public struct ServiceRegistry: Sendable {
    /// The services, in init and start order.
    public let services: [any OrchardService]

    /// A registry of `services`; two services with one name are refused.
    public init(_ services: [any OrchardService]) throws(ServicesError) {
        var seen: Set<ServiceName> = []
        for service in services where !seen.insert(service.name).inserted {
            throw ServicesError(.invalidConfiguration, "two services are named \(service.name)")
        }
        self.services = services
    }

    /// The service called `name`, or ``ServicesError/Code/unknownService`` listing the known ones.
    public func service(named name: String) throws(ServicesError) -> any OrchardService {
        guard let service = services.first(where: { $0.name.rawValue == name }) else {
            let known = services.map(\.name.rawValue).joined(separator: ", ")
            throw ServicesError(.unknownService, "there is no service \"\(name)\" (services: \(known))")
        }
        return service
    }

    /// The names, in order.
    public var names: [ServiceName] { services.map(\.name) }

    /// The configuration schema: every service's standard keys plus the keys each service adds, and the
    /// `names` section with the host names the services answer for.
    public var schema: ConfigurationSchema {
        ConfigurationSchema.standard.adding(services.flatMap(\.configurationKeys)).adding(
            services.flatMap(\.hostNames).map { HostNames.port($0.name).erased })
    }

    /// Reads `DIR/config.json` against ``schema`` with the `ORCHARD_<SERVICE>_<KEY>` overrides of
    /// `environment`; ``ServicesError/Code/notInitialized`` when DIR holds no deployment.
    public func loadConfiguration(
        from directory: DeploymentDirectory, environment: [String: String]
    ) throws(ServicesError) -> Configuration {
        let state: DeploymentDirectory.State
        do {
            state = try directory.state()
        } catch {
            throw ServicesError(.invalidConfiguration, "cannot inspect \(directory)", underlying: error)
        }
        guard state == .deployment else {
            throw ServicesError(
                .notInitialized, "\(directory) holds no deployment: run `orchard init --data-dir \(directory)` first")
        }
        do {
            try directory.checkPermissions()
            return try directory.loadConfiguration(schema: schema, environment: environment)
        } catch {
            throw ServicesError(.invalidConfiguration, "cannot use \(directory)", underlying: error)
        }
    }
}
