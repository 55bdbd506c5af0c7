import Acquirer
import CardBasics
import Foundation
import Issuer
import NetworkServer
import NetworkTestSupport
import OrchardCrypto
import OrchardHTTP
import OrchardLogging
import OrchardRuntime
import OrchardServices
import OrchardStore
import OrchardX509
import Testing
import TokenRequestorAPI
import TokenService

/// Two token requestors, each with a client certificate made as `orchard init` makes the Pay server's (role
/// `tokenRequestor`, CN its requestor ID, from the deployment's root), over real mutual TLS: each acts only on its
/// own sessions, tokens and notifications, and another's answer 404 as if they did not exist.
@Suite("Token requestor routes: each requestor acts only as itself")
struct TokenRequestorScopeTests {
    typealias API = TokenRequestorAPI
    static let pay = TokenRequestor.orchardPay.id
    static let other = "40010099999"

    struct Network {
        let h: NetworkHarness
        let outbox: SQLiteNotificationOutbox
        /// Orchard Pay's client, the other requestor's, and one without a certificate.
        let pay: HTTPClient
        let other: HTTPClient
        let anonymous: HTTPClient
        let base: String
    }

    func withNetwork(_ body: (Network) async throws -> Void) async throws {
        let directory = try TemporaryDirectory()
        let deployment = DeploymentDirectory(path: directory.path)
        try deployment.create()
        let root = try CertificateAuthority.create(
            subject: DistinguishedName([.organization("Orchard"), .commonName("Orchard Test Root")]), issuer: nil,
            lifetime: 3600, clock: SystemClock(), random: SystemRandom())
        for (name, requestorID) in [("pay-client", Self.pay), ("other-client", Self.other)] {
            try ServiceAccess.issueClientIdentity(
                named: name, role: .tokenRequestor, commonName: requestorID, by: root, to: deployment,
                clock: SystemClock(), random: SystemRandom())
        }
        let h = try await NetworkHarness()
        let vault = try SQLiteTokenVaultStore(path: directory.path + "/network.sqlite")
        let outbox = SQLiteNotificationOutbox(vault: vault)
        var router = Router()
        NetworkRoutes.install(
            into: &router, tokenService: h.tokenService,
            acquirer: Acquirer(acquirerID: "acq-1", store: InMemoryAcquirerStore(), network: h.tokenService),
            issuerID: TestCards.issuerID,
            access: NetworkAccess(
                tokenRequestor: ServiceAccess.requirement([.tokenRequestor], root: root.certificate),
                acquiring: .none, issuer: .none),
            outbox: outbox)
        let server = try LoopbackServer(router: router, clientRootsPEM: root.certificate.pemRepresentation)
        func client(_ name: String?) throws -> HTTPClient {
            try server.client(
                certificateChainPEM: try name.map { try deployment.readCertificate(named: $0) },
                privateKeyPEM: try name.map { try deployment.readPrivateKey(named: $0) })
        }
        let network = Network(
            h: h, outbox: outbox, pay: try client("pay-client"), other: try client("other-client"),
            anonymous: try client(nil), base: server.base)
        do {
            try await body(network)
        } catch {
            for client in [network.pay, network.other, network.anonymous] { client.shutdown() }
            await server.server.shutdown()
            await vault.store.close()
            throw error
        }
        for client in [network.pay, network.other, network.anonymous] { client.shutdown() }
        await server.server.shutdown()
        await vault.store.close()
    }

    @Test("C4: Another requestor's token answers 404 to status and lifecycle calls, and stays as it was")
    func anotherRequestorsToken() async throws {
        try await withNetwork { n in
            let card = try await n.h.provision("4111111111111111", on: try n.h.makeDevice("phone-1"))
            let reference = card.token.tokenReference
            let status = try await n.pay.get(n.base + API.Route.token(reference))
            #expect(status.status.code == 200)
            let hidden = try await n.other.get(n.base + API.Route.token(reference))
            let unknown = try await n.other.get(n.base + API.Route.token("tok_nope"))
            #expect(hidden.status.code == 404 && hidden.errorBody?.code == "notFound")
            // Exactly the answer for a token that does not exist.
            #expect(hidden.body == unknown.body)
            for action in API.LifecycleAction.allCases {
                let response = try await n.other.post(
                    n.base + API.Route.token(reference, action), json: API.LifecycleRequest(actor: .cardholder))
                #expect(response.status.code == 404, "\(action)")
            }
            #expect(try await n.h.tokenService.status(tokenReference: reference).state == .active)
            for response in [status, hidden] {
                #expect(!String(decoding: response.body, as: UTF8.self).contains(card.data.dpan.digits))
            }
            // Without a certificate the route is closed (401).
            #expect(try await n.anonymous.get(n.base + API.Route.token(reference)).status.code == 401)
        }
    }

