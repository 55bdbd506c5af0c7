import Foundation

#if canImport(Glibc)
    import Glibc
#endif

extension ServiceSettings {
    /// The ports of a service's further instances (`orchard serve <service> --instance N`, N ≥ 2, on one
    /// PostgreSQL database): entry N − 2 is instance N's port. A missing entry, or `"0"`, means any free port; the
    /// instance lists the port it bound here, so clients find every instance in `config.json`.
    public static func instancePorts(_ service: ServiceName) -> ConfigurationKey<[String]> {
        .strings(service.rawValue, "instancePorts", default: [])
    }

    /// The highest instance number `orchard serve --instance` accepts.
    public static let maximumInstances = 16

    /// Instance `instance`'s port from `ports` (``instancePorts(_:)``), 0 when not listed; nil when the entry is
    /// not a port number.
    public static func instancePort(_ instance: Int, in ports: [String]) -> Int? {
        guard instance >= 2, ports.count > instance - 2 else { return 0 }
        guard let port = Int(ports[instance - 2]), (0...65535).contains(port) else { return nil }
        return port
    }
}

extension DeploymentDirectory {
    /// `run/<service>.json` for instance 1, `run/<service>.<N>.json` for instance N ≥ 2.
    public func runRecordPath(for service: ServiceName, instance: Int) -> String {
        instance <= 1 ? runRecordPath(for: service) : "\(runPath)/\(service.rawValue).\(instance).json"
    }

    /// Publishes `record` as instance `instance`'s run record (atomically).
    public func publish(_ record: ServiceRecord, instance: Int) throws(RuntimeError) {
        try SecureFile.write(record.jsonData(), to: runRecordPath(for: record.service, instance: instance), mode: 0o600)
    }

    /// Removes instance `instance`'s run record if it belongs to this process.
    public func withdraw(_ service: ServiceName, instance: Int) {
        let pid = getpid()
        let path = runRecordPath(for: service, instance: instance)
        guard let record = try? ServiceRecord(json: Data(SecureFile.read(path))), record.pid == pid else { return }
        unlink(path)
    }

    /// Instance `instance`'s record when its process is alive (a record left by a dead process is removed).
    public func runningService(_ service: ServiceName, instance: Int) throws(RuntimeError) -> ServiceRecord? {
        guard instance >= 2 else { return try runningService(service) }
        let path = runRecordPath(for: service, instance: instance)
        let bytes: [UInt8]
        do throws(RuntimeError) {
            bytes = try SecureFile.read(path, limit: 64 << 10)
        } catch  where error.code == .notFound {
            return nil
        }
        let record = try ServiceRecord(json: Data(bytes))
        guard record.service == service, record.isAlive else {
            unlink(path)
            return nil
        }
        return record
    }

    /// Every live instance of `service`, instance 1 first: how a client finds the instances to fail over between.
    public func runningInstances(of service: ServiceName) -> [ServiceRecord] {
        (1...ServiceSettings.maximumInstances).compactMap { try? runningService(service, instance: $0) }
    }

    /// Lists `port` as instance `instance`'s in `config.json` (the file only, not environment overrides).
    public func listInstancePort(
        _ port: Int, service: ServiceName, instance: Int, schema: ConfigurationSchema = .standard
    ) throws(RuntimeError) {
        var configuration = try loadConfiguration(schema: schema, environment: [:])
        let key = ServiceSettings.instancePorts(service)
        var ports = configuration[key]
        while ports.count < instance - 1 { ports.append("0") }
        ports[instance - 2] = String(port)
        try configuration.set(key, ports)
        try writeConfiguration(configuration)
    }
}
