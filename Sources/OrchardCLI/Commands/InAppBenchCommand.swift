import OrchardBenchmarks
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardX509
import PayAPI
import PayServer
import PaymentCredential
import PaymentToken

/// `orchard bench inapp`: its options and its summary line; the harness is ``InAppBenchmark`` in OrchardBenchmarks.
enum InAppBenchCommand {
    static let command = Command(
        name: "inapp",
        summary: "Credentials → signed tokens per second through the Pay server (keep-alive mTLS), with its ceiling.",
        discussion: """
            Initialises a throw-away deployment, starts its Pay server in this process, registers a device and
            prepares one nonce and one sealed credential per request before the timed phase. Then CONNECTIONS
            clients (each one keep-alive HTTPS connection with the device's client certificate) send the
            credentials; every answer must be a token. Reports tokens per second with p50/p99 latency, and the
            crypto ceiling: the same cryptography per credential (open, verify, re-encrypt, sign) without HTTP or
            SQLite, in thread CPU time on one core times the cores. The load generator shares the cores with the server.
            """,
        options: [
            .single("requests", "N", help: "Credentials to exchange (default 6000; all must fit the 60 s nonce life)."),
            .single("connections", "N", help: "Concurrent keep-alive connections (default 16)."),
            .single("ceiling-seconds", "N", help: "Duration of the ceiling measurement (default 3)."),
        ]
    ) { arguments, context in
        let (requests, connections, ceilingSeconds) = try options(arguments)
        let result = try await InAppBenchmark.run(
            requests: requests, connections: connections, ceilingSeconds: Double(ceilingSeconds),
            trace: context.trace)
        context.trace(
            "\(Int(result.tokensPerSecond)) tokens/s through the Pay server (p50 \(result.p50Milliseconds) ms, "
                + "p99 \(result.p99Milliseconds) ms, \(Int(result.processCPUMicrosecondsPerToken)) µs CPU per token "
                + "with the load generator); crypto ceiling \(Int(result.ceilingPerSecond))/s on \(result.cores) cores "
                + "(\(Int(result.ceilingCPUMicrosecondsPerToken)) µs each; \(Int(result.fractionOfCeiling * 100)) %), "
                + "load average \(result.loadAverage)")
        try context.outputJSON(result)
    }

    static func options(_ arguments: ParsedArguments) throws -> (Int, Int, Int) {
        (
            try arguments.integer("requests", default: 6000, in: 10...50_000),
            try arguments.integer("connections", default: 16, in: 1...256),
            try arguments.integer("ceiling-seconds", default: 3, in: 1...60)
        )
    }
}