    @Test("C4: A device action reaches only the caller's tokens on the device")
    func deviceActionsAreScoped() async throws {
        try await withNetwork { n in
            let card = try await n.h.provision("4111111111111111", on: try n.h.makeDevice("phone-1"))
            let lost = try await n.other.post(
                n.base + API.Route.device("phone-1", .suspend), json: API.LifecycleRequest(actor: .cardholder)
            ).decodeJSON(API.DeviceLifecycleAnswer.self)
            #expect(lost.tokens.isEmpty)
            #expect(try await n.h.tokenService.status(tokenReference: card.token.tokenReference).state == .active)
            let own = try await n.pay.post(
                n.base + API.Route.device("phone-1", .suspend), json: API.LifecycleRequest(actor: .cardholder)
            ).decodeJSON(API.DeviceLifecycleAnswer.self)
            #expect(own.tokens.map(\.tokenReference) == [card.token.tokenReference])
            #expect(own.tokens.map(\.state) == [.suspended])
        }
    }

    @Test("C4: Check Card naming another requestor is refused (403); another's session answers 404")
    func provisioningIsScoped() async throws {
        try await withNetwork { n in
            let phone = try n.h.makeDevice("phone-2")
            let envelope = try phone.sealCardData(
                pan: try PrimaryAccountNumber("4111111111111111"), expiry: try n.h.testCardExpiry(),
                cvv: try n.h.cvv("4111111111111111"), name: "A", to: n.h.tokenService)
            let posing = try await n.other.post(
                n.base + API.Route.checkCard,
                json: API.CheckCardRequest(
                    idempotencyKey: "add-1", tokenRequestorID: Self.pay, deviceID: "phone-2", deviceKind: "phone",
                    encryptedCardData: Data(envelope.serialized).base64EncodedString()))
            #expect(posing.status.code == 403 && posing.errorBody?.code == "requestorNotPermitted")
            #expect(!String(decoding: posing.body, as: UTF8.self).contains("4111111111111111"))

            let check = try await n.h.checkCard("4111111111111111", on: phone)
            let sessionID = try #require(check.sessionID)
            let link = try await n.other.post(
                n.base + API.Route.link,
                json: API.LinkRequest(
                    idempotencyKey: "link-1", sessionID: sessionID, deviceID: "phone-2",
                    secureElementCertificateChain: phone.certificateChain.map { Data($0).base64EncodedString() },
                    termsAccepted: true))
            #expect(link.status.code == 404 && link.errorBody?.code == "notFound")
            let code = try await n.other.post(
                n.base + API.Route.oneTimeCode,
                json: API.OneTimeCodeRequest(sessionID: sessionID, deviceID: "phone-2", code: "123456"))
            #expect(code.status.code == 404)
            // The session is untouched: its own requestor links it.
            guard case .provisioned = try await n.h.link(sessionID, on: phone) else {
                Issue.record("the session was changed by another requestor's calls")
                return
            }
        }
    }

    @Test("C4: Each requestor reads only its own notifications")
    func notificationsAreFiltered() async throws {
        try await withNetwork { n in
            let card = try await n.h.provision("4111111111111111", on: try n.h.makeDevice("phone-1"))
            try await n.h.tokenService.suspend(tokenReference: card.token.tokenReference, by: .cardholder)
            let mine = n.h.outbox.notifications
            // A notification of the other requestor's, between Orchard Pay's.
            var fields = try #require(
                try JSONSerialization.jsonObject(with: try JSONEncoder().encode(mine[0])) as? [String: Any])
            fields["tokenRequestorID"] = Self.other
            fields["tokenReference"] = "tok_other"
            let theirs = try JSONDecoder().decode(
                TokenStatusNotification.self, from: try JSONSerialization.data(withJSONObject: fields))
            await n.outbox.tokenStatusChanged(mine[0])
            await n.outbox.tokenStatusChanged(theirs)
            for notification in mine.dropFirst() { await n.outbox.tokenStatusChanged(notification) }

            let payFeed = try await n.pay.get(n.base + API.Route.notifications(after: 0))
                .decodeJSON(API.NotificationFeed.self)
            #expect(payFeed.notifications.count == mine.count)
            #expect(payFeed.notifications.allSatisfy { $0.tokenRequestorID == Self.pay })
            let otherFeed = try await n.other.get(n.base + API.Route.notifications(after: 0))
                .decodeJSON(API.NotificationFeed.self)
            #expect(otherFeed.notifications.map(\.tokenReference) == ["tok_other"])
            let after = try #require(otherFeed.notifications.last?.sequence)
            let rest = try await n.other.get(n.base + API.Route.notifications(after: after))
                .decodeJSON(API.NotificationFeed.self)
            #expect(rest.notifications.isEmpty)
        }
    }
}
