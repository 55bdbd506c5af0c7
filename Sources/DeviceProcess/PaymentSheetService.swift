public import AppPayments
public import Device
import DeviceControlAPI
public import Foundation
import OrchardCrypto
import OrchardRuntime
public import OrchardX509
public import PayClient
import SecureElement
import Wallet

/// The payment sheet in the device process: the `/payment-sheets` routes of the device's control API (docs/in-app.md,
/// "The payment sheet through the device's control API").
///
/// An app on the device presents its request (`POST /payment-sheets`), long-polls the sheet's events and answers each
/// with its update or verdict; the user looks at the sheet and acts on it (`/payment-sheets/current/...`). One sheet
/// at a time (a second presentation gets 409 while one is up). The sheet runs ``DevicePaymentSheet``, the same state
/// machine as in process; it is cancelled if not completed within ``timeout``. With an ``AutoAuthentication`` the
/// device approves every sheet itself: the proposed card, the wallet's most recent contact (else a fixed demo
/// contact), the first shipping method.
public final class PaymentSheetService: Sendable {
    /// The device's connection to the Pay server for one sheet, closed when the sheet ends.
    public struct PayServerConnection: Sendable {
        public let client: PayServerClient
        /// The Orchard root, which the Pay server's credential certificate must chain to.
        public let root: Certificate
        public let close: @Sendable () async -> Void

        public init(client: PayServerClient, root: Certificate, close: @escaping @Sendable () async -> Void) {
            self.client = client
            self.root = root
            self.close = close
        }
    }

    /// The contact an automatic sheet gives when the wallet has none.
    public static let demoContact = PaymentContact(
        name: "Alice Appleseed", emailAddress: "alice@example.com", phoneNumber: "+1 555 0100",
        postalAddress: PostalAddress(
            street: "1 Orchard Way", city: "Cupertino", state: "CA", postalCode: "95014", country: "US"))

    /// The longest an app may wait for an event in one poll.
    public static let maximumPollSeconds = 25

    public let device: Device
    public let automatic: AutoAuthentication?
    /// How long a sheet may stay up before it is cancelled.
    public let timeout: Duration
    /// How long the sheet waits for the app's verdict on an authorized payment.
    public let verdictTimeout: Duration
    private let connect: @Sendable () async throws -> PayServerConnection
    private let newIdentifier: @Sendable () -> String
    private let events: @Sendable (PaymentSheetEvent) -> Void
    private let trace: @Sendable (String) -> Void
    private let now: @Sendable () -> Date
    private let registry = Registry()

    /// - Parameters:
    ///   - connect: opens the device's connection to the Pay server when a sheet is presented.
    ///   - newIdentifier: the sheets' identifiers (random by default; tests may fix them).
    ///   - events: told when a sheet is presented, refused or ended (the device process prints them).
    ///   - now: the time recorded with each ended sheet (``recentPayments``).
    public init(
        device: Device, automatic: AutoAuthentication? = nil, timeout: Duration = .seconds(120),
        verdictTimeout: Duration = .seconds(60), connect: @escaping @Sendable () async throws -> PayServerConnection,
        newIdentifier: @escaping @Sendable () -> String = { UUID().uuidString.lowercased() },
        events: @escaping @Sendable (PaymentSheetEvent) -> Void = { _ in },
        trace: @escaping @Sendable (String) -> Void = { _ in },
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.now = now
        self.device = device
        self.automatic = automatic
        self.timeout = timeout
        self.verdictTimeout = verdictTimeout
        self.connect = connect
        self.newIdentifier = newIdentifier
        self.events = events
        self.trace = trace
    }

