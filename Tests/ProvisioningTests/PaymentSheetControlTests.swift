import AppPayments
import Device
import DeviceProcess
import Foundation
import MerchantKit
import MerchantServer
import OrchardRuntime
import OrchardServices
import OrchardStore
import PayClient
import PaymentToken
import SecureElement
import Testing
import Wallet

/// A device process's control socket served in this process: the device's control API and its payment sheets, the
/// device registered with the sandbox's Pay server. The app reaches the sheet through ``ControlSocketSheetHost``
/// and the user through raw control-API requests, both over the real Unix socket.
final class SheetDevice: @unchecked Sendable {
    let sandbox: Sandbox
    let device: Device
    let socket: String
    private let server: ControlSocketServer

    init(
        _ sandbox: Sandbox, _ device: Device, automatic: AutoAuthentication? = nil,
        timeout: Duration = .seconds(120)
    ) async throws {
        self.sandbox = sandbox
        self.device = device
        _ = try await sandbox.client(device.name).register(
            secureElementCertificate: try Device.identity(of: device.name, in: sandbox.deployment).certificate)
        let client = try sandbox.client(device.name)
        let root = sandbox.root
        let sheets = PaymentSheetService(
            device: device, automatic: automatic, timeout: timeout,
            connect: { PaymentSheetService.PayServerConnection(client: client, root: root, close: {}) })
        let control = DeviceControl(device: device)
        socket = Device.controlSocketPath(of: device.name, in: sandbox.deployment)
        server = try ControlSocketServer(path: socket) { request in
            PaymentSheetService.handles(request) ? await sheets.handle(request) : await control.handle(request)
        }
    }

    func stop() { server.stop() }

    /// The app's side: the sheet of this device process.
    var host: ControlSocketSheetHost { ControlSocketSheetHost(socketPath: socket, pollSeconds: 2) }

    /// Presents `request` for the demo app on a task of its own, as an app does.
    func present(
        _ request: PaymentRequest, delegate: any PaymentAuthorizationControllerDelegate,
        application: String = "dev.orchard.demo-app"
    ) -> Task<PaymentSheetOutcome, any Error> {
        let host = self.host
        return Task {
            try await PaymentAuthorizationController(
                paymentRequest: request, host: host, applicationIdentifier: application
            ).present(delegate: delegate)
        }
    }

    /// One control-API request as the user sends it: (status, JSON object).
    func call(_ method: String, _ path: String, _ body: Any? = nil) async throws -> (Int, [String: Any]) {
        let data = try body.map { try JSONSerialization.data(withJSONObject: $0) } ?? Data()
        let response = try await ControlSocketClient.send(
            ControlRequest(method: method, path: path, body: data), to: socket
        ).get()
        return (response.status, (try? JSONSerialization.jsonObject(with: response.body) as? [String: Any]) ?? [:])
    }

    /// The sheet as `GET /payment-sheets/current` shows it.
    func sheet() async throws -> [String: Any] {
        try await call("GET", "/payment-sheets/current").1["sheet"] as? [String: Any] ?? [:]
    }

    /// Waits (bounded) until the sheet waits for `party` (`user` or `app`), and returns it.
    func sheetWaiting(for party: String) async throws -> [String: Any] {
        for _ in 0..<400 {
            let sheet = try await sheet()
            if sheet["waitingFor"] as? String == party { return sheet }
            try await Task.sleep(for: .milliseconds(25))
        }
        Issue.record("the sheet never waited for the \(party)")
        return try await sheet()
    }

    /// The Pay server's nonce rows (issued or used).
    func nonceRows() throws -> Int {
        let database = try Database(
            path: sandbox.deployment.databasePath(for: .pay), options: StoreOptions(durability: .normal),
            access: .readOnly)
        return Int(try database.queryFirst("SELECT count(*) FROM payment_nonces", [], { try $0.int(0) }) ?? -1)
    }
}

