import CardBasics
import Device
import DeviceControlAPI
import Foundation
import OrchardCrypto
import OrchardRuntime
import PayClient
import RelayAPI
import SecureElement
import Wallet

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

    init(
        device: Device, deployment: DeploymentDirectory, window: Duration, random: any RandomSource = SystemRandom(),
        trace: @escaping @Sendable (String) -> Void
    ) {
        let radio = RadioMedium(device: device, deployment: deployment, window: window, random: random, trace: trace)
        self.radio = radio
        self.device = device
        relay = HandoffRelay(
            device: device, deployment: deployment, random: random,
            answerDiscovery: { requester, requestID in
                await Self.answer(
                    device: device, radio: radio, requester: requester, requestID: requestID, random: random)
            }, trace: trace)
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
        device: Device, radio: RadioMedium, requester: String, requestID: String, random: any RandomSource
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
            HandoffCard(
                identifier: random.bytes(16).map { String(format: "%02x", $0) }.joined(), network: card.network,
                type: card.type.rawValue, displayName: card.displayName, suffix: card.suffix)
        }
        return HandoffMessage(kind: .discoveryAnswer, requestID: requestID, deviceKind: kind.rawValue, cards: cards)
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
