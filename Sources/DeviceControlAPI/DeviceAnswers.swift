public import Foundation
import OrchardCrypto

/// A wallet card as the control API shows it: display data only (no DPAN, no key).
public struct WalletCardAnswer: Codable, Sendable, Hashable {
    /// The Secure Element's identifier of the card (32 hex digits).
    public let id: String
    /// `visa`, `masterCard`, ...
    public let network: String
    /// `credit`, `debit` or `prepaid`.
    public let type: String
    /// The last four digits of the card number.
    public let suffix: String
    /// The last four digits of the device account number.
    public let deviceAccountSuffix: String
    public let displayName: String
    /// `active`, `suspended` or `terminated`.
    public let state: String
    public let automaticSelection: Bool
    public let addedAt: Date

    public init(
        id: String, network: String, type: String, suffix: String, deviceAccountSuffix: String, displayName: String,
        state: String, automaticSelection: Bool, addedAt: Date
    ) {
        self.id = id
        self.network = network
        self.type = type
        self.suffix = suffix
        self.deviceAccountSuffix = deviceAccountSuffix
        self.displayName = displayName
        self.state = state
        self.automaticSelection = automaticSelection
        self.addedAt = addedAt
    }
}

/// A device's kind, biometry and account.
public struct DeviceProfileAnswer: Codable, Sendable, Hashable {
    /// `phone`, `ipad`, `watch` or `mac`.
    public let kind: String
    /// `face`, `touch` or `none`.
    public let biometry: String
    public let account: String

    public init(kind: String, biometry: String, account: String) {
        self.kind = kind
        self.biometry = biometry
        self.account = account
    }
}

/// The Secure Enclave as a status display shows it: nothing secret.
public struct SecureEnclaveStatusAnswer: Codable, Sendable, Hashable {
    public let profile: DeviceProfileAnswer
    /// `locked`, `unlocked` or `off-wrist`.
    public let lock: String
    public let hasPasscode: Bool
    /// Whether an Authorization Random exists (a card was provisioned since the last reset).
    public let hasAuthorizationRandom: Bool
    public let biometricsForPayments: Bool
    public let failedBiometricAttempts: Int
    public let failedPasscodeAttempts: Int
    /// The methods offered for a payment now, by name (`face-id`, `touch-id`, `passcode`, `double-click`).
    public let paymentMethods: [String]

    public init(
        profile: DeviceProfileAnswer, lock: String, hasPasscode: Bool, hasAuthorizationRandom: Bool,
        biometricsForPayments: Bool, failedBiometricAttempts: Int, failedPasscodeAttempts: Int,
        paymentMethods: [String]
    ) {
        self.profile = profile
        self.lock = lock
        self.hasPasscode = hasPasscode
        self.hasAuthorizationRandom = hasAuthorizationRandom
        self.biometricsForPayments = biometricsForPayments
        self.failedBiometricAttempts = failedBiometricAttempts
        self.failedPasscodeAttempts = failedPasscodeAttempts
        self.paymentMethods = paymentMethods
    }
}

/// `GET /status`.
public struct DeviceStatusAnswer: Codable, Sendable, Hashable {
    public let name: String
    public let profile: DeviceProfileAnswer
    public let enclave: SecureEnclaveStatusAnswer
    public let cards: [WalletCardAnswer]
    public let defaultCard: String?
    /// `idle`, `armed` or `in-field`.
    public let contactless: String
    /// Whether the account owner put the device in lost mode (as the Pay server last said).
    public let lostMode: Bool

    public init(
        name: String, profile: DeviceProfileAnswer, enclave: SecureEnclaveStatusAnswer, cards: [WalletCardAnswer],
        defaultCard: String?, contactless: String, lostMode: Bool
    ) {
        self.name = name
        self.profile = profile
        self.enclave = enclave
        self.cards = cards
        self.defaultCard = defaultCard
        self.contactless = contactless
        self.lostMode = lostMode
    }
}

/// How an authentication, a lock or a double-click went.
public struct AuthenticationOutcomeAnswer: Codable, Sendable, Hashable {
    /// `authorized`, `rejected`, `locked`, `unlocked` or `presented` (a phone's double-click).
    public let outcome: String
    /// After a rejection, the methods offered now.
    public let offered: [String]?

    public init(outcome: String, offered: [String]? = nil) {
        self.outcome = outcome
        self.offered = offered
    }
}

/// `POST /field/apdu`: the card's answer in hex, status word included.
public struct APDUAnswer: Codable, Sendable, Hashable {
    public let response: String
    public init(response: String) { self.response = response }
    /// The answer's bytes, or nil when it is not hex.
    public var bytes: [UInt8]? { Hex.decode(response) }
}

/// The cards a passcode removal or an Authorization Random reset terminated (their identifiers).
/// The answer to ``AttestPasscode``: the Secure Enclave's DER ECDSA signature (base64 on the wire) over
/// `orchard-passcode-attestation-v1` ‖ 00 ‖ the challenge.
public struct PasscodeAttestationAnswer: Codable, Sendable, Hashable {
    public let signature: Data
    public init(signature: Data) { self.signature = signature }
}

public struct TerminatedCardsAnswer: Codable, Sendable, Hashable {
    public let terminated: [String]
    public init(terminated: [String]) { self.terminated = terminated }
}

/// The answer to ``GetRelayKeys``: the device's relay encryption and signing public keys (X9.63, base64 on the
/// wire).
public struct RelayKeysAnswer: Codable, Sendable, Hashable {
    public let encryptionKey: Data
    public let signingKey: Data
    public init(encryptionKey: Data, signingKey: Data) {
        self.encryptionKey = encryptionKey
        self.signingKey = signingKey
    }
}

/// The answer to ``VouchRelayDevice``: the Secure Enclave's DER ECDSA signature over the relay vouch (base64 on
/// the wire).
public struct RelayVouchAnswer: Codable, Sendable, Hashable {
    public let signature: Data
    public init(signature: Data) { self.signature = signature }
}

/// The answer to ``GetRelayAlerts``.
public struct RelayAlertsAnswer: Codable, Sendable, Hashable {
    public let alerts: [String]
    public init(alerts: [String]) { self.alerts = alerts }
}
