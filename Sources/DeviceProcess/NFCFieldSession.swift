public import Device
import Foundation
public import NFCLink
public import OrchardCrypto
public import OrchardRuntime
import PayAPI
import SecureElement
import Wallet

/// The user's actions at a tap when no person is at the device (`orchard device run --auto-auth`, demos and
/// tests): one or more steps, in order, each a double-click or an authentication.
///
/// Parsed from `face-id`, `touch-id`, `passcode`, `double-click`, or a comma-separated list such as
/// `double-click,face-id` (a locked phone: the double-click presents the default card, Face ID authorizes it).
/// A `passcode` step's passcode is given apart from the text, which a command line shows to `ps`; it is held in
/// ``SecureBytes`` and never printed.
public struct AutoAuthentication: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// One step of the user at the device.
    public enum Step: Sendable {
        case faceID
        case touchID
        case passcode(SecureBytes)
        case doubleClick

        var name: String {
            switch self {
            case .faceID: "face-id"
            case .touchID: "touch-id"
            case .passcode: "passcode"
            case .doubleClick: "double-click"
            }
        }
    }

    public let steps: [Step]

    public init(steps: [Step]) throws(DeviceError) {
        guard (1...4).contains(steps.count) else {
            throw DeviceError(.invalidArgument, "an automatic authentication has 1 to 4 steps")
        }
        self.steps = steps
    }

    /// Parses the `--auto-auth` value; a `passcode` step authenticates with `passcode`. The passcode is never part
    /// of the value (a command line is visible to every user's `ps`): the caller reads it from a file, the
    /// environment or stdin when ``needsPasscode(_:)`` says the steps hold one.
    public init(parsing text: String, passcode: SecureBytes? = nil) throws(DeviceError) {
        var steps: [Step] = []
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            switch part {
            case "face-id": steps.append(.faceID)
            case "touch-id": steps.append(.touchID)
            case "double-click": steps.append(.doubleClick)
            case "passcode":
                guard let passcode, passcode.count > 0 else {
                    throw DeviceError(.invalidArgument, "--auto-auth passcode needs the passcode")
                }
                steps.append(.passcode(passcode))
            default:
                throw DeviceError(
                    .invalidArgument,
                    "--auto-auth takes face-id, touch-id, passcode or double-click, or a comma-separated list")
            }
        }
        try self.init(steps: steps)
    }

    /// Whether the `--auto-auth` value `text` has a `passcode` step.
    public static func needsPasscode(_ text: String) -> Bool {
        text.split(separator: ",").contains("passcode")
    }

    public var description: String { "AutoAuthentication(\(steps.map(\.name).joined(separator: ",")))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

/// What the device did in a reader's field, for the device process's output (card identifiers only,
/// never a DPAN).
public struct NFCFieldEvent: Sendable, Hashable, Encodable {
    /// `field-on`, `refused`, `authenticated`, `not-authenticated`, `field-off`.
    public let event: String
    public let merchant: String?
    public let networks: [String]?
    /// The card the device offered (its Secure Element identifier).
    public let card: String?
    /// How the card was offered (`chosen`, `automatic`, `default`), the refusal's code, or the method.
    public let detail: String?
}

/// The device side of the NFC link: hooks a device to its ``NFCAntenna``.
///
/// In a reader's field:
/// - only phones and watches join; a watch that is locked or off the wrist pays nothing and stays out of
///   the field (`deviceLocked`); a wallet without an active card stays out (`noCard`);
/// - the card offered is the wallet's choice for the networks the reader asked for (see
///   `Wallet.cardForField(requestedNetworks:)`: the card chosen by hand, else a card with automatic
///   selection on for a requested network, else the default card); an authorization made before the tap
///   keeps its card;
/// - the user authenticates through the control API (the session then tells the reader it is ready) or,
///   with an ``AutoAuthentication``, at once;
/// - the Secure Element answers the APDUs (it releases a cryptogram only after a contactless authorization);
///   anything it refuses makes the device leave the field with the refusal's code.
public final class NFCFieldSession: NFCTarget {
    public let device: Device
    public let autoAuthentication: AutoAuthentication?
    /// Told of each purchase (amount, currency, terminal country) once the card released its cryptogram.
    public let analytics: (any PurchaseAnalyticsSink)?
    private let events: @Sendable (NFCFieldEvent) -> Void

    public init(
        device: Device, autoAuthentication: AutoAuthentication? = nil, analytics: (any PurchaseAnalyticsSink)? = nil,
        events: @escaping @Sendable (NFCFieldEvent) -> Void = { _ in }
    ) {
        self.device = device
        self.autoAuthentication = autoAuthentication
        self.analytics = analytics
        self.events = events
    }

    /// Starts the device's antenna at `DIR/devices/<name>/nfc.sock`. Returns nil for a device that has no
    /// NFC controller (an iPad, a Mac): nothing listens for it, so no reader can reach it.
    ///
    /// Purchases go to `analytics`, by default a ``PayAnalyticsReporter`` for the deployment (anonymous, after a
    /// random delay of up to `ORCHARD_ANALYTICS_MAX_DELAY` seconds, default 10).
    public static func startAntenna(
        device: Device, deployment: DeploymentDirectory, autoAuthentication: AutoAuthentication? = nil,
        limits: NFCLinkLimits = NFCLinkLimits(), analytics: (any PurchaseAnalyticsSink)? = nil,
        events: @escaping @Sendable (NFCFieldEvent) -> Void = { _ in }
    ) throws(NFCLinkError) -> NFCAntenna? {
        guard device.profile.kind.joinsNFCField, let kind = NFCDeviceKind(rawValue: device.profile.kind.rawValue)
        else { return nil }
        let sink =
            analytics
            ?? PayAnalyticsReporter(
                deployment: deployment,
                maxDelay: PayAnalyticsReporter.configuredMaxDelay(ProcessInfo.processInfo.environment))
        let session = NFCFieldSession(
            device: device, autoAuthentication: autoAuthentication, analytics: sink, events: events)
        return try NFCAntenna(
            path: NFCAntenna.path(forDevice: device.name, in: deployment), kind: kind, target: session, limits: limits)
    }

    // MARK: NFCTarget

    public func fieldOn(_ polling: NFCPolling) async -> NFCFieldAnswer {
        func refuse(_ code: String, _ message: String) -> NFCFieldAnswer {
            events(event("refused", polling, detail: code))
            return .refuse(NFCRefusal(code: code, message: message))
        }
        guard device.profile.kind.joinsNFCField else {
            return refuse("unsupported", "a \(device.profile.kind) does not join an NFC field")
        }
        if device.profile.kind == .watch, await device.secureEnclave.status.lock != .unlocked {
            return refuse("deviceLocked", "the watch is locked or off the wrist: it pays nothing")
        }
        let networks = await walletNetworks(polling.networks)
        guard let offered = await device.wallet.cardForField(requestedNetworks: networks) else {
            return refuse("noCard", "the wallet has no active card")
        }
        do {
            try await device.fieldOn(requestedNetworks: networks)
        } catch {
            let (_, code, message) = DeviceControl.status(for: error)
            return refuse(code, message)
        }
        let presented = await presentedCard()
        events(
            event(
                "field-on", polling, card: presented,
                detail: presented == offered.card.id ? "\(offered.reason)" : "authorized-before"))
        if !(await isAuthorized()), let autoAuthentication {
            await authenticate(autoAuthentication, polling)
        }
        return .join(ready: await isAuthorized())
    }

    public func isAuthorized() async -> Bool {
        if case .inField(_, true) = await device.secureElement.contactlessStatus { return true }
        return false
    }

    public func transceive(_ command: [UInt8]) async throws(NFCRefusal) -> [UInt8] {
        do {
            let response = try await device.transceive(command)
            if let analytics, let purchase = AnonymousPurchase.observed(command: command, response: response) {
                analytics.purchase(
                    amountMinorUnits: purchase.amountMinorUnits, currency: purchase.currency, country: purchase.country)
            }
            return response
        } catch {
            let (_, code, message) = DeviceControl.status(for: error)
            throw NFCRefusal(code: code, message: message)
        }
    }

    public func fieldOff() async {
        // A field-off without a field (the Secure Element already idle) has nothing to undo.
        try? await device.fieldOff()
        events(NFCFieldEvent(event: "field-off", merchant: nil, networks: nil, card: nil, detail: nil))
    }

    // MARK: Helpers

    /// The user's steps, in order; the first failure ends them (the reader then sees no authorization).
    private func authenticate(_ automatic: AutoAuthentication, _ polling: NFCPolling) async {
        for step in automatic.steps {
            do {
                switch step {
                case .doubleClick:
                    if try await device.doubleClick() == nil { continue }  // a phone: the default card is presented
                case .faceID, .touchID, .passcode:
                    let evidence: AuthenticationEvidence
                    switch step {
                    case .faceID: evidence = .faceID(matched: true)
                    case .touchID: evidence = .touchID(matched: true)
                    case .passcode(let code): evidence = .passcode(code)
                    case .doubleClick: evidence = .doubleClick
                    }
                    guard let card = await presentedCard() else { break }
                    _ = try await device.authenticate(evidence, for: .contactless, card: card)
                }
            } catch {
                let (_, code, _) = DeviceControl.status(for: error)
                events(event("not-authenticated", polling, card: await presentedCard(), detail: code))
                return
            }
        }
        let authorized = await isAuthorized()
        events(
            event(
                authorized ? "authenticated" : "not-authenticated", polling, card: await presentedCard(),
                detail: automatic.steps.map(\.name).joined(separator: ",")))
    }

    /// The card the Secure Element presents in the field.
    private func presentedCard() async -> String? {
        if case .inField(let presented, _) = await device.secureElement.contactlessStatus { return presented?.hex }
        return nil
    }

    /// The reader's network names as the wallet spells them (`mastercard` asks for `masterCard` cards).
    private func walletNetworks(_ requested: [String]) async -> [String] {
        let known = Set(await device.wallet.allCards.map(\.network))
        return requested.map { name in known.first { $0.lowercased() == name.lowercased() } ?? name }
    }

    private func event(_ name: String, _ polling: NFCPolling, card: String? = nil, detail: String?) -> NFCFieldEvent {
        NFCFieldEvent(
            event: name, merchant: polling.merchantName, networks: polling.networks, card: card, detail: detail)
    }
}
