public import Foundation
import OrchardCrypto
public import RelayAPI

// The device's own routes: cards, lifecycle, authentication, the NFC field, passcode and settings.
// Requests that carry a secret (a personalisation envelope, a passcode) print and mirror without it.

/// `GET /status`: the device, its Secure Enclave and wallet.
public struct GetDeviceStatus: DeviceControlRequest, Hashable {
    public typealias Answer = DeviceStatusAnswer
    public init() {}
    public var route: DeviceControlRoute { .status }
}

/// `GET /cards`: the wallet's cards (display data).
public struct ListCards: DeviceControlRequest, Hashable {
    public typealias Answer = [WalletCardAnswer]
    public init() {}
    public var route: DeviceControlRoute { .cards }
}

/// `POST /cards`: installs the token service's personalisation envelope (sealed to the Secure Element's key)
/// with the wallet's display data. Answered 201 with the card.
public struct AddCard: DeviceControlRequest, Codable, Hashable, CustomStringConvertible,
    CustomDebugStringConvertible, CustomReflectable
{
    public typealias Answer = WalletCardAnswer
    /// The sealed personalisation (base64 on the wire).
    public let envelope: Data
    /// `credit`, `debit` or `prepaid`.
    public let type: String
    /// The last four digits of the card number.
    public let suffix: String
    public let displayName: String

    public init(envelope: Data, type: String, suffix: String, displayName: String) {
        self.envelope = envelope
        self.type = type
        self.suffix = suffix
        self.displayName = displayName
    }

    public var route: DeviceControlRoute { .addCard }
    public var body: Self { self }
    public var description: String { "AddCard(\(type) •••• \(suffix), envelope: <redacted>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["type": type, "suffix": suffix]) }
}

/// `DELETE /cards/{id}`.
public struct RemoveCard: DeviceControlRequest, Hashable {
    public typealias Answer = Acknowledgement
    public let card: String
    public init(card: String) { self.card = card }
    public var route: DeviceControlRoute { .removeCard(card) }
}

/// `POST /cards/{id}/choose`: the card chosen by hand for the next payment.
public struct ChooseCard: DeviceControlRequest, Hashable {
    public typealias Answer = Acknowledgement
    public let card: String
    public init(card: String) { self.card = card }
    public var route: DeviceControlRoute { .chooseCard(card) }
}

/// `POST /cards/{id}/default`.
public struct SetDefaultCard: DeviceControlRequest, Hashable {
    public typealias Answer = Acknowledgement
    public let card: String
    public init(card: String) { self.card = card }
    public var route: DeviceControlRoute { .setDefaultCard(card) }
}

/// `POST /cards/{id}/automatic-selection` `{"enabled"}`.
public struct SetAutomaticSelection: DeviceControlRequest, Hashable {
    public typealias Answer = Acknowledgement
    /// The body.
    public struct Body: Codable, Sendable, Hashable {
        public let enabled: Bool
        public init(enabled: Bool) { self.enabled = enabled }
    }
    public let card: String
    public let enabled: Bool
    public init(card: String, enabled: Bool) {
        self.card = card
        self.enabled = enabled
    }
    public var route: DeviceControlRoute { .setAutomaticSelection(card) }
    public var body: Body { Body(enabled: enabled) }
}

/// `POST /tokens/{tokenReference}/status` `{"state": "active|suspended|deleted"}`: a token-status notification
/// from the Pay server applied to the card of that token. Answered with the card (404 when no card has it).
public struct ApplyTokenStatus: DeviceControlRequest, Hashable {
    public typealias Answer = WalletCardAnswer
    /// The body.
    public struct Body: Codable, Sendable, Hashable {
        /// `active`, `suspended` or `deleted`.
        public let state: String
        public init(state: String) { self.state = state }
    }
    public let tokenReference: String
    public let state: String
    public init(tokenReference: String, state: String) {
        self.tokenReference = tokenReference
        self.state = state
    }
    public var route: DeviceControlRoute { .tokenStatus(tokenReference) }
    public var body: Body { Body(state: state) }
}

/// `POST /lost-mode` `{"lostMode": true|false}`: what the Pay server said of the device's lost mode (with its
/// notifications), recorded by the device. Answered with the device's status.
public struct ApplyLostMode: DeviceControlRequest, Codable, Hashable {
    public typealias Answer = DeviceStatusAnswer
    public let lostMode: Bool
    public init(lostMode: Bool) { self.lostMode = lostMode }
    public var route: DeviceControlRoute { .lostMode }
    public var body: ApplyLostMode { self }
}

/// How the user authenticates (`POST /unlock`, and the payment sheet's `authenticate`):
/// `{"method": "face-id|touch-id|passcode|double-click", "success"?, "passcode"?}`.
public struct AuthenticationEvidenceBody: Codable, Sendable, Hashable, CustomStringConvertible,
    CustomDebugStringConvertible, CustomReflectable
{
    /// `face-id`, `touch-id`, `passcode` or `double-click`.
    public let method: String
    /// Whether a biometric matched (biometrics only).
    public let success: Bool?
    /// The passcode (method `passcode` only).
    public let passcode: String?

    public init(method: String, success: Bool? = nil, passcode: String? = nil) {
        self.method = method
        self.success = success
        self.passcode = passcode
    }

    public var description: String {
        "\(method)" + (success.map { $0 ? " (match)" : " (no match)" } ?? "") + (passcode == nil ? "" : " <redacted>")
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["method": method, "success": success as Any]) }
}

