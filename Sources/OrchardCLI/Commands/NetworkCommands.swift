import Acquirer
import Foundation
import NetworkServer
import OrchardCrypto
import OrchardRuntime
import OrchardServices
import TokenService

/// `orchard network ...`: operations on the network side of a deployment (`--data-dir DIR`).
enum NetworkCommands {
    static let command = Command(
        name: "network",
        summary: "Operate the deployment's card network (token service, issuer, acquirer).",
        subcommands: [reconcile, wrapHSMKey]
    )

    static let kekFileOption = Option.required(
        "kek-file", "FILE", help: "The key-encryption key: 32 raw bytes, mode 0600, outside DIR.")

    static let wrapHSMKey = Command(
        name: "wrap-hsm-key",
        summary: "Wrap the HSM master key under a key-encryption key kept outside DIR (the production layout).",
        discussion: """
            Seals pki/network/network-hsm.key and the issuer's storage key pki/network/network-issuer-vault.key \
            under the KEK in --kek-file (AES-256-GCM) as NAME.wrapped, then removes the keys in clear. From then \
            on `orchard serve network` \
            needs ORCHARD_NETWORK_KEK_FILE (or network.kekFile in config.json) naming that file, and refuses to \
            start without it. Make the KEK with `head -c 32 /dev/urandom > FILE; chmod 600 FILE` on storage that is \
            not DIR's (docs/deployment.md). Prints {"wrapped": [PATH, …]}.
            """,
        options: [kekFileOption]
    ) { arguments, context in
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let paths: [String]
        do {
            paths = try NetworkMasterKey.wrap(
                in: deployment, kekPath: arguments[kekFileOption], random: SystemRandom())
        } catch let error as ServicesError {
            throw CLIError.failure(error.message)
        }
        context.trace(
            "network: the HSM master key and the issuer's storage key are now wrapped; serve with "
                + "ORCHARD_NETWORK_KEK_FILE set")
        try context.outputJSON(["wrapped": paths])
    }

    static let reconcile = Command(
        name: "reconcile",
        summary: "Reverse authorizations and holds that have no final answer (one pass; JSON on stdout).",
        discussion: """
            Older than network.reconcileAfterSeconds (default 300), two kinds are reversed through the reversal \
            path, so the amount goes back to the account once and a retry that arrives later is declined with 12: \
            an authorization the acquirer sent with no result recorded (its client never came back, or the \
            process stopped), then a hold the issuer placed with no final answer at the token service. Prints \
            {"count", "acquirer": [{"idempotencyKey", "maskedPAN", "amount", "ageSeconds", "outcome"}], \
            "holds": [{"networkTransactionID", "maskedPAN", "amount", "ageSeconds", "outcome"}]}; count is the \
            number of holds released. Works on DIR's acquirer.sqlite, network.sqlite and issuer.sqlite, and \
            refuses while the network service runs for DIR: that service reconciles at start and every \
            network.reconcileIntervalSeconds by itself.
            """
    ) { _, context in
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let report: NetworkReconciliationReport
        do {
            let configuration = try DeploymentCommands.registry().loadConfiguration(
                from: deployment, environment: context.environment)
            report = try await NetworkServer.reconcileOnce(
                configuration: configuration, directory: deployment,
                environment: ServiceEnvironment(variables: context.environment))
        } catch let error as ServicesError {
            throw CLIError.failure(error.message)
        }
        for authorization in report.acquirer {
            context.trace(
                "reconcile: acquirer \(authorization.idempotencyKey) \(authorization.maskedPAN) "
                    + "\(authorization.amount), \(authorization.ageSeconds) s old: \(authorization.outcome)")
        }
        for hold in report.holds {
            context.trace(
                "reconcile: \(hold.maskedPAN ?? "card unknown") \(hold.amount), \(hold.ageSeconds) s old: "
                    + hold.outcome)
        }
        context.trace("reconcile: \(report.count) hold(s) released")
        try context.outputJSON(report)
    }
}
