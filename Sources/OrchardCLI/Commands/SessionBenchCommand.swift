import OrchardBenchmarks

/// `orchard bench sessions`: merchant sessions per second through the gateway, with the crypto ceiling; the
/// harness is ``SessionBenchmark`` in OrchardBenchmarks.
enum SessionBenchCommand {
    static let command = Command(
        name: "sessions",
        summary: "Merchant sessions per second through the gateway (keep-alive mutual TLS), with its ceiling.",
        discussion: """
            Initialises a throw-away deployment (init validates the demo domain) and starts its Pay server as its own
            process (orchard serve pay) on the machine's last core, this process (the load generator) on the
            others; on one core, or when not run as the orchard executable, in this process. CONNECTIONS clients, each one keep-alive mutual-TLS connection with the demo merchant's
            identity certificate to apple-pay-gateway.orchard.test, ask for REQUESTS sessions; every answer must be
            a session. The server's CPU time per session is reported next to the ceiling's. The crypto ceiling is
            the cryptography the gateway cannot avoid per session (random identifier and nonce, the merchant ID's
            hash, the CMS signature, the request's and the answer's TLS records opened and sealed with AES-256-GCM)
            without the answer's JSON, HTTP, the certificate lookup or SQLite, in thread CPU time on one core times the
            server's cores. The target is 0.6 of the ceiling.
            """,
        options: [requests, connections, ceilingSeconds]
    ) { arguments, context in
        let result = try await SessionBenchmark.run(
            requests: arguments[requests], connections: arguments[connections],
            ceilingSeconds: Double(arguments[ceilingSeconds]), placement: .preferred(), trace: context.trace)
        context.trace(
            "\(Int(result.sessionsPerSecond)) sessions/s through the gateway (p50 \(result.p50Milliseconds) ms, "
                + "p99 \(result.p99Milliseconds) ms); crypto ceiling \(Int(result.ceilingPerSecond))/s on "
                + "the server's \(result.serverCores) core(s) (\(Int(result.ceilingCPUMicrosecondsPerSession)) µs each; "
                + "\(Int(result.fractionOfCeiling * 100)) %, target 60 %); the server spent "
                + "\(Int(result.serverCPUMicrosecondsPerSession)) µs of CPU per session (ceiling's share "
                + "\(Int(result.cpuFractionOfCeiling * 100)) %), load average \(result.loadAverage)")
        try context.outputJSON(result)
    }

    static let requests = Option.integer(
        "requests", default: 4000, range: 10...100_000, help: "Sessions to ask for.")
    static let connections = Option.integer(
        "connections", default: 16, range: 1...256, help: "Concurrent keep-alive connections.")
    static let ceilingSeconds = Option.integer(
        "ceiling-seconds", default: 3, range: 1...60, help: "Duration of the ceiling measurement.")
}
