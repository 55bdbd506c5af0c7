import AcquirerAPI
import Foundation
import MerchantAPI
import MerchantKit
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardStore
import OrchardX509
import PayServer
import PaymentCredential
import PaymentToken
import Testing

@testable import MerchantServer

/// The merchant server end to end (cases A10, A11, D3, V2): real tokens from the Pay server,
/// charges through the network's acquirer, token service and issuer, all over HTTPS on loopback.
@Suite("Merchant server: orders and in-app payments", .serialized)
struct MerchantServerTests {
    static let shippingContact = MerchantAPI.Contact(
        givenName: "Alice", familyName: "Doe", emailAddress: "alice@example.com", phoneNumber: "+1 415 555 0199",
        addressLines: ["1 Infinite Loop"], locality: "Cupertino", administrativeArea: "CA", postalCode: "95014",
        countryCode: "us")
    static let billingContact = MerchantAPI.Contact(
        givenName: "Alice", familyName: "Doe", addressLines: ["77 Billing Street"], locality: "Springfield",
        postalCode: "12345", countryCode: "US")
    static let shippingMethod = MerchantAPI.ShippingMethod(
        identifier: "pickup", label: "Pick up in store", amount: "0.00")

    /// The payment with the approved shipping contact, billing contact and shipping method.
    static func payWithContacts(_ s: MerchantSandbox, _ orderID: String, token: String) async throws -> HTTPResponse {
        try await s.pay(
            orderID, token: token, shippingContact: shippingContact, billingContact: billingContact,
            shippingMethod: shippingMethod)
    }

    @Test("An approved charge: one authorization at the issuer, the same answer again for the same token")
    func approvedCharge() async throws {
        let s = try await MerchantSandbox()
        try await s.provisionPhone()
        let order = try await s.createOrder()
        #expect(order.created.merchantIdentifier == "merchant.dev.orchard.demo")
        #expect(order.created.countryCode == "US" && order.created.currency == "USD")
        #expect(order.created.total == "9.99")
        #expect(order.created.supportedNetworks == ["visa", "masterCard"])
        #expect(order.applicationData == Array("{\"orderID\":\"\(order.id)\"}".utf8))

        let token = try await s.token(amount: 999, applicationData: order.applicationData)
        let first = try await Self.payWithContacts(s, order.id, token: token)
        try #require(first.status == .ok, "\(String(decoding: first.body, as: UTF8.self))")
        let answer = MerchantSandbox.json(first)
        #expect(answer["outcome"] as? String == "approved" && answer["responseCode"] as? String == "00")
        #expect(answer["orderID"] as? String == order.id && answer["reason"] as? String == "approved")
        #expect((answer["approvalCode"] as? String)?.isEmpty == false)
        let masked = try #require(answer["maskedPAN"] as? String)
        #expect(masked == String(s.dpan.prefix(6)) + "******" + String(s.dpan.suffix(4)))
        #expect(!masked.hasPrefix("411111"))
        let parsed = try PaymentToken(jsonBytes: Array(token.utf8))
        #expect(answer["transactionIdentifier"] as? String == parsed.transactionIdentifier)
        #expect(try s.issuerAuthorizations().count == 1)

        // The same token again (a retry after a lost answer): the first answer, byte for byte; no second charge.
        let again = try await Self.payWithContacts(s, order.id, token: token)
        #expect(again.status == .ok && again.body == first.body)
        #expect(try s.issuerAuthorizations().count == 1)

        // The order: paid, with only what fulfilment needs.
        let status = MerchantSandbox.json(try await s.order(order.id))
        #expect(status["status"] as? String == "paid" && status["paymentStatus"] as? String == "approved")
        #expect((status["payment"] as? [String: Any])?["maskedPAN"] as? String == masked)
        let fulfilment = try #require(status["fulfilment"] as? [String: Any])
        #expect(fulfilment["recipientName"] as? String == "Alice Doe" && fulfilment["countryCode"] as? String == "US")
        #expect(fulfilment["receiptEmail"] as? String == "alice@example.com")
        #expect(fulfilment["shippingMethodIdentifier"] as? String == "pickup")

        // The merchant never holds the FPAN or the DPAN, nor the phone number or the billing address (D3).
        for secret in [MerchantSandbox.fpan, s.dpan, "415 555 0199", "77 Billing Street", "Springfield"] {
            #expect(try s.merchantFilesHolding(secret).isEmpty, "found in the merchant's files")
        }
        // The scan finds what is there: the masked number is kept.
        #expect(!(try s.merchantFilesHolding(masked)).isEmpty)
        await s.close()
    }

