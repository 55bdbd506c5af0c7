import CardBasics
import Foundation
import Issuer
import NetworkTestSupport
import OrchardCrypto
import OrchardHTTP
import OrchardStore
import PaymentCredential
import Testing
import TokenRequestorAPI
import TokenService

@testable import NetworkServer

/// The Pay server's side of the token-requestor routes (`TokenRequestorAPI`, the only thing it imports of the
/// network) against the network's routes: what the Pay server writes the network reads field for field, what the
/// network answers over HTTPS decodes as the contract's answers, the wire keys are pinned, and a malformed body is
/// a typed 400 that changes nothing.
@Suite("Token-requestor wire format: Pay server and network agree")
struct TokenRequestorAPIContractTests {
    typealias API = TokenRequestorAPI

    /// A well-formed envelope (version, ephemeral point, tag) that opens for no one.
    let envelope: [UInt8] = [0x01, 0x04] + Array(repeating: 0xAB, count: 64) + Array(repeating: 0xCD, count: 16)

    /// Through JSON as the Pay server writes it and the network's router reads it.
    func read<T: Decodable>(_ type: T.Type, from value: some Encodable) throws -> T {
        try JSONDecoder().decode(type, from: JSONEncoder().encode(value))
    }

    // MARK: (a) requests, field for field

