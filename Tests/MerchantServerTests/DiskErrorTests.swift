import Foundation
import MerchantAPI
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import SQLiteCrashVFS
import Testing

@testable import MerchantServer

/// The merchant server on a failing disk (the crash VFS under its store): it answers 503 with `Retry-After`,
/// acknowledges no order it may lose, says so in its log, and recovers after a restart.
@Suite("R4: the merchant server on a failing disk", .serialized)
struct MerchantDiskErrorTests {
    @Test(
        "R4: a failed fsync under the merchant's store: 503 with Retry-After, logged, nothing acknowledged; restart recovers"
    )
    func failedSyncAnswers503UntilRestart() async throws {
        let gateway: @Sendable (DeploymentDirectory, ServicePeers) throws -> any AcquirerGateway = { directory, peers in
            try AcquirerHTTPSGateway(directory: directory, peers: peers)
        }
        let s = try await MerchantSandbox(gateway: gateway)
        let before = try await s.createOrder()
        // The merchant's store reopens under the crash VFS (the other services keep their files as they are).
        CrashVFS.install(under: s.path)
        try await s.restartMerchant(gateway: gateway)
        CrashVFS.fail(.sync, with: .io, under: s.path)
        defer { CrashVFS.clearFault(under: s.path) }

        let order = MerchantAPI.CreateOrder(item: "Tea", amount: "3.50", currency: "USD", applicationData: nil)
        for attempt in 1...2 {
            let refused = try await s.send(order)
            #expect(refused.status == .serviceUnavailable, "attempt \(attempt): \(refused.status)")
            #expect(refused.headers["Retry-After"] == "30")
            #expect(MerchantSandbox.errorCode(refused) == "service_unavailable")
        }
        #expect(CrashVFS.faultHits(under: s.path) == 1)
        #expect(
            CrashVFS.operationsAfterFault(under: s.path) == 0,
            "the merchant's store went on writing after the failed fsync")
        // Reads still work.
        #expect(try await s.order(before.id).status == .ok)
        let log = try String(contentsOfFile: s.deployment.logPath(for: .merchant), encoding: .utf8)
        #expect(log.contains("request failed with 503") && log.contains("stopped writing after a disk error"))

        // The operator fixes the disk and restarts the service: it recovers from what is on disk and takes orders.
        CrashVFS.clearFault(under: s.path)
        try await s.restartMerchant(gateway: gateway)
        #expect(try await s.order(before.id).status == .ok)
        _ = try await s.createOrder(item: "Tea", amount: "3.50")
        await s.close()
    }
}
