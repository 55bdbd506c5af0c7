import Foundation
import NetworkServer
import OrchardRuntime
import OrchardServices
import TokenService

/// `orchard network ...`: operations on the network side of a deployment (`--data-dir DIR`).
enum NetworkCommands {
    static let command = Command(
        name: "network",
        summary: "Operate the deployment's card network (token service, issuer, acquirer).",
        subcommands: [reconcile]
    )

    static let reconcile = Command(
        name: "reconcile",
        summary: "Reverse the issuer's holds that have no final answer at the network (one pass; JSON on stdout).",
        discussion: """
            A hold the issuer placed with no answer recorded at the token service (a crash or failed write in \
            between) and older than network.reconcileAfterSeconds (default 300) is reversed through the \
            network's reversal path: the amount goes back to the account once, and an authorization that arrives \
            later is declined with 12. Prints {"count", "holds": [{"networkTransactionID", "maskedPAN", \
            "amount", "ageSeconds", "outcome"}]}; count is the number of holds released. Works on DIR's \
            network.sqlite and issuer.sqlite, and refuses while the network service runs for DIR: that service \
            reconciles at start and every network.reconcileIntervalSeconds by itself.
            """
    ) { _, context in
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        let report: ReconciliationReport
        do {
            let configuration = try DeploymentCommands.registry().loadConfiguration(
                from: deployment, environment: context.environment)
            report = try await NetworkServer.reconcileOnce(
                configuration: configuration, directory: deployment,
                environment: ServiceEnvironment(variables: context.environment))
        } catch let error as ServicesError {
            throw CLIError.failure(error.message)
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