    @Test func theRequestsThePayServerSendsAreReadFieldForField() throws {
        let check = API.CheckCardRequest(
            idempotencyKey: "phone-1/add-1", tokenRequestorID: TokenRequestor.orchardPay.id, deviceID: "phone-1",
            deviceKind: "watch", encryptedCardData: Data(envelope).base64EncodedString())
        let checkRead = try read(API.CheckCardRequest.self, from: check).domain
        #expect(checkRead.idempotencyKey == "phone-1/add-1" && checkRead.tokenRequestorID == "40010075001")
        #expect(checkRead.deviceID == "phone-1" && checkRead.deviceKind == "watch")
        #expect(checkRead.encryptedCardData.serialized == envelope)

        let chain: [[UInt8]] = [[0x30, 0x82, 0x01], [0x30, 0x82, 0x02, 0xFF]]
        let link = API.LinkRequest(
            idempotencyKey: "phone-1/link-1", sessionID: "ps_1", deviceID: "phone-1",
            secureElementCertificateChain: chain.map { Data($0).base64EncodedString() }, termsAccepted: true)
        let linkRead = try read(API.LinkRequest.self, from: link).domain
        #expect(linkRead.idempotencyKey == "phone-1/link-1" && linkRead.sessionID == "ps_1")
        #expect(linkRead.deviceID == "phone-1" && linkRead.termsAccepted)
        #expect(linkRead.secureElementCertificateChain == chain && linkRead.domainControls == nil)
        #expect(try read(API.LinkRequest.self, from: link.refusingTerms).domain.termsAccepted == false)

        let code = API.OneTimeCodeRequest(sessionID: "ps_1", deviceID: "phone-1", code: "123456")
        #expect(try read(API.OneTimeCodeRequest.self, from: code) == code)
        // Its descriptions never show the code.
        #expect(!"\(code)".contains("123456") && !String(reflecting: code).contains("123456"))

        #expect(
            try read(API.LifecycleRequest.self, from: API.LifecycleRequest(actor: .cardholder)).actor.domain
                == .cardholder)
        #expect(
            try read(API.LifecycleRequest.self, from: API.LifecycleRequest(actor: .tokenRequestor)).actor.domain
                == .tokenRequestor)
        for action in API.LifecycleAction.allCases { #expect(action.domain.rawValue == action.rawValue) }
    }

    // MARK: (b) the network's answers over HTTPS

    func checkCard(
        _ h: NetworkHarness, _ pan: String, on device: SimulatedDevice, key: String
    ) throws -> API.CheckCardRequest {
        let sealed = try device.sealCardData(
            pan: try PrimaryAccountNumber(pan), expiry: try h.testCardExpiry(), cvv: try h.cvv(pan),
            name: TestCards.cardholderName, to: h.tokenService)
        return API.CheckCardRequest(
            idempotencyKey: key, tokenRequestorID: TokenRequestor.orchardPay.id, deviceID: device.deviceID,
            deviceKind: device.kind, encryptedCardData: Data(sealed.serialized).base64EncodedString())
    }

    func linkRequest(_ sessionID: String, on device: SimulatedDevice, key: String) -> API.LinkRequest {
        API.LinkRequest(
            idempotencyKey: key, sessionID: sessionID, deviceID: device.deviceID,
            secureElementCertificateChain: device.certificateChain.map { Data($0).base64EncodedString() },
            termsAccepted: true)
    }

    /// `path` answered 200 with a body that decodes as `T`.
    func answer<T: Decodable>(
        _ response: HTTPResponse, as type: T.Type, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> T {
        #expect(
            response.status.code == 200, "\(String(decoding: response.body, as: UTF8.self))",
            sourceLocation: sourceLocation)
        return try response.decodeJSON(T.self)
    }

    @Test func provisioningAnswersDecode() async throws {
        try await NetworkRoutesTests().withNetwork { h, client, base in
            let phone = try h.makeDevice("phone-1")
            let key = try answer(
                try await client.get(base + API.Route.provisioningKey), as: API.ProvisioningKey.self)
            #expect(
                Data(base64Encoded: key.publicKey).map(Array.init)
                    == h.tokenService.provisioningPublicKey.derRepresentation)
            #expect(key.certificate == nil)  // this network was given no certificate for it

            // Approve.
            let approved = try answer(
                try await client.post(
                    base + API.Route.checkCard, json: try checkCard(h, "4111111111111111", on: phone, key: "add-1")),
                as: API.CheckCardAnswer.self)
            guard case .approve(let profile) = approved.decision, let sessionID = approved.sessionID else {
                Issue.record("not approved: \(approved)")
                return
            }
            #expect(profile.network == "visa" && profile.type == "credit" && profile.suffix == "1111")
            #expect(profile.issuerName == TestCards.issuerName && !profile.productName.isEmpty)
            #expect(approved.termsID == "orchard-pay-terms-v1")

            // Step-up, then the one-time code.
            let challenged = try answer(
                try await client.post(
                    base + API.Route.checkCard, json: try checkCard(h, "4000000000003220", on: phone, key: "add-2")),
                as: API.CheckCardAnswer.self)
            guard case .stepUp(let challenge, let stepUpProfile) = challenged.decision,
                let stepUpSession = challenged.sessionID
            else {
                Issue.record("no step-up: \(challenged)")
                return
            }
            #expect(!challenge.method.isEmpty && !challenge.destinationHint.isEmpty)
            #expect(stepUpProfile.suffix == "3220" && challenged.termsID == "orchard-pay-terms-v1")
            let coded = try answer(
                try await client.post(
                    base + API.Route.oneTimeCode,
                    json: API.OneTimeCodeRequest(sessionID: stepUpSession, deviceID: "phone-1", code: "123456")),
                as: API.CheckCardAnswer.self)
            #expect(coded.decision == .approve(profile: stepUpProfile) && coded.sessionID == stepUpSession)

            // Decline.
            let declined = try answer(
                try await client.post(
                    base + API.Route.checkCard, json: try checkCard(h, "4000000000000002", on: phone, key: "add-3")),
                as: API.CheckCardAnswer.self)
            guard case .decline(let reason) = declined.decision else {
                Issue.record("not declined: \(declined)")
                return
            }
            #expect(!reason.isEmpty && declined.sessionID == nil && declined.termsID == nil)

            // Link: provisioned, and declined without the terms.
            let linked = try answer(
                try await client.post(base + API.Route.link, json: linkRequest(sessionID, on: phone, key: "link-1")),
                as: API.LinkAnswer.self)
            guard case .provisioned(let token) = linked else {
                Issue.record("not provisioned: \(linked)")
                return
            }
            let status = try await h.tokenService.status(tokenReference: token.tokenReference)
            #expect(token.dpanSuffix == status.dpanSuffix && token.profile == profile)
            #expect(token.tokenExpiry == API.Expiry(year: status.tokenExpiry.year, month: status.tokenExpiry.month))
            #expect(token.domains == [.contactless, .inApp, .web])
            let personalisation = try #require(Data(base64Encoded: token.personalisation))
            // A signed install ("OPI1", install ID, certificate digest, the envelope, the signature) for this SE.
            let install = try SignedPersonalisation(serialized: Array(personalisation))
            #expect(install.certificateDigest == SHA256.hash(phone.certificateChain[0]))
            #expect(install.isSigned(by: try h.hsm.signingPublicKey(of: h.keys.personalisationSigningKey)))
            // Its description names the token, not the envelope.
            #expect(!"\(token)".contains(token.personalisation))
            let refused = try answer(
                try await client.post(
                    base + API.Route.link, json: linkRequest(stepUpSession, on: phone, key: "link-2").refusingTerms),
                as: API.LinkAnswer.self)
            #expect(refused == .declined(reason: "termsNotAccepted"))
        }
    }

    @Test func lifecycleAndNotificationAnswersDecode() async throws {
        let directory = try TemporaryDirectory()
        let vault = try SQLiteTokenVaultStore(path: directory.path + "/network.sqlite")
        let outbox = SQLiteNotificationOutbox(vault: vault)
        try await NetworkRoutesTests().withNetwork(outbox: outbox) { h, client, base in
            let phone = try h.makeDevice("phone-1")
            let card = try await h.provision("4111111111111111", on: phone)
            let reference = card.token.tokenReference
            let cardholder = API.LifecycleRequest(actor: .cardholder)

            let active = try answer(try await client.get(base + API.Route.token(reference)), as: API.TokenStatus.self)
            let domain = try await h.tokenService.status(tokenReference: reference)
            #expect(
                active
                    == API.TokenStatus(
                        tokenReference: reference, deviceID: "phone-1", state: .active, suspendedBy: [],
                        domains: [.contactless, .inApp, .web],
                        tokenExpiry: API.Expiry(year: domain.tokenExpiry.year, month: domain.tokenExpiry.month),
                        dpanSuffix: String(card.data.dpan.digits.suffix(4))))

            let suspended = try answer(
                try await client.post(base + API.Route.token(reference, .suspend), json: cardholder),
                as: API.TokenStatus.self)
            #expect(suspended.state == .suspended && suspended.suspendedBy == [.cardholder])
            let resumed = try answer(
                try await client.post(base + API.Route.token(reference, .resume), json: cardholder),
                as: API.TokenStatus.self)
            #expect(resumed.state == .active && resumed.suspendedBy.isEmpty)

            let lost = try answer(
                try await client.post(base + API.Route.device("phone-1", .suspend), json: cardholder),
                as: API.DeviceLifecycleAnswer.self)
            #expect(lost.tokens.map(\.tokenReference) == [reference] && lost.tokens.map(\.state) == [.suspended])
            let found = try answer(
                try await client.post(base + API.Route.device("phone-1", .resume), json: cardholder),
                as: API.DeviceLifecycleAnswer.self)
            #expect(found.tokens.map(\.state) == [.active])

            let byIssuer = try answer(
                try await client.send(
                    HTTPClientRequest(method: .post, url: base + API.Route.issuerToken(reference, .suspend))),
                as: API.TokenStatus.self)
            #expect(byIssuer.state == .suspended && byIssuer.suspendedBy == [.issuer])

            let erased = try answer(
                try await client.post(
                    base + API.Route.device("phone-1", .delete), json: API.LifecycleRequest(actor: .tokenRequestor)),
                as: API.DeviceLifecycleAnswer.self)
            #expect(erased.tokens.map(\.state) == [.deleted])

            // The notifications the token service sent, through the durable outbox the route serves.
            let sent = h.outbox.notifications
            for notification in sent { await outbox.tokenStatusChanged(notification) }
            let feed = try answer(
                try await client.get(base + API.Route.notifications(after: 0)), as: API.NotificationFeed.self)
            #expect(feed.notifications.map(\.event.rawValue) == sent.map(\.event.rawValue))
            #expect(feed.notifications.map(\.state.rawValue) == sent.map(\.state.rawValue))
            #expect(feed.notifications.allSatisfy { $0.tokenReference == reference && $0.deviceID == "phone-1" })
            #expect(feed.notifications.allSatisfy { $0.tokenRequestorID == TokenRequestor.orchardPay.id })
            #expect(feed.notifications.map(\.occurredAt) == sent.map(\.occurredAt))
            #expect(feed.notifications.map(\.sequence) == feed.notifications.map(\.sequence).sorted())
            #expect(feed.notifications.first?.event == .provisioned && feed.notifications.last?.event == .deleted)
            let last = try #require(feed.notifications.last?.sequence)
            let rest = try answer(
                try await client.get(base + API.Route.notifications(after: last)), as: API.NotificationFeed.self)
            #expect(rest.notifications.isEmpty)
        }
        await vault.store.close()
    }

    // MARK: (c) the wire keys

    /// `value` encodes to exactly `json` (sorted keys, as the services write it) and `json` decodes to `value`.
    func pin<T: Codable & Equatable>(
        _ value: T, _ json: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        #expect(
            String(decoding: try encoder.encode(value), as: UTF8.self) == json, sourceLocation: sourceLocation)
        #expect(try JSONDecoder().decode(T.self, from: Data(json.utf8)) == value, sourceLocation: sourceLocation)
    }

    @Test func theWireKeysArePinned() throws {
        let profile = API.CardProfile(
            network: "visa", type: "credit", suffix: "1111", issuerName: "Bank", productName: "Classic")
        let profileJSON =
            #"{"issuerName":"Bank","network":"visa","productName":"Classic","suffix":"1111","type":"credit"}"#
        let expiry = API.Expiry(year: 2029, month: 12)
        try pin(
            API.ProvisioningKey(publicKey: "AQID", certificate: "BAUG"), #"{"certificate":"BAUG","publicKey":"AQID"}"#)
        try pin(
            API.CheckCardRequest(
                idempotencyKey: "phone-1/add-1", tokenRequestorID: "40010075001", deviceID: "phone-1",
                deviceKind: "phone", encryptedCardData: "AQID"),
            #"{"deviceID":"phone-1","deviceKind":"phone","encryptedCardData":"AQID","idempotencyKey":"phone-1/add-1","#
                + #""tokenRequestorID":"40010075001"}"#)
        try pin(
            API.OneTimeCodeRequest(sessionID: "ps_1", deviceID: "phone-1", code: "123456"),
            #"{"code":"123456","deviceID":"phone-1","sessionID":"ps_1"}"#)
        try pin(
            API.CheckCardAnswer(sessionID: "ps_1", decision: .approve(profile: profile), termsID: "terms-1"),
            #"{"decision":{"outcome":"approve","profile":"# + profileJSON
                + #"},"sessionID":"ps_1","termsID":"terms-1"}"#
        )
        try pin(
            API.CheckCardAnswer(
                sessionID: "ps_1",
                decision: .stepUp(
                    challenge: API.StepUpChallenge(method: "sms", destinationHint: "**** 0142"), profile: profile),
                termsID: "terms-1"),
            #"{"decision":{"challenge":{"destinationHint":"**** 0142","method":"sms"},"outcome":"stepUp","profile":"#
                + profileJSON + #"},"sessionID":"ps_1","termsID":"terms-1"}"#)
        try pin(
            API.CheckCardAnswer(sessionID: nil, decision: .decline(reason: "unknownCard"), termsID: nil),
            #"{"decision":{"outcome":"decline","reason":"unknownCard"}}"#)
        try pin(
            API.LinkRequest(
                idempotencyKey: "phone-1/link-1", sessionID: "ps_1", deviceID: "phone-1",
                secureElementCertificateChain: ["MIIB"], termsAccepted: true),
            #"{"deviceID":"phone-1","idempotencyKey":"phone-1/link-1","secureElementCertificateChain":["MIIB"],"#
                + #""sessionID":"ps_1","termsAccepted":true}"#)
        try pin(
            API.LinkAnswer.provisioned(
                token: API.ProvisionedToken(
                    tokenReference: "tok_1", dpanSuffix: "4242", tokenExpiry: expiry, domains: [.contactless, .inApp],
                    profile: profile, personalisation: "AQID")),
            #"{"outcome":"provisioned","token":{"domains":["contactless","inApp"],"dpanSuffix":"4242","#
                + #""personalisation":"AQID","profile":"# + profileJSON
                + #","tokenExpiry":{"month":12,"year":2029},"tokenReference":"tok_1"}}"#)
        try pin(
            API.LinkAnswer.declined(reason: "termsNotAccepted"), #"{"outcome":"declined","reason":"termsNotAccepted"}"#)
        try pin(API.LifecycleRequest(actor: .cardholder), #"{"actor":"cardholder"}"#)
        try pin(API.LifecycleRequest(actor: .tokenRequestor), #"{"actor":"tokenRequestor"}"#)
        let status = API.TokenStatus(
            tokenReference: "tok_1", deviceID: "phone-1", state: .suspended, suspendedBy: [.cardholder, .issuer],
            domains: [.web], tokenExpiry: expiry, dpanSuffix: "4242")
        let statusJSON =
            #"{"deviceID":"phone-1","domains":["web"],"dpanSuffix":"4242","state":"suspended","#
            + #""suspendedBy":["cardholder","issuer"],"tokenExpiry":{"month":12,"year":2029},"tokenReference":"tok_1"}"#
        try pin(status, statusJSON)
        try pin(API.DeviceLifecycleAnswer(tokens: [status]), #"{"tokens":["# + statusJSON + "]}")
        try pin(
            API.NotificationFeed(notifications: [
                API.TokenNotification(
                    sequence: 7, tokenReference: "tok_1", tokenRequestorID: "40010075001", deviceID: "phone-1",
                    event: .suspended, state: .suspended, suspendedBy: [.network], cardSuffix: "1111",
                    occurredAt: NetworkHarness.start)
            ]),
            #"{"notifications":[{"cardSuffix":"1111","deviceID":"phone-1","event":"suspended","#
                + #""occurredAt":"2026-03-01T12:00:00.000Z","sequence":7,"state":"suspended","suspendedBy":["network"],"#
                + #""tokenReference":"tok_1","tokenRequestorID":"40010075001"}]}"#)
        try pin(
            API.ErrorAnswer(code: .sessionState, message: "already linked"),
            #"{"error":{"code":"sessionState","message":"already linked"}}"#)
        #expect(API.Route.token("tok_1", .resume) == "/v1/tokens/tok_1/resume")
        #expect(API.Route.device("phone 1/x", .delete) == "/v1/devices/phone%201%2Fx/delete")
        #expect(API.Route.issuerToken("tok_1", .suspend) == "/v1/issuer/tokens/tok_1/suspend")
        #expect(API.Route.notifications(after: 12) == "/v1/notifications?after=12")
    }

    @Test func answersWithAnUnknownOrIncompleteOutcomeDoNotDecode() {
        let decoder = JSONDecoder()
        let profile = #"{"issuerName":"B","network":"visa","productName":"C","suffix":"1","type":"credit"}"#
        // Unknown outcome, a missing field of the named outcome, no outcome, and Swift's synthesized form.
        for json in [
            #"{"outcome":"maybe","reason":"x"}"#, #"{"outcome":"approve"}"#, #"{"reason":"unknownCard"}"#,
            #"{"outcome":"stepUp","profile":"# + profile + "}", #"{"approve":{"_0":"# + profile + "}}",
        ] {
            #expect(throws: DecodingError.self, "\(json)") {
                try decoder.decode(API.CardDecision.self, from: Data(json.utf8))
            }
        }
        let links = [#"{"outcome":"provisioned"}"#, #"{"outcome":"linked","reason":"x"}"#, #"{"declined":{"_0":"x"}}"#]
        for json in links {
            #expect(throws: DecodingError.self, "\(json)") {
                try decoder.decode(API.LinkAnswer.self, from: Data(json.utf8))
            }
        }
        #expect(throws: DecodingError.self) {
            try decoder.decode(API.TokenStatus.self, from: Data(#"{"state":"frozen"}"#.utf8))
        }
    }

    // MARK: (d) malformed requests

    /// `value`'s JSON with `change` applied to its top-level object.
    func mutated(_ value: some Encodable, _ change: (inout [String: Any]) -> Void) throws -> Data {
        var object = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(value)) as? [String: Any])
        change(&object)
        return try JSONSerialization.data(withJSONObject: object)
    }

    /// POSTs raw JSON and expects the typed 400 of the contract.
    func expectRefused(
        _ client: HTTPClient, _ url: String, _ body: Data, code: API.ErrorCode = .invalidRequest,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let response = try await client.send(
            HTTPClientRequest(method: .post, url: url, headers: ["Content-Type": "application/json"], body: body))
        #expect(response.status.code == 400, sourceLocation: sourceLocation)
        let refusal = try response.decodeJSON(API.ErrorAnswer.self)
        #expect(refusal.error.code == code, "\(refusal)", sourceLocation: sourceLocation)
    }

    @Test func malformedBodiesGetATyped400AndChangeNothing() async throws {
        try await NetworkRoutesTests().withNetwork { h, client, base in
            let phone = try h.makeDevice("phone-1")
            let check = try checkCard(h, "4111111111111111", on: phone, key: "add-1")
            // Missing field, wrong type, not base64, not an envelope.
            try await expectRefused(
                client, base + API.Route.checkCard, try mutated(check) { $0["deviceKind"] = nil })
            try await expectRefused(
                client, base + API.Route.checkCard, try mutated(check) { $0["encryptedCardData"] = 42 })
            try await expectRefused(
                client, base + API.Route.checkCard, try mutated(check) { $0["encryptedCardData"] = "not base64!" })
            try await expectRefused(
                client, base + API.Route.checkCard, try mutated(check) { $0["encryptedCardData"] = "AQID" },
                code: .envelopeRejected)
            try await expectRefused(client, base + API.Route.checkCard, Data("[]".utf8))
            // None of them used the idempotency key: the well-formed request with it is answered afresh.
            let approved = try answer(
                try await client.post(base + API.Route.checkCard, json: check), as: API.CheckCardAnswer.self)
            let sessionID = try #require(approved.sessionID)

            try await expectRefused(
                client, base + API.Route.oneTimeCode,
                try mutated(API.OneTimeCodeRequest(sessionID: sessionID, deviceID: "phone-1", code: "1")) {
                    $0["code"] = nil
                })

            let link = linkRequest(sessionID, on: phone, key: "link-1")
            try await expectRefused(
                client, base + API.Route.link, try mutated(link) { $0["termsAccepted"] = "yes" })
            try await expectRefused(
                client, base + API.Route.link, try mutated(link) { $0["secureElementCertificateChain"] = ["%%%"] })
            try await expectRefused(client, base + API.Route.link, try mutated(link) { $0["sessionID"] = nil })
            // The session is still open and the key unused: the well-formed Link provisions.
            guard
                case .provisioned(let token) = try answer(
                    try await client.post(base + API.Route.link, json: link), as: API.LinkAnswer.self)
            else {
                Issue.record("the session did not provision after the malformed Links")
                return
            }

            // Lifecycle bodies: an unknown role, a role the token requestor cannot take, none at all.
            for body in [#"{"actor":"martian"}"#, #"{"actor":"issuer"}"#, #"{"actor":"network"}"#, "{}"] {
                try await expectRefused(
                    client, base + API.Route.token(token.tokenReference, .delete), Data(body.utf8))
                try await expectRefused(client, base + API.Route.device("phone-1", .suspend), Data(body.utf8))
            }
            let status = try await h.tokenService.status(tokenReference: token.tokenReference)
            #expect(status.state == .active && status.suspendedBy.isEmpty)
        }
    }
}

extension TokenRequestorAPI.LinkRequest {
    /// The same request with the terms refused.
    var refusingTerms: Self {
        Self(
            idempotencyKey: idempotencyKey, sessionID: sessionID, deviceID: deviceID,
            secureElementCertificateChain: secureElementCertificateChain, termsAccepted: false)
    }
}