    @Test("A decline (above the card's per-transaction limit): 200 declined, nothing kept for fulfilment, replayed")
    func declinedCharge() async throws {
        let s = try await MerchantSandbox()
        try await s.provisionPhone()
        let order = try await s.createOrder(item: "Espresso machine", amount: "2500.00")
        let token = try await s.token(amount: 250_000, applicationData: order.applicationData)
        let declined = try await Self.payWithContacts(s, order.id, token: token)
        try #require(declined.status == .ok, "\(String(decoding: declined.body, as: UTF8.self))")
        let answer = MerchantSandbox.json(declined)
        #expect(answer["outcome"] as? String == "declined" && answer["responseCode"] as? String == "61")
        #expect(answer["approvalCode"] == nil && (answer["reason"] as? String)?.isEmpty == false)
        let again = try await Self.payWithContacts(s, order.id, token: token)
        #expect(again.status == .ok && again.body == declined.body)
        #expect(try s.issuerAuthorizations().count == 1)
        let status = MerchantSandbox.json(try await s.order(order.id))
        #expect(status["status"] as? String == "open" && status["paymentStatus"] as? String == "declined")
        #expect(status["fulfilment"] == nil)
        for secret in ["Alice", "Infinite Loop", "alice@example.com"] {
            #expect(try s.merchantFilesHolding(secret).isEmpty)
        }
        await s.close()
    }

    @Test("A4: A token made for merchant B is refused by merchant A (it decrypts only for B)")
    func otherMerchant() async throws {
        let s = try await MerchantSandbox()
        try await s.provisionPhone()
        // Merchant B: registered at the Pay server with its own processing certificate; the app may pay it.
        let other = "merchant.dev.orchard.other"
        let payStore = try PayStore.open(in: s.deployment)
        let registry = MerchantRegistry(
            store: payStore,
            authority: try CertificateAuthority.load(named: PayService.Files.merchantCA, from: s.deployment),
            clock: SystemClock(), random: SystemRandom())
        try await registry.registerMerchant(identifier: other, displayName: "Other Store")
        let key = try P256.Signing.PrivateKey()
        let certificates = try await registry.issuePaymentProcessingCertificate(
            for: try CertificateSigningRequest.create(
                subject: DistinguishedName([.userID(other), .commonName("Orchard Pay Payment Processing:\(other)")]),
                key: CertificatePrivateKey(key)),
            merchantIdentifier: other)
        try await registry.entitle(application: MerchantSandbox.application, merchantIdentifiers: [other])
        await payStore.close()

        let order = try await s.createOrder()
        let token = try await s.token(amount: 999, applicationData: order.applicationData, merchant: other)
        let refused = try await s.pay(order.id, token: token)
        #expect(refused.status == .unprocessableContent && MerchantSandbox.errorCode(refused) == "tokenRejected")
        // It is a good token, for B: B's key decrypts it.
        let identityB = try MerchantIdentity(certificate: certificates[0], privateKeyPEM: try key.pemRepresentation)
        let rootPEM = try s.deployment.readCertificate(named: MerchantServer.tokenRootFile)
        let decryptor = try PaymentTokenDecryptor(
            identities: [identityB], trustRoots: [try Certificate(pemEncoded: rootPEM)])
        #expect(throws: Never.self) { try decryptor.decrypt(try PaymentToken(jsonBytes: Array(token.utf8))) }
        #expect(try s.issuerAuthorizations().isEmpty)
        #expect(MerchantSandbox.json(try await s.order(order.id))["status"] as? String == "open")
        await s.close()
    }

