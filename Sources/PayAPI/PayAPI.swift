import Foundation

/// The wire formats between a device and the Orchard Pay server for registration, provisioning, lifecycle and
/// token-status notifications (JSON over HTTPS with the device's client certificate), and the profile of the
/// token service's provisioning certificate a device checks before it seals card data.
///
/// Both sides import this module and nothing else of each other: the device never links the Pay server, the Pay
/// server never links the device. Byte strings travel as standard base64.
public enum PayAPI {
    /// Routes of the Pay server a device calls (all need the device's client certificate).
    public enum Route {
        public static let register = "/v1/devices/register"
        public static let provisioningKey = "/v1/provisioning/key"
        public static let checkCard = "/v1/provisioning/check-card"
        public static let oneTimeCode = "/v1/provisioning/one-time-code"
        public static let terms = "/v1/provisioning/terms/"
        public static let link = "/v1/provisioning/link"
        public static let cards = "/v1/devices/self/cards"
        public static let notifications = "/v1/devices/self/notifications"
        /// `POST /v1/account/devices/{name}/{lost-mode,resume,erase}`: the account owner acts on one of its devices.
        public static func lifecycle(device: String, action: LifecycleAction) -> String {
            "/v1/account/devices/\(device)/\(action.rawValue)"
        }
        /// `POST /v1/account/devices/{name}/resume-challenge`: a fresh challenge for leaving lost mode, which the
        /// device's Secure Enclave signs once the user entered the passcode (``PasscodeAttestation``).
        public static func resumeChallenge(device: String) -> String {
            "/v1/account/devices/\(device)/resume-challenge"
        }
    }

    /// Leaving lost mode takes the user's passcode on the device itself: its Secure Enclave checks it and signs
    /// ``context`` ‖ the Pay server's challenge with the key the device registered (ECDSA P-256, SHA-256). The
    /// device's certificate alone never leaves lost mode.
    public enum PasscodeAttestation {
        /// `orchard-passcode-attestation-v1` and a zero byte (the Secure Enclave signs nothing else that starts so).
        public static let context: [UInt8] = Array("orchard-passcode-attestation-v1".utf8) + [0]
        /// The bytes signed for `challenge`.
        public static func signedContent(challenge: [UInt8]) -> [UInt8] { context + challenge }
        /// How many bytes a challenge has.
        public static let challengeByteCount = 32
    }

    /// The token service's provisioning certificate: issued directly by the Orchard root, subject
    /// `O=Orchard, OU=token-service-provisioning, CN=<recipient>`, a P-256 key for key agreement. The device seals
    /// card data to its key only after checking this, so the Pay server that relays it cannot substitute its own.
    public enum ProvisioningCertificate {
        public static let organizationalUnit = "token-service-provisioning"
    }

    /// The envelope purpose of card data sealed by the wallet of `deviceID` to the token service named
    /// `recipient` (the provisioning certificate's common name): `wallet/<deviceID>><recipient>:card-data`.
    public static func cardDataPurpose(deviceID: String, recipient: String) -> String {
        "wallet/\(deviceID)>\(recipient):card-data"
    }

    /// The owner's actions on a device, as Find My offers them; they reach the token service even while the
    /// device is offline.
    public enum LifecycleAction: String, Codable, Sendable, CaseIterable {
        /// Lost mode: every token of the device is suspended (by the cardholder).
        case lostMode = "lost-mode"
        /// Leaving lost mode: the cardholder's suspension is lifted.
        case resume
        /// Remote erase: every token of the device is deleted.
        case erase
    }
}

/// `POST /v1/devices/register`: the device presents its Secure Element certificate (DER, base64) alongside the
/// client certificate of the TLS connection; both must name the same device, account and kind. It also gives its
/// Secure Enclave's public key (X9.63, base64), which the Pay server keeps for the device's life to check passcode
/// attestations (``PayAPI/PasscodeAttestation``); a later registration may not change it.
public struct DeviceRegistrationRequest: Codable, Sendable, Hashable {
    public let secureElementCertificate: String
    public let enclavePublicKey: String
    public init(secureElementCertificate: String, enclavePublicKey: String) {
        self.secureElementCertificate = secureElementCertificate
        self.enclavePublicKey = enclavePublicKey
    }
}

/// `POST /v1/account/devices/{name}/resume-challenge` answers this: 32 random bytes (base64) for the device's
/// Secure Enclave to sign, usable once, for ``expiresInSeconds``.
public struct ResumeChallenge: Codable, Sendable, Hashable {
    public let challenge: String
    public let expiresInSeconds: Int
    public init(challenge: String, expiresInSeconds: Int) {
        self.challenge = challenge
        self.expiresInSeconds = expiresInSeconds
    }
}

