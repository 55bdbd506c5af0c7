public import OrchardRuntime
import Synchronization

/// How one service finds another of the same deployment at call time: a service started in the same process
/// first (``ServiceHost`` registers each one as it starts, since an in-process service publishes no run
/// record), else the live run record `DIR/run/<service>.json` of an `orchard serve` or `orchard up` process, else
/// the address of another party's service from its imported bundle (`DIR/peers.json`, a party deployed on its own).
///
/// Shared by every copy of a ``ServiceEnvironment``; looked up per call, so a peer started or restarted later
/// is found.
public final class ServicePeers: Sendable {
    private let started = Mutex<[ServiceName: ServiceEndpoint]>([:])

    public init() {}

    /// Records that `name` listens at `endpoint` in this process.
    public func register(_ name: ServiceName, at endpoint: ServiceEndpoint) {
        started.withLock { $0[name] = endpoint }
    }

    /// Forgets `name` (it stopped).
    public func remove(_ name: ServiceName) {
        _ = started.withLock { $0.removeValue(forKey: name) }
    }

    /// Where `name` listens for `directory`, or nil when it runs nowhere: in this process, else its run record in
    /// DIR, else (a party deployed on its own) the address another party's imported bundle gave (`peers.json`).
    public func endpoint(of name: ServiceName, in directory: DeploymentDirectory) -> ServiceEndpoint? {
        if let local = started.withLock({ $0[name] }) { return local }
        if let record = try? directory.runningService(name) {
            return ServiceEndpoint(host: record.host, port: record.port, ports: record.ports)
        }
        return PeerAddresses.read(from: directory).endpoint(of: name)
    }

    /// `https://host:port` of `name`'s main port, or nil when it runs nowhere.
    public func baseURL(of name: ServiceName, in directory: DeploymentDirectory) -> String? {
        endpoint(of: name, in: directory).map(\.baseURL)
    }

    /// `https://host:port` of every instance of `name` (one started in this process first, then each live run
    /// record, `orchard serve --instance N` included), for a client that fails over between them; empty when it
    /// runs nowhere.
    public func baseURLs(of name: ServiceName, in directory: DeploymentDirectory) -> [String] {
        endpoints(of: name, in: directory).map(\.baseURL)
    }

    /// Every instance of `name`, in the order ``baseURLs(of:in:)`` lists them.
    public func endpoints(of name: ServiceName, in directory: DeploymentDirectory) -> [ServiceEndpoint] {
        let endpoints = ServiceEndpoint.instances(of: name, in: directory, after: started.withLock({ $0[name] }))
        if endpoints.isEmpty, let peer = PeerAddresses.read(from: directory).endpoint(of: name) { return [peer] }
        return endpoints
    }
}

extension ServiceEndpoint {
    /// `first` when given, then every live instance of `name` in `directory` (its run records, `orchard serve
    /// --instance N` included) not already listed: the order a client fails over in.
    static func instances(
        of name: ServiceName, in directory: DeploymentDirectory, after first: ServiceEndpoint?
    ) -> [ServiceEndpoint] {
        var endpoints = first.map { [$0] } ?? []
        for record in directory.runningInstances(of: name) {
            let endpoint = ServiceEndpoint(host: record.host, port: record.port, ports: record.ports)
            if !endpoints.contains(where: { $0.baseURL == endpoint.baseURL }) { endpoints.append(endpoint) }
        }
        return endpoints
    }
}

extension ServiceEndpoint {
    /// `https://host:port` of the main port (IPv6 hosts in brackets).
    public var baseURL: String { host.contains(":") ? "https://[\(host)]:\(port)" : "https://\(host):\(port)" }
}