    @Test("A5/A10: applicationData, amount or currency other than the order's: orderMismatch, nothing charged")
    func orderMismatch() async throws {
        let s = try await MerchantSandbox()
        try await s.provisionPhone()
        let order = try await s.createOrder()
        for (amount, data) in [
            (Int64(999), Array("{\"orderID\":\"ord_someotherorder\"}".utf8)), (999, nil),
            (1999, order.applicationData),
        ] as [(Int64, [UInt8]?)] {
            let token = try await s.token(amount: amount, applicationData: data)
            let refused = try await s.pay(order.id, token: token)
            #expect(refused.status == .unprocessableContent && MerchantSandbox.errorCode(refused) == "orderMismatch")
        }
        let euros = try await s.createOrder(amount: "9.99", currency: "EUR")
        let usdToken = try await s.token(amount: 999, applicationData: euros.applicationData)
        let refused = try await s.pay(euros.id, token: usdToken)
        #expect(MerchantSandbox.errorCode(refused) == "orderMismatch")
        #expect(try s.issuerAuthorizations().isEmpty)
        // The right token still pays the order afterwards.
        let good = try await s.pay(
            order.id, token: try await s.token(amount: 999, applicationData: order.applicationData))
        #expect(MerchantSandbox.json(good)["outcome"] as? String == "approved")
        await s.close()
    }

    @Test("One token for two orders: the second is refused; the same cryptogram again at the network: declined 88")
    func tokenUsedTwice() async throws {
        let s = try await MerchantSandbox()
        try await s.provisionPhone()
        let first = try await s.createOrder()
        let second = try await s.createOrder()
        let token = try await s.token(amount: 999, applicationData: first.applicationData)
        #expect(MerchantSandbox.json(try await s.pay(first.id, token: token))["outcome"] as? String == "approved")
        let refused = try await s.pay(second.id, token: token)
        #expect(refused.status == .conflict && MerchantSandbox.errorCode(refused) == "tokenAlreadyUsed")
        #expect(try s.issuerAuthorizations().count == 1)
        #expect(MerchantSandbox.json(try await s.order(second.id))["status"] as? String == "open")

        // Even a merchant that failed to de-duplicate cannot charge the remote cryptogram twice: the same
        // cryptogram under another idempotency key is declined by the token service (ATC replayed).
        let parsed = try PaymentToken(jsonBytes: Array(token.utf8))
        let identity = try MerchantService.loadProcessingIdentity(from: s.deployment)
        let rootPEM = try s.deployment.readCertificate(named: MerchantServer.tokenRootFile)
        let decrypted = try PaymentTokenDecryptor(
            identities: [identity], trustRoots: [try Certificate(pemEncoded: rootPEM)]
        ).decrypt(parsed)
        guard case .threeDSecure(let cryptogramText, let eci) = decrypted.payment.credential else {
            Issue.record("not 3-D Secure")
            return await s.close()
        }
        let cryptogram = try #require(StrictEncoding.base64Decode(cryptogramText))
        let gateway = try AcquirerHTTPSGateway(directory: s.deployment, peers: s.environment.peers)
        let replay = AcquirerCharge(
            merchantID: "merchant.dev.orchard.demo", idempotencyKey: "replay-attempt", dpan: s.dpan,
            expiryYear: 2000 + (Int(decrypted.payment.applicationExpirationDate.prefix(2)) ?? 0),
            expiryMonth: Int(decrypted.payment.applicationExpirationDate.dropFirst(2).prefix(2)) ?? 0,
            amountMinorUnits: 999, currency: "840", cryptogram: cryptogram,
            applicationTransactionCounter: UInt16(cryptogram[2]) << 8 | UInt16(cryptogram[3]),
            transactionData: RemoteTransactionData(
                merchantIdentifier: "merchant.dev.orchard.demo", amount: 999, currency: 840
            )
            .encoded, eci: eci, appleMerchantID: "merchant.dev.orchard.demo")
        guard case .answered(let decision) = await gateway.authorize(replay) else {
            Issue.record("the acquirer did not decide")
            return await s.close()
        }
        #expect(decision.responseCode == "88" && !decision.isApproved, "\(decision)")
        #expect(decision.declineReason == "atcReplayed")
        #expect(try s.issuerAuthorizations().count == 1)
        await s.close()
    }