@Suite("In-app: the payment sheet in the device process, driven through its control API", .serialized)
struct PaymentSheetControlTests {
    static let alice = PaymentSheetTests.alice
    static var aliceJSON: [String: Any] {
        [
            "name": "Alice Doe", "emailAddress": "alice@example.com", "phoneNumber": "+1 555 0100",
            "postalAddress": [
                "street": "1 Infinite Loop", "city": "Cupertino", "state": "CA", "postalCode": "95014",
                "country": "US",
            ],
        ]
    }

    /// Runs `body` with a sandbox and a phone with Face ID and the given test cards, served on its control
    /// socket; stops both however `body` ends.
    static func withPhone(
        cards: [String], timeout: Duration = .seconds(120), automatic: AutoAuthentication? = nil,
        _ body: (Sandbox, SheetDevice) async throws -> Void
    ) async throws {
        let sandbox = try await Sandbox()
        do {
            let device = try await sandbox.makeDevice("phone", kind: .phone, biometry: .face)
            for pan in cards { _ = try await sandbox.addCard(pan, to: device) }
            let phone = try await SheetDevice(sandbox, device, automatic: automatic, timeout: timeout)
            do {
                try await body(sandbox, phone)
            } catch {
                phone.stop()
                throw error
            }
            phone.stop()
        } catch {
            await sandbox.close()
            throw error
        }
        await sandbox.close()
    }

    /// The merchant's view of a token: its decrypted payment data (amount and DPAN).
    static func decrypt(_ token: Data, _ sandbox: Sandbox, amount: Int64) throws -> DecryptedPaymentData {
        let decryptor = try PaymentTokenDecryptor(
            identities: [try MerchantService.loadProcessingIdentity(from: sandbox.deployment)],
            trustRoots: [try DeploymentPKI.readCertificate(named: "token-root", from: sandbox.deployment)])
        return try decryptor.decrypt(
            try PaymentToken(jsonBytes: Array(token)),
            order: ExpectedOrder(applicationData: Array("order-42".utf8), amount: amount, currencyCode: "840")
        ).payment
    }

