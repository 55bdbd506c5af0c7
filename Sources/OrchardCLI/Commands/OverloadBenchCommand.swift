import OrchardBenchmarks

/// `orchard bench overload`: its options and its summary line; the harness is ``OverloadBenchmark`` in
/// OrchardBenchmarks.
enum OverloadBenchCommand {
    static let command = Command(
        name: "overload",
        summary: "Open-loop load at a multiple of the capacity: payments' p99, goodput, shed fraction, losses.",
        discussion: """
            Starts an HTTPS server in this process (its event loop and its store's writer on the last core) with \
            admission control and three routes, payment, order creation and analytics, each signing the body with \
            P-256 and storing a row durably before it answers. The load generator's callers (one client per class, \
            2 × MAX-IN-FLIGHT keep-alive connections each, their threads on the first core) measure the capacity \
            (MAX-IN-FLIGHT closed-loop clients, payments only), the payments' p99 at half of it (open loop), then \
            send MULTIPLE × capacity open loop (20 % payments, 40 % orders, 40 % analytics) and report the \
            payments' p99 against the unloaded figure (target ≤ 2×), the goodput against the capacity (target ≥ \
            90 %), the fraction shed by class, arrivals not sent (their connections held back) by class, and \
            acknowledged rows missing from the store (must be 0). Latencies run from each request's scheduled \
            time, so waiting for a connection counts. Build with `swift build -c release` first.
            """,
        options: [seconds, multiple, maxInFlight]
    ) { arguments, context in
        let result = try await OverloadBenchmark.run(
            seconds: Double(arguments[seconds]), multiple: Double(arguments[multiple]),
            maxInFlight: arguments[maxInFlight], trace: context.trace)
        context.trace(
            "capacity \(Int(result.capacityPerSecond))/s; at \(Int(result.offeredPerSecond))/s offered: payments' "
                + "p99 \(result.loadedPaymentP99Milliseconds) ms vs \(result.unloadedPaymentP99Milliseconds) ms "
                + "unloaded (\(result.paymentP99Ratio)×), goodput \(Int(result.goodputPerSecond))/s "
                + "(\(Int(result.goodputFraction * 100)) % of capacity), shed \(Int(result.shedFraction * 100)) %, "
                + "not sent \(result.notSent), lost \(result.lost), errors \(result.errors)")
        try context.outputJSON(result)
    }

    static let seconds = Option.integer(
        "seconds", default: 10, range: 2...120, help: "Seconds of each phase (capacity, unloaded, overload).")
    static let multiple = Option.integer(
        "multiple", default: 3, range: 1...10, help: "The overload phase's rate as a multiple of the capacity.")
    static let maxInFlight = Option.integer(
        "max-in-flight", default: 16, range: 1...4096, help: "The server's admission bound on requests in flight.")
}