/// `POST /v1/account/devices/{name}/resume`: the challenge and the Secure Enclave's signature over it (DER,
/// base64), made after the user entered the device passcode.
public struct ResumeRequest: Codable, Sendable, Hashable {
    public let challenge: String
    public let attestation: String
    public init(challenge: String, attestation: String) {
        self.challenge = challenge
        self.attestation = attestation
    }
}

/// The Pay server's record of a registered device.
public struct RegisteredDevice: Codable, Sendable, Hashable {
    public let deviceID: String
    public let account: String
    public let kind: String
    public let lostMode: Bool
    public init(deviceID: String, account: String, kind: String, lostMode: Bool) {
        self.deviceID = deviceID
        self.account = account
        self.kind = kind
        self.lostMode = lostMode
    }
}

/// `GET /v1/provisioning/key`: the token service's provisioning certificate, relayed (DER, base64).
public struct ProvisioningKeyResponse: Codable, Sendable, Hashable {
    public let certificate: String
    public init(certificate: String) { self.certificate = certificate }
}

/// `POST /v1/provisioning/check-card`: card data sealed on the device to the token service's key.
public struct CheckCardBody: Codable, Sendable, Hashable {
    /// A retry with the same key gets the first decision.
    public let idempotencyKey: String
    /// The sealed card data (base64).
    public let encryptedCardData: String
    public init(idempotencyKey: String, encryptedCardData: String) {
        self.idempotencyKey = idempotencyKey
        self.encryptedCardData = encryptedCardData
    }
}

