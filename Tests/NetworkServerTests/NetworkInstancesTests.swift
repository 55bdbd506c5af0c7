import Acquirer
import AcquirerAPI
import CardBasics
import CommandTestSupport
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

/// Two instances of the network's token service and acquiring routes, each a real HTTPS server on loopback, with
/// their token vaults on one PostgreSQL schema (the test run's server) and the same keys (one HSM).
@Suite(
    "Two network instances on one PostgreSQL database", .serialized,
    .enabled(if: TestPostgreSQL.enabled, Comment(rawValue: TestPostgreSQL.installHint)))
struct NetworkInstancesTests {
    /// The routes of one instance over `tokenService`, served on loopback.
    static func serve(_ tokenService: TokenService, clock: ManualClock) async throws -> LoopbackServer {
        let acquirer = Acquirer(
            acquirerID: "acq-1", store: InMemoryAcquirerStore(), network: tokenService, clock: clock)
        try await acquirer.registerMerchant(
            MerchantAccount(
                merchantID: "m-coffee", name: "Orchard Coffee", categoryCode: "5814", countryCode: "840",
                terminalIDs: ["T0001", "T0002"]))
        var router = Router()
        NetworkRoutes.install(
            into: &router, tokenService: tokenService, acquirer: acquirer, issuerID: TestCards.issuerID,
            access: NetworkRoutesTests.open, outbox: nil)
        return try LoopbackServer(router: router)
    }

    static func answer(_ response: HTTPResponse) throws -> AcquirerAPI.AuthorizationAnswer {
        do {
            return try response.decodeJSON(AcquirerAPI.AuthorizationAnswer.self)
        } catch {
            Issue.record("\(response.status.code): \(String(decoding: response.body, as: UTF8.self))")
            throw error
        }
    }

    @Test("two network instances receive one cryptogram at once: one approval, the other declined")
    func oneCryptogramOneApproval() async throws {
        let location = StoreLocation.postgreSQL(
            try PostgreSQLLocation(
                url: try await TestPostgreSQL.shared().url, schema: TestPostgreSQL.freshSchema("network")))
        let vaultA = try SQLiteTokenVaultStore(location: location)
        let vaultB = try SQLiteTokenVaultStore(location: location)
        let h = try await NetworkHarness(vaultStore: vaultA)
        let second = try TokenService(
            keyStore: h.hsm, keys: h.keys, ranges: [h.visaRange, h.mastercardRange],
            issuers: [
                IssuerRoute(
                    issuerID: TestCards.issuerID, cardBINPrefixes: TestCards.cardBINPrefixes, host: h.issuerSwitch)
            ],
            vault: vaultB, deviceKeys: h.deviceKeys, notifier: h.outbox, clock: h.clock, random: h.random,
            monotonicClock: h.clock)
        let serverA = try await Self.serve(h.tokenService, clock: h.clock)
        let serverB = try await Self.serve(second, clock: h.clock)
        let clientA = try serverA.client()
        let clientB = try serverB.client()

        let phone = try h.makeDevice("phone-1")
        let card = try await h.provision("4111111111111111", on: phone)
        let money = try Money(minorUnits: 450, currency: Currency("840"))
        func request(
            _ submission: CryptogramSubmission, terminal: String, stan: String
        ) -> AcquirerAPI.AuthorizationRequest {
            AcquirerAPI.AuthorizationRequest(
                merchantID: "m-coffee", terminalID: terminal, stan: stan, pan: card.data.dpan.digits,
                expiry: AcquirerAPI.Expiry(year: card.data.tokenExpiry.year, month: card.data.tokenExpiry.month),
                amount: AcquirerAPI.Money(minorUnits: 450, currency: "840"),
                cryptogram: AcquirerAPI.Cryptogram(
                    kind: submission.kind.rawValue, cryptogram: submission.cryptogram,
                    applicationTransactionCounter: submission.applicationTransactionCounter,
                    transactionData: submission.transactionData),
                panSequenceNumber: 1, posEntryMode: "07")
        }
        // A cryptogram approved by one instance is a replay at the other.
        let first = try await phone.cryptogram(for: card, kind: .proximityARQC, amount: money)
        let approved = try Self.answer(
            try await clientA.post(
                serverA.base + AcquirerAPI.Route.authorizations, json: request(first, terminal: "T0001", stan: "000001")
            ))
        #expect(approved.responseCode == "00")
        let replayed = try Self.answer(
            try await clientB.post(
                serverB.base + AcquirerAPI.Route.authorizations, json: request(first, terminal: "T0002", stan: "000002")
            ))
        #expect(replayed.responseCode != "00")

        // One cryptogram sent to both instances at once: exactly one approval.
        let raced = try await phone.cryptogram(for: card, kind: .proximityARQC, amount: money)
        async let atA = clientA.post(
            serverA.base + AcquirerAPI.Route.authorizations, json: request(raced, terminal: "T0001", stan: "000003"))
        async let atB = clientB.post(
            serverB.base + AcquirerAPI.Route.authorizations, json: request(raced, terminal: "T0002", stan: "000004"))
        let responses: [HTTPResponse] = try await [atA, atB]
        let answers = try responses.map(Self.answer)
        #expect(answers.filter { $0.responseCode == "00" }.count == 1)
        // The issuer holds the two approved amounts, no more.
        #expect(try await h.issuer.account(id: "acct-1")?.balance == 900)

        // The vault's compare-and-set: a save over a token read before another writer's is refused, unsaved.
        let read = try #require(try await vaultB.token(dpan: card.data.dpan))
        var changed = read
        changed.updatedAt = read.updatedAt.addingTimeInterval(1)
        let record = IdempotencyRecord(
            scope: "test", key: "cas-1", requestFingerprint: "00", response: [], createdAt: read.updatedAt,
            started: nil)
        #expect(try await vaultA.saveToken(changed, with: record, ifUnchangedFrom: read))
        var stale = read
        stale.updatedAt = read.updatedAt.addingTimeInterval(2)
        #expect(!(try await vaultB.saveToken(stale, with: record, ifUnchangedFrom: read)))
        #expect(try await vaultB.token(dpan: card.data.dpan) == changed)

        clientA.shutdown()
        clientB.shutdown()
        await serverA.server.shutdown()
        await serverB.server.shutdown()
        await vaultA.store.close()
        await vaultB.store.close()
    }
}
