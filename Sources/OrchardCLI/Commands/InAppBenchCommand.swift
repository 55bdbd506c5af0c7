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
            The ceiling's CPU per token over the process's is reported too: the fraction other load on the machine
            does not move.
            """,
        options: [requests, connections, ceilingSeconds]
    ) { arguments, context in
        let result = try await InAppBenchmark.run(
            requests: arguments[requests], connections: arguments[connections],
            ceilingSeconds: Double(arguments[ceilingSeconds]),
            trace: context.trace)
        context.trace(
            "\(Int(result.tokensPerSecond)) tokens/s through the Pay server (p50 \(result.p50Milliseconds) ms, "
                + "p99 \(result.p99Milliseconds) ms, \(Int(result.processCPUMicrosecondsPerToken)) µs CPU per token "
                + "with the load generator); crypto ceiling \(Int(result.ceilingPerSecond))/s on \(result.cores) cores "
                + "(\(Int(result.ceilingCPUMicrosecondsPerToken)) µs each; \(Int(result.fractionOfCeiling * 100)) %; "
                + "the ceiling's share of the process's CPU \(Int(result.cpuFractionOfCeiling * 100)) %), "
                + "load average \(result.loadAverage)")
        try context.outputJSON(result)
    }

    static let requests = Option.integer(
        "requests", default: 6000, range: 10...50_000,
        help: "Credentials to exchange (all must fit the 60 s nonce life).")
    static let connections = Option.integer(
        "connections", default: 16, range: 1...256, help: "Concurrent keep-alive connections.")
    static let ceilingSeconds = Option.integer(
        "ceiling-seconds", default: 3, range: 1...60, help: "Duration of the ceiling measurement.")
}
