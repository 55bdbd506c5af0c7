import Foundation
import OrchardBenchmarks
import OrchardCrypto
import OrchardHTTP
import OrchardLogging

/// `orchard http …`: the service runtime on its own (an echo server for trying TLS settings and for the
/// graceful-shutdown test, and the HTTPS benchmark).
enum HTTPCommands {
    static let command = Command(
        name: "http",
        summary: "The HTTPS service runtime: an echo server and the HTTPS benchmark.",
        subcommands: [echoServer, bench]
    )

    static let echoServer = Command(
        name: "echo-server",
        summary: "Serve a small HTTPS echo service until SIGTERM or SIGINT, then drain and exit 0.",
        discussion: """
            Routes: GET /health; POST /echo (answers the JSON it receives); GET /slow?ms=N (answers after
            N milliseconds); GET /whoami (needs a client certificate; answers its subject).
            Prints {"event":"listening","port":N} on stdout once it accepts connections, and
            {"event":"stopped"} after a graceful shutdown. Logs go to stderr as JSON lines.
            Without --cert and --key it uses a throwaway self-signed certificate for localhost.
            """,
        options: [
            hostOption, portOption, threadsOption, certOption, keyOption, clientCAOption, clientCertOption,
            shutdownDeadlineOption, headerTimeoutOption, maxBodyOption, maxConnectionsOption, logLevelOption,
        ]
    ) { arguments, context in
        let level = try logLevel(arguments, context)
        let logger = Logger(label: "echo-server", level: level)
        let tls = try tlsConfiguration(arguments)
        var limits = HTTPServerConfiguration.Limits()
        limits.headerTimeout = .seconds(arguments[headerTimeoutOption])
        limits.maxBodyBytes = arguments[maxBodyOption]
        limits.maxConnections = arguments[maxConnectionsOption]
        let configuration = HTTPServerConfiguration(
            listeners: [.init(host: arguments[hostOption], port: arguments[portOption], tls: tls)],
            threads: arguments[threadsOption] ?? ThreadAffinity.usableCPUCount,
            limits: limits,
            shutdownDeadline: .seconds(arguments[shutdownDeadlineOption]))
        let server = try HTTPServer(configuration: configuration, router: echoRoutes(), logger: logger)
        // Install the signal handlers before announcing the port, so a SIGTERM right after it is graceful.
        _ = ShutdownSignals.shared
        try server.start()
        context.output(#"{"event":"listening","port":\#(server.port)}"#)
        await ServiceRunner.runUntilSignalled([server], logger: logger)
        context.output(#"{"event":"stopped"}"#)
    }

    static let hostOption = Option.text("host", "ADDRESS", default: "127.0.0.1", help: "Address to listen on.")
    static let portOption = Option.integer(
        "port", "PORT", default: 8443, range: 0...65535, help: "TCP port; 0 picks a free one.")
    static let threadsOption: Option<Int?> = .integer(
        "threads", range: 1...256, help: "Event-loop threads (default: the number of cores).")
    static let certOption = Option.optional("cert", "FILE", help: "Server certificate chain (PEM).")
    static let keyOption = Option.optional("key", "FILE", help: "Server private key (PEM).")
    static let clientCAOption = Option.optional(
        "client-ca", "FILE", help: "Roots that client certificates must chain to (PEM).")
    static let clientCertOption: Option<ClientCertificatePolicy?> = .optional(
        "client-cert", "POLICY",
        help: "Client certificate policy: none, optional or required (default: optional with --client-ca)."
    ) { text throws(CLIError) in
        guard let policy = ClientCertificatePolicy(rawValue: text) else {
            throw CLIError.usage("--client-cert takes none, optional or required")
        }
        return policy
    }
    static let shutdownDeadlineOption = Option.integer(
        "shutdown-deadline", "SECONDS", default: 10, range: 0...3600, help: "Time in-flight requests get on shutdown.")
    static let headerTimeoutOption = Option.integer(
        "header-timeout", "SECONDS", default: 10, range: 1...3600,
        help: "Time a client has to send a complete request.")
    static let maxBodyOption = Option.integer(
        "max-body", "BYTES", default: 1 << 20, range: 1...(1 << 30), help: "Largest request body.")
    static let maxConnectionsOption = Option.integer(
        "max-connections", default: 4096, range: 1...1_000_000, help: "Open connections allowed.")
    static let logLevelOption: Option<LogLevel?> = .optional(
        "log-level", "LEVEL",
        help: "trace, debug, info, notice, warning, error or critical (default $ORCHARD_LOG_LEVEL, else info)."
    ) { text throws(CLIError) in try parseLogLevel(text) }

    static let bench = Command(
        name: "bench",
        summary: "Measure keep-alive HTTPS JSON POSTs per second on one server thread, with wrk on the other core.",
        discussion: """
            Starts an in-process HTTPS server (one event-loop thread, client certificates optional, the default
            log level) and runs `wrk -t1 -c64 --latency` against POST /pay, pinned to another core when
            `taskset` exists. Prints requests per second and the p50 and p99 latency as JSON.
            """,
        options: [benchSecondsOption, benchConnectionsOption]
    ) { arguments, context in
        let seconds = arguments[benchSecondsOption]
        let connections = arguments[benchConnectionsOption]
        context.trace("running wrk -t1 -c\(connections) for \(seconds) s against one server thread…")
        let result = try await runHTTPBenchmark(seconds: seconds, connections: connections)
        context.trace(
            "\(Int(result.requestsPerSecond)) requests/s, p50 \(result.p50Milliseconds) ms, "
                + "p99 \(result.p99Milliseconds) ms, \(result.errors) errors")
        try context.outputJSON(result)
    }

    static let benchSecondsOption = Option.integer(
        "seconds", default: 10, range: 1...600, help: "Duration of the run.")
    static let benchConnectionsOption = Option.integer(
        "connections", default: 64, range: 1...10_000, help: "Concurrent keep-alive connections.")

    /// `--log-level`, else `$ORCHARD_LOG_LEVEL`, else info.
    static func logLevel(_ arguments: ParsedArguments, _ context: CommandContext) throws -> LogLevel {
        if let level = arguments[logLevelOption] { return level }
        guard let text = context.environment["ORCHARD_LOG_LEVEL"] else { return .info }
        return try parseLogLevel(text)
    }

    static func parseLogLevel(_ text: String) throws(CLIError) -> LogLevel {
        do {
            return try LogLevel(parsing: text)
        } catch {
            throw CLIError.usage(error.message)
        }
    }

    static func tlsConfiguration(_ arguments: ParsedArguments) throws -> TLSServerConfiguration {
        let certificatePEM: String
        let keyPEM: SecureBytes
        switch (arguments[certOption], arguments[keyOption]) {
        case (let cert?, let key?):
            certificatePEM = try readText(cert, what: "certificate")
            keyPEM = SecureBytes(try readBytes(key, what: "private key"))
        case (nil, nil):
            let ephemeral = try EphemeralCertificate()
            certificatePEM = ephemeral.certificatePEM
            keyPEM = ephemeral.privateKeyPEM
        default:
            throw CLIError.usage("--cert and --key go together")
        }
        let roots = try arguments[clientCAOption].map { try readText($0, what: "client CA") }
        let policy = arguments[clientCertOption] ?? (roots == nil ? .none : .optional)
        if policy != .none, roots == nil { throw CLIError.usage("--client-cert \(policy) needs --client-ca") }
        return TLSServerConfiguration(
            certificateChainPEM: certificatePEM, privateKeyPEM: keyPEM, clientCertificatePolicy: policy,
            trustedClientRootsPEM: roots)
    }

    static func readBytes(_ path: String, what: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CLIError.failure("cannot read the \(what) file \(path)")
        }
        return Array(data)
    }

    static func readText(_ path: String, what: String) throws -> String {
        String(decoding: try readBytes(path, what: what), as: UTF8.self)
    }

    static func echoRoutes() -> Router {
        var router = Router()
        router.get("/health") { _ in try .json(["status": "ok"]) }
        router.post("/echo") { request in
            guard (try? JSONDecoder().decode(AnyJSON.self, from: request.body)) != nil else {
                throw HTTPError(.invalidJSON, "the request body is not valid JSON")
            }
            return HTTPResponse(status: .ok, headers: ["Content-Type": "application/json"], body: request.body)
        }
        router.get("/slow") { request in
            let milliseconds = Int(request.queryValue("ms") ?? "") ?? 1000
            guard (0...60_000).contains(milliseconds) else {
                throw HTTPError(.invalidRequest, "ms must be 0 to 60000")
            }
            request.logger.info("slow request started", metadata: ["ms": .integer(milliseconds)])
            try await Task.sleep(for: .milliseconds(milliseconds))
            return try .json(["slept_ms": milliseconds])
        }
        router.get("/whoami", requirement: .required) { request in
            try .json([
                "subject": request.clientCertificate?.subject ?? "",
                "common_name": request.clientCertificate?.commonName ?? "",
            ])
        }
        return router
    }
}

/// Any JSON value: decoding it only checks that bytes are JSON (the decoder parses the whole input first).
private struct AnyJSON: Decodable {
    init(from decoder: any Decoder) {}
}
