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
            Initialises a throw-away deployment, starts its Pay server as its own process (orchard serve pay) on the
            machine's last core, this process (the load generator) on the others (on one core, or when not run as
            the orchard executable, in this process), registers a device and
            prepares one nonce and one sealed credential per request before the timed phase. Then CONNECTIONS
            clients (each one keep-alive HTTPS connection with the device's client certificate) send the
            credentials, in four rounds; every answer must be a token. Reports tokens per second with p50/p99
            latency, and the crypto ceiling: the same cryptography per credential (open, verify, re-encrypt, sign)
            without HTTP or SQLite, in thread CPU time on one core times the server's cores, measured in five slices
            of CEILING-SECONDS ÷ 5 before, between and after the rounds, on the server's core while it waits
            (ceilingSliceMicroseconds in the JSON). The ceiling's CPU per token over the server's is reported too:
            the fraction other load on the machine does not move; and how busy the server was (serverBusyFraction):
            near 1 when the connections kept it saturated. Each exchange is answered once the store's group commit
            is on disk, so the connections must outnumber the exchanges one commit holds; with too few, the server
            waits for its clients and the figures measure the load instead.

            With --database postgresql://… (and --pgpass FILE) the same exchange runs again, after the one-instance
            SQLite figure, through --instances N Pay server instances (in this process, each its own HTTPS server)
            whose state is in that database: its pay, merchant and *_idempotency schemas are replaced. Its
            SCALE-OUT-CONNECTIONS clients (16 by default: more only queue for the database's row locks, and 64 let
            the prepared nonces expire before their turn) are spread over the instances; `scaleOut` in the JSON and
            a second line give its tokens per second beside the SQLite figure of the same run.
            """,
        options: [
            requests, connections, ceilingSeconds, database, DeploymentCommands.pgpassOption, instances,
            scaleOutConnections,
        ]
    ) { arguments, context in
        let url = arguments[database]
        guard url != nil || arguments[instances] == 1 else {
            throw CLIError.usage("--instances \(arguments[instances]) needs --database postgresql://…")
        }
        var result = try await InAppBenchmark.run(
            requests: arguments[requests], connections: arguments[connections],
            ceilingSeconds: Double(arguments[ceilingSeconds]), placement: .preferred(), trace: context.trace)
        context.trace(
            "\(Int(result.tokensPerSecond)) tokens/s through the Pay server (p50 \(result.p50Milliseconds) ms, "
                + "p99 \(result.p99Milliseconds) ms, \(Int(result.serverCPUMicrosecondsPerToken)) µs of server CPU per "
                + "token); crypto ceiling \(Int(result.ceilingPerSecond))/s on the server's \(result.serverCores) "
                + "core(s) (\(Int(result.ceilingCPUMicrosecondsPerToken)) µs each; \(Int(result.fractionOfCeiling * 100)) %; "
                + "the ceiling's share of the server's CPU \(Int(result.cpuFractionOfCeiling * 100)) %"
                + (result.serverBusyFraction.map { "; the server busy \(Int($0 * 100)) % of the time" } ?? "")
                + "), load average \(result.loadAverage)")
        if let url {
            let scaled = try await InAppBenchmark.runScaledOut(
                database: url, passfile: arguments[DeploymentCommands.pgpassOption], instances: arguments[instances],
                requests: arguments[requests], connections: arguments[scaleOutConnections],
                baseline: result.tokensPerSecond,
                trace: context.trace)
            result.scaleOut = scaled
            context.trace(
                "\(Int(scaled.tokensPerSecond)) tokens/s through \(scaled.instances) Pay server instance(s) on "
                    + "PostgreSQL (p50 \(scaled.p50Milliseconds) ms, p99 \(scaled.p99Milliseconds) ms) beside "
                    + "\(Int(scaled.sqliteOneInstanceTokensPerSecond)) tokens/s on one instance on SQLite "
                    + "(\(scaled.ratio)×); \(scaled.retried) sent again after a 503; "
                    + "load average \(scaled.loadAverage)")
        }
        try context.outputJSON(result)
    }

    static let requests = Option.integer(
        "requests", default: 6000, range: 10...50_000,
        help: "Credentials to exchange (all must fit the 60 s nonce life).")
    static let connections = Option.integer(
        "connections", default: 64, range: 1...256,
        help: "Concurrent keep-alive connections (64: enough to keep the server busy through the store's commits).")
    static let scaleOutConnections = Option.integer(
        "scale-out-connections", default: 16, range: 1...256,
        help: "Concurrent keep-alive connections of the run on --database, spread over its instances.")
    static let database = Option.optional(
        "database", "URL",
        help: "Also measure through Pay server instances on this PostgreSQL database (postgresql://…, no password).")
    static let instances = Option.integer(
        "instances", default: 1, range: 1...8, help: "Pay server instances on --database (more than one needs it).")
    static let ceilingSeconds = Option.integer(
        "ceiling-seconds", default: 3, range: 1...60, help: "Duration of the ceiling measurement (five slices in all).")
}