/// An amount in minor units of an ISO 4217 numeric currency.
public struct AmountBody: Codable, Sendable, Hashable {
    public let minorUnits: Int64
    /// ISO 4217 numeric code (840 for USD).
    public let currency: UInt16
    public init(minorUnits: Int64, currency: UInt16) {
        self.minorUnits = minorUnits
        self.currency = currency
    }
}

/// `POST /authenticate`: the user authenticates for a payment (contactless by default: the authorization goes to
/// the Secure Element for the next field).
public struct Authenticate: DeviceControlRequest, Codable, Hashable, CustomStringConvertible,
    CustomDebugStringConvertible, CustomReflectable
{
    public typealias Answer = AuthenticationOutcomeAnswer
    /// `face-id`, `touch-id`, `passcode` or `double-click`.
    public let method: String
    public let success: Bool?
    public let passcode: String?
    /// `contactless` (default), `in-app` or `web`.
    public let type: String?
    /// The card (default: the one the wallet offers).
    public let card: String?
    public let amount: AmountBody?

    public init(
        _ evidence: AuthenticationEvidenceBody, type: String? = nil, card: String? = nil, amount: AmountBody? = nil
    ) {
        method = evidence.method
        success = evidence.success
        passcode = evidence.passcode
        self.type = type
        self.card = card
        self.amount = amount
    }

    /// The evidence alone.
    public var evidence: AuthenticationEvidenceBody {
        AuthenticationEvidenceBody(method: method, success: success, passcode: passcode)
    }
    public var route: DeviceControlRoute { .authenticate }
    public var body: Self { self }
    public var description: String { "Authenticate(\(evidence), type: \(type ?? "contactless"))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror {
        Mirror(self, children: ["evidence": evidence, "type": type as Any, "card": card as Any])
    }
}

/// `POST /lock`: answered `{"outcome": "locked"}`.
public struct Lock: DeviceControlRequest, Hashable {
    public typealias Answer = AuthenticationOutcomeAnswer
    public init() {}
    public var route: DeviceControlRoute { .lock }
}

/// `POST /unlock` with the evidence: `{"outcome": "unlocked|rejected", "offered"?}`.
public struct Unlock: DeviceControlRequest, Hashable {
    public typealias Answer = AuthenticationOutcomeAnswer
    public let evidence: AuthenticationEvidenceBody
    public init(_ evidence: AuthenticationEvidenceBody) { self.evidence = evidence }
    public var route: DeviceControlRoute { .unlock }
    public var body: AuthenticationEvidenceBody { evidence }
}

