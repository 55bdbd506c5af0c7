import Foundation
import OrchardCrypto
import OrchardRuntime
import OrchardServices
import OrchardStore

/// `orchard chaos`: every party as its own process under a mixed workload, one of them killed with SIGKILL at a
/// random moment each cycle, then the invariants checked across every store (docs/reliability.md).
enum ChaosCommand {
    static let cyclesOption = Option<Int>.integer(
        "cycles", default: 20, range: 1...100_000, help: "How many cycles (one kill each).")
    static let paymentsOption = Option<Int>.integer(
        "payments", default: 3, range: 1...100, help: "Payments per cycle (in-store taps and in-app purchases).")
    static let seedOption = Option<Int?>.integer(
        "seed", "S", range: 0...Int(Int32.max), help: "The seed of the random choices (default: a fresh one).")
    static let instancesOption = Option<Int>.integer(
        "instances", default: 1, range: 1...4,
        help: "Instances of each server party (network, pay, merchant); more than one needs --database.")

    static let command = Command(
        name: "chaos",
        summary: "Kill a random party every cycle under a mixed workload; check every store's invariants at the end.",
        discussion: """
            Runs the network, the Pay server and the merchant server (`orchard serve`), a phone and a watch
            (`orchard device run`) and the terminal (`orchard terminal charge`, one process per tap) as processes of
            their own in DIR (initialised when empty), and drives in-store taps, in-app purchases (`orchard app
            buy`) and a lost-mode-and-resume per cycle, with the retries and reversals the clients make. In each
            cycle one party (network, pay, merchant, phone, watch, or the client of the payment in flight) is
            killed with SIGKILL at a random moment of a random payment, then restarted (a killed terminal runs
            `orchard terminal recover`). Every operation is journalled, fsync'd, in DIR/chaos/journal.jsonl before
            and after it runs: acknowledged, failed or indeterminate.

            At the end every party runs again, the terminal recovers, the merchant reverses what it left open, the
            services stop, and reconciliation runs a day later (as `orchard network reconcile` would). Then: every
            acknowledged payment is held once at the issuer and recorded once at the acquirer and at the terminal or
            merchant (else lost); no payment is held twice (duplicated); every hold has its approved record at the
            acquirer and at the terminal or merchant, and nothing is left pending (else unreconciled); no ATC was
            approved twice; no in-app nonce was redeemed twice. Prints a JSON summary; the last stderr line is
            `chaos: N cycles, M payments, X lost, Y duplicated, Z unreconciled (seed S)`; exits 1 on any violation.

            With --database postgresql://… (and --pgpass FILE), an empty DIR is initialised with the server parties'
            state in that database (as `orchard init --database`); the checks read every store where the deployment
            keeps it. --instances N runs N instances of each server party on that database (`orchard serve
            <service> --instance N`); a kill then strikes one instance of the chosen party, and the clients fail over
            to the others.
            """,
        options: [
            cyclesOption, paymentsOption, seedOption, instancesOption, DeploymentCommands.databaseOption,
            DeploymentCommands.pgpassOption,
        ]
    ) { arguments, context in
        let seed = arguments[seedOption] ?? Int(SystemRandom().bytes(4).reduce(0) { $0 << 8 | Int($1) } & 0x7FFF_FFFF)
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let options = DeploymentInitializer.Options(
            databases: try DeploymentCommands.databases(arguments[DeploymentCommands.databaseOption]),
            passfile: arguments[DeploymentCommands.pgpassOption])
        try await DeploymentCommands.initializeIfEmpty(deployment, options: options, context: context)
        let instances = arguments[instancesOption]
        if instances > 1 {
            for service in StoreSettings.serverServices {
                let party = StoreSettings.parties(of: service)[0]
                guard try StoreSettings.location(for: party, in: deployment, environment: [:]).isPostgreSQL else {
                    throw CLIError.failure(
                        "--instances \(instances) needs every server party on PostgreSQL, and \(service) keeps SQLite "
                            + "files in \(deployment.path): start from an empty --data-dir with --database URL")
                }
            }
        }
        let run = try ChaosRun(
            deployment: deployment, seed: seed, cycles: arguments[cyclesOption],
            paymentsPerCycle: arguments[paymentsOption], instances: instances, trace: { context.trace($0) })
        let summary = try await run.run()
        try context.outputJSON(summary)
        // The summary line stays last on stderr, a failure's `error:` line just before it.
        guard summary.violations.isEmpty else {
            let message =
                "\(summary.violations.count) invariant violation(s); replay with --seed \(seed): "
                + summary.violations.prefix(3).joined(separator: "; ")
            context.trace("error: " + message)
            context.trace(summary.line)
            throw CLIError.reportedFailure(message)
        }
        context.trace(summary.line)
    }
}
