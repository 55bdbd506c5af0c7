import CardBasics
import Foundation
import Issuer
import NetworkServer
import OrchardCrypto
import OrchardRuntime
import OrchardStore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `orchard network reconcile` and the running network's own pass, through the built `orchard` binary, over a
/// deployment's SQLite files.
@Suite("orchard network reconcile", .serialized)
struct NetworkReconcileTests {
    let temporary: TemporaryDirectory
    let directory: DeploymentDirectory
    init() throws {
        temporary = try TemporaryDirectory()
        directory = DeploymentDirectory(path: temporary.child("deployment"))
    }

    /// Places a hold at the deployment's issuer decided `age` seconds ago, and records nothing at the token
    /// service: what a crash between the issuer's hold and the network's answer leaves.
    func orphanHold(_ id: String, amount: Int64, age: TimeInterval) async throws {
        let store = try await SQLiteIssuerStore.open(in: directory)
        do {
            let issuer = Issuer(
                configuration: TestCards.configuration, store: store,
                cardVerificationKey: TestCards.insecureDemoCardVerificationKey,
                clock: ManualClock(now: Date().addingTimeInterval(-age)))
            let card = try #require(try await issuer.card(pan: PrimaryAccountNumber("4111111111111111")))
            let answer = try await issuer.authorize(
                IssuerAuthorizationRequest(
                    networkTransactionID: NetworkServerService.acquirerID + ":" + id, pan: card.pan,
                    expiry: card.expiry, amount: try Money(minorUnits: amount, currency: Currency("840")),
                    channel: .contactless,
                    merchant: MerchantInfo(
                        merchantID: "m-1", name: "Shop", categoryCode: "5814", countryCode: "840"),
                    token: nil, cryptogramVerified: false, transmittedAt: Date()))
            #expect(answer.responseCode.isApproved)
        } catch {
            await store.store.close()
            throw error
        }
        await store.store.close()
    }

    func balance() async throws -> Int64? {
        let store = try await SQLiteIssuerStore.open(in: directory)
        let account = try await store.account(id: "acct-1")
        await store.store.close()
        return account?.balance
    }

    @Test(
        "R3: `orchard network reconcile` reverses old unanswered holds once as JSON; the network does at start",
        arguments: PartyBackend.all)
    func reconcileReversesOldHoldsOncePrintsJSONAndRefusesWhileTheNetworkRuns(_ backend: PartyBackend) async throws {
        #expect(try await runOrchard(["init", "--data-dir", directory.path] + backend.initArguments()).status == 0)
        let start = try #require(try await balance())
        try await orphanHold("lost-old", amount: 700, age: 3600)
        try await orphanHold("lost-young", amount: 30, age: 60)
        #expect(try await balance() == start + 730)

        let first = try await runOrchard(["network", "reconcile", "--data-dir", directory.path])
        #expect(first.status == 0, "\(first.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(first.stdout.utf8)) as? [String: Any])
        #expect(report["count"] as? Int == 1)
        // No acquirer authorization was left without a result.
        #expect((report["acquirer"] as? [Any])?.isEmpty == true)
        let holds = try #require(report["holds"] as? [[String: Any]])
        // The young hold's authorization may still be in flight: left alone.
        #expect(holds.count == 1)
        #expect(holds.first?["maskedPAN"] as? String == "411111******1111")
        #expect(holds.first?["outcome"] as? String == "released")
        #expect((holds.first?["ageSeconds"] as? Int ?? 0) >= 3600)
        #expect((holds.first?["amount"] as? [String: Any])?["minorUnits"] as? Int == 700)
        #expect(first.stderr.contains("1 hold(s) released"))
        #expect(!(first.stdout + first.stderr).contains("4111111111111111"))
        #expect(try await balance() == start + 30)

        // Idempotent: nothing is left to reverse.
        let second = try await runOrchard(["network", "reconcile", "--data-dir", directory.path])
        #expect(second.status == 0, "\(second.stderr)")
        let again = try #require(try JSONSerialization.jsonObject(with: Data(second.stdout.utf8)) as? [String: Any])
        #expect(again["count"] as? Int == 0 && (again["holds"] as? [Any])?.isEmpty == true)
        #expect(try await balance() == start + 30)

        // The running network reconciles at start (here with a 30-second bound, so the younger hold is due too);
        // the command refuses meanwhile.
        let network = try OrchardChild(
            ["serve", "network", "--data-dir", directory.path],
            environment: ["ORCHARD_NETWORK_RECONCILE_AFTER_SECONDS": "30"])
        _ = try await network.firstLine()
        let refused = try await runOrchard(["network", "reconcile", "--data-dir", directory.path])
        #expect(refused.status == 1)
        #expect(refused.stderr.contains("reconciles by itself") && refused.stdout.isEmpty)
        var released = false
        for _ in 0..<100 where !released {
            released = try await balance() == start
            if !released { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(released)
        network.send(SIGINT)
        #expect(try await network.exitStatus() == 0)
        let log = try String(contentsOfFile: directory.logPath(for: .network), encoding: .utf8)
        #expect(log.contains("reconciliation") && log.contains("411111******1111"))
        #expect(!log.contains("4111111111111111"))
    }
}
