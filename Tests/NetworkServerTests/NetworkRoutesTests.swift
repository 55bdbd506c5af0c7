import Acquirer
import CardBasics
import Foundation
import Issuer
import NetworkAuthorizationAPI
import NetworkServer
import NetworkTestSupport
import OrchardCrypto
import OrchardHTTP
import OrchardLogging
import PaymentCredential
import Testing
import TokenRequestorAPI
import TokenService

/// The network's routes over a real HTTPS server on loopback (an ephemeral certificate the client trusts).
@Suite("Network routes over HTTPS")
struct NetworkRoutesTests {
    /// No certificates: every token-requestor call acts for Orchard Pay.
    static let open = NetworkAccess(
        tokenRequestor: .none, acquiring: .none, issuer: .none, tokenRequestorID: { _ in TokenRequestor.orchardPay.id })

    /// `outbox`, when given, serves `GET /v1/notifications`.
    func withNetwork<T: Sendable>(
        access: NetworkAccess = open, outbox: SQLiteNotificationOutbox? = nil,
        _ body: (NetworkHarness, HTTPClient, String) async throws -> T
    ) async throws -> T {
        let h = try await NetworkHarness()
        let acquirer = Acquirer(
            acquirerID: "acq-1", store: InMemoryAcquirerStore(), network: h.tokenService, clock: h.clock)
        try await acquirer.registerMerchant(
            MerchantAccount(
                merchantID: "m-coffee", name: "Orchard Coffee", categoryCode: "5814", countryCode: "840",
                terminalIDs: ["T0001"]))
        var router = Router()
        NetworkRoutes.install(
            into: &router, tokenService: h.tokenService, acquirer: acquirer, issuerID: TestCards.issuerID,
            access: access, outbox: outbox)
        let server = try LoopbackServer(router: router)
        let client = try server.client()
        do {
            let result = try await body(h, client, server.base)
            client.shutdown()
            await server.server.shutdown()
            return result
        } catch {
            client.shutdown()
            await server.server.shutdown()
            throw error
        }
    }