    @Test("An order paid with one token refuses another; malformed bodies, unknown orders, tampered tokens")
    func refusals() async throws {
        let s = try await MerchantSandbox()
        try await s.provisionPhone()
        let order = try await s.createOrder()
        let token = try await s.token(amount: 999, applicationData: order.applicationData)
        #expect(MerchantSandbox.json(try await s.pay(order.id, token: token))["outcome"] as? String == "approved")
        let second = try await s.token(amount: 999, applicationData: order.applicationData)
        let paid = try await s.pay(order.id, token: second)
        #expect(paid.status == .conflict && MerchantSandbox.errorCode(paid) == "orderAlreadyPaid")
        #expect(try s.issuerAuthorizations().count == 1)

        // Unknown order; malformed bodies.
        let unknown = try await s.pay("ord_nosuchorder", token: second)
        #expect(unknown.status == .notFound && MerchantSandbox.errorCode(unknown) == "orderNotFound")
        #expect(try await s.order("ord_nosuchorder").status == .notFound)
        let fresh = try await s.createOrder()
        for body in ["{}", "[]", "{\"token\": 5}", "{\"token\": {\"paymentData\": {}}}", "not json"] {
            let response = try await s.merchantClient.send(
                HTTPClientRequest(
                    method: .post, url: s.merchantBase + MerchantAPI.Route.payment(fresh.id), body: Data(body.utf8)))
            #expect(
                response.status == .badRequest && MerchantSandbox.errorCode(response) == "malformedRequest", "\(body)")
        }
        let badContact = try await s.pay(
            fresh.id, body: Data(("{\"token\":" + second + ",\"shippingContact\": 7}").utf8))
        #expect(badContact.status == .badRequest)
        for (amount, currency) in [
            ("9.999", "USD"), ("-1", "USD"), ("1,00", "USD"), ("5.5", "JPY"), ("1", "XYZ"), ("0", "USD"),
        ] {
            let response = try await s.send(MerchantAPI.CreateOrder(item: "Coffee", amount: amount, currency: currency))
            #expect(response.status == .badRequest && MerchantSandbox.errorCode(response) == "malformedRequest")
        }
        let noItem = try await s.send(MerchantAPI.CreateOrder(item: "", amount: "1.00", currency: "USD"))
        #expect(noItem.status == .badRequest)