/// `POST /wrist` `{"on"}`: a watch put on the wrist or taken off.
public struct SetWrist: DeviceControlRequest, Codable, Hashable {
    public typealias Answer = Acknowledgement
    public let on: Bool
    public init(on: Bool) { self.on = on }
    public var route: DeviceControlRoute { .wrist }
    public var body: Self { self }
}

/// `POST /double-click`: a watch authorizes its default card (an outcome), a phone presents it (`presented`).
public struct DoubleClick: DeviceControlRequest, Hashable {
    public typealias Answer = AuthenticationOutcomeAnswer
    public init() {}
    public var route: DeviceControlRoute { .doubleClick }
}

/// `POST /field/on` `{"networks"?}`: a terminal's field comes on, asking for these networks.
public struct FieldOn: DeviceControlRequest, Codable, Hashable {
    public typealias Answer = Acknowledgement
    public let networks: [String]?
    public init(networks: [String]? = nil) { self.networks = networks }
    public var route: DeviceControlRoute { .fieldOn }
    public var body: Self { self }
}

/// `POST /field/off`.
public struct FieldOff: DeviceControlRequest, Hashable {
    public typealias Answer = Acknowledgement
    public init() {}
    public var route: DeviceControlRoute { .fieldOff }
}

/// `POST /field/apdu` `{"command": hex}`: one command APDU from the terminal in the field.
public struct SendAPDU: DeviceControlRequest, Codable, Hashable {
    public typealias Answer = APDUAnswer
    /// The command APDU in hex.
    public let command: String
    public init(command: String) { self.command = command }
    /// The command from its bytes.
    public init(bytes: [UInt8]) { command = Hex.encode(bytes) }
    public var route: DeviceControlRoute { .fieldAPDU }
    public var body: Self { self }
}