    @Test("The user chooses another eligible card and it is the one paid with; an ineligible card is refused")
    func chooseCard() async throws {
        try await Self.withPhone(cards: ["4111111111111111", "5555555555554444", "4000056655665556"]) {
            sandbox, phone in
            // Visa credit (the default), Mastercard credit, Visa debit (not for a credit-only merchant).
            let cards = await phone.device.wallet.allCards
            let mastercard = try #require(cards.first { $0.network.lowercased() == "mastercard" })
            let debit = try #require(cards.first { $0.type == .debit })
            var request = PaymentSheetTests.request(capabilities: [.threeDSecure, .credit])
            request.requiredShippingContactFields = []
            let delegate = RecordingDelegate()
            let app = phone.present(request, delegate: delegate)

            let shown = try await phone.sheetWaiting(for: "user")
            let listed = (shown["cards"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
            #expect(Set(listed) == Set(cards.filter { $0.type == .credit }.map(\.id)))
            #expect(shown["selectedCard"] as? String == shown["proposedCard"] as? String)
            #expect(shown["selectedCard"] as? String != mastercard.id)
            #expect((shown["items"] as? [[String: Any]])?.first?["label"] as? String == "Secret Roast Blend")

            // The debit card cannot pay a credit-only merchant: refused, and the sheet keeps waiting on its card.
            let (refused, refusal) = try await phone.call("POST", "/payment-sheets/current/card", ["card": debit.id])
            #expect(refused == 422 && (refusal["error"] as? [String: Any])?["code"] as? String == "cardNotEligible")
            let after = try await phone.sheetWaiting(for: "user")
            #expect(
                after["status"] as? String == "presented"
                    && after["selectedCard"] as? String == shown["selectedCard"] as? String)

            let (chosen, reply) = try await phone.call("POST", "/payment-sheets/current/card", ["card": mastercard.id])
            #expect(chosen == 200 && reply["result"] as? String == "accepted")
            #expect((reply["sheet"] as? [String: Any])?["selectedCard"] as? String == mastercard.id)
            #expect(try await phone.call("POST", "/payment-sheets/current/billing-contact", Self.aliceJSON).0 == 200)
            let (paid, final) = try await phone.call(
                "POST", "/payment-sheets/current/authenticate", ["method": "face-id", "success": true])
            #expect(paid == 200 && (final["sheet"] as? [String: Any])?["status"] as? String == "completed")

            let result = try #require((try await app.value).completedResult, "the app's sheet did not complete")
            #expect(result.status == .success)
            #expect(delegate.methods.map(\.network) == [.visa, .masterCard])
            let payment = try #require(delegate.payments.first)
            #expect(payment.paymentMethod.network == .masterCard && payment.paymentMethod.displayName.hasSuffix("4444"))
            let decrypted = try Self.decrypt(payment.token, sandbox, amount: 999)
            #expect(decrypted.applicationPrimaryAccountNumber.hasSuffix(mastercard.deviceAccountSuffix))
            #expect(decrypted.applicationPrimaryAccountNumber != "5555555555554444")
        }
    }

    @Test("A failed authentication leaves the sheet waiting; a second one pays. Paying before the contact is refused")
    func failedAuthentication() async throws {
        try await Self.withPhone(cards: ["4111111111111111"]) { sandbox, phone in
            let delegate = RecordingDelegate()
            let app = phone.present(PaymentSheetTests.request(), delegate: delegate)
            let shown = try await phone.sheetWaiting(for: "user")
            #expect(shown["needs"] as? [String] == ["shippingContact", "billingContact", "authentication"])

            let (early, refusal) = try await phone.call(
                "POST", "/payment-sheets/current/authenticate", ["method": "face-id", "success": true])
            #expect(early == 409 && (refusal["error"] as? [String: Any])?["code"] as? String == "invalidAction")
            #expect(try await phone.call("POST", "/payment-sheets/current/shipping-contact", Self.aliceJSON).0 == 200)
            #expect(try await phone.call("POST", "/payment-sheets/current/billing-contact", Self.aliceJSON).0 == 200)

            let (status, rejected) = try await phone.call(
                "POST", "/payment-sheets/current/authenticate", ["method": "face-id", "success": false])
            #expect(status == 200 && rejected["result"] as? String == "rejected")
            #expect((rejected["offered"] as? [String])?.contains("face-id") == true)
            let waiting = try await phone.sheetWaiting(for: "user")
            #expect(waiting["status"] as? String == "presented" && waiting["needs"] as? [String] == ["authentication"])
            #expect(try phone.nonceRows() == 0)
            #expect(delegate.payments.isEmpty)

            let (paid, final) = try await phone.call(
                "POST", "/payment-sheets/current/authenticate", ["method": "face-id", "success": true])
            #expect(paid == 200 && (final["sheet"] as? [String: Any])?["status"] as? String == "completed")
            let result = try #require((try await app.value).completedResult, "the app's sheet did not complete")
            #expect(result.status == .success && delegate.payments.count == 1)
            #expect(try phone.nonceRows() == 1)
            // Once ended, the sheet takes no more actions.
            #expect(try await phone.call("POST", "/payment-sheets/current/cancel").0 == 409)
        }
    }

    @Test("Cancel: the app gets .cancelled, no nonce is issued and nothing is paid; the device is free again")
    func cancel() async throws {
        try await Self.withPhone(cards: ["4111111111111111"]) { sandbox, phone in
            let delegate = RecordingDelegate()
            let app = phone.present(PaymentSheetTests.request(), delegate: delegate)
            _ = try await phone.sheetWaiting(for: "user")
            #expect(try await phone.call("POST", "/payment-sheets/current/shipping-contact", Self.aliceJSON).0 == 200)
            let (status, reply) = try await phone.call("POST", "/payment-sheets/current/cancel")
            #expect(status == 200 && (reply["sheet"] as? [String: Any])?["status"] as? String == "cancelled")
            try #require((try await app.value).isCancelled, "a cancelled sheet did not end cancelled for the app")
            #expect(delegate.payments.isEmpty)
            #expect(try phone.nonceRows() == 0)

            // The next presentation is shown (the slot was freed), and it pays.
            let second = phone.present(PaymentSheetTests.request(), delegate: delegate)
            _ = try await phone.sheetWaiting(for: "user")
            #expect(try await phone.call("POST", "/payment-sheets/current/shipping-contact", Self.aliceJSON).0 == 200)
            #expect(try await phone.call("POST", "/payment-sheets/current/billing-contact", Self.aliceJSON).0 == 200)
            #expect(
                try await phone.call(
                    "POST", "/payment-sheets/current/authenticate", ["method": "face-id", "success": true]
                ).0 == 200)
            try #require((try await second.value).completedResult != nil, "the second sheet did not complete")
            #expect(delegate.payments.count == 1)
        }
    }