        // A tampered token (its encrypted data changed): the signature no longer verifies.
        var tampered = try PaymentToken(jsonBytes: Array(second.utf8))
        tampered.paymentData.data[0] ^= 0x01
        let rejected = try await s.pay(fresh.id, token: tampered.json.serialized)
        #expect(rejected.status == .unprocessableContent && MerchantSandbox.errorCode(rejected) == "tokenRejected")
        #expect(try s.issuerAuthorizations().count == 1)
        await s.close()
    }

    @Test("A lost answer: the charge is reversed with the same key; the same token again gets that outcome")
    func lostAnswerIsReversed() async throws {
        let recorder = LossyGateway.Recorder()
        let s = try await MerchantSandbox(gateway: { directory, peers in
            LossyGateway(real: try AcquirerHTTPSGateway(directory: directory, peers: peers), recorder: recorder)
        })
        try await s.provisionPhone()
        let order = try await s.createOrder()
        let token = try await s.token(amount: 999, applicationData: order.applicationData)
        recorder.set(loseAuthorizationAnswers: true, loseReversals: 1)

        // The authorization reaches the issuer, its answer is lost; the reversal's answer is lost too.
        let pending = try await s.pay(order.id, token: token)
        #expect(pending.status == .badGateway && MerchantSandbox.errorCode(pending) == "acquirerUnavailable")
        #expect(MerchantSandbox.json(try await s.order(order.id))["status"] as? String == "processing")
        #expect(try s.issuerAuthorizations().count == 1)
        // The same token again: the pending reversal is completed (never a second authorization).
        let reversed = try await s.pay(order.id, token: token)
        #expect(reversed.status == .badGateway && MerchantSandbox.errorCode(reversed) == "acquirerUnavailable")
        #expect(recorder.authorizations == ["order-\(order.id)-1"])
        #expect(recorder.reversals == ["order-\(order.id)-1", "order-\(order.id)-1"])
        #expect(try s.acquirerReversals().count == 1)
        #expect(try s.issuerAuthorizations().count == 1)
        // Once more: the recorded outcome, nothing sent.
        let replay = try await s.pay(order.id, token: token)
        #expect(replay.body == reversed.body)
        #expect(recorder.reversals.count == 2 && recorder.authorizations.count == 1)

        // The order is open again; a new token pays it under the next key.
        recorder.set(loseAuthorizationAnswers: false, loseReversals: 0)
        #expect(MerchantSandbox.json(try await s.order(order.id))["status"] as? String == "open")
        let paid = try await s.pay(
            order.id, token: try await s.token(amount: 999, applicationData: order.applicationData))
        #expect(MerchantSandbox.json(paid)["outcome"] as? String == "approved")
        #expect(recorder.authorizations.last == "order-\(order.id)-2")
        await s.close()
    }

    @Test("Not delivered: nothing kept, the same token pays later; refused by the acquirer: 502, replayed")
    func notDeliveredAndRefused() async throws {
        let recorder = LossyGateway.Recorder()
        let s = try await MerchantSandbox(gateway: { directory, peers in
            LossyGateway(real: try AcquirerHTTPSGateway(directory: directory, peers: peers), recorder: recorder)
        })
        try await s.provisionPhone()
        let order = try await s.createOrder()
        let token = try await s.token(amount: 999, applicationData: order.applicationData)
        recorder.set(.notDeliver)
        let unreachable = try await s.pay(order.id, token: token)
        #expect(unreachable.status == .badGateway && MerchantSandbox.errorCode(unreachable) == "acquirerUnavailable")
        #expect(MerchantSandbox.json(try await s.order(order.id))["status"] as? String == "open")
        recorder.set(.none)
        let paid = try await s.pay(order.id, token: token)
        #expect(MerchantSandbox.json(paid)["outcome"] as? String == "approved")
        // The same key both times: nothing had arrived.
        #expect(recorder.authorizations == ["order-\(order.id)-1", "order-\(order.id)-1"])

        let other = try await s.createOrder()
        let second = try await s.token(amount: 999, applicationData: other.applicationData)
        recorder.set(.refuse)
        let refused = try await s.pay(other.id, token: second)
        #expect(refused.status == .badGateway && MerchantSandbox.errorCode(refused) == "acquirerRefused")
        recorder.set(.none)
        let again = try await s.pay(other.id, token: second)
        #expect(again.body == refused.body)
        #expect(MerchantSandbox.json(try await s.order(other.id))["paymentStatus"] as? String == "failed")
        #expect(try s.issuerAuthorizations().count == 1)
        await s.close()
    }

    @Test("While a charge is on its way: the same token and another token for the order get 409 paymentInProgress")
    func paymentInProgress() async throws {
        let recorder = LossyGateway.Recorder()
        let s = try await MerchantSandbox(gateway: { directory, peers in
            LossyGateway(real: try AcquirerHTTPSGateway(directory: directory, peers: peers), recorder: recorder)
        })
        try await s.provisionPhone()
        let order = try await s.createOrder()
        let token = try await s.token(amount: 999, applicationData: order.applicationData)
        let other = try await s.token(amount: 999, applicationData: order.applicationData)
        recorder.hold()
        let orderID = order.id
        let first = Task { try await s.pay(orderID, token: token) }
        for _ in 0..<400 where !recorder.isHolding { try await Task.sleep(for: .milliseconds(25)) }
        try #require(recorder.isHolding)
        let same = try await s.pay(order.id, token: token)
        #expect(same.status == .conflict && MerchantSandbox.errorCode(same) == "paymentInProgress")
        let another = try await s.pay(order.id, token: other)
        #expect(another.status == .conflict && MerchantSandbox.errorCode(another) == "paymentInProgress")
        #expect(MerchantSandbox.json(try await s.order(order.id))["status"] as? String == "processing")
        recorder.release()
        let answer = try await first.value
        #expect(MerchantSandbox.json(answer)["outcome"] as? String == "approved")
        #expect(recorder.authorizations.count == 1)
        #expect(try s.issuerAuthorizations().count == 1)
        await s.close()
    }

    @Test("A stale token is refused; a charged token resubmitted after the window still gets its first answer")
    func freshness() async throws {
        let clock = ManualClock(now: Date())
        let recorder = LossyGateway.Recorder()
        let s = try await MerchantSandbox(
            gateway: { directory, peers in
                LossyGateway(real: try AcquirerHTTPSGateway(directory: directory, peers: peers), recorder: recorder)
            }, merchantClock: clock)
        try await s.provisionPhone()
        let order = try await s.createOrder()
        let token = try await s.token(amount: 999, applicationData: order.applicationData)
        let paid = try await s.pay(order.id, token: token)
        #expect(MerchantSandbox.json(paid)["outcome"] as? String == "approved")
        let late = try await s.createOrder()
        // The token's signing time is the Pay server's real clock, somewhere between these two instants; the
        // merchant's clock is set from them, not from its start (the setup may take seconds on a loaded machine).
        let beforeSigning = Date()
        let lateToken = try await s.token(amount: 999, applicationData: late.applicationData)
        // The merchant's clock restarts from the token's signing (now): the setup before it (init with an RSA-2048
        // identity key, provisioning) may take over a second on a loaded machine, which the 1-second margins below
        // cannot absorb.
        clock.setWall(Date())
        clock.advance(by: 301)
        let stale = try await s.pay(late.id, token: lateToken)
        #expect(stale.status == .unprocessableContent && MerchantSandbox.errorCode(stale) == "tokenRejected")
        let again = try await s.pay(order.id, token: token)
        #expect(again.status == .ok && again.body == paid.body)
        clock.setWall(beforeSigning.addingTimeInterval(-301))
        let early = try await s.pay(late.id, token: lateToken)
        #expect(MerchantSandbox.errorCode(early) == "tokenRejected")
        #expect(recorder.authorizations.count == 1)
        await s.close()
    }

    @Test("A10: Another token with a transactionId already on record (unsigned fields changed): tokenAlreadyUsed")
    func sameTransactionIDOtherBytes() async throws {
        let s = try await MerchantSandbox()
        try await s.provisionPhone()
        let order = try await s.createOrder()
        let token = try await s.token(amount: 999, applicationData: order.applicationData)
        #expect(MerchantSandbox.json(try await s.pay(order.id, token: token))["outcome"] as? String == "approved")
        var altered = try PaymentToken(jsonBytes: Array(token.utf8))
        altered.paymentMethod?.displayName = "Visa 9999"
        let refused = try await s.pay(order.id, token: altered.json.serialized)
        #expect(refused.status == .conflict && MerchantSandbox.errorCode(refused) == "tokenAlreadyUsed")
        #expect(try s.issuerAuthorizations().count == 1)
        await s.close()
    }

    @Test("A charge a stopped server left without an outcome is reversed when the server starts again")
    func reversedAtRestart() async throws {
        let recorder = LossyGateway.Recorder()
        let s = try await MerchantSandbox(gateway: { directory, peers in
            LossyGateway(real: try AcquirerHTTPSGateway(directory: directory, peers: peers), recorder: recorder)
        })
        try await s.provisionPhone()
        let order = try await s.createOrder()
        let token = try await s.token(amount: 999, applicationData: order.applicationData)
        recorder.set(loseAuthorizationAnswers: true, loseReversals: 1_000)
        let pending = try await s.pay(order.id, token: token)
        #expect(MerchantSandbox.errorCode(pending) == "acquirerUnavailable")
        #expect(try s.issuerAuthorizations().count == 1 && s.acquirerReversals().isEmpty)

        try await s.restartMerchant { directory, peers in try AcquirerHTTPSGateway(directory: directory, peers: peers) }
        #expect(try await s.orderStatus(order.id, becomes: "open"))
        #expect(try s.acquirerReversals().count == 1 && s.issuerAuthorizations().count == 1)
        let replay = try await s.pay(order.id, token: token)
        #expect(replay.status == .badGateway && MerchantSandbox.errorCode(replay) == "acquirerUnavailable")
        #expect(try s.acquirerReversals().count == 1)
        await s.close()
    }

    @Test("R3: a reversal the acquirer did not take is sent again by the periodic pass, without a restart")
    func reversedByThePeriodicPass() async throws {
        let recorder = LossyGateway.Recorder()
        let s = try await MerchantSandbox(
            gateway: { directory, peers in
                LossyGateway(real: try AcquirerHTTPSGateway(directory: directory, peers: peers), recorder: recorder)
            }, merchantVariables: ["ORCHARD_MERCHANT_RECONCILE_INTERVAL_SECONDS": "1"])
        try await s.provisionPhone()
        let order = try await s.createOrder()
        let token = try await s.token(amount: 999, applicationData: order.applicationData)
        recorder.set(loseAuthorizationAnswers: true, loseReversals: 1_000)
        let pending = try await s.pay(order.id, token: token)
        #expect(MerchantSandbox.errorCode(pending) == "acquirerUnavailable")
        #expect(MerchantSandbox.json(try await s.order(order.id))["status"] as? String == "processing")
        #expect(try s.issuerAuthorizations().count == 1 && s.acquirerReversals().isEmpty)

        // The acquirer takes reversals again; nobody resubmits the token and the server keeps running.
        recorder.set(loseAuthorizationAnswers: false, loseReversals: 0)
        #expect(try await s.orderStatus(order.id, becomes: "open"))
        #expect(try s.acquirerReversals().count == 1 && s.issuerAuthorizations().count == 1)
        await s.close()
    }
}