    /// Handles one `/payment-sheets` route (``DeviceControl`` parsed it); never throws: every failure is a JSON
    /// error response.
    func handle(_ route: DeviceControlRoute, body: Data) async -> ControlResponse {
        // A key given twice is refused before any route reads the body, as every Orchard party refuses it.
        if let duplicate = DuplicateJSONKeys.first(in: body) {
            return Self.failure(
                PaymentSheetError(.invalidRequest, "field '\(duplicate)' appears twice; send each field once"))
        }
        switch route {
        case .presentSheet:
            return await present(body)
        case .canMakePayments:
            return await canMakePayments(body)
        case .sheet(let id):
            guard let session = await session(id) else { return Self.noSheet(id) }
            return .json(await Self.status(of: session))
        case .sheetEvents(let id, let wait):
            guard let session = await session(id) else { return Self.noSheet(id) }
            let seconds = min(max(wait ?? 20, 0), Self.maximumPollSeconds)
            return .json(await session.nextEvent(wait: Duration.seconds(seconds)))
        case .sheetAnswer(let id):
            guard let session = await session(id) else { return Self.noSheet(id) }
            guard let answer = try? Self.decoder.decode(AnswerPaymentSheetEvent.Body.self, from: body) else {
                return .error(400, "invalidRequest", "the body is not an answer {sequence, update | result}")
            }
            switch await session.answer(answer) {
            case .success: return .json(PaymentSheetAnswerAccepted(accepted: true))
            case .failure(let error): return Self.failure(error)
            }
        case .sheetAction(let id, let verb):
            guard let session = await session(id) else { return Self.noSheet(id) }
            let action: PaymentSheetAction
            switch Self.action(verb, body) {
            case .success(let parsed): action = parsed
            case .failure(let error): return Self.failure(error)
            }
            switch await session.submit(action) {
            case .success(let reply): return Self.reply(reply)
            case .failure(let error): return Self.failure(error)
            }
        default:
            return .error(404, "notFound", "no route \(route.method) \(route.path)")
        }
    }

    private static let decoder = DeviceControlJSON.decoder()

    // MARK: Presentation

    private func present(_ body: Data) async -> ControlResponse {
        guard let presentation = try? Self.decoder.decode(PresentPaymentSheet.self, from: body) else {
            return .error(400, "invalidRequest", "the body is not a presentation {applicationIdentifier, request}")
        }
        let request: PaymentRequest
        switch presentation.request.paymentRequest() {
        case .success(let parsed): request = parsed
        case .failure(let error): return Self.failure(error)
        }
        return await start(request, applicationIdentifier: presentation.applicationIdentifier, web: nil)
    }

    /// Presents a web page's payment for the browser agent (its merchant session verified); the answer is the
    /// presentation's (201 with the sheet's identifier) or the refusal.
    func presentWeb(_ request: PaymentRequest, web: WebPaymentContext) async -> ControlResponse {
        await start(request, applicationIdentifier: web.domain, web: web)
    }

    /// Presents a web page's payment for a Mac (Handoff): as ``presentWeb(_:web:)``, but the page's events go to
    /// `delegate` (which carries them to the Mac) rather than to an app on this device's control socket.
    func presentHandoff(
        _ request: PaymentRequest, web: WebPaymentContext, delegate: any PaymentAuthorizationControllerDelegate
    ) async -> ControlResponse {
        await start(request, applicationIdentifier: web.domain, web: web, delegate: delegate)
    }

