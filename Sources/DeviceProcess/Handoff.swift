import AppPayments
import CardBasics
import Device
import DeviceControlAPI
import Foundation
import OrchardCrypto
import OrchardRuntime
import PayClient
import RelayAPI
import SecureElement
import Synchronization
import Wallet
import WebMerchantAPI

/// Handoff in the device process (docs/handoff.md): the radio (proximity) and the relay loop, and the two sides of
/// discovery. A Mac asks the phones and watches it hears for their cards; a phone or watch answers a device of its
/// account only when it hears that device too and its user allows payments on a Mac.
final class Handoff: Sendable {
    /// What a Mac's sheet says when no phone or watch offers its cards.
    static let notFound =
        "iPhone could not be found: bring your iPhone or Apple Watch near this Mac (the same room), unlocked and "
        + "signed in to the same account"
    static let notRunning = "Handoff needs the device's process: run `orchard device run`"
    /// How long a Mac waits for the devices it hears to answer.
    static let discoveryTimeout: Duration = .seconds(3)

    let radio: RadioMedium
    private let relay: HandoffRelay
    private let device: Device
    private let random: any RandomSource
    /// How long a Mac waits for the phone's or watch's user.
    private let paymentTimeout: Duration
    private let trace: @Sendable (String) -> Void

    /// - Parameters:
    ///   - sheets: this device's payment sheets (a phone's or watch's Handoff payments are presented there).
    ///   - sessions: the merchant-session check (the token-signing root); without it a phone or watch pays for no Mac.
    init(
        device: Device, deployment: DeploymentDirectory, window: Duration, sheets: PaymentSheetService? = nil,
        sessions: MerchantSessionCheck? = nil, sheetTimeout: Duration = .seconds(120),
        random: any RandomSource = SystemRandom(), payServer: (@Sendable () -> PayServerClient?)? = nil,
        relayWaitSeconds: Int = PayServerClient.maximumRelayWaitSeconds, trace: @escaping @Sendable (String) -> Void
    ) {
        let radio = RadioMedium(device: device, deployment: deployment, window: window, random: random, trace: trace)
        let offers = Offers()
        let underWay = PaymentsUnderWay()
        self.radio = radio
        self.device = device
        self.random = random
        paymentTimeout = sheetTimeout + .seconds(10)
        self.trace = trace
        relay = HandoffRelay(
            device: device, deployment: deployment, random: random, payServer: payServer,
            waitSeconds: relayWaitSeconds,
            answerDiscovery: { requester, requestID in
                await Self.answer(
                    device: device, radio: radio, requester: requester, requestID: requestID, random: random,
                    offers: offers)
            },
            answerPayment: { requester, request in
                await Self.pay(
                    request, from: requester,
                    on: PayingDevice(
                        device: device, radio: radio, offers: offers, sheets: sheets, sessions: sessions,
                        underWay: underWay, verdictTimeout: sheetTimeout),
                    trace: trace)
            },
            followPayment: { requester, message in
                await Self.follow(message, from: requester, underWay: underWay, sheets: sheets, trace: trace)
            }, trace: trace)
    }

    /// The Handoff payments a phone or watch has under way, by requester and request ID: the sheet shown for each and
    /// what the Mac said of it since (its page ended it, or gave its verdict). A word that comes before the request
    /// was handled is kept, so the request is refused when it is.
    final class PaymentsUnderWay: Sendable {
        enum Word: Sendable, Equatable {
            case cancelled(String)
            case completed(success: Bool)
        }
        private struct Entry {
            var sheet: String?
            var word: Word?
        }
        private let entries = Mutex<[String: Entry]>([:])

        static func key(_ requester: String, _ requestID: String) -> String { requester + " " + requestID }

        func begin(_ key: String) {
            entries.withLock { entries in
                if entries.count > 1000 { entries.removeAll() }
                if entries[key] == nil { entries[key] = Entry() }
            }
        }

        func end(_ key: String) { _ = entries.withLock { $0.removeValue(forKey: key) } }

