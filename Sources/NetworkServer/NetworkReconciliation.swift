public import Acquirer
import Foundation
import Issuer
import OrchardCrypto
public import TokenService

/// What one reconciliation pass of the network service did: the acquirer's unfinished authorizations first
/// (reversed through the network, which releases their holds), then the issuer's holds with no final answer at
/// the token service.
public struct NetworkReconciliationReport: Hashable, Sendable, Codable {
    /// How many holds were released, by either part.
    public let count: Int
    /// The issuer's holds the token service acted on (``NetworkReconciler``).
    public let holds: [ReconciledHold]
    /// The acquirer's authorizations without a result it reversed (``Acquirer/reconcile(sentBefore:)``).
    public let acquirer: [AcquirerReconciledAuthorization]

    public init(holds: [ReconciledHold], acquirer: [AcquirerReconciledAuthorization]) {
        self.holds = holds
        self.acquirer = acquirer
        count =
            holds.filter { $0.outcome == ReversalOutcome.released.rawValue }.count
            + acquirer.filter { $0.outcome == ReversalOutcome.released.rawValue }.count
    }
}

/// The network service's two reconcilers, run in order with one bound: an authorization older than
/// `reconcileAfter` with no final answer is one a crash or a vanished client left behind.
struct NetworkReconciliation: Sendable {
    let acquirer: Acquirer
    let holds: NetworkReconciler
    let clock: any WallClock

    func run() async throws -> NetworkReconciliationReport {
        let acquirerPass = try await acquirer.reconcile(
            sentBefore: clock.now().addingTimeInterval(-holds.reconcileAfter))
        return NetworkReconciliationReport(holds: try await holds.run().holds, acquirer: acquirerPass)
    }
}