    private func start(
        _ request: PaymentRequest, applicationIdentifier: String, web: WebPaymentContext?,
        delegate given: (any PaymentAuthorizationControllerDelegate)? = nil
    ) async -> ControlResponse {
        let presentation = (applicationIdentifier: applicationIdentifier, web: web)
        let id = newIdentifier()
        let session = PaymentSheetSession(
            id: id, applicationIdentifier: presentation.applicationIdentifier, automatic: automatic != nil)
        guard await registry.claim(session) else {
            return .error(
                409, Code.sheetPresented.rawValue, "a payment sheet is already presented on this device")
        }
        let connection: PayServerConnection
        do {
            connection = try await connect()
        } catch {
            await registry.release(session)
            return .error(503, "payServerUnavailable", "the device cannot reach the Pay server: \(error)")
        }
        let sheet: DevicePaymentSheet
        if let automatic {
            let contact = await walletContact() ?? Self.demoContact
            sheet = DevicePaymentSheet(
                device: device, client: connection.client, root: connection.root,
                driver: AutomaticSheetDriver(session: session, evidence: automatic.sheetEvidence, contact: contact),
                trace: trace)
        } else {
            sheet = DevicePaymentSheet(
                device: device, client: connection.client, root: connection.root,
                driver: ControlledSheetDriver(session: session), trace: trace)
        }
        trace(
            "sheet \(id): \(presentation.applicationIdentifier) presents a payment for \(request.merchantIdentifier)"
                + (automatic != nil ? " (approved by --auto-auth)" : "; it waits for the user on the control API"))
        let delegate: any PaymentAuthorizationControllerDelegate =
            given ?? RemoteAppDelegate(session: session, verdictTimeout: verdictTimeout)
        let event = { @Sendable (name: String, outcome: String?, detail: String?) in
            PaymentSheetEvent(
                event: name, sheet: id, application: presentation.applicationIdentifier,
                merchant: request.merchantIdentifier, outcome: outcome, detail: detail)
        }
        let run = Task {
            let ending = await Self.run(sheet, request, presentation.applicationIdentifier, web, delegate)
            await connection.close()
            // Free the device for the next sheet before anyone learns this one ended.
            await self.registry.release(session)
            await session.finish(ending)
            let view = await session.currentSheet
            let ended = await session.ending
            let outcome: (String, String?)? =
                switch ended {
                case .completed(let result)?: ("completed", result.status.rawValue)
                case .cancelled(let timedOut)?: ("cancelled", timedOut ? "timedOut" : nil)
                case .failed(let error)?: ("failed", Self.describe(error).code)
                case nil: nil
                }
            if let outcome {
                await self.registry.record(
                    EndedSheet(
                        merchant: view?.merchantName ?? request.merchantIdentifier,
                        amount: view?.total ?? request.paymentSummaryItems.last?.amount ?? "",
                        currency: view?.currencyCode ?? request.currencyCode, outcome: outcome.0,
                        detail: outcome.1, endedAt: self.now()))
            }
            switch ended {
            case .completed(let result)?: self.events(event("sheet-ended", "completed", result.status.rawValue))
            case .cancelled(let timedOut)?: self.events(event("sheet-ended", "cancelled", timedOut ? "timedOut" : nil))
            case .failed(let error)?: self.events(event("sheet-ended", "failed", Self.describe(error).code))
            case nil: break
            }
        }
        let timeout = self.timeout
        Task {
            // The run ends long before the timeout in most sheets: stop waiting then.
            let expiry = Task {
                try? await Task.sleep(for: timeout)
                if !Task.isCancelled { await session.expire() }
            }
            await run.value
            expiry.cancel()
        }
        await session.waitShown()
        if case .failed(let error) = await session.ending {
            let described = Self.describe(error)
            return .error(described.status, described.code, described.message)
        }
        events(event("sheet-presented", nil, automatic != nil ? "automatic" : "control-api"))
        return .json(PresentedPaymentSheet(id: id, automatic: automatic != nil), status: 201)
    }

    /// Runs the state machine to its end (an untyped-throws helper: typed catches around actor calls in async code
    /// crash the Swift 6.3 compiler).
    private static func run(
        _ sheet: DevicePaymentSheet, _ request: PaymentRequest, _ application: String, _ web: WebPaymentContext?,
        _ delegate: any PaymentAuthorizationControllerDelegate
    ) async -> PaymentSheetSession.Ending {
        do {
            let outcome =
                if let web {
                    try await sheet.present(request, web: web, delegate: delegate)
                } else {
                    try await sheet.present(request, applicationIdentifier: application, delegate: delegate)
                }
            switch outcome {
            case .completed(let result): return .completed(result)
            case .cancelled: return .cancelled(timedOut: false)
            }
        } catch {
            return .failed(error)
        }
    }