        /// Records the sheet shown for `key`; the word said already, if any.
        func attach(_ sheet: String, to key: String) -> Word? {
            entries.withLock { entries in
                entries[key]?.sheet = sheet
                return entries[key]?.word
            }
        }

        func word(_ key: String) -> Word? { entries.withLock { $0[key]?.word } }

        /// Records the Mac's word (the first one counts); the sheet shown for the request, if any.
        func say(_ word: Word, to key: String) -> String? {
            entries.withLock { entries in
                var entry = entries[key] ?? Entry()
                if entry.word == nil { entry.word = word }
                entries[key] = entry
                return entry.sheet
            }
        }
    }

    /// A phone's or watch's side of what a Mac says after its payment request: a cancellation dismisses the sheet
    /// (without authorizing; a later authorization is refused), a verdict ends the sheet that waits for it.
    static func follow(
        _ message: HandoffMessage, from requester: String, underWay: PaymentsUnderWay, sheets: PaymentSheetService?,
        trace: @Sendable (String) -> Void
    ) async {
        guard let requestID = message.requestID else { return }
        let word: PaymentsUnderWay.Word =
            message.kind == .paymentCancel
            ? .cancelled(String((message.refusal ?? "the Mac's page ended the payment").prefix(200)))
            : .completed(success: message.verdict == "success")
        let sheet = underWay.say(word, to: PaymentsUnderWay.key(requester, requestID))
        guard case .cancelled(let reason) = word else { return }
        trace("handoff: \(requester) ended its payment (\(reason)): this device's sheet is dismissed")
        if let sheet, let session = await sheets?.session(sheet) { await session.dismiss() }
    }

    /// The cards a phone or watch offered, by the random identifier it gave each, per requesting device.
    final class Offers: Sendable {
        private let offered = Mutex<[String: (requester: String, card: String)]>([:])

        func record(_ identifier: String, card: String, for requester: String) {
            offered.withLock { offered in
                if offered.count > 1000 { offered.removeAll() }
                offered[identifier] = (requester, card)
            }
        }

        /// The wallet card offered to `requester` under `identifier`.
        func card(_ identifier: String, for requester: String) -> String? {
            offered.withLock { $0[identifier] }.flatMap { $0.requester == requester ? $0.card : nil }
        }
    }

    /// What a phone or watch pays for a Mac with.
    struct PayingDevice: Sendable {
        let device: Device
        let radio: RadioMedium
        let offers: Offers
        let sheets: PaymentSheetService?
        let sessions: MerchantSessionCheck?
        let underWay: PaymentsUnderWay
        /// How long a sheet waits for the Mac's page's verdict after its user authorized.
        let verdictTimeout: Duration
    }

    func start() {
        radio.start()
        relay.start()
    }

    func stop() async {
        relay.stop()
        await radio.stop()
    }

    /// A phone's or watch's answer to `requester`: its active cards, each under an identifier drawn at random for
    /// this answer (never derived from a card number), or a refusal.
    static func answer(
        device: Device, radio: RadioMedium, requester: String, requestID: String, random: any RandomSource,
        offers: Offers = Offers()
    ) async -> HandoffMessage {
        let kind = device.profile.kind
        func refusal(_ reason: String) -> HandoffMessage {
            HandoffMessage(kind: .discoveryAnswer, requestID: requestID, deviceKind: kind.rawValue, refusal: reason)
        }
        guard kind == .phone || kind == .watch else { return refusal("only a phone or a watch pays for a Mac") }
        guard await device.wallet.currentSettings.allowPaymentsOnMac else {
            return refusal("payments on a Mac are turned off on this device")
        }
        guard radio.near().contains(where: { $0.device == requester }) else {
            return refusal("this device does not hear \(requester)")
        }
        let cards = await device.wallet.allCards.filter { $0.state == .active }.map { card in
            let identifier = Hex.encode(random.bytes(16), lowercase: true)
            offers.record(identifier, card: card.id, for: requester)
            return HandoffCard(
                identifier: identifier, network: card.network, type: card.type.rawValue, displayName: card.displayName,
                suffix: card.suffix)
        }
        return HandoffMessage(kind: .discoveryAnswer, requestID: requestID, deviceKind: kind.rawValue, cards: cards)
    }