/// `POST /v1/provisioning/one-time-code`. The code is a secret: descriptions and the mirror leave it out.
public struct OneTimeCodeBody: Codable, Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    public let sessionID: String
    public let code: String
    public init(sessionID: String, code: String) {
        self.sessionID = sessionID
        self.code = code
    }

    public var description: String { "OneTimeCodeBody(session: \(sessionID), code redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

/// What the wallet may show of a card: never a card number, only its last four digits.
public struct CardDisplay: Codable, Sendable, Hashable {
    /// Apple Pay's network names: `visa`, `masterCard`, ...
    public let network: String
    /// `credit`, `debit` or `prepaid`.
    public let type: String
    /// Last four digits of the card number.
    public let suffix: String
    /// The issuer's product name.
    public let description: String
    public init(network: String, type: String, suffix: String, description: String) {
        self.network = network
        self.type = type
        self.suffix = suffix
        self.description = description
    }
}

/// The issuer's decision on a card, as the wallet shows it.
public struct CardCheckResult: Codable, Sendable, Hashable {
    public enum Outcome: String, Codable, Sendable {
        case approved, stepUp, declined
    }
    public let outcome: Outcome
    /// The session to continue with (approved or step-up).
    public let sessionID: String?
    /// The terms to accept before Link and Provision.
    public let termsID: String?
    /// How the one-time code was sent (`sms`, ...) and where, masked; step-up only.
    public let stepUpMethod: String?
    public let stepUpDestination: String?
    /// Why, when declined.
    public let declineReason: String?
    public let card: CardDisplay?
    public init(
        outcome: Outcome, sessionID: String?, termsID: String?, stepUpMethod: String? = nil,
        stepUpDestination: String? = nil, declineReason: String? = nil, card: CardDisplay?
    ) {
        self.outcome = outcome
        self.sessionID = sessionID
        self.termsID = termsID
        self.stepUpMethod = stepUpMethod
        self.stepUpDestination = stepUpDestination
        self.declineReason = declineReason
        self.card = card
    }
}

/// `GET /v1/provisioning/terms/{id}`.
public struct TermsResponse: Codable, Sendable, Hashable {
    public let termsID: String
    public let text: String
    public init(termsID: String, text: String) {
        self.termsID = termsID
        self.text = text
    }
}

/// `POST /v1/provisioning/link`.
public struct LinkBody: Codable, Sendable, Hashable {
    public let idempotencyKey: String
    public let sessionID: String
    public let termsAccepted: Bool
    public init(idempotencyKey: String, sessionID: String, termsAccepted: Bool) {
        self.idempotencyKey = idempotencyKey
        self.sessionID = sessionID
        self.termsAccepted = termsAccepted
    }
}

/// The answer to Link and Provision: the personalisation sealed to the device's Secure Element, opaque to
/// the Pay server, and the display data.
public struct LinkResult: Codable, Sendable, Hashable {
    public let outcome: String  // "provisioned" or "declined"
    public let declineReason: String?
    public let tokenReference: String?
    /// Last four digits of the device account number.
    public let deviceAccountSuffix: String?
    public let card: CardDisplay?
    /// The SE personalisation envelope (base64).
    public let personalisation: String?
    public init(
        outcome: String, declineReason: String? = nil, tokenReference: String? = nil,
        deviceAccountSuffix: String? = nil, card: CardDisplay? = nil, personalisation: String? = nil
    ) {
        self.outcome = outcome
        self.declineReason = declineReason
        self.tokenReference = tokenReference
        self.deviceAccountSuffix = deviceAccountSuffix
        self.card = card
        self.personalisation = personalisation
    }
}

/// A card of a device as the Pay server knows it: display data and state, no card or device account number.
public struct DeviceCard: Codable, Sendable, Hashable {
    public let tokenReference: String
    public let card: CardDisplay
    /// `active`, `suspended` or `deleted`.
    public let state: String
    public init(tokenReference: String, card: CardDisplay, state: String) {
        self.tokenReference = tokenReference
        self.card = card
        self.state = state
    }
}

/// The answer to a lifecycle action.
public struct LifecycleResult: Codable, Sendable, Hashable {
    public let deviceID: String
    public let action: PayAPI.LifecycleAction
    public let cards: [DeviceCard]
    public init(deviceID: String, action: PayAPI.LifecycleAction, cards: [DeviceCard]) {
        self.deviceID = deviceID
        self.action = action
        self.cards = cards
    }
}

/// A token-status change for one of the device's cards, passed on from the token service.
public struct TokenNotification: Codable, Sendable, Hashable {
    /// Increasing per Pay server; the device acknowledges with `?after=<sequence>`.
    public let sequence: Int64
    public let tokenReference: String
    /// `provisioned`, `suspended`, `resumed`, `deleted`, `cardUpdated`, `domainControlsChanged`.
    public let event: String
    /// `active`, `suspended` or `deleted`.
    public let state: String
    public init(sequence: Int64, tokenReference: String, event: String, state: String) {
        self.sequence = sequence
        self.tokenReference = tokenReference
        self.event = event
        self.state = state
    }
}

/// `GET /v1/devices/self/notifications?after=N`: the pending notifications, oldest first. Those up to `after`
/// are acknowledged and deleted. With them, the device's own state as the Pay server holds it: whether the
/// account owner put it in lost mode (a state, not an event: every answer carries it, nothing acknowledges it).
///
/// JSON: `{"lostMode": true, "notifications": [...]}`.
public struct NotificationsResponse: Codable, Sendable, Hashable {
    public let notifications: [TokenNotification]
    /// Whether the device is in lost mode (set by ``PayAPI/LifecycleAction/lostMode``, cleared by
    /// ``PayAPI/LifecycleAction/resume`` and by erase). Absent (nil) from a Pay server older than this field: the
    /// device then keeps what it knew.
    public let lostMode: Bool?
    public init(notifications: [TokenNotification], lostMode: Bool? = nil) {
        self.notifications = notifications
        self.lostMode = lostMode
    }
}

extension PayAPI.Route {
    /// `GET /v1/apps/{app}/merchants`: the merchant IDs an app may pay for (``AppEntitlements``), which the
    /// device checks before it shows a payment sheet.
    public static func appEntitlements(_ applicationIdentifier: String) -> String {
        "/v1/apps/\(applicationIdentifier)/merchants"
    }
}

/// The merchant IDs an app is entitled to.
public struct AppEntitlements: Codable, Sendable, Hashable {
    public let applicationIdentifier: String
    public let merchantIdentifiers: [String]
    public init(applicationIdentifier: String, merchantIdentifiers: [String]) {
        self.applicationIdentifier = applicationIdentifier
        self.merchantIdentifiers = merchantIdentifiers
    }
}

extension PayAPI.Route {
    /// `POST`: ``AnonymousPurchase`` → 202 ``AnonymousPurchaseAccepted``. Sent without the device's client
    /// certificate (the Pay server refuses one with 400), so the channel carries no device identity.
    public static let anonymousPurchases = "/v1/analytics/purchases"
}

/// What a device reports after an in-store purchase, after a random delay and on a connection that does not
/// identify it: an amount bucket, the hour and a coarse region. Nothing else: no device, account, card,
/// merchant, exact amount or time.
///
/// JSON: `{"amountBucket": "10-25", "hour": "2026-03-01T12", "region": "840"}`.
public struct AnonymousPurchase: Codable, Sendable, Hashable {
    /// The amount buckets, in whole units of the purchase's currency.
    public static let amountBuckets = ["0-5", "5-10", "10-25", "25-50", "50-100", "100-250", "250+"]

    /// One of ``amountBuckets``.
    public let amountBucket: String
    /// The hour of the purchase, UTC: `YYYY-MM-DDTHH`.
    public let hour: String
    /// The terminal's country, ISO 3166-1 numeric (three digits).
    public let region: String

    public init(amountBucket: String, hour: String, region: String) {
        self.amountBucket = amountBucket
        self.hour = hour
        self.region = region
    }
}

/// The Pay server's answer to an ``AnonymousPurchase``: `{"accepted": true}`.
public struct AnonymousPurchaseAccepted: Codable, Sendable, Hashable {
    public let accepted: Bool
    public init(accepted: Bool) { self.accepted = accepted }
}
