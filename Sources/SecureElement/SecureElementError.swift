/// The one error type of `SecureElement` (the Secure Element, the Secure Enclave and their factory).
///
/// A struct with an extensible code (the `CryptoError` pattern). Equality compares the code only. Messages
/// say what was refused and why; they never contain a card number, a key, a passcode or an authorization's
/// bytes.
public struct SecureElementError: Error, Hashable, CustomStringConvertible, Sendable {
    /// What went wrong, as a value a caller can branch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidArgument, unsupportedDevice, methodUnavailable, methodNotOffered, lockedOut, deviceLocked
            case notOnWrist, passcodeRequired, passcodeIncorrect, notProvisioned, illegalTransition
            case invalidAuthorization, authorizationReplayed, authorizationExpired, wrongTransactionType
            case wrongCard, rollbackDetected, invalidEnvelope, untrustedInstall, unsupportedNetwork, cardNotFound
            case cardTerminated
            case fieldNotActive, notFromField, storageFailure, corruptState, internalFailure
            case invalidRelayFrame, relayFrameReplayed
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// An argument has the wrong form (a name, an amount, an identifier).
        public static let invalidArgument = Code(.invalidArgument)
        /// The device cannot do this at all (a watch with Face ID, a contactless payment on an iPad).
        public static let unsupportedDevice = Code(.unsupportedDevice)
        /// The device lacks this authentication method (Face ID on a Touch ID phone, a double-click on a phone).
        public static let methodUnavailable = Code(.methodUnavailable)
        /// The device has the method, but it is not offered now (a passcode before the biometric failures
        /// that offer it, a biometric match after five failures).
        public static let methodNotOffered = Code(.methodNotOffered)
        /// Too many wrong passcodes: the Secure Enclave waits before it accepts another attempt.
        public static let lockedOut = Code(.lockedOut)
        /// The device is locked: a locked watch pays nothing.
        public static let deviceLocked = Code(.deviceLocked)
        /// The watch is not on a wrist.
        public static let notOnWrist = Code(.notOnWrist)
        /// The operation needs a passcode and none is set.
        public static let passcodeRequired = Code(.passcodeRequired)
        /// The passcode given to change or remove the passcode is wrong.
        public static let passcodeIncorrect = Code(.passcodeIncorrect)
        /// No Authorization Random exists yet (no card was ever provisioned, or it was reset).
        public static let notProvisioned = Code(.notProvisioned)
        /// The operation is not allowed in the component's current state.
        public static let illegalTransition = Code(.illegalTransition)
        /// A Secure Enclave message is malformed, not signed by the paired Secure Enclave, or not for this
        /// Secure Element.
        public static let invalidAuthorization = Code(.invalidAuthorization)
        /// A Secure Enclave message was already used, or answers a challenge this Secure Element did not issue.
        public static let authorizationReplayed = Code(.authorizationReplayed)
        /// An authorization or its challenge is older than its validity.
        public static let authorizationExpired = Code(.authorizationExpired)
        /// An authorization was made for another transaction type (in-app used for contactless, ...).
        public static let wrongTransactionType = Code(.wrongTransactionType)
        /// An authorization names another card, or the transaction does not match its amount.
        public static let wrongCard = Code(.wrongCard)
        /// The Secure Enclave's state is older than a state the Secure Element has already seen.
        public static let rollbackDetected = Code(.rollbackDetected)
        /// A personalisation envelope is not addressed to this Secure Element, was altered, or is malformed.
        public static let invalidEnvelope = Code(.invalidEnvelope)
        /// A card install not signed by the token service key pinned at manufacture, not bound to this Secure
        /// Element's certificate, or whose install identifier was already used.
        public static let untrustedInstall = Code(.untrustedInstall)
        /// The card's network has no applet on this Secure Element.
        public static let unsupportedNetwork = Code(.unsupportedNetwork)
        /// No card with this identifier.
        public static let cardNotFound = Code(.cardNotFound)
        /// The card was terminated (Authorization Random reset); it must be provisioned again.
        public static let cardTerminated = Code(.cardTerminated)
        /// No NFC field is present.
        public static let fieldNotActive = Code(.fieldNotActive)
        /// A contactless command did not come from the NFC field.
        public static let notFromField = Code(.notFromField)
        /// The persistent store failed; nothing was released.
        public static let storageFailure = Code(.storageFailure)
        /// A stored record does not decrypt or decode under this device's storage key.
        public static let corruptState = Code(.corruptState)
        /// Something failed that the input does not explain.
        public static let internalFailure = Code(.internalFailure)
        /// A relay frame that is malformed, not for this device, not signed by its sender's key, or whose tag fails.
        public static let invalidRelayFrame = Code(.invalidRelayFrame)
        /// A relay frame whose sequence number is not above the last one accepted from its sender (replayed or
        /// reordered).
        public static let relayFrameReplayed = Code(.relayFrameReplayed)

        public var description: String { base.rawValue }
    }

    public let code: Code
    /// What happened and, where it helps, what to do about it.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }

    public static func == (lhs: SecureElementError, rhs: SecureElementError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