    /// Whether a phone or watch this Mac hears offers a card for a payment on it (the page's `canMakePayments()`).
    func offersCards() async -> Bool {
        guard radio.near().contains(where: { $0.kind == "phone" || $0.kind == "watch" }) else { return false }
        return !(await discover()).devices.isEmpty
    }

    /// A Mac's discovery: the phones and watches it hears, asked over the relay; those that offer cards, labelled as
    /// the sheet lists them.
    func discover() async -> HandoffDevicesAnswer {
        let candidates = radio.near().filter { $0.kind == "phone" || $0.kind == "watch" }
        guard !candidates.isEmpty else { return HandoffDevicesAnswer(devices: [], message: Self.notFound) }
        let answers: [String: HandoffMessage]
        do {
            answers = try await relay.discover(candidates.map(\.device), timeout: Self.discoveryTimeout)
        } catch {
            return HandoffDevicesAnswer(devices: [], message: "\(Self.notFound) (\(error))")
        }
        var offering: [HandoffDevicesAnswer.OfferingDevice] = []
        var refusals: [String] = []
        for (name, answer) in answers.sorted(by: { $0.key < $1.key }) {
            guard answer.kind == .discoveryAnswer, answer.refusal == nil, let cards = answer.cards, !cards.isEmpty
            else {
                refusals.append("\(name): \(answer.refusal ?? "no card")")
                continue
            }
            let kind = answer.deviceKind ?? "phone"
            offering.append(
                HandoffDevicesAnswer.OfferingDevice(
                    device: name, kind: kind, label: kind == "watch" ? "Confirm with Apple Watch" : "Pay with iPhone",
                    cards: cards))
        }
        let message = offering.isEmpty ? ([Self.notFound] + refusals).joined(separator: "; ") : nil
        return HandoffDevicesAnswer(devices: offering, message: message)
    }
}

// MARK: The payment

