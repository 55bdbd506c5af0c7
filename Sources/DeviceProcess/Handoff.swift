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
        self.radio = radio
        self.device = device
        self.random = random
        paymentTimeout = sheetTimeout + .seconds(10)
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
                    on: PayingDevice(device: device, radio: radio, offers: offers, sheets: sheets, sessions: sessions),
                    trace: trace)
            }, trace: trace)
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
            let identifier = random.bytes(16).map { String(format: "%02x", $0) }.joined()
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
        func refusal(_ reason: String) -> HandoffMessage {
            trace("handoff: \(requester)'s payment refused: \(reason)")
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
        let delegate = SheetDelegate(radio: paying.radio, requester: requester)
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
        while await current.ending == nil { try? await Task.sleep(for: .milliseconds(20)) }
        guard case .completed(let result) = await current.ending, result.status == .success,
            let payment = delegate.payment,
            let bytes = try? DeviceControlJSON.encoder().encode(PaymentSheetPayment(payment))
        else { return refusal(delegate.failure ?? "the payment was not authorized on this device") }
        trace("handoff: the payment authorized here goes to \(requester)")
        return HandoffMessage(
            kind: .paymentResult, requestID: request.requestID, deviceKind: kind.rawValue, payment: Array(bytes))
    }

    /// The phone's or watch's sheet delegate for a Mac's page: the page's totals stay as requested; at authorization,
    /// the Mac must still be heard.
    final class SheetDelegate: PaymentAuthorizationControllerDelegate, Sendable {
        let radio: RadioMedium
        let requester: String
        private let authorized = Mutex<(payment: Payment?, failure: String?)>((nil, nil))

        init(radio: RadioMedium, requester: String) {
            self.radio = radio
            self.requester = requester
        }

        var payment: Payment? { authorized.withLock { $0.payment } }
        var failure: String? { authorized.withLock { $0.failure } }

        func didSelectPaymentMethod(_ method: PaymentMethod, request: PaymentRequest) async -> PaymentRequestUpdate {
            PaymentRequestUpdate(paymentSummaryItems: request.paymentSummaryItems, shippingMethods: nil)
        }

        func didAuthorizePayment(_ payment: Payment) async -> PaymentAuthorizationResult {
            guard radio.near().contains(where: { $0.device == requester }) else {
                let reason = "\(requester) is no longer near this device: the payment is refused"
                authorized.withLock { $0.failure = reason }
                return PaymentAuthorizationResult(status: .failure, errors: [reason])
            }
            authorized.withLock { $0.payment = payment }
            return PaymentAuthorizationResult(status: .success)
        }
    }

    /// A Mac's side: the request to the phone or watch it hears, the result when its user authorized; the device must
    /// be heard when the request leaves and when the result comes back.
    func pay(_ request: HandoffPayment) async -> HandoffPaymentAnswer {
        func refusal(_ reason: String) -> HandoffPaymentAnswer {
            HandoffPaymentAnswer(outcome: "refused", payment: nil, failure: reason)
        }
        guard radio.near().contains(where: { $0.device == request.device }) else { return refusal(Self.notFound) }
        let message: HandoffMessage
        do {
            message = HandoffMessage(
                kind: .paymentRequest, requestID: random.bytes(16).map { String(format: "%02x", $0) }.joined(),
                card: request.card, merchantSession: Array(request.merchantSession.utf8),
                paymentRequest: Array(try DeviceControlJSON.encoder().encode(request.request)), domain: request.domain)
        } catch {
            return refusal("the payment request does not encode")
        }
        let answer: HandoffMessage?
        do {
            answer = try await relay.pay(message, to: request.device, timeout: paymentTimeout)
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