    @Test("Through the socket the app sees only the redacted shipping contact, then only the fields it required")
    func redactedContact() async throws {
        try await Self.withPhone(cards: ["4111111111111111"]) { sandbox, phone in
            let delegate = RecordingDelegate()
            let app = phone.present(PaymentSheetTests.request(), delegate: delegate)
            _ = try await phone.sheetWaiting(for: "user")
            let (status, reply) = try await phone.call(
                "POST", "/payment-sheets/current/shipping-contact", Self.aliceJSON)
            #expect(status == 200)
            // The app's update (a shipping line, a new total) is what the device shows.
            let sheet = reply["sheet"] as? [String: Any] ?? [:]
            #expect(sheet["total"] as? String == "11.99" && (sheet["items"] as? [Any])?.count == 3)
            #expect(delegate.shippingContacts == [Self.alice.redacted])
            let seen = try #require(delegate.shippingContacts.first)
            #expect(seen.name == nil && seen.emailAddress == nil && seen.phoneNumber == nil)
            #expect(seen.postalAddress?.street == "" && seen.postalAddress?.city == "Cupertino")

            #expect(try await phone.call("POST", "/payment-sheets/current/billing-contact", Self.aliceJSON).0 == 200)
            #expect(
                try await phone.call(
                    "POST", "/payment-sheets/current/authenticate", ["method": "face-id", "success": true]
                ).0 == 200)
            try #require((try await app.value).completedResult != nil, "the app's sheet did not complete")
            let payment = try #require(delegate.payments.first)
            #expect(payment.shippingContact == Self.alice.limited(to: [.name, .postalAddress]))
            #expect(payment.billingContact == PaymentContact(name: "Alice Doe"))
            #expect(payment.shippingMethod?.identifier == "standard")
            #expect(try Self.decrypt(payment.token, sandbox, amount: 1199).transactionAmount == 1199)
        }
    }

    @Test("One sheet at a time: a second presentation gets 409; an app not entitled is refused before the sheet")
    func oneAtATime() async throws {
        try await Self.withPhone(cards: ["4111111111111111"]) { sandbox, phone in
            let delegate = RecordingDelegate()
            do {
                _ = try await phone.present(
                    PaymentSheetTests.request(), delegate: delegate, application: "dev.orchard.other-app"
                ).value
                Issue.record("an app not entitled for the merchant got a sheet")
            } catch let error as PaymentSheetError {
                #expect(error.code == .notEntitled)
            }

            let first = phone.present(PaymentSheetTests.request(), delegate: delegate)
            _ = try await phone.sheetWaiting(for: "user")
            do {
                _ = try await phone.present(PaymentSheetTests.request(), delegate: delegate).value
                Issue.record("a second sheet was presented while one was up")
            } catch let error as PaymentSheetError {
                #expect(error.code == .sheetPresented)
            }
            let presentation: [String: Any] = [
                "applicationIdentifier": "dev.orchard.demo-app", "request": PaymentSheetWireRequest.demo,
            ]
            #expect(try await phone.call("POST", "/payment-sheets", presentation).0 == 409)
            // The first sheet is unaffected.
            #expect(try await phone.sheet()["status"] as? String == "presented")
            #expect(try await phone.call("POST", "/payment-sheets/current/cancel").0 == 200)
            try #require((try await first.value).isCancelled, "the first sheet did not end cancelled")
        }
    }

    @Test("Malformed presentations, actions and answers are refused; the sheet keeps waiting")
    func malformed() async throws {
        try await Self.withPhone(cards: ["4111111111111111"]) { sandbox, phone in
            #expect(try await phone.call("GET", "/payment-sheets/current").0 == 404)
            #expect(try await phone.call("POST", "/payment-sheets", ["applicationIdentifier": "x"]).0 == 400)
            var request = PaymentSheetWireRequest.demo
            request["applicationData"] = "%%% not base64"
            #expect(
                try await phone.call(
                    "POST", "/payment-sheets", ["applicationIdentifier": "dev.orchard.demo-app", "request": request]
                ).0 == 400)
            let (yes, capable) = try await phone.call(
                "POST", "/payment-sheets/can-make-payments", ["networks": ["visa"], "capabilities": ["supports3DS"]])
            #expect(yes == 200 && capable["canMakePayments"] as? Bool == true)
            let (_, incapable) = try await phone.call(
                "POST", "/payment-sheets/can-make-payments", ["networks": ["amex"], "capabilities": ["supports3DS"]])
            #expect(incapable["canMakePayments"] as? Bool == false)
            #expect(await !phone.host.canMakePayments(usingNetworks: [.visa], capabilities: [.threeDSecure, .debit]))
            #expect(await phone.host.canMakePayments(usingNetworks: [.visa], capabilities: [.threeDSecure, .credit]))

            let delegate = RecordingDelegate()
            let app = phone.present(PaymentSheetTests.request(), delegate: delegate)
            let shown = try await phone.sheetWaiting(for: "user")
            let refusals: [(String, Any?, Int, String)] = [
                ("frobnicate", [:] as [String: Any], 404, "notFound"),
                ("card", ["id": "x"], 400, "invalidRequest"),
                ("card", ["card": "00"], 422, "cardNotEligible"),
                ("authenticate", ["method": "retina", "success": true], 400, "invalidRequest"),
                ("authenticate", ["method": "face-id"], 400, "invalidRequest"),
                ("shipping-method", ["identifier": "teleport"], 409, "invalidAction"),
                ("shipping-contact", ["name": "Alice Doe"], 409, "invalidAction"),
                ("billing-contact", ["emailAddress": "alice@example.com"], 409, "invalidAction"),
            ]
            for (verb, body, status, code) in refusals {
                let (answered, error) = try await phone.call("POST", "/payment-sheets/current/\(verb)", body)
                #expect(answered == status, "\(verb)")
                #expect((error["error"] as? [String: Any])?["code"] as? String == code, "\(verb)")
            }
            let id = try #require(try await phone.call("GET", "/payment-sheets/current").1["id"] as? String)
            #expect(try await phone.call("GET", "/payment-sheets/another-sheet").0 == 404)
            let stale: [String: Any] = ["sequence": 999, "update": ["paymentSummaryItems": [] as [Any]]]
            #expect(try await phone.call("POST", "/payment-sheets/\(id)/answers", stale).0 == 409)
            // Nothing changed: the same sheet, still waiting for the user.
            let after = try await phone.sheetWaiting(for: "user")
            #expect(after["needs"] as? [String] == shown["needs"] as? [String])
            #expect(after["selectedCard"] as? String == shown["selectedCard"] as? String)
            #expect(try await phone.call("POST", "/payment-sheets/\(id)/cancel").0 == 200)
            try #require((try await app.value).isCancelled, "the sheet did not end cancelled")
        }
    }

    @Test("Errors in the app's update block the payment until another selection clears them")
    func appErrors() async throws {
        try await Self.withPhone(cards: ["4111111111111111"]) { sandbox, phone in
            let delegate = CaliforniaOnlyDelegate()
            var request = PaymentSheetTests.request()
            request.requiredBillingContactFields = []
            let app = Task {
                try await PaymentAuthorizationController(
                    paymentRequest: request, host: phone.host, applicationIdentifier: "dev.orchard.demo-app"
                ).present(delegate: delegate)
            }
            _ = try await phone.sheetWaiting(for: "user")
            var oregon = Self.aliceJSON
            oregon["postalAddress"] = [
                "street": "1 Main St", "city": "Portland", "state": "OR", "postalCode": "97201", "country": "US",
            ]
            let (status, reply) = try await phone.call("POST", "/payment-sheets/current/shipping-contact", oregon)
            #expect(
                status == 200 && (reply["sheet"] as? [String: Any])?["appErrors"] as? [String] == ["no shipping to OR"])
            let (blocked, refusal) = try await phone.call(
                "POST", "/payment-sheets/current/authenticate", ["method": "face-id", "success": true])
            #expect(blocked == 409 && (refusal["error"] as? [String: Any])?["code"] as? String == "invalidAction")
            #expect(try phone.nonceRows() == 0)
            let (_, fixed) = try await phone.call("POST", "/payment-sheets/current/shipping-contact", Self.aliceJSON)
            #expect((fixed["sheet"] as? [String: Any])?["appErrors"] as? [String] == [])
            #expect(
                try await phone.call(
                    "POST", "/payment-sheets/current/authenticate", ["method": "face-id", "success": true]
                ).0 == 200)
            let result = try #require((try await app.value).completedResult, "the sheet did not complete")
            #expect(result.status == .success)
            #expect(delegate.payment?.shippingContact?.postalAddress?.state == "CA")
        }
    }

    @Test(
        "While the app thinks: an action waits its turn, a second one is refused, a cancel does not wait for the app")
    func actionsWhileTheAppThinks() async throws {
        try await Self.withPhone(cards: ["4111111111111111"]) { sandbox, phone in
            enum Round { case cancelDuringCardQuestion, contactDuringCardQuestion, secondActionDuringContactQuestion }
            for round in [
                Round.cancelDuringCardQuestion, .contactDuringCardQuestion, .secondActionDuringContactQuestion,
            ] {
                let gate = Gate()
                let delegate = GatedDelegate(gate: gate, gatesCard: round != .secondActionDuringContactQuestion)
                let app = phone.present(PaymentSheetTests.request(), delegate: delegate)
                let contact = { () async throws -> (Int, [String]?) in
                    let (status, reply) = try await phone.call(
                        "POST", "/payment-sheets/current/shipping-contact", Self.aliceJSON)
                    return (status, (reply["sheet"] as? [String: Any])?["needs"] as? [String])
                }
                switch round {
                case .cancelDuringCardQuestion:
                    _ = try await phone.sheetWaiting(for: "app")
                    let (status, reply) = try await phone.call("POST", "/payment-sheets/current/cancel")
                    #expect(status == 200 && (reply["sheet"] as? [String: Any])?["status"] as? String == "cancelled")
                    await gate.open()
                case .contactDuringCardQuestion:
                    _ = try await phone.sheetWaiting(for: "app")
                    let posted = Task { try await contact() }
                    // Lets the contact arrive first; either order passes.
                    try await Task.sleep(for: .milliseconds(300))
                    await gate.open()
                    let (status, needs) = try await posted.value
                    #expect(status == 200 && needs == ["billingContact", "authentication"])
                    #expect(try await phone.call("POST", "/payment-sheets/current/cancel").0 == 200)
                case .secondActionDuringContactQuestion:
                    _ = try await phone.sheetWaiting(for: "user")
                    let posted = Task { try await contact() }
                    let asking = try await phone.sheetWaiting(for: "app")
                    #expect(asking["shippingContact"] != nil)
                    let (refused, refusal) = try await phone.call(
                        "POST", "/payment-sheets/current/card", ["card": "00"])
                    #expect(
                        refused == 409 && (refusal["error"] as? [String: Any])?["code"] as? String == "invalidAction")
                    await gate.open()
                    let (status, needs) = try await posted.value
                    #expect(status == 200 && needs == ["billingContact", "authentication"])
                    #expect(try await phone.call("POST", "/payment-sheets/current/cancel").0 == 200)
                }
                guard case .cancelled = try await app.value else {
                    Issue.record("the sheet did not end cancelled (\(round))")
                    break
                }
            }
            #expect(try phone.nonceRows() == 0)
        }
    }

    @Test("A sheet not completed in time is cancelled for the app")
    func timeout() async throws {
        try await Self.withPhone(cards: ["4111111111111111"], timeout: .seconds(1)) { sandbox, phone in
            let delegate = RecordingDelegate()
            try #require(
                (try await phone.present(PaymentSheetTests.request(), delegate: delegate).value).isCancelled,
                "an abandoned sheet did not end cancelled")
            #expect(try await phone.sheet()["status"] as? String == "cancelled")
            #expect(delegate.payments.isEmpty)
            #expect(try phone.nonceRows() == 0)
        }
    }

    @Test("--auto-auth: the device approves the sheet itself (proposed card, demo contact, Face ID)")
    func automatic() async throws {
        try await Self.withPhone(cards: ["4111111111111111"], automatic: try AutoAuthentication(parsing: "face-id")) {
            sandbox, phone in
            let delegate = RecordingDelegate()
            let result = try #require(
                (try await phone.present(PaymentSheetTests.request(), delegate: delegate).value).completedResult,
                "the automatic sheet did not complete")
            #expect(result.status == .success && delegate.payments.count == 1)
            #expect(delegate.shippingContacts == [PaymentSheetService.demoContact.redacted])
            #expect(try await phone.sheet()["status"] as? String == "completed")
        }
    }
}