extension Handoff {
    /// A phone's or watch's side of a Mac's payment: the checks (its kind, its user's setting, that it hears the Mac,
    /// that the card is one it offered this Mac), the merchant session verified here, then the web sheet on this
    /// device's screen for the user to authorize; the payment goes back to the Mac only if the Mac is still heard when
    /// the user authorized.
    static func pay(
        _ request: HandoffMessage, from requester: String, on paying: PayingDevice,
        trace: @Sendable (String) -> Void
    ) async -> HandoffMessage {
        let device = paying.device
        let kind = device.profile.kind
        let key = PaymentsUnderWay.key(requester, request.requestID ?? "")
        paying.underWay.begin(key)
        func refusal(_ reason: String) -> HandoffMessage {
            trace("handoff: \(requester)'s payment refused: \(reason)")
            paying.underWay.end(key)
            return HandoffMessage(
                kind: .paymentResult, requestID: request.requestID, deviceKind: kind.rawValue, refusal: reason)
        }
        guard kind == .phone || kind == .watch else { return refusal("only a phone or a watch pays for a Mac") }
        guard await device.wallet.currentSettings.allowPaymentsOnMac else {
            return refusal("payments on a Mac are turned off on this device")
        }
        guard paying.radio.near().contains(where: { $0.device == requester }) else {
            return refusal("this device does not hear \(requester)")
        }
        guard let identifier = request.card, let card = paying.offers.card(identifier, for: requester) else {
            return refusal("the card is not one this device offered \(requester)")
        }
        guard let sheets = paying.sheets, let sessions = paying.sessions else {
            return refusal("this device cannot verify merchant sessions")
        }
        guard let json = request.merchantSession, let domain = request.domain,
            let session = try? MerchantSession(json: json)
        else { return refusal("the merchant session is not one") }
        if let problem = sessions.problem(with: session, domain: domain) {
            return refusal("the merchant session was refused: \(problem)")
        }
        guard let body = request.paymentRequest,
            let requestBody = try? DeviceControlJSON.decoder().decode(PaymentSheetRequestBody.self, from: Data(body)),
            case .success(var paymentRequest) = requestBody.paymentRequest()
        else { return refusal("the payment request is not one") }
        paymentRequest.merchantIdentifier = session.merchantIdentifier
        // The card the Mac chose is the one the sheet proposes.
        try? await device.chooseCard(card)
        trace(
            "handoff: \(requester) asks for a payment to \(session.displayName) (\(domain)); the user authorizes here")
        if case .cancelled(let reason) = paying.underWay.word(key) { return refusal(reason) }
        let awaitsVerdict = request.awaitsVerdict == true
        let delegate = SheetDelegate(
            radio: paying.radio, requester: requester, underWay: paying.underWay, key: key,
            verdictTimeout: awaitsVerdict ? paying.verdictTimeout : nil)
        let presented = await sheets.presentHandoff(
            paymentRequest,
            web: WebPaymentContext(
                domain: domain, merchantSessionIdentifier: session.merchantSessionIdentifier,
                merchantSessionNonce: session.nonce), delegate: delegate)
        guard presented.status == 201,
            let sheet = try? DeviceControlJSON.decoder().decode(PresentedPaymentSheet.self, from: presented.body),
            let current = await sheets.session(sheet.id)
        else {
            let message = (try? DeviceControlJSON.decoder().decode(DeviceControlErrorBody.self, from: presented.body))?
                .error.message
            return refusal(message ?? "the sheet could not be presented")
        }
        // The Mac's page may have ended the payment meanwhile: the sheet is dismissed at once.
        if case .cancelled = paying.underWay.attach(sheet.id, to: key) { await current.dismiss() }
        let underWay = paying.underWay
        Task {
            while await current.ending == nil { try? await Task.sleep(for: .milliseconds(50)) }
            underWay.end(key)
        }
        while await current.ending == nil {
            // A sheet that waits for the page's verdict sends the payment as soon as its user authorized.
            if awaitsVerdict, let payment = delegate.payment,
                let bytes = try? DeviceControlJSON.encoder().encode(PaymentSheetPayment(payment))
            {
                trace("handoff: the payment authorized here goes to \(requester); the sheet waits for its page")
                return HandoffMessage(
                    kind: .paymentResult, requestID: request.requestID, deviceKind: kind.rawValue,
                    payment: Array(bytes))
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        guard case .completed(let result) = await current.ending, result.status == .success,
            let payment = delegate.payment,
            let bytes = try? DeviceControlJSON.encoder().encode(PaymentSheetPayment(payment))
        else { return refusal(delegate.failure ?? "the payment was not authorized on this device") }
        trace("handoff: the payment authorized here goes to \(requester)")
        return HandoffMessage(
            kind: .paymentResult, requestID: request.requestID, deviceKind: kind.rawValue, payment: Array(bytes))
    }

    /// The phone's or watch's sheet delegate for a Mac's page: the page's totals stay as requested; at authorization,
    /// the Mac must still be heard and must not have ended the payment; with a verdict timeout, the sheet then waits
    /// for the page's verdict (or its end) that long.
    final class SheetDelegate: PaymentAuthorizationControllerDelegate, Sendable {
        let radio: RadioMedium
        let requester: String
        let underWay: PaymentsUnderWay
        let key: String
        let verdictTimeout: Duration?
        private let authorized = Mutex<(payment: Payment?, failure: String?)>((nil, nil))

        init(
            radio: RadioMedium, requester: String, underWay: PaymentsUnderWay = PaymentsUnderWay(), key: String = "",
            verdictTimeout: Duration? = nil
        ) {
            self.radio = radio
            self.requester = requester
            self.underWay = underWay
            self.key = key
            self.verdictTimeout = verdictTimeout
        }

        private func failing(_ reason: String) -> PaymentAuthorizationResult {
            authorized.withLock { $0.failure = reason }
            return PaymentAuthorizationResult(status: .failure, errors: [reason])
        }

        var payment: Payment? { authorized.withLock { $0.payment } }
        var failure: String? { authorized.withLock { $0.failure } }

        func didSelectPaymentMethod(_ method: PaymentMethod, request: PaymentRequest) async -> PaymentRequestUpdate {
            PaymentRequestUpdate(paymentSummaryItems: request.paymentSummaryItems, shippingMethods: nil)
        }

        func didAuthorizePayment(_ payment: Payment) async -> PaymentAuthorizationResult {
            if case .cancelled(let reason) = underWay.word(key) { return failing(reason) }
            guard radio.near().contains(where: { $0.device == requester }) else {
                return failing("\(requester) is no longer near this device: the payment is refused")
            }
            authorized.withLock { $0.payment = payment }
            guard let verdictTimeout else { return PaymentAuthorizationResult(status: .success) }
            let deadline = ContinuousClock.now + verdictTimeout
            while ContinuousClock.now < deadline {
                switch underWay.word(key) {
                case .completed(success: true): return PaymentAuthorizationResult(status: .success)
                case .completed(success: false): return failing("the website did not accept the payment")
                case .cancelled(let reason): return failing(reason)
                case nil: try? await Task.sleep(for: .milliseconds(20))
                }
            }
            return failing("\(requester)'s page gave no verdict in time")
        }
    }

    /// A fresh payment request ID (16 random bytes, hex).
    func newRequestID() -> String { Hex.encode(random.bytes(16), lowercase: true) }

    /// A Mac's page ended the payment `requestID` it asked `device` for: the device dismisses its sheet.
    func cancel(requestID: String, device: String, reason: String) async {
        do {
            try await relay.tell(
                HandoffMessage(kind: .paymentCancel, requestID: requestID, refusal: reason), to: device)
        } catch {
            trace("handoff: the cancellation could not be sent to \(device): \(error)")
        }
    }

    /// A Mac's page completed the payment `requestID`: the device's sheet, which waited for it, ends as the page said.
    func complete(requestID: String, device: String, success: Bool) async {
        var message = HandoffMessage(kind: .paymentComplete, requestID: requestID)
        message.verdict = success ? "success" : "failure"
        do {
            try await relay.tell(message, to: device)
        } catch {
            trace("handoff: the page's verdict could not be sent to \(device): \(error)")
        }
    }

    /// A Mac's side: the request to the phone or watch it hears, the result when its user authorized; the device must
    /// be heard when the request leaves and when the result comes back. With `awaitsVerdict`, the device's sheet
    /// stays up until ``complete(requestID:device:success:)`` or ``cancel(requestID:device:reason:)``; a cancelled
    /// task stops waiting.
    func pay(
        _ request: HandoffPayment, requestID: String? = nil, awaitsVerdict: Bool = false
    ) async -> HandoffPaymentAnswer {
        func refusal(_ reason: String) -> HandoffPaymentAnswer {
            HandoffPaymentAnswer(outcome: "refused", payment: nil, failure: reason)
        }
        guard radio.near().contains(where: { $0.device == request.device }) else { return refusal(Self.notFound) }
        var message: HandoffMessage
        do {
            message = HandoffMessage(
                kind: .paymentRequest, requestID: requestID ?? newRequestID(), card: request.card,
                merchantSession: Array(request.merchantSession.utf8),
                paymentRequest: Array(try DeviceControlJSON.encoder().encode(request.request)), domain: request.domain)
            message.awaitsVerdict = awaitsVerdict ? true : nil
        } catch {
            return refusal("the payment request does not encode")
        }
        let answer: HandoffMessage?
        do {
            answer = try await relay.pay(message, to: request.device, timeout: paymentTimeout)
        } catch is CancellationError {
            return refusal("the page ended the payment")
        } catch {
            return refusal("\(request.device) could not be reached: \(error)")
        }
        guard let answer else { return refusal("\(request.device) did not answer in time") }
        guard answer.refusal == nil, let bytes = answer.payment,
            let payment = try? DeviceControlJSON.decoder().decode(PaymentSheetPayment.self, from: Data(bytes))
        else { return refusal(answer.refusal ?? "\(request.device) sent no payment") }
        guard radio.near().contains(where: { $0.device == request.device }) else {
            return refusal("\(request.device) is no longer near this Mac: the payment is refused")
        }
        return HandoffPaymentAnswer(outcome: "authorized", payment: payment, failure: nil)
    }
}
