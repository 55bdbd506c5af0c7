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
            .single("host", "ADDRESS", help: "Address to listen on (default 127.0.0.1)."),
            .single("port", "PORT", help: "TCP port; 0 picks a free one (default 8443)."),
            .single("threads", "N", help: "Event-loop threads (default: the number of cores)."),
            .single("cert", "FILE", help: "Server certificate chain (PEM)."),
            .single("key", "FILE", help: "Server private key (PEM)."),
            .single("client-ca", "FILE", help: "Roots that client certificates must chain to (PEM)."),
            .single(
                "client-cert", "POLICY",
                help: "Client certificate policy: none, optional or required (default: optional with --client-ca)."),
            .single("shutdown-deadline", "SECONDS", help: "Time in-flight requests get on shutdown (default 10)."),
            .single("header-timeout", "SECONDS", help: "Time a client has to send a complete request (default 10)."),
            .single("max-body", "BYTES", help: "Largest request body (default 1048576)."),
            .single("max-connections", "N", help: "Open connections allowed (default 4096)."),
            .single(
                "log-level", "LEVEL", help: "trace, debug, info, notice, warning, error or critical (default info)."),
        ]
    ) { arguments, context in
        let level = try logLevel(arguments, context)
        let logger = Logger(label: "echo-server", level: level)
        let tls = try tlsConfiguration(arguments)
        var limits = HTTPServerConfiguration.Limits()
        limits.headerTimeout = .seconds(try arguments.integer("header-timeout", default: 10, in: 1...3600))
        limits.maxBodyBytes = try arguments.integer("max-body", default: 1 << 20, in: 1...(1 << 30))
        limits.maxConnections = try arguments.integer("max-connections", default: 4096, in: 1...1_000_000)
        let configuration = HTTPServerConfiguration(
            listeners: [
                .init(
                    host: arguments.value("host") ?? "127.0.0.1",
                    port: try arguments.integer("port", default: 8443, in: 0...65535), tls: tls)
            ],
            threads: try arguments.integer(
                "threads", default: ProcessInfo.processInfo.activeProcessorCount, in: 1...256),
            limits: limits,
            shutdownDeadline: .seconds(try arguments.integer("shutdown-deadline", default: 10, in: 0...3600)))
        let server = try HTTPServer(configuration: configuration, router: echoRoutes(), logger: logger)
        // Install the signal handlers before announcing the port, so a SIGTERM right after it is graceful.
        _ = ShutdownSignals.shared
        try server.start()
        context.output(#"{"event":"listening","port":\#(server.port)}"#)
        await ServiceRunner.runUntilSignalled([server], logger: logger)
        context.output(#"{"event":"stopped"}"#)
    }

    static let bench = Command(
        name: "bench",
        summary: "Measure keep-alive HTTPS JSON POSTs per second on one server thread, with wrk on the other core.",
        discussion: """
            Starts an in-process HTTPS server (one event-loop thread, client certificates optional, the default
            log level) and runs `wrk -t1 -c64 --latency` against POST /pay, pinned to another core when
            `taskset` exists. Prints requests per second and the p50 and p99 latency as JSON.
            """,
        options: [
            .single("seconds", "N", help: "Duration of the run (default 10)."),
            .single("connections", "N", help: "Concurrent keep-alive connections (default 64)."),
        ]
    ) { arguments, context in
        let seconds = try arguments.integer("seconds", default: 10, in: 1...600)
        let connections = try arguments.integer("connections", default: 64, in: 1...10_000)
        context.trace("running wrk -t1 -c\(connections) for \(seconds) s against one server thread…")
        let result = try await runHTTPBenchmark(seconds: seconds, connections: connections)
        context.trace(
            "\(Int(result.requestsPerSecond)) requests/s, p50 \(result.p50Milliseconds) ms, "
                + "p99 \(result.p99Milliseconds) ms, \(result.errors) errors")
        try context.outputJSON(result)
    }

    static func logLevel(_ arguments: ParsedArguments, _ context: CommandContext) throws -> LogLevel {
        guard let text = arguments.value("log-level") ?? context.environment["ORCHARD_LOG_LEVEL"] else { return .info }
        do {
            return try LogLevel(parsing: text)
        } catch {
            throw CLIError.usage(error.message)
        }
    }

    static func tlsConfiguration(_ arguments: ParsedArguments) throws -> TLSServerConfiguration {
        let certificatePEM: String
        let keyPEM: SecureBytes
        switch (arguments.value("cert"), arguments.value("key")) {
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
        let roots = try arguments.value("client-ca").map { try readText($0, what: "client CA") }
        let policy: ClientCertificatePolicy
        if let text = arguments.value("client-cert") {
            guard let parsed = ClientCertificatePolicy(rawValue: text) else {
                throw CLIError.usage("--client-cert takes none, optional or required")
            }
            policy = parsed
        } else {
            policy = roots == nil ? .none : .optional
        }
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