    private func canMakePayments(_ body: Data) async -> ControlResponse {
        let query = (try? Self.decoder.decode(CanMakePayments.self, from: body))
        guard body.isEmpty || query != nil else {
            return .error(400, "invalidRequest", "the body is {networks?, capabilities?}")
        }
        var answer = device.profile.authorizesPayments
        if answer, let networks = query?.networks {
            let eligible = await DevicePaymentSheet.eligibleCards(
                in: device, networks: networks.map(PaymentNetwork.init(rawValue:)),
                capabilities: MerchantCapabilities(names: query?.capabilities ?? []))
            answer = !eligible.isEmpty
        }
        return .json(CanMakePaymentsAnswer(canMakePayments: answer))
    }

    /// The wallet's most recent shipping contact, as a payment contact.
    private func walletContact() async -> PaymentContact? {
        guard let contact = (try? await device.wallet.recentContacts(.shipping))?.first else { return nil }
        return PaymentContact(
            name: contact.name, emailAddress: contact.emailAddress, phoneNumber: contact.phoneNumber,
            postalAddress: contact.postalAddress.map {
                PostalAddress(
                    street: $0.street, city: $0.locality, state: $0.administrativeArea, postalCode: $0.postalCode,
                    country: $0.countryCode)
            })
    }

    /// The sheets that ended since the device process started, newest first (the device's screen lists them).
    func recentPayments() async -> [EndedSheet] { await registry.ended }

    func session(_ id: String) async -> PaymentSheetSession? {
        guard let session = await registry.latest, id == "current" || id == session.id else { return nil }
        return session
    }

    // MARK: The user's actions

    /// The action of `POST /payment-sheets/{id}/{verb}`.
    private static func action(
        _ verb: PaymentSheetActionName, _ body: Data
    ) -> Result<PaymentSheetAction, PaymentSheetError> {
        func decode<T: Decodable>(_ type: T.Type, _ shape: String) -> Result<T, PaymentSheetError> {
            guard let value = try? decoder.decode(T.self, from: body) else {
                return .failure(PaymentSheetError(.invalidRequest, "the body is not \(shape)"))
            }
            return .success(value)
        }
        switch verb {
        case .card:
            return decode(ChoosePaymentSheetCard.Body.self, "{card}").map { .chooseCard($0.card) }
        case .shippingContact:
            return decode(PaymentContact.self, "a contact").map { .shippingContact($0) }
        case .billingContact:
            return decode(PaymentContact.self, "a contact").map { .billingContact($0) }
        case .shippingMethod:
            return decode(ChoosePaymentSheetShippingMethod.Body.self, "{identifier}").map {
                .shippingMethod($0.identifier)
            }
        case .couponCode:
            return decode(ChangePaymentSheetCouponCode.Body.self, "{couponCode}").map { .couponCode($0.couponCode) }
        case .authenticate:
            return decode(AuthenticationEvidenceBody.self, "{method, success?, passcode?}").flatMap { body in
                switch Result(catching: { () throws(DeviceError) in try DeviceControl.evidence(body) }) {
                case .success(let evidence): .success(.authenticate(evidence))
                case .failure(let error): .failure(PaymentSheetError(.invalidRequest, error.message))
                }
            }
        case .cancel:
            return .success(.cancel)
        }
    }

    private typealias Code = PaymentSheetError.Code

    /// `{"result": "accepted" | "rejected", "offered"?, "sheet"}`, or the refusal as an error.
    private static func reply(_ reply: PaymentSheetSession.Reply) -> ControlResponse {
        switch reply.result {
        case .accepted:
            return .json(PaymentSheetActionAnswer(result: "accepted", sheet: reply.sheet))
        case .authenticationRejected(let offered):
            return .json(PaymentSheetActionAnswer(result: "rejected", offered: offered.map(\.name), sheet: reply.sheet))
        case .refused(let error):
            let described = describe(error)
            return .error(described.status, described.code, described.message)
        }
    }

    // MARK: Encoding and errors

