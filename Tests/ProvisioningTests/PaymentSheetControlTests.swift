import AppPayments
import CardBasics
import Device
import DeviceControlAPI
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
/// and the user through the control API's typed requests, both over the real Unix socket.
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
        try await sandbox.register(device.name)
        let client = try sandbox.client(device.name)
        let root = sandbox.root
        let sheets = PaymentSheetService(
            device: device, automatic: automatic, timeout: timeout,
            connect: { PaymentSheetService.PayServerConnection(client: client, root: root, close: {}) })
        socket = Device.controlSocketPath(of: device.name, in: sandbox.deployment)
        server = try ControlSocketServer(path: socket, control: DeviceControl(device: device, sheets: sheets))
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

    /// One typed control-API request as the user sends it: the answer, or the device's refusal.
    func send<Request: DeviceControlRequest>(_ request: Request) async throws -> Result<Request.Answer, Refusal> {
        switch await ControlSocketClient.send(request, to: socket) {
        case .success(let answer): return .success(answer)
        case .failure(let error):
            guard let refusal = error.refusal, let status = error.status else { throw error }
            return .failure(Refusal(status: status, code: refusal.code))
        }
    }

    /// Malformed bytes on a route: the status and the error body's code.
    func raw(_ method: String, _ path: String, _ json: String) async throws -> Refusal {
        let response = try await ControlSocketClient.send(
            ControlRequest(method: method, path: path, body: Data(json.utf8)), to: socket
        ).get()
        let body = try? DeviceControlJSON.decoder().decode(DeviceControlErrorBody.self, from: response.body)
        return Refusal(status: response.status, code: body?.error.code ?? "")
    }

    /// The sheet as `GET /payment-sheets/current` shows it; nil before one was presented.
    func sheet() async throws -> PaymentSheetView? {
        try? await send(GetPaymentSheet()).get().sheet
    }

    /// Waits (bounded) until the sheet waits for `party` (`user` or `app`), and returns it.
    func sheetWaiting(for party: String) async throws -> PaymentSheetView {
        for _ in 0..<400 {
            if let sheet = try await sheet(), sheet.waitingFor == party { return sheet }
            try await Task.sleep(for: .milliseconds(25))
        }
        Issue.record("the sheet never waited for the \(party)")
        return try #require(try await sheet())
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
    static let face = AuthenticationEvidenceBody(method: "face-id", success: true)
    /// A small request for `POST /payment-sheets` (applicationData `order`).
    static var demoRequest: PaymentRequest {
        PaymentRequest(
            merchantIdentifier: "merchant.dev.orchard.demo", countryCode: "US", currencyCode: "USD",
            supportedNetworks: [.visa], merchantCapabilities: [.threeDSecure],
            paymentSummaryItems: [PaymentSummaryItem(label: "Orchard Demo Store", amount: "1.00")],
            applicationData: Data("order".utf8))
    }
    static let shipAlice = GivePaymentSheetContact(role: .shipping, contact: alice)
    static let billAlice = GivePaymentSheetContact(role: .billing, contact: alice)

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
            #expect(Set(shown.cards.map(\.id)) == Set(cards.filter { $0.type == .credit }.map(\.id)))
            #expect(shown.selectedCard == shown.proposedCard && shown.selectedCard != mastercard.id)
            #expect(shown.items.first?.label == "Secret Roast Blend")

            // The debit card cannot pay a credit-only merchant: refused, and the sheet keeps waiting on its card.
            let refused = try await phone.send(ChoosePaymentSheetCard(card: debit.id))
            #expect(refused.refusal == Refusal(status: 422, code: "cardNotEligible"))
            let after = try await phone.sheetWaiting(for: "user")
            #expect(after.status == "presented" && after.selectedCard == shown.selectedCard)

            let reply = try await phone.send(ChoosePaymentSheetCard(card: mastercard.id)).get()
            #expect(reply.result == "accepted" && reply.sheet?.selectedCard == mastercard.id)
            _ = try await phone.send(Self.billAlice).get()
            let final = try await phone.send(AuthenticatePaymentSheet(Self.face)).get()
            #expect(final.sheet?.status == "completed")

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
            #expect(shown.needs == ["shippingContact", "billingContact", "authentication"])

            let early = try await phone.send(AuthenticatePaymentSheet(Self.face))
            #expect(early.refusal == Refusal(status: 409, code: "invalidAction"))
            _ = try await phone.send(Self.shipAlice).get()
            _ = try await phone.send(Self.billAlice).get()

            let rejected = try await phone.send(
                AuthenticatePaymentSheet(AuthenticationEvidenceBody(method: "face-id", success: false))
            ).get()
            #expect(rejected.result == "rejected" && rejected.offered?.contains("face-id") == true)
            let waiting = try await phone.sheetWaiting(for: "user")
            #expect(waiting.status == "presented" && waiting.needs == ["authentication"])
            #expect(try phone.nonceRows() == 0)
            #expect(delegate.payments.isEmpty)

            let final = try await phone.send(AuthenticatePaymentSheet(Self.face)).get()
            #expect(final.sheet?.status == "completed")
            let result = try #require((try await app.value).completedResult, "the app's sheet did not complete")
            #expect(result.status == .success && delegate.payments.count == 1)
            #expect(try phone.nonceRows() == 1)
            // Once ended, the sheet takes no more actions.
            #expect(try await phone.send(CancelPaymentSheet()).refusal?.status == 409)
        }
    }

    @Test("Cancel: the app gets .cancelled, no nonce is issued and nothing is paid; the device is free again")
    func cancel() async throws {
        try await Self.withPhone(cards: ["4111111111111111"]) { sandbox, phone in
            let delegate = RecordingDelegate()
            let app = phone.present(PaymentSheetTests.request(), delegate: delegate)
            _ = try await phone.sheetWaiting(for: "user")
            _ = try await phone.send(Self.shipAlice).get()
            #expect(try await phone.send(CancelPaymentSheet()).get().sheet?.status == "cancelled")
            try #require((try await app.value).isCancelled, "a cancelled sheet did not end cancelled for the app")
            #expect(delegate.payments.isEmpty)
            #expect(try phone.nonceRows() == 0)

            // The next presentation is shown (the slot was freed), and it pays.
            let second = phone.present(PaymentSheetTests.request(), delegate: delegate)
            _ = try await phone.sheetWaiting(for: "user")
            _ = try await phone.send(Self.shipAlice).get()
            _ = try await phone.send(Self.billAlice).get()
            _ = try await phone.send(AuthenticatePaymentSheet(Self.face)).get()
            try #require((try await second.value).completedResult != nil, "the second sheet did not complete")
            #expect(delegate.payments.count == 1)
        }
    }

    @Test("A11: Through the socket the app sees only the redacted shipping contact, then only the fields it required")
    func redactedContact() async throws {
        try await Self.withPhone(cards: ["4111111111111111"]) { sandbox, phone in
            let delegate = RecordingDelegate()
            let app = phone.present(PaymentSheetTests.request(), delegate: delegate)
            _ = try await phone.sheetWaiting(for: "user")
            let reply = try await phone.send(Self.shipAlice).get()
            // The app's update (a shipping line, a new total) is what the device shows.
            #expect(reply.sheet?.total == "11.99" && reply.sheet?.items.count == 3)
            #expect(delegate.shippingContacts == [Self.alice.redacted])
            let seen = try #require(delegate.shippingContacts.first)
            #expect(seen.name == nil && seen.emailAddress == nil && seen.phoneNumber == nil)
            #expect(seen.postalAddress?.street == "" && seen.postalAddress?.city == "Cupertino")

            _ = try await phone.send(Self.billAlice).get()
            _ = try await phone.send(AuthenticatePaymentSheet(Self.face)).get()
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
            let presentation = PresentPaymentSheet(
                applicationIdentifier: "dev.orchard.demo-app", request: PaymentSheetRequestBody(Self.demoRequest))
            #expect(try await phone.send(presentation).refusal == Refusal(status: 409, code: "sheetPresented"))
            // The first sheet is unaffected.
            #expect(try await phone.sheet()?.status == "presented")
            _ = try await phone.send(CancelPaymentSheet()).get()
            try #require((try await first.value).isCancelled, "the first sheet did not end cancelled")
        }
    }

    @Test("Malformed presentations, actions and answers are refused; the sheet keeps waiting")
    func malformed() async throws {
        try await Self.withPhone(cards: ["4111111111111111"]) { sandbox, phone in
            #expect(try await phone.send(GetPaymentSheet()).refusal == Refusal(status: 404, code: "notFound"))
            let invalid = Refusal(status: 400, code: "invalidRequest")
            #expect(try await phone.raw("POST", "/payment-sheets", #"{"applicationIdentifier":"x"}"#) == invalid)
            // A request whose applicationData is not base64.
            let encoded = try DeviceControlJSON.encoder().encode(
                PresentPaymentSheet(
                    applicationIdentifier: "dev.orchard.demo-app", request: PaymentSheetRequestBody(Self.demoRequest)))
            let notBase64 = String(decoding: encoded, as: UTF8.self).replacingOccurrences(
                of: #""applicationData":"b3JkZXI=""#, with: #""applicationData":"%%% not base64""#)
            #expect(notBase64 != String(decoding: encoded, as: UTF8.self))
            #expect(try await phone.raw("POST", "/payment-sheets", notBase64) == invalid)
            let capable = try await phone.send(CanMakePayments(networks: ["visa"], capabilities: ["supports3DS"]))
            #expect(try capable.get().canMakePayments)
            let incapable = try await phone.send(CanMakePayments(networks: ["amex"], capabilities: ["supports3DS"]))
            #expect(try !incapable.get().canMakePayments)
            #expect(await !phone.host.canMakePayments(usingNetworks: [.visa], capabilities: [.threeDSecure, .debit]))
            #expect(await phone.host.canMakePayments(usingNetworks: [.visa], capabilities: [.threeDSecure, .credit]))

            let delegate = RecordingDelegate()
            let app = phone.present(PaymentSheetTests.request(), delegate: delegate)
            let shown = try await phone.sheetWaiting(for: "user")
            #expect(try await phone.raw("POST", "/payment-sheets/current/frobnicate", "{}").status == 404)
            #expect(try await phone.raw("POST", "/payment-sheets/current/card", #"{"id":"x"}"#) == invalid)
            let refusals: [(Result<PaymentSheetActionAnswer, Refusal>, Refusal)] = [
                (
                    try await phone.send(ChoosePaymentSheetCard(card: "00")),
                    Refusal(status: 422, code: "cardNotEligible")
                ),
                (
                    try await phone.send(
                        AuthenticatePaymentSheet(AuthenticationEvidenceBody(method: "retina", success: true))),
                    invalid
                ),
                (
                    try await phone.send(AuthenticatePaymentSheet(AuthenticationEvidenceBody(method: "face-id"))),
                    invalid
                ),
                (
                    try await phone.send(ChoosePaymentSheetShippingMethod(identifier: "teleport")),
                    Refusal(status: 409, code: "invalidAction")
                ),
                (
                    // The request offers no coupon code.
                    try await phone.send(ChangePaymentSheetCouponCode(couponCode: "SPRING")),
                    Refusal(status: 409, code: "invalidAction")
                ),
                (
                    try await phone.send(
                        GivePaymentSheetContact(role: .shipping, contact: PaymentContact(name: "Alice Doe"))),
                    Refusal(status: 409, code: "invalidAction")
                ),
                (
                    try await phone.send(
                        GivePaymentSheetContact(
                            role: .billing, contact: PaymentContact(emailAddress: "alice@example.com"))),
                    Refusal(status: 409, code: "invalidAction")
                ),
            ]
            for (index, (answer, expected)) in refusals.enumerated() {
                #expect(answer.refusal == expected, "refusal \(index)")
            }
            let id = try await phone.send(GetPaymentSheet()).get().id
            #expect(try await phone.send(GetPaymentSheet(sheet: "another-sheet")).refusal?.status == 404)
            let stale = AnswerPaymentSheetEvent(
                sheet: id,
                .init(
                    sequence: 999,
                    update: PaymentSheetUpdateBody(PaymentRequestUpdate(paymentSummaryItems: []))))
            #expect(try await phone.send(stale).refusal?.status == 409)
            // Nothing changed: the same sheet, still waiting for the user.
            let after = try await phone.sheetWaiting(for: "user")
            #expect(after.needs == shown.needs && after.selectedCard == shown.selectedCard)
            _ = try await phone.send(CancelPaymentSheet(sheet: id)).get()
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
            var oregon = Self.alice
            oregon.postalAddress = PostalAddress(
                street: "1 Main St", city: "Portland", state: "OR", postalCode: "97201", country: "US")
            let reply = try await phone.send(GivePaymentSheetContact(role: .shipping, contact: oregon)).get()
            #expect(reply.sheet?.appErrors == ["no shipping to OR"])
            let blocked = try await phone.send(AuthenticatePaymentSheet(Self.face))
            #expect(blocked.refusal == Refusal(status: 409, code: "invalidAction"))
            #expect(try phone.nonceRows() == 0)
            #expect(try await phone.send(Self.shipAlice).get().sheet?.appErrors == [])
            _ = try await phone.send(AuthenticatePaymentSheet(Self.face)).get()
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
                let contact = { () async throws -> [String]? in try await phone.send(Self.shipAlice).get().sheet?.needs
                }
                switch round {
                case .cancelDuringCardQuestion:
                    _ = try await phone.sheetWaiting(for: "app")
                    #expect(try await phone.send(CancelPaymentSheet()).get().sheet?.status == "cancelled")
                    await gate.open()
                case .contactDuringCardQuestion:
                    _ = try await phone.sheetWaiting(for: "app")
                    let posted = Task { try await contact() }
                    // Lets the contact arrive first; either order passes.
                    try await Task.sleep(for: .milliseconds(300))
                    await gate.open()
                    #expect(try await posted.value == ["billingContact", "authentication"])
                    _ = try await phone.send(CancelPaymentSheet()).get()
                case .secondActionDuringContactQuestion:
                    _ = try await phone.sheetWaiting(for: "user")
                    let posted = Task { try await contact() }
                    let asking = try await phone.sheetWaiting(for: "app")
                    #expect(asking.shippingContact != nil)
                    let refused = try await phone.send(ChoosePaymentSheetCard(card: "00"))
                    #expect(refused.refusal == Refusal(status: 409, code: "invalidAction"))
                    await gate.open()
                    #expect(try await posted.value == ["billingContact", "authentication"])
                    _ = try await phone.send(CancelPaymentSheet()).get()
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
            #expect(try await phone.sheet()?.status == "cancelled")
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
            #expect(try await phone.sheet()?.status == "completed")
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

/// A refusal of the control API as a test compares it: the status and the error body's code.
struct Refusal: Error, Hashable {
    let status: Int
    let code: String
}

extension Result where Failure == Refusal {
    /// The refusal, or nil for an answer.
    var refusal: Refusal? {
        if case .failure(let refusal) = self { return refusal }
        return nil
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

/// An app with one coupon: `SAVE1` takes 1.00 off; any other code gets an error the sheet shows.
final class CouponDelegate: PaymentAuthorizationControllerDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var _codes: [String] = []
    private var _payments: [Payment] = []
    var codes: [String] { lock.withLock { _codes } }
    var payments: [Payment] { lock.withLock { _payments } }

    func didChangeCouponCode(_ couponCode: String, request: PaymentRequest) async -> PaymentRequestUpdate {
        lock.withLock { _codes.append(couponCode) }
        guard couponCode == "SAVE1" else {
            return PaymentRequestUpdate(
                paymentSummaryItems: request.paymentSummaryItems, errors: ["Coupon \(couponCode) is not valid."])
        }
        return PaymentRequestUpdate(paymentSummaryItems: [
            PaymentSummaryItem(label: "Secret Roast Blend", amount: "9.99"),
            PaymentSummaryItem(label: "Coupon SAVE1", amount: "-1.00"),
            PaymentSummaryItem(label: "Orchard Demo Store", amount: "8.99"),
        ])
    }

    func didAuthorizePayment(_ payment: Payment) async -> PaymentAuthorizationResult {
        lock.withLock { _payments.append(payment) }
        return PaymentAuthorizationResult(status: .success)
    }
}

extension PaymentSheetControlTests {
    @Test(
        "Coupon codes for an in-app request over the control socket: the request's field and first code shown, the user's codes reach the app, an invalid one's error blocks paying, a valid one's total is paid"
    )
    func couponCodesThroughTheSocket() async throws {
        try await Self.withPhone(cards: ["4111111111111111"]) { sandbox, phone in
            var request = PaymentSheetTests.request()
            request.requiredShippingContactFields = []
            request.supportsCouponCode = true
            request.couponCode = "SPRING"
            let delegate = CouponDelegate()
            let app = phone.present(request, delegate: delegate)
            let shown = try await phone.sheetWaiting(for: "user")
            #expect(shown.supportsCouponCode == true && shown.couponCode == "SPRING")

            let invalid = try await phone.send(ChangePaymentSheetCouponCode(couponCode: "BAD")).get()
            #expect(invalid.sheet?.appErrors == ["Coupon BAD is not valid."] && invalid.sheet?.total == "9.99")
            _ = try await phone.send(Self.billAlice).get()
            let blocked = try await phone.send(AuthenticatePaymentSheet(Self.face))
            #expect(blocked.refusal == Refusal(status: 409, code: "invalidAction"))
            let tooLong = try await phone.send(
                ChangePaymentSheetCouponCode(couponCode: String(repeating: "X", count: 65)))
            #expect(tooLong.refusal == Refusal(status: 409, code: "invalidAction"))

            let valid = try await phone.send(ChangePaymentSheetCouponCode(couponCode: "SAVE1")).get()
            #expect(valid.sheet?.appErrors == [] && valid.sheet?.total == "8.99" && valid.sheet?.couponCode == "SAVE1")
            let final = try await phone.send(AuthenticatePaymentSheet(Self.face)).get()
            #expect(final.sheet?.status == "completed")
            let result = try #require((try await app.value).completedResult, "the app's sheet did not complete")
            #expect(result.status == .success && delegate.codes == ["BAD", "SAVE1"])
            let payment = try #require(delegate.payments.first)
            #expect(try Self.decrypt(payment.token, sandbox, amount: 899).transactionAmount == 899)
        }
    }
}
