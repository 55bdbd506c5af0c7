import Acquirer
import CardBasics
import Foundation
import Issuer
import NetworkAuthorizationAPI
import NetworkServer
import NetworkTestSupport
import OrchardCrypto
import OrchardHTTP
import OrchardStore
import Testing
import TokenService

@Suite("Reversals on SQLite and over HTTPS")
struct ReversalServiceTests {
    @Test func reversalsAreDurableInEveryPartysFile() async throws {
        let directory = try TemporaryDirectory()
        let vault = try SQLiteTokenVaultStore(path: directory.path + "/network.sqlite")
        let issuerKey = try IssuerStorageKey.generate()
        let issuerStore = try await SQLiteIssuerStore.open(path: directory.path + "/issuer.sqlite", key: issuerKey)
        let acquirerStore = try SQLiteAcquirerStore(path: directory.path + "/acquirer.sqlite")
        let h = try await NetworkHarness(vaultStore: vault, issuerStore: issuerStore)
        let acquirer = Acquirer(acquirerID: "acq-1", store: acquirerStore, network: h.tokenService, clock: h.clock)
        try await acquirer.registerMerchant(
            MerchantAccount(
                merchantID: "m1", name: "Shop", categoryCode: "5814", countryCode: "840", terminalIDs: ["T1"]))
        let phone = try h.makeDevice("phone-1")
        let card = try await h.provision("4111111111111111", on: phone)
        let amount = try Money(minorUnits: 990, currency: Currency("840"))
        let approved = try await acquirer.authorize(
            AcquirerAuthorizationRequest(
                origin: .terminal(terminalID: "T1", systemTraceAuditNumber: "000001"), merchantID: "m1",
                pan: card.data.dpan, expiry: card.data.tokenExpiry, amount: amount, channel: .contactless,
                cryptogram: try await phone.cryptogram(for: card, kind: .proximityARQC, amount: amount)))
        #expect(approved.isApproved)
        let reversal = AcquirerReversalRequest(
            origin: .terminal(terminalID: "T1", systemTraceAuditNumber: "000001"), merchantID: "m1", amount: amount,
            reason: "timeout")
        #expect(try await acquirer.reverse(reversal).reversed)
        let preempt = AcquirerReversalRequest(
            origin: .terminal(terminalID: "T1", systemTraceAuditNumber: "000002"), merchantID: "m1", amount: amount,
            reason: "recovery")
        #expect(try await acquirer.reverse(preempt).outcome == .preempted)
        await vault.store.close()
        await issuerStore.store.close()
        await acquirerStore.store.close()

        // Reopened, every party still knows: the balance is restored, the reversal recorded, the
        // preempted transaction blocked.
        let issuerAgain = try await SQLiteIssuerStore.open(path: directory.path + "/issuer.sqlite", key: issuerKey)
        let vaultAgain = try SQLiteTokenVaultStore(path: directory.path + "/network.sqlite")
        let acquirerAgain = try SQLiteAcquirerStore(path: directory.path + "/acquirer.sqlite")
        #expect(try await issuerAgain.account(id: "acct-1")?.balance == 0)
        let entries = try await issuerAgain.store.read { database in
            try database.query("SELECT network_transaction_id FROM authorizations ORDER BY 1", []) { row in
                try row.string(0)
            }
        }
        #expect(entries.count == 2)
        for id in entries {
            #expect(try await issuerAgain.authorization(networkTransactionID: id)?.reversedAt != nil)
        }
        #expect(try await acquirerAgain.reversal(idempotencyKey: "terminal:T1:000001")?.result.reversed == true)
        #expect(try await acquirerAgain.reversal(idempotencyKey: "terminal:T1:000002")?.result.outcome == .preempted)
        let reversalRecords = try await vaultAgain.store.read { database in
            try database.query("SELECT count(*) FROM idempotency_records WHERE scope = 'reversal:acq-1'", []) { row in
                try row.int(0)
            }
        }
        #expect(reversalRecords == [2])
        // The acquirer's reversal table holds no card number.
        let files = try directory.files().filter { $0.name.hasPrefix("acquirer.sqlite") }
        #expect(!files.isEmpty && !files.contains { $0.bytes.contains(ascii: card.data.dpan.digits) })
        await issuerAgain.store.close()
        await vaultAgain.store.close()
        await acquirerAgain.store.close()
    }

    @Test func theReversalRouteAnswersAndRefuses() async throws {
        try await NetworkRoutesTests().withNetwork { h, client, base in
            let phone = try h.makeDevice("phone-1")
            let card = try await h.provision("4111111111111111", on: phone)
            let amount = try Money(minorUnits: 450, currency: Currency("840"))
            let body = AuthorizationBody(
                merchantID: "m-coffee", terminalID: "T0001", stan: "000042", pan: card.data.dpan,
                expiry: card.data.tokenExpiry, amount: amount, channel: .contactless,
                cryptogram: try await phone.cryptogram(for: card, kind: .proximityARQC, amount: amount))
            let result = try await client.post(base + "/v1/acquirer/authorizations", json: body)
                .decodeJSON(AcquirerAuthorizationResult.self)
            #expect(result.isApproved)
            #expect(try await h.issuer.account(id: "acct-1")?.balance == 450)
            let reversal = ReversalBody(
                merchantID: "m-coffee", terminalID: "T0001", stan: "000042", amount: amount, reason: "timeout")
            let answer = try await client.post(base + "/v1/acquirer/reversals", json: reversal)
            #expect(answer.status.code == 200)
            let json = try #require(try JSONSerialization.jsonObject(with: answer.body) as? [String: Any])
            #expect(json["reversed"] as? Bool == true && json["outcome"] as? String == "released")
            #expect(!String(decoding: answer.body, as: UTF8.self).contains(card.data.dpan.digits))
            #expect(try await h.issuer.account(id: "acct-1")?.balance == 0)
            // Repeated: the same answer.
            let again = try await client.post(base + "/v1/acquirer/reversals", json: reversal)
            #expect(again.body == answer.body)
            // Both origins, another amount, unknown terminal: refused.
            let both = ReversalBody(
                merchantID: "m-coffee", terminalID: "T0001", stan: "000042", idempotencyKey: "k", amount: amount,
                reason: "timeout")
            #expect(try await client.post(base + "/v1/acquirer/reversals", json: both).status.code == 400)
            let other = ReversalBody(
                merchantID: "m-coffee", terminalID: "T0001", stan: "000042",
                amount: try Money(minorUnits: 1, currency: Currency("840")), reason: "timeout")
            #expect(try await client.post(base + "/v1/acquirer/reversals", json: other).status.code == 422)
            let unknown = ReversalBody(
                merchantID: "m-coffee", terminalID: "T0009", stan: "000042", amount: amount, reason: "timeout")
            #expect(try await client.post(base + "/v1/acquirer/reversals", json: unknown).status.code == 404)
        }
    }

    @Test func theAcquiringRouteNeedsItsCertificate() async throws {
        let access = NetworkAccess(
            tokenRequestor: .none, acquiring: .required(where: { _ in false }), issuer: .none)
        try await NetworkRoutesTests().withNetwork(access: access) { _, client, base in
            let reversal = ReversalBody(
                merchantID: "m-coffee", terminalID: "T0001", stan: "000043",
                amount: try Money(minorUnits: 1, currency: Currency("840")), reason: "timeout")
            let refused = try await client.post(base + "/v1/acquirer/reversals", json: reversal)
            #expect(refused.status.code == 401)
        }
    }
}
