public import AccessPolicy
import Foundation
public import OrchardCrypto
public import OrchardHTTP
public import OrchardLogging
public import OrchardRuntime

/// An Orchard service served over HTTPS: its TLS identity from `pki/<service>-tls`, its address from its
/// configuration section, `GET /health` answered without a client certificate, and whatever routes the
/// service adds. Every state-changing route honours `Idempotency-Key` (``SQLiteIdempotencyRecords``, in
/// `DIR/<service>-idempotency.sqlite`), scoped by the caller, unless the service exempted it with a reason.
///
/// The main listener requests a client certificate but does not require one (policy `optional`, trusting the
/// Orchard root CA, under which the device CA and the Pay server's merchant CA issue), so a route that needs
/// mutual TLS says so in its declared policy (a role) and answers 401 without a certificate.
public final class HTTPServiceInstance: ServiceInstance {
    /// `GET /health`: every service answers it, to anyone.
    public static let health = DeclaredRoute("GET", "/health", .anyone)

    public let name: ServiceName
    public let server: HTTPServer
    private let onStop: @Sendable () async -> Void
    private let idempotency: SQLiteIdempotencyRecords
    private let logger: Logger

    /// Builds the server (TLS contexts included) without binding. `onStop` runs after the server stopped,
    /// to close the service's stores. `clock` dates the Idempotency-Key records.
    public init(
        name: ServiceName, configuration: Configuration, directory: DeploymentDirectory, router: Router,
        logger: Logger, clock: any WallClock, onStop: @escaping @Sendable () async -> Void = {}
    ) throws(ServicesError) {
        let identity = try TLSIdentity.load(named: PKIFiles.tlsServer(name), from: directory)
        let rootPEM: String
        do {
            rootPEM = try directory.readCertificate(named: PKIFiles.rootCA)
        } catch {
            throw ServicesError(.pkiFailure, "cannot read the Orchard root CA", underlying: error)
        }
        do {
            idempotency = try SQLiteIdempotencyRecords(
                location: try StoreSettings.idempotencyLocation(
                    for: name, configuration: configuration, directory: directory),
                clock: clock)
        } catch {
            throw ServicesError(.startFailed, "cannot open the \(name) Idempotency-Key records", underlying: error)
        }
        var routes = router
        routes.idempotency = idempotency
        // Every service sheds load: bounded work per route class, rate limits on routes open without a certificate.
        if routes.admission == nil { routes.admission = AdmissionControl() }
        let serviceName = name.rawValue
        routes.add(Self.health) { _ in
            try HTTPResponse.json(["status": "ok", "service": serviceName])
        }
        let tls = TLSServerConfiguration(
            certificateChainPEM: identity.certificateChainPEM, privateKeyPEM: identity.privateKeyPEM,
            clientCertificatePolicy: .optional, trustedClientRootsPEM: rootPEM)
        let listener = HTTPServerConfiguration.Listener(
            host: configuration[ServiceSettings.host(name)], port: configuration[ServiceSettings.port(name)], tls: tls)
        do {
            server = try HTTPServer(
                configuration: HTTPServerConfiguration(listeners: [listener]), router: routes,
                logger: logger)
        } catch {
            throw ServicesError(.startFailed, "cannot set up the \(name) server", underlying: error)
        }
        self.name = name
        self.onStop = onStop
        self.logger = logger
    }

    public func start() async throws -> ServiceEndpoint {
        do {
            // Before the first request: claims a killed predecessor left would answer its retries 409.
            let released = try await idempotency.releaseAbandonedClaims()
            if released > 0 {
                logger.notice(
                    "idempotency keys of requests cut short by a stop released", metadata: ["count": .integer(released)]
                )
            }
        } catch {
            throw ServicesError(.startFailed, "\(name) cannot read its idempotency records", underlying: error)
        }
        do {
            try server.start()
        } catch {
            throw ServicesError(.startFailed, "\(name) cannot listen", underlying: error)
        }
        return ServiceEndpoint(host: server.configuration.listeners[0].host, port: server.port)
    }

    public func shutdown() async {
        await server.shutdown()
        await onStop()
        await idempotency.close()
    }

    public func forceShutdown() { server.forceShutdown() }
}

/// Service logs: one JSON line per event in `DIR/logs/<service>.log` (mode 0600, appended), at the level of
/// the service's `logLevel`.
public enum ServiceLogging {
    /// The logger of `service` for `directory`.
    public static func logger(
        for service: ServiceName, configuration: Configuration, directory: DeploymentDirectory
    ) throws(ServicesError) -> Logger {
        let level: LogLevel
        do {
            level = try LogLevel(parsing: configuration[ServiceSettings.logLevel(service)])
        } catch {
            throw ServicesError(.invalidConfiguration, "\(service).logLevel", underlying: error)
        }
        let sink = try FileLogSink(path: directory.logPath(for: Party(service)))
        return Logger(label: service.rawValue, level: level, sink: sink)
    }
}

/// Appends JSON lines to a file opened once with `O_APPEND`, each line in one `write(2)`, so lines from
/// several threads (or processes) never interleave.
public final class FileLogSink: LogSink, @unchecked Sendable {
    // Thread-safety: the descriptor is only written under `lock`; it is closed in deinit.
    private let descriptor: Int32
    private let lock = NSLock()

    public init(path: String) throws(ServicesError) {
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw ServicesError(
                .invalidConfiguration, "cannot open the log \(path): \(String(cString: strerror(errno)))")
        }
        descriptor = fd
    }

    deinit { close(descriptor) }

    public func emit(_ record: LogRecord) {
        let bytes = Array((record.jsonLine + "\n").utf8)
        lock.withLock {
            var offset = 0
            while offset < bytes.count {
                let written = bytes.withUnsafeBytes { buffer in
                    write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                }
                if written > 0 {
                    offset += written
                } else if written < 0 && errno == EINTR {
                    continue
                } else {
                    return  // a full disk must not stop the service; the line is dropped
                }
            }
        }
    }
}