/// The real acquirer gateway, with faults on demand: an authorization delivered and decided whose answer the
/// merchant never hears, a reversal dropped before it is sent, an authorization refused or not delivered at all,
/// or held until the test lets it go.
final class LossyGateway: AcquirerGateway {
    final class Recorder: @unchecked Sendable {
        enum Fault { case none, loseAnswer, refuse, notDeliver }
        private let lock = NSLock()
        private var _authorizations: [String] = []
        private var _reversals: [String] = []
        private var fault = Fault.none
        private var reversalsToLose = 0
        private var held: CheckedContinuation<Void, Never>?
        private var holding = false

        var authorizations: [String] { lock.withLock { _authorizations } }
        var reversals: [String] { lock.withLock { _reversals } }
        /// Whether an authorization waits for ``release()``.
        var isHolding: Bool { lock.withLock { held != nil } }

        func set(loseAuthorizationAnswers: Bool, loseReversals: Int) {
            set(loseAuthorizationAnswers ? .loseAnswer : .none, loseReversals: loseReversals)
        }
        func set(_ fault: Fault, loseReversals: Int = 0) {
            lock.withLock {
                self.fault = fault
                reversalsToLose = loseReversals
            }
        }
        /// The next authorization waits for ``release()`` before it is sent.
        func hold() { lock.withLock { holding = true } }
        func release() {
            let continuation = lock.withLock {
                holding = false
                defer { held = nil }
                return held
            }
            continuation?.resume()
        }
        func authorization(_ key: String) async -> Fault {
            let wait = lock.withLock { holding }
            if wait { await withCheckedContinuation { continuation in lock.withLock { held = continuation } } }
            return lock.withLock {
                _authorizations.append(key)
                return fault
            }
        }
        func reversal(_ key: String) -> Bool {
            lock.withLock {
                _reversals.append(key)
                guard reversalsToLose > 0 else { return false }
                reversalsToLose -= 1
                return true
            }
        }
    }

    let real: AcquirerHTTPSGateway
    let recorder: Recorder

    init(real: AcquirerHTTPSGateway, recorder: Recorder) {
        self.real = real
        self.recorder = recorder
    }

    func authorize(_ charge: AcquirerCharge) async -> AcquirerOutcome<AcquirerDecision> {
        switch await recorder.authorization(charge.idempotencyKey) {
        case .none: return await real.authorize(charge)
        case .loseAnswer:
            _ = await real.authorize(charge)
            return .noAnswer("the test lost the answer")
        case .refuse: return .refused(status: 400, message: "the test refused it")
        case .notDeliver: return .notDelivered("the test did not send it")
        }
    }

    func reverse(
        merchantID: String, idempotencyKey: String, amountMinorUnits: Int64, currency: String, reason: String
    ) async -> AcquirerOutcome<Bool> {
        if recorder.reversal(idempotencyKey) { return .noAnswer("the test dropped the reversal") }
        return await real.reverse(
            merchantID: merchantID, idempotencyKey: idempotencyKey, amountMinorUnits: amountMinorUnits,
            currency: currency, reason: reason)
    }
}