    private static func status(of session: PaymentSheetSession) async -> PaymentSheetStatusAnswer {
        PaymentSheetStatusAnswer(
            id: session.id, applicationIdentifier: session.applicationIdentifier, automatic: session.automatic,
            sheet: await session.currentSheet)
    }

    /// The HTTP status, code and message of an error of the sheet, the Secure Element or the wallet.
    static func describe(_ error: any Error) -> (status: Int, code: String, message: String) {
        guard let error = error as? PaymentSheetError else { return DeviceControl.status(for: error) }
        let status: Int
        switch error.code {
        case .invalidRequest: status = 400
        case .notEntitled, .authenticationFailed, .secureElementRefused, .deviceInLostMode: status = 403
        case .notFound: status = 404
        case .invalidAction, .requestRejectedByApp: status = 409
        case .noEligibleCard, .deviceCannotPay, .cardNotEligible: status = 422
        case .payServerFailed: status = 502
        default: status = 500
        }
        return (status, error.code.rawValue, error.message)
    }

    private static func failure(_ error: PaymentSheetError) -> ControlResponse {
        let described = describe(error)
        return .error(described.status, described.code, described.message)
    }

    private static func noSheet(_ id: String) -> ControlResponse {
        .error(404, "notFound", id == "current" ? "no payment sheet was presented" : "no payment sheet \(id)")
    }
}

extension PaymentSheetError.Code {
    /// No such sheet, or no such action.
    public static let notFound = PaymentSheetError.Code("notFound")
    /// The device process cannot be reached, or answered outside the protocol.
    public static let deviceUnreachable = PaymentSheetError.Code("deviceUnreachable")
    /// Another sheet is up on the device (one at a time).
    public static let sheetPresented = PaymentSheetError.Code("sheetPresented")
}

/// A payment sheet's life, for the device process's output (no contact, no card, no amount).
public struct PaymentSheetEvent: Sendable, Hashable, Encodable {
    /// `sheet-presented` or `sheet-ended` (a sheet refused before it was shown, e.g. an app not entitled, ends
    /// `failed` without being presented).
    public let event: String
    public let sheet: String
    public let application: String
    public let merchant: String
    /// `completed`, `cancelled` or `failed` (ended).
    public let outcome: String?
    /// How it is driven (`control-api`, `automatic`) when presented; the app's verdict, `timedOut` or the
    /// failure's code when ended.
    public let detail: String?
}

/// A payment sheet that ended, as the device's screen lists it (display data only).
struct EndedSheet: Sendable, Hashable {
    /// How many the device keeps (in memory, since the device process started).
    static let kept = 20
    let merchant: String
    /// The total, a decimal string.
    let amount: String
    let currency: String
    /// `completed`, `cancelled` or `failed`.
    let outcome: String
    /// The app's verdict, `timedOut` or the failure's code.
    let detail: String?
    let endedAt: Date
}

/// The sheets of one device: at most one up at a time; the latest stays readable after it ended.
private actor Registry {
    private(set) var latest: PaymentSheetSession?
    private var live = false

    /// Makes `session` the device's sheet, unless one is up.
    func claim(_ session: PaymentSheetSession) -> Bool {
        guard !live else { return false }
        live = true
        latest = session
        return true
    }

    /// The sheets that ended, newest first (the last ``EndedSheet/kept``).
    private(set) var ended: [EndedSheet] = []

    func record(_ sheet: EndedSheet) {
        ended.insert(sheet, at: 0)
        if ended.count > EndedSheet.kept { ended.removeLast() }
    }

    /// `session` ended: another may be presented.
    func release(_ session: PaymentSheetSession) {
        guard latest === session else { return }
        live = false
    }
}

/// A person at the device's control API: each action comes from `POST /payment-sheets/current/...`.
struct ControlledSheetDriver: PaymentSheetDriver {
    let session: PaymentSheetSession
    var staysOnFailure: Bool { true }
    func nextAction(_ sheet: PaymentSheetView, after result: PaymentSheetActionResult?) async -> PaymentSheetAction {
        await session.nextAction(sheet, after: result)
    }
    func show(_ sheet: PaymentSheetView) async { await session.show(sheet) }
}