/// `POST /passcode` `{"passcode", "current"?}`: sets or changes the passcode.
public struct SetPasscode: DeviceControlRequest, Codable, Hashable, CustomStringConvertible,
    CustomDebugStringConvertible, CustomReflectable
{
    public typealias Answer = Acknowledgement
    public let passcode: String
    public let current: String?
    public init(passcode: String, current: String? = nil) {
        self.passcode = passcode
        self.current = current
    }
    public var route: DeviceControlRoute { .setPasscode }
    public var body: Self { self }
    public var description: String { "SetPasscode(<redacted>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// `POST /passcode/attest` `{"passcode", "challenge"}`: the Secure Enclave checks the passcode and signs a server's
/// challenge (leaving lost mode); the answer is the signature. A wrong passcode counts as a failed attempt.
public struct AttestPasscode: DeviceControlRequest, Codable, Hashable, CustomStringConvertible,
    CustomDebugStringConvertible, CustomReflectable
{
    public typealias Answer = PasscodeAttestationAnswer
    public let passcode: String
    /// The server's challenge (base64 on the wire).
    public let challenge: Data
    public init(passcode: String, challenge: Data) {
        self.passcode = passcode
        self.challenge = challenge
    }
    public var route: DeviceControlRoute { .attestPasscode }
    public var body: Self { self }
    public var description: String { "AttestPasscode(<redacted>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// `POST /passcode/remove` `{"current"}`: turns the passcode off, which terminates every card.
public struct RemovePasscode: DeviceControlRequest, Codable, Hashable, CustomStringConvertible,
    CustomDebugStringConvertible, CustomReflectable
{
    public typealias Answer = TerminatedCardsAnswer
    public let current: String
    public init(current: String) { self.current = current }
    public var route: DeviceControlRoute { .removePasscode }
    public var body: Self { self }
    public var description: String { "RemovePasscode(<redacted>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// `POST /reset` `{"reason"}`: discards the Authorization Random, which terminates every card.
public struct ResetAuthorizationRandom: DeviceControlRequest, Codable, Hashable {
    public typealias Answer = TerminatedCardsAnswer
    /// `passcode-disabled`, `sign-out`, `erase`, `recovery-restore` or `watch-unpaired`.
    public let reason: String
    public init(reason: String) { self.reason = reason }
    public var route: DeviceControlRoute { .reset }
    public var body: Self { self }
}

/// `GET /settings`.
public struct GetSettings: DeviceControlRequest, Hashable {
    public typealias Answer = DeviceSettingsBody
    public init() {}
    public var route: DeviceControlRoute { .settings }
}

/// `PUT /settings`: changes the settings given, answers all of them.
public struct UpdateSettings: DeviceControlRequest, Hashable {
    public typealias Answer = DeviceSettingsBody
    public let settings: DeviceSettingsBody
    public init(_ settings: DeviceSettingsBody) { self.settings = settings }
    public var route: DeviceControlRoute { .updateSettings }
    public var body: DeviceSettingsBody { settings }
}

/// The wallet's and the Secure Enclave's settings; in a change, a missing one stays as it is.
public struct DeviceSettingsBody: Codable, Sendable, Hashable {
    /// Websites may ask whether the device can pay (the privacy switch).
    public var allowWebsiteQueries: Bool?
    /// A double-click presents the default card.
    public var doubleClickPresentsCards: Bool?
    /// Biometrics authorize payments (off: the passcode only).
    public var biometricsForPayments: Bool?
    /// The room of the simulated radio medium the device is in (`orchard device move`).
    public var room: String?
    /// A phone or watch offers its cards to the account's Macs near it (Handoff).
    public var allowPaymentsOnMac: Bool?

    public init(
        allowWebsiteQueries: Bool? = nil, doubleClickPresentsCards: Bool? = nil, biometricsForPayments: Bool? = nil,
        room: String? = nil, allowPaymentsOnMac: Bool? = nil
    ) {
        self.allowWebsiteQueries = allowWebsiteQueries
        self.doubleClickPresentsCards = doubleClickPresentsCards
        self.biometricsForPayments = biometricsForPayments
        self.room = room
        self.allowPaymentsOnMac = allowPaymentsOnMac
    }
}

/// `GET /handoff/devices`: a Mac asks the phones and watches of its account near it for their cards (Handoff
/// discovery, docs/handoff.md).
public struct DiscoverHandoffDevices: DeviceControlRequest, Hashable {
    public typealias Answer = HandoffDevicesAnswer
    public init() {}
    public var route: DeviceControlRoute { .handoffDevices }
}

/// `POST /handoff/payments`: a Mac without Touch ID asks a phone or watch near it to pay (Handoff, docs/handoff.md):
/// the card it offered, the page's merchant session and payment request; the answer comes when the user authorized
/// (or not) there.
public struct HandoffPayment: DeviceControlRequest, Codable, Hashable {
    public typealias Answer = HandoffPaymentAnswer
    /// The phone or watch.
    public let device: String
    /// The card's identifier from that device's discovery answer.
    public let card: String
    /// The merchant session the page received (its JSON text).
    public let merchantSession: String
    /// The top-level page's host.
    public let domain: String
    public let request: PaymentSheetRequestBody

    public init(device: String, card: String, merchantSession: String, domain: String, request: PaymentSheetRequestBody)
    {
        self.device = device
        self.card = card
        self.merchantSession = merchantSession
        self.domain = domain
        self.request = request
    }

    public var route: DeviceControlRoute { .handoffPayment }
    public var body: Self { self }
}

/// The Handoff payment's outcome at the Mac.
public struct HandoffPaymentAnswer: Codable, Sendable, Hashable {
    /// `authorized` or `refused`.
    public let outcome: String
    /// The payment the phone or watch authorized (the token encrypted to the merchant).
    public let payment: PaymentSheetPayment?
    /// Why not.
    public let failure: String?

    public init(outcome: String, payment: PaymentSheetPayment?, failure: String?) {
        self.outcome = outcome
        self.payment = payment
        self.failure = failure
    }
}

/// The phones and watches that answered, as a Mac's payment sheet lists them.
public struct HandoffDevicesAnswer: Codable, Sendable, Hashable {
    /// A device that offers its cards.
    public struct OfferingDevice: Codable, Sendable, Hashable {
        public let device: String
        public let kind: String
        /// What the sheet shows: "Pay with iPhone", "Confirm with Apple Watch".
        public let label: String
        public let cards: [HandoffCard]

        public init(device: String, kind: String, label: String, cards: [HandoffCard]) {
            self.device = device
            self.kind = kind
            self.label = label
            self.cards = cards
        }
    }

    public let devices: [OfferingDevice]
    /// When no device offers its cards: what the sheet says ("iPhone could not be found…").
    public let message: String?

    public init(devices: [OfferingDevice], message: String?) {
        self.devices = devices
        self.message = message
    }
}

/// `GET /proximity`: the device's room and the devices of its account it hears (docs/handoff.md, "Proximity").
public struct GetProximity: DeviceControlRequest, Hashable {
    public typealias Answer = ProximityAnswer
    public init() {}
    public var route: DeviceControlRoute { .proximity }
}

/// Where the device is and whom it hears.
public struct ProximityAnswer: Codable, Sendable, Hashable {
    /// A device of the account heard within the window.
    public struct NearbyDevice: Codable, Sendable, Hashable {
        public let device: String
        public let kind: String
        /// How long ago its last counted advertisement was heard.
        public let heardMillisecondsAgo: Int

        public init(device: String, kind: String, heardMillisecondsAgo: Int) {
            self.device = device
            self.kind = kind
            self.heardMillisecondsAgo = heardMillisecondsAgo
        }
    }

    public let room: String
    /// Whether the device is on the radio medium (its process runs); when not, it hears nothing.
    public let listening: Bool
    public let nearby: [NearbyDevice]
    /// How many advertisements were ignored since the process started: opened by no key (foreign or junk),
    /// replayed (a counter not above the last), or stale (a counter outside the window).
    public let ignored: IgnoredCounts

    /// Counts of ignored advertisements.
    public struct IgnoredCounts: Codable, Sendable, Hashable {
        public var foreign: Int
        public var replayed: Int
        public var stale: Int
        public init(foreign: Int = 0, replayed: Int = 0, stale: Int = 0) {
            self.foreign = foreign
            self.replayed = replayed
            self.stale = stale
        }
    }

    public init(room: String, listening: Bool, nearby: [NearbyDevice], ignored: IgnoredCounts = IgnoredCounts()) {
        self.room = room
        self.listening = listening
        self.nearby = nearby
        self.ignored = ignored
    }
}

/// `GET /relay/keys`: the public halves of the device's relay keys (its Secure Enclave makes them at the first
/// call), as the device itself shows them to the user approving it on another device.
public struct GetRelayKeys: DeviceControlRequest, Hashable {
    public typealias Answer = RelayKeysAnswer
    public init() {}
    public var route: DeviceControlRoute { .relayKeys }
}

/// `POST /relay/vouch` `{"device", "encryptionKey", "signingKey", "passcode"}`: the user of this device approves
/// another device of the account: the Secure Enclave checks the passcode (a wrong one counts as a failed attempt)
/// and signs a relay vouch for the keys given (X9.63, base64 on the wire), which that device showed.
public struct VouchRelayDevice: DeviceControlRequest, Codable, Hashable, CustomStringConvertible,
    CustomDebugStringConvertible, CustomReflectable
{
    public typealias Answer = RelayVouchAnswer
    public let device: String
    public let encryptionKey: Data
    public let signingKey: Data
    public let passcode: String
    public init(device: String, encryptionKey: Data, signingKey: Data, passcode: String) {
        self.device = device
        self.encryptionKey = encryptionKey
        self.signingKey = signingKey
        self.passcode = passcode
    }
    public var route: DeviceControlRoute { .relayVouch }
    public var body: Self { self }
    public var description: String { "VouchRelayDevice(\(device), <redacted>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// `GET /relay/alerts`: the relay alerts the running device process has shown (a device that joined the account
/// unapproved, a substituted key of this device), oldest first; empty without a running process.
public struct GetRelayAlerts: DeviceControlRequest, Hashable {
    public typealias Answer = RelayAlertsAnswer
    public init() {}
    public var route: DeviceControlRoute { .relayAlerts }
}