extension PaymentSheetOutcome {
    /// The app's result of a completed sheet; nil for a cancelled one.
    var completedResult: PaymentAuthorizationResult? {
        if case .completed(let result) = self { return result }
        return nil
    }

    var isCancelled: Bool {
        if case .cancelled = self { return true }
        return false
    }
}

/// An app that ships to California only: any other state gets an error in its update.
final class CaliforniaOnlyDelegate: PaymentAuthorizationControllerDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var _payment: Payment?
    var payment: Payment? { lock.withLock { _payment } }

    func didSelectShippingContact(_ contact: PaymentContact, request: PaymentRequest) async -> PaymentRequestUpdate {
        let state = contact.postalAddress?.state ?? "?"
        return PaymentRequestUpdate(
            paymentSummaryItems: request.paymentSummaryItems, errors: state == "CA" ? [] : ["no shipping to \(state)"])
    }

    func didAuthorizePayment(_ payment: Payment) async -> PaymentAuthorizationResult {
        lock.withLock { _payment = payment }
        return PaymentAuthorizationResult(status: .success)
    }
}

/// A presentation's request as an app sends it (`POST /payment-sheets`).
enum PaymentSheetWireRequest {
    static var demo: [String: Any] {
        [
            "merchantIdentifier": "merchant.dev.orchard.demo", "countryCode": "US", "currencyCode": "USD",
            "supportedNetworks": ["visa"], "merchantCapabilities": ["supports3DS"],
            "paymentSummaryItems": [["label": "Orchard Demo Store", "amount": "1.00", "type": "final"]],
            "requiredBillingContactFields": [] as [String], "requiredShippingContactFields": [] as [String],
            "shippingMethods": [] as [Any],
        ]
    }
}

/// Holds back whoever waits until opened.
actor Gate {
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiters.append($0) }
    }

    func open() {
        isOpen = true
        for waiter in waiters { waiter.resume() }
        waiters = []
    }
}

/// An app that answers a shipping contact (and, if `gatesCard`, a card) only once its gate opens.
final class GatedDelegate: PaymentAuthorizationControllerDelegate, Sendable {
    let gate: Gate
    let gatesCard: Bool
    init(gate: Gate, gatesCard: Bool) {
        self.gate = gate
        self.gatesCard = gatesCard
    }

    func didSelectPaymentMethod(
        _ method: AppPayments.PaymentMethod, request: PaymentRequest
    ) async -> PaymentRequestUpdate {
        if gatesCard { await gate.wait() }
        return PaymentRequestUpdate(paymentSummaryItems: request.paymentSummaryItems)
    }

    func didSelectShippingContact(_ contact: PaymentContact, request: PaymentRequest) async -> PaymentRequestUpdate {
        await gate.wait()
        return PaymentRequestUpdate(paymentSummaryItems: request.paymentSummaryItems)
    }

    func didAuthorizePayment(_ payment: Payment) async -> PaymentAuthorizationResult {
        PaymentAuthorizationResult(status: .failure)
    }
}