/// `--auto-auth`: the proposed card, `contact` where the request needs one, the first shipping method, then the
/// automatic authentication. A refusal or a failed authentication ends the sheet.
struct AutomaticSheetDriver: PaymentSheetDriver {
    let session: PaymentSheetSession
    let evidence: AuthenticationEvidence
    let contact: PaymentContact
    var staysOnFailure: Bool { false }
    func nextAction(_ sheet: PaymentSheetView, after result: PaymentSheetActionResult?) async -> PaymentSheetAction {
        await session.show(sheet)
        if case .refused = result { return .cancel }
        if sheet.needs.contains("shippingContact") { return .shippingContact(contact) }
        if sheet.needs.contains("billingContact") { return .billingContact(contact) }
        return .authenticate(evidence)
    }
    func show(_ sheet: PaymentSheetView) async { await session.show(sheet) }
}

/// The app's delegate as the device process sees it: each event goes to the app through the session, and the
/// app's answer comes back. Without an answer (the sheet was cancelled or timed out) a selection changes nothing and
/// an authorization counts as failed for the app.
struct RemoteAppDelegate: PaymentAuthorizationControllerDelegate {
    let session: PaymentSheetSession
    let verdictTimeout: Duration

    private func ask(_ event: PaymentSheetAppEvent, _ request: PaymentRequest) async -> PaymentRequestUpdate {
        let answer = await session.appEvent(event, answerTimeout: verdictTimeout)
        return answer?.update?.value
            ?? PaymentRequestUpdate(paymentSummaryItems: request.paymentSummaryItems, shippingMethods: nil)
    }

    func didSelectPaymentMethod(_ method: PaymentMethod, request: PaymentRequest) async -> PaymentRequestUpdate {
        var event = PaymentSheetAppEvent(sheet: session.id, kind: .paymentMethodSelected)
        event.paymentMethod = method
        return await ask(event, request)
    }

    func didSelectShippingContact(_ contact: PaymentContact, request: PaymentRequest) async -> PaymentRequestUpdate {
        var event = PaymentSheetAppEvent(sheet: session.id, kind: .shippingContactSelected)
        event.shippingContact = contact
        return await ask(event, request)
    }

    func didSelectShippingMethod(_ method: ShippingMethod, request: PaymentRequest) async -> PaymentRequestUpdate {
        var event = PaymentSheetAppEvent(sheet: session.id, kind: .shippingMethodSelected)
        event.shippingMethod = method
        return await ask(event, request)
    }

    func didChangeCouponCode(_ couponCode: String, request: PaymentRequest) async -> PaymentRequestUpdate {
        var event = PaymentSheetAppEvent(sheet: session.id, kind: .couponCodeChanged)
        event.couponCode = couponCode
        return await ask(event, request)
    }

    func didAuthorizePayment(_ payment: Payment) async -> PaymentAuthorizationResult {
        var event = PaymentSheetAppEvent(sheet: session.id, kind: .paymentAuthorized)
        event.payment = PaymentSheetPayment(payment)
        let answer = await session.appEvent(event, answerTimeout: verdictTimeout)
        return answer?.result?.value ?? PaymentAuthorizationResult(status: .failure, errors: ["the app did not answer"])
    }
}

extension AutoAuthentication {
    /// The evidence a sheet takes from `--auto-auth`: its last step (`double-click,face-id` on a phone authorizes
    /// with Face ID; a watch's `double-click` with its double-click).
    var sheetEvidence: AuthenticationEvidence {
        switch steps.last {
        case .faceID?: .faceID(matched: true)
        case .touchID?: .touchID(matched: true)
        case .passcode(let code)?: .passcode(code)
        case .doubleClick?, nil: .doubleClick
        }
    }
}