    @Test func provisionAndPayOverHTTPS() async throws {
        try await withNetwork { h, client, base in
            let phone = try h.makeDevice("phone-1")
            // The wallet fetches the key, seals the card data to it, and checks the card.
            let key = try await client.get(base + TokenRequestorAPI.Route.provisioningKey)
                .decodeJSON(TokenRequestorAPI.ProvisioningKey.self)
            let tokenServiceKey = try P256.KeyAgreement.PublicKey(
                derRepresentation: try #require(Data(base64Encoded: key.publicKey)))
            #expect(tokenServiceKey == h.tokenService.provisioningPublicKey)
            let payload = try CardDataPayload(
                pan: try PrimaryAccountNumber("4111111111111111"), expiry: try h.testCardExpiry(),
                cardVerificationValue: try CardVerificationValue(try h.cvv("4111111111111111")), cardholderName: "A")
            let sealed = try EncryptedEnvelope.seal(
                try payload.encoded(), to: tokenServiceKey, label: try h.tokenService.cardDataLabel(deviceID: "phone-1")
            )
            let checkRequest = TokenRequestorAPI.CheckCardRequest(
                idempotencyKey: "add-1", tokenRequestorID: TokenRequestor.orchardPay.id, deviceID: "phone-1",
                deviceKind: "phone", encryptedCardData: Data(sealed.serialized).base64EncodedString())
            let check = try await client.post(base + TokenRequestorAPI.Route.checkCard, json: checkRequest)
                .decodeJSON(TokenRequestorAPI.CheckCardAnswer.self)
            // A retry over HTTP gets the same answer.
            let retried = try await client.post(base + TokenRequestorAPI.Route.checkCard, json: checkRequest)
                .decodeJSON(TokenRequestorAPI.CheckCardAnswer.self)
            #expect(check == retried)
            let sessionID = try #require(check.sessionID)
            let link = try await client.post(
                base + TokenRequestorAPI.Route.link,
                json: TokenRequestorAPI.LinkRequest(
                    idempotencyKey: "link-1", sessionID: sessionID, deviceID: "phone-1",
                    secureElementCertificateChain: phone.certificateChain.map { Data($0).base64EncodedString() },
                    termsAccepted: true)
            ).decodeJSON(TokenRequestorAPI.LinkAnswer.self)
            guard case .provisioned(let provisioned) = link else {
                Issue.record("no token")
                return
            }
            // The same Link through the library is the same request (its idempotency record answers): the wire
            // carried the token service's token, and the simulated Secure Element installs that.
            let replayed = try await h.tokenService.linkAndProvision(
                LinkAndProvisionRequest(
                    idempotencyKey: "link-1", sessionID: sessionID, deviceID: "phone-1",
                    secureElementCertificateChain: phone.certificateChain, termsAccepted: true))
            guard case .provisioned(let token) = replayed else {
                Issue.record("the replayed Link did not provision")
                return
            }
            #expect(token.tokenReference == provisioned.tokenReference)
            #expect(Data(token.personalisation.serialized).base64EncodedString() == provisioned.personalisation)
            let card = try phone.install(token, from: h.tokenService)

            // A terminal's authorization through the acquirer route.
            let amount = try Money(minorUnits: 725, currency: Currency("840"))
            let body = AuthorizationBody(
                merchantID: "m-coffee", terminalID: "T0001", stan: "000001", pan: card.data.dpan,
                expiry: card.data.tokenExpiry, amount: amount, channel: .contactless,
                cryptogram: try await phone.cryptogram(for: card, kind: .proximityARQC, amount: amount))
            let result = try await client.post(base + "/v1/acquirer/authorizations", json: body)
                .decodeJSON(AcquirerAuthorizationResult.self)
            #expect(result.isApproved && result.maskedPAN == card.data.dpan.masked)

            // Lost mode for the device, then the status route.
            let cardholder = TokenRequestorAPI.LifecycleRequest(actor: .cardholder)
            let suspended = try await client.post(
                base + TokenRequestorAPI.Route.device("phone-1", .suspend), json: cardholder
            ).decodeJSON(TokenRequestorAPI.DeviceLifecycleAnswer.self)
            #expect(suspended.tokens.map(\.state) == [.suspended])
            let status = try await client.get(base + TokenRequestorAPI.Route.token(token.tokenReference))
                .decodeJSON(TokenRequestorAPI.TokenStatus.self)
            #expect(status.state == .suspended && status.suspendedBy == [.cardholder])
            // The issuer's route acts as the issuer: it suspends too, and the cardholder cannot lift that.
            let byIssuer = try await client.send(
                HTTPClientRequest(
                    method: .post, url: base + TokenRequestorAPI.Route.issuerToken(token.tokenReference, .suspend)))
            #expect(byIssuer.status.code == 200)
            _ = try await client.post(base + TokenRequestorAPI.Route.device("phone-1", .resume), json: cardholder)
            let refused = try await client.post(
                base + TokenRequestorAPI.Route.token(token.tokenReference, .resume), json: cardholder)
            #expect(refused.status.code == 403)
            #expect(try refused.decodeJSON(TokenRequestorAPI.ErrorAnswer.self).error.code == .lifecycleNotPermitted)
        }
    }

    @Test func errorsAreMappedToStatuses() async throws {
        try await withNetwork { h, client, base in
            // Unknown token: 404 with the error code.
            let missing = try await client.get(base + TokenRequestorAPI.Route.token("tok_missing"))
            #expect(missing.status.code == 404)
            #expect(try missing.decodeJSON(TokenRequestorAPI.ErrorAnswer.self).error.code == .notFound)
            // A token requestor may not act as the issuer: the wire has no such role, so the body is refused.
            let phone = try h.makeDevice("phone-1")
            let card = try await h.provision("4111111111111111", on: phone)
            let asIssuer = try await client.post(
                base + TokenRequestorAPI.Route.token(card.token.tokenReference, .suspend), json: ["actor": "issuer"])
            #expect(asIssuer.status.code == 400)
            #expect(try asIssuer.decodeJSON(TokenRequestorAPI.ErrorAnswer.self).error.code == .invalidRequest)
            #expect(try await h.tokenService.status(tokenReference: card.token.tokenReference).state == .active)
            // Malformed JSON: 400; an authorization with both origins: 400; unknown merchant: 404.
            let garbage = try await client.send(
                HTTPClientRequest(
                    method: .post, url: base + TokenRequestorAPI.Route.checkCard,
                    headers: ["Content-Type": "application/json"],
                    body: Data("{".utf8)))
            #expect(garbage.status.code == 400)
            let amount = try Money(minorUnits: 1, currency: Currency("840"))
            let both = AuthorizationBody(
                merchantID: "m-coffee", terminalID: "T0001", stan: "000001", idempotencyKey: "k", pan: card.data.dpan,
                expiry: nil, amount: amount, channel: .contactless, cryptogram: nil)
            #expect(try await client.post(base + "/v1/acquirer/authorizations", json: both).status.code == 400)
            let unknown = AuthorizationBody(
                merchantID: "m-nope", terminalID: "T0001", stan: "000001", pan: card.data.dpan, expiry: nil,
                amount: amount, channel: .contactless, cryptogram: nil)
            let notFound = try await client.post(base + "/v1/acquirer/authorizations", json: unknown)
            #expect(notFound.status.code == 404)
            // No answer carries the DPAN.
            for response in [missing, asIssuer, garbage, notFound] {
                let text = String(decoding: response.body, as: UTF8.self)
                #expect(!text.contains(card.data.dpan.digits))
            }
        }
    }

    @Test func routesThatRequireAClientCertificateRefuseWithoutOne() async throws {
        let access = NetworkAccess(tokenRequestor: .required, acquiring: .required, issuer: .required)
        try await withNetwork(access: access) { _, client, base in
            #expect(try await client.get(base + TokenRequestorAPI.Route.provisioningKey).status.code == 401)
            #expect(try await client.get(base + TokenRequestorAPI.Route.token("tok_x")).status.code == 401)
            let issuer = try await client.send(
                HTTPClientRequest(method: .post, url: base + TokenRequestorAPI.Route.issuerToken("tok_x", .delete)))
            #expect(issuer.status.code == 401)
        }
    }
}
