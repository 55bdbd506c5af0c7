import Foundation
public import OrchardCrypto

/// What the user presented to the Secure Enclave. Biometric sensors are simulated (a match or not); the
/// passcode is checked for real against the Secure Enclave's verifier.
public enum AuthenticationEvidence: Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    case faceID(matched: Bool)
    case touchID(matched: Bool)
    case passcode(SecureBytes)
    /// A double-click of the watch's side button.
    case doubleClick

    public var method: AuthenticationMethod {
        switch self {
        case .faceID: return .faceID
        case .touchID: return .touchID
        case .passcode: return .passcode
        case .doubleClick: return .doubleClick
        }
    }

    public var description: String {
        switch self {
        case .faceID(let matched), .touchID(let matched): return "\(method) (\(matched ? "match" : "no match"))"
        case .passcode: return "passcode (redacted)"
        case .doubleClick: return "double-click"
        }
    }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .enum) }
}

/// What the user is asked to authorize: one payment of one type with one card.
public struct AuthorizationRequest: Sendable, Hashable {
    public let transactionType: TransactionType
    public let card: CardIdentifier
    /// The amount, when the device knows it (in-app and web always; contactless when the terminal said).
    public let amount: PaymentAmount?
    /// The Secure Element's challenge for this authorization (``SecureElement/challenge()``).
    public let challenge: AuthorizationChallenge

    public init(
        transactionType: TransactionType, card: CardIdentifier, amount: PaymentAmount?,
        challenge: AuthorizationChallenge
    ) {
        self.transactionType = transactionType
        self.card = card
        self.amount = amount
        self.challenge = challenge
    }
}

/// The result of presenting evidence: a signed authorization, or a refusal with what is offered next.
public enum AuthenticationOutcome: Sendable, Hashable {
    /// The user was verified; the statement goes to the Secure Element.
    case authorized(SignedEnclaveStatement)
    /// The biometric did not match or the passcode was wrong. `offered` lists the methods the user may try
    /// now (empty while a passcode delay runs).
    case rejected(offered: [AuthenticationMethod])
}

/// The result of an unlock attempt.
public enum UnlockOutcome: Sendable, Hashable {
    case unlocked
    case rejected(offered: [AuthenticationMethod])
}

/// Why the Authorization Random is discarded. Each makes the Secure Element terminate every card.
public enum AuthorizationRandomResetReason: String, Sendable, Hashable, CaseIterable, Codable {
    case passcodeDisabled = "passcode-disabled"
    case signOut = "sign-out"
    case erase
    case recoveryRestore = "recovery-restore"
    case watchUnpaired = "watch-unpaired"
}

/// A snapshot of the Secure Enclave for status displays: nothing secret.
public struct SecureEnclaveStatus: Sendable, Hashable, Codable {
    public enum Lock: String, Sendable, Hashable, Codable {
        case locked, unlocked
        /// A watch that is not on a wrist (locked).
        case offWrist = "off-wrist"
    }
    public let profile: DeviceProfile
    public let lock: Lock
    public let hasPasscode: Bool
    /// Whether an Authorization Random exists (a card was provisioned since the last reset).
    public let hasAuthorizationRandom: Bool
    public let biometricsForPayments: Bool
    public let failedBiometricAttempts: Int
    public let failedPasscodeAttempts: Int
    /// The methods offered for a payment now.
    public let paymentMethods: [AuthenticationMethod]
}

/// The Secure Enclave: user authentication, the Authorization Random (AR) and the pairing key with the
/// Secure Element.
///
/// Guarantees:
/// - methods as the device has them: Face ID only with face biometry, Touch ID only with touch, the
///   passcode everywhere, the double-click only on a watch; anything else is
///   ``SecureElementError/Code/methodUnavailable``;
/// - Apple's limits for payments: with biometrics on, the passcode is offered after 2 failed Face ID or 3
///   failed Touch ID matches and is the only method after 5; with biometrics off for payments, only the
///   passcode; wrong passcodes add delays (1 min after 5, 5 min after 6, 15 min after 7 and 8, 1 h after 9);
/// - a watch authorizes only while unlocked on the wrist (passcode at put-on, locked on removal), by a
///   double-click; a locked watch authorizes nothing;
/// - an authorization is a ``SignedEnclaveStatement`` (ECDSA P-256 with the pairing key) naming the method,
///   the transaction type, the card, the amount, the Secure Element's challenge, a fresh nonce and the AR;
/// - the AR is made at the first provisioning, survives restarts, and is discarded (every card then
///   terminated by the Secure Element) when the passcode is removed, on sign-out, erase, recovery restore
///   or watch unpairing;
/// - every state change is persisted (encrypted) before it takes effect, with a growing generation the
///   Secure Element uses to detect a restored older snapshot.
public actor SecureEnclave {
    static let owner = "secure-enclave"
    static let recordKind = "state"
    static let recordID = "enclave"

    /// The lock state: the explicit state machine of the enclave.
    private enum State {
        case locked
        case unlocked
        /// Watches only: not on a wrist (and therefore locked).
        case offWrist
    }

    /// The persisted part; every secret in it is held in `SecureBytes` or an OrchardCrypto key.
    struct Persisted {
        var profile: DeviceProfile
        var uidKey: SymmetricKey
        var pairingKey: P256.Signing.PrivateKey
        var elementPublicKey: P256.KeyAgreement.PublicKey
        var passcodeSalt: [UInt8]?
        var passcodeVerifier: [UInt8]?
        var authorizationRandom: SecureBytes?
        var generation: UInt64
        var biometricFailures: Int
        var passcodeFailures: Int
        var biometricsForPayments: Bool
        /// The relay keys (``SecureEnclave/relayPublicKeys()``), made at their first use.
        var relayEncryptionKey: P256.KeyAgreement.PrivateKey? = nil
        var relaySigningKey: P256.Signing.PrivateKey? = nil
    }

    private var state: State
    var persisted: Persisted
    /// Monotonic time until which a passcode attempt is refused (in memory; recomputed at start-up).
    private var passcodeBlockedUntil: UInt64?
    let storage: any SealedRecordStorage
    let sealer: RecordSealer
    private let clock: any MonotonicClock
    let random: any RandomSource

    /// The device this enclave belongs to.
    public nonisolated let profile: DeviceProfile
    /// The public half of the pairing key: the Secure Element checks authorizations with it.
    public nonisolated let pairingPublicKey: P256.Signing.PublicKey

    /// Face ID failures after which the passcode is offered.
    public static let passcodeOfferedAfterFaceIDFailures = 2
    /// Touch ID failures after which the passcode is offered.
    public static let passcodeOfferedAfterTouchIDFailures = 3
    /// Biometric failures after which only the passcode is accepted.
    public static let biometricFailureLimit = 5

    // MARK: Factory and start-up

    /// The factory step: makes the pairing key and the enclave's own key, records the Secure Element's public
    /// key, and writes the initial state (no passcode, no AR). Returns the pairing public key for the
    /// Secure Element.
    public static func manufacture(
        profile: DeviceProfile, elementPublicKey: P256.KeyAgreement.PublicKey, storage: any SealedRecordStorage,
        storageKey: SymmetricKey, random: any RandomSource
    ) throws(SecureElementError) -> P256.Signing.PublicKey {
        let sealer = try RecordSealer(storageKey: storageKey, owner: owner, random: random)
        guard try storage.loadRecords(kind: recordKind).isEmpty else {
            throw SecureElementError(.illegalTransition, "this Secure Enclave was already manufactured")
        }
        let pairingKey = try freshSigningKey(random)
        let state = Persisted(
            profile: profile, uidKey: SymmetricKey(data: random.bytes(32)), pairingKey: pairingKey,
            elementPublicKey: elementPublicKey, passcodeSalt: nil, passcodeVerifier: nil, authorizationRandom: nil,
            generation: 1, biometricFailures: 0, passcodeFailures: 0,
            biometricsForPayments: profile.biometricMethod != nil)
        try storage.write([
            SealedRecordChange(
                kind: recordKind, id: recordID,
                sealed: try sealer.seal(try encode(state), kind: recordKind, id: recordID))
        ])
        return pairingKey.publicKey
    }

    /// Loads the enclave's state. A watch starts off the wrist, every other device locked.
    public init(
        storage: any SealedRecordStorage, storageKey: SymmetricKey, clock: any MonotonicClock,
        random: any RandomSource
    ) throws(SecureElementError) {
        let sealer = try RecordSealer(storageKey: storageKey, owner: Self.owner, random: random)
        guard let record = try storage.loadRecords(kind: Self.recordKind).first(where: { $0.id == Self.recordID })
        else {
            throw SecureElementError(.notProvisioned, "this device has no Secure Enclave state: run the factory step")
        }
        let persisted = try Self.decode(try sealer.open(record.sealed, kind: Self.recordKind, id: Self.recordID))
        self.persisted = persisted
        self.profile = persisted.profile
        self.pairingPublicKey = persisted.pairingKey.publicKey
        self.storage = storage
        self.sealer = sealer
        self.clock = clock
        self.random = random
        state = persisted.profile.kind == .watch ? .offWrist : .locked
        let delay = Self.passcodeDelay(afterFailures: persisted.passcodeFailures)
        passcodeBlockedUntil = delay > 0 ? clock.nanoseconds() + delay : nil
    }

    // MARK: Status

    public var status: SecureEnclaveStatus {
        SecureEnclaveStatus(
            profile: profile,
            lock: state == .unlocked ? .unlocked : (state == .offWrist ? .offWrist : .locked),
            hasPasscode: persisted.passcodeVerifier != nil,
            hasAuthorizationRandom: persisted.authorizationRandom != nil,
            biometricsForPayments: persisted.biometricsForPayments,
            failedBiometricAttempts: persisted.biometricFailures,
            failedPasscodeAttempts: persisted.passcodeFailures,
            paymentMethods: paymentMethods())
    }

    /// The methods the user may use for a payment now, in the order a payment sheet shows them.
    public func paymentMethods() -> [AuthenticationMethod] {
        guard profile.authorizesPayments, persisted.passcodeVerifier != nil else { return [] }
        if profile.kind == .watch { return state == .unlocked ? [.doubleClick] : [] }
        let passcode: [AuthenticationMethod] = isPasscodeBlocked ? [] : [.passcode]
        guard let biometric = profile.biometricMethod, persisted.biometricsForPayments else { return passcode }
        let failures = persisted.biometricFailures
        if failures >= Self.biometricFailureLimit { return passcode }
        let offerAfter =
            biometric == .faceID ? Self.passcodeOfferedAfterFaceIDFailures : Self.passcodeOfferedAfterTouchIDFailures
        return failures >= offerAfter ? [biometric] + passcode : [biometric]
    }

    // MARK: Payments

    /// Verifies the user for one payment and, on success, signs an authorization for the Secure Element.
    ///
    /// Throws (and changes nothing) when the device cannot authorize this type, lacks the method, does not
    /// offer it now, is a locked watch, has no AR, or is in a passcode delay. A failed match or wrong passcode
    /// is counted, persisted and returned as ``AuthenticationOutcome/rejected(offered:)``.
    public func authorizePayment(
        _ request: AuthorizationRequest, evidence: AuthenticationEvidence
    )
        throws(SecureElementError) -> AuthenticationOutcome
    {
        guard profile.authorizesPayments else {
            throw SecureElementError(
                .unsupportedDevice, "a Mac without Touch ID cannot authorize a payment: hand off to a phone or watch")
        }
        guard profile.transactionTypes.contains(request.transactionType) else {
            throw SecureElementError(
                .unsupportedDevice, "a \(profile.kind) cannot authorize a \(request.transactionType) payment")
        }
        try requireAvailable(evidence.method)
        guard let authorizationRandom = persisted.authorizationRandom else {
            throw SecureElementError(.notProvisioned, "no card was provisioned since the last reset: add a card first")
        }
        if profile.kind == .watch {
            guard state == .unlocked else {
                throw SecureElementError(.deviceLocked, "a locked watch pays nothing: put it on and unlock it")
            }
            guard evidence.method == .doubleClick else {
                throw SecureElementError(
                    .methodNotOffered, "on a watch the passcode unlocks; a double-click authorizes the payment")
            }
        } else {
            if evidence.method == .passcode { try requirePasscodeAttemptAllowed() }
            let offered = paymentMethods()
            guard offered.contains(evidence.method) else {
                let names = offered.map(\.description).joined(separator: ", ")
                throw SecureElementError(
                    .methodNotOffered,
                    "\(evidence.method) is not offered now (offered: \(names.isEmpty ? "none" : names))")
            }
        }
        guard try verify(evidence) else { return .rejected(offered: paymentMethods()) }
        let method: AuthenticationMethod = evidence.method
        let statement = EnclaveStatement(
            kind: .paymentAuthorization, pairingID: pairingID, challenge: request.challenge,
            generation: persisted.generation, authorizationRandomDigest: Self.digest(authorizationRandom),
            method: method, transactionType: request.transactionType, card: request.card, amount: request.amount,
            nonce: random.bytes(16))
        return .authorized(try sign(statement))
    }

    // MARK: Lock, unlock, wrist

    /// Unlocks the device. On a watch only the passcode unlocks, and only on the wrist; on other devices a
    /// biometric match (while fewer than 5 failures) or the passcode.
    public func unlock(_ evidence: AuthenticationEvidence) throws(SecureElementError) -> UnlockOutcome {
        try requireAvailable(evidence.method)
        guard evidence.method != .doubleClick else {
            throw SecureElementError(.methodNotOffered, "a double-click does not unlock a device")
        }
        guard state != .offWrist else { throw SecureElementError(.notOnWrist, "put the watch on first") }
        if state == .unlocked { return .unlocked }
        guard persisted.passcodeVerifier != nil else {
            // Without a passcode nothing protects the lock (and no card can be added).
            state = .unlocked
            return .unlocked
        }
        if evidence.method == .passcode {
            try requirePasscodeAttemptAllowed()
        } else if persisted.biometricFailures >= Self.biometricFailureLimit {
            throw SecureElementError(
                .methodNotOffered, "\(evidence.method) failed \(Self.biometricFailureLimit) times: enter the passcode")
        }
        guard try verify(evidence) else { return .rejected(offered: unlockMethods()) }
        state = .unlocked
        return .unlocked
    }

    private func unlockMethods() -> [AuthenticationMethod] {
        var methods: [AuthenticationMethod] = []
        if let biometric = profile.biometricMethod, persisted.biometricFailures < Self.biometricFailureLimit {
            methods.append(biometric)
        }
        if !isPasscodeBlocked { methods.append(.passcode) }
        return methods
    }

    /// Locks the device (a watch stays on the wrist, locked). Locking a locked device does nothing.
    public func lock() {
        if state == .unlocked { state = .locked }
    }

    /// A watch is put on a wrist: it stays locked until the passcode is entered.
    public func putOnWrist() throws(SecureElementError) {
        guard profile.kind == .watch else { throw SecureElementError(.unsupportedDevice, "only a watch is worn") }
        guard state == .offWrist else {
            throw SecureElementError(.illegalTransition, "the watch is already on a wrist")
        }
        state = .locked
    }

    /// A watch is taken off: it locks at once.
    public func takeOffWrist() throws(SecureElementError) {
        guard profile.kind == .watch else { throw SecureElementError(.unsupportedDevice, "only a watch is worn") }
        guard state != .offWrist else { throw SecureElementError(.illegalTransition, "the watch is not on a wrist") }
        state = .offWrist
    }

    // MARK: Settings

    /// Sets or changes the passcode (4 to 64 characters). Changing it needs the current one, which counts as
    /// a passcode attempt.
    public func setPasscode(_ new: SecureBytes, current: SecureBytes?) throws(SecureElementError) {
        guard (4...64).contains(new.count) else {
            throw SecureElementError(.invalidArgument, "a passcode is 4 to 64 characters")
        }
        if persisted.passcodeVerifier != nil {
            guard let current else { throw SecureElementError(.passcodeIncorrect, "enter the current passcode") }
            try requirePasscodeAttemptAllowed()
            guard try verify(.passcode(current)) else {
                throw SecureElementError(.passcodeIncorrect, "the current passcode is wrong")
            }
        }
        let salt = random.bytes(16)
        let verifier = passcodeVerifier(new, salt: salt)
        try update { state in
            state.passcodeSalt = salt
            state.passcodeVerifier = verifier
        }
    }

    /// Removes the passcode: the AR is discarded with it (Apple Pay needs a passcode), so the Secure Element
    /// terminates every card once told (``status(challenge:)``).
    public func removePasscode(current: SecureBytes) throws(SecureElementError) {
        guard persisted.passcodeVerifier != nil else {
            throw SecureElementError(.passcodeRequired, "no passcode is set")
        }
        try requirePasscodeAttemptAllowed()
        guard try verify(.passcode(current)) else {
            throw SecureElementError(.passcodeIncorrect, "the current passcode is wrong")
        }
        try update { state in
            state.passcodeSalt = nil
            state.passcodeVerifier = nil
            state.authorizationRandom = nil
        }
    }

    /// Turns biometric authentication for payments on or off (off: the passcode only).
    public func setBiometricsForPayments(_ enabled: Bool) throws(SecureElementError) {
        guard !enabled || profile.biometricMethod != nil else {
            throw SecureElementError(.methodUnavailable, "this \(profile.kind) has no biometric sensor")
        }
        try update { $0.biometricsForPayments = enabled }
    }

    // MARK: Authorization Random

    /// For provisioning a card: makes the AR if there is none (the first provisioning), and signs a binding
    /// the Secure Element needs to install the card. Requires a passcode.
    public func provisioningBinding(
        challenge: AuthorizationChallenge
    ) throws(SecureElementError)
        -> SignedEnclaveStatement
    {
        guard profile.authorizesPayments else {
            throw SecureElementError(.unsupportedDevice, "a Mac without Touch ID holds no cards")
        }
        guard persisted.passcodeVerifier != nil else {
            throw SecureElementError(.passcodeRequired, "set a passcode before adding a card")
        }
        if persisted.authorizationRandom == nil {
            let fresh = SecureBytes(randomCount: 32, using: random)
            try update { $0.authorizationRandom = fresh }
        }
        return try sign(
            EnclaveStatement(
                kind: .provisioningBinding, pairingID: pairingID, challenge: challenge,
                generation: persisted.generation,
                authorizationRandomDigest: persisted.authorizationRandom.map(Self.digest), nonce: random.bytes(16)))
    }

    /// Discards the AR. The caller then gives the Secure Element a ``status(challenge:)``, which makes it
    /// terminate every card; until then the Secure Element refuses every authorization (no AR, no payment).
    public func resetAuthorizationRandom(reason: AuthorizationRandomResetReason) throws(SecureElementError) {
        try update { $0.authorizationRandom = nil }
    }

    /// Erases the device's user data: passcode, AR, counters and settings. The keys fused at the factory stay.
    public func erase() throws(SecureElementError) {
        try update { state in
            state.passcodeSalt = nil
            state.passcodeVerifier = nil
            state.authorizationRandom = nil
            state.biometricFailures = 0
            state.passcodeFailures = 0
            state.biometricsForPayments = state.profile.biometricMethod != nil
        }
        passcodeBlockedUntil = nil
        state = profile.kind == .watch ? .offWrist : .locked
    }

    // MARK: Passcode attestation

    /// What a passcode attestation signs before the challenge: `orchard-passcode-attestation-v1` and a zero byte.
    /// No other statement of this key starts with it (Secure Element statements start with `OSEP`).
    public static let passcodeAttestationContext: [UInt8] = Array("orchard-passcode-attestation-v1".utf8) + [0]

    /// Checks `passcode` (counting a failure, with the usual waits after five) and, when it is right, signs
    /// ``passcodeAttestationContext`` ‖ `challenge` with the Secure Enclave's key: proof for a server that holds
    /// that key's public half that the user entered the passcode on this device, for that server's challenge
    /// (leaving lost mode). `challenge` is 16 to 64 bytes.
    /// - Throws: ``SecureElementError/Code/passcodeIncorrect`` for a wrong passcode,
    ///   ``SecureElementError/Code/lockedOut`` while a wait runs, ``SecureElementError/Code/passcodeRequired``
    ///   without a passcode.
    public func attestPasscode(
        _ passcode: SecureBytes, challenge: [UInt8]
    ) throws(SecureElementError) -> P256.Signing.ECDSASignature {
        guard (16...64).contains(challenge.count) else {
            throw SecureElementError(.invalidArgument, "an attestation challenge is 16 to 64 bytes")
        }
        try requirePasscodeAttemptAllowed()
        guard try verify(.passcode(passcode)) else {
            throw SecureElementError(.passcodeIncorrect, "the passcode is not right")
        }
        do {
            return try persisted.pairingKey.signature(for: Self.passcodeAttestationContext + challenge)
        } catch {
            throw SecureElementError(.internalFailure, "signing with the Secure Enclave key failed")
        }
    }

    /// A signed statement of the current AR and generation, answering the Secure Element's challenge.
    public func status(challenge: AuthorizationChallenge) throws(SecureElementError) -> SignedEnclaveStatement {
        try sign(
            EnclaveStatement(
                kind: .status, pairingID: pairingID, challenge: challenge, generation: persisted.generation,
                authorizationRandomDigest: persisted.authorizationRandom.map(Self.digest), nonce: random.bytes(16)))
    }

    // MARK: Verification

    private func requireAvailable(_ method: AuthenticationMethod) throws(SecureElementError) {
        let available: Bool
        switch method {
        case .faceID: available = profile.biometry == .face
        case .touchID: available = profile.biometry == .touch
        case .passcode: available = true
        case .doubleClick: available = profile.kind == .watch
        }
        guard available else {
            throw SecureElementError(
                .methodUnavailable, "a \(profile.kind) with biometry \(profile.biometry) has no \(method)")
        }
    }

    private var isPasscodeBlocked: Bool {
        guard let until = passcodeBlockedUntil else { return false }
        return clock.nanoseconds() < until
    }

    func requirePasscodeAttemptAllowed() throws(SecureElementError) {
        guard persisted.passcodeVerifier != nil else {
            throw SecureElementError(.passcodeRequired, "no passcode is set")
        }
        if let until = passcodeBlockedUntil {
            let now = clock.nanoseconds()
            if now < until {
                let seconds = (until - now + 999_999_999) / 1_000_000_000
                throw SecureElementError(
                    .lockedOut, "too many wrong passcodes: try again in \(seconds) s")
            }
        }
    }

    /// Checks the evidence, counts a failure or resets the counters, and persists the result first.
    func verify(_ evidence: AuthenticationEvidence) throws(SecureElementError) -> Bool {
        switch evidence {
        case .faceID(let matched), .touchID(let matched):
            if matched {
                if persisted.biometricFailures != 0 { try update { $0.biometricFailures = 0 } }
            } else {
                try update { $0.biometricFailures += 1 }
            }
            return matched
        case .passcode(let passcode):
            guard let salt = persisted.passcodeSalt, let expected = persisted.passcodeVerifier else {
                throw SecureElementError(.passcodeRequired, "no passcode is set")
            }
            let matched = constantTimeEquals(passcodeVerifier(passcode, salt: salt), expected)
            if matched {
                if persisted.passcodeFailures != 0 || persisted.biometricFailures != 0 {
                    try update { state in
                        state.passcodeFailures = 0
                        state.biometricFailures = 0
                    }
                }
                passcodeBlockedUntil = nil
            } else {
                try update { $0.passcodeFailures += 1 }
                let delay = Self.passcodeDelay(afterFailures: persisted.passcodeFailures)
                passcodeBlockedUntil = delay > 0 ? clock.nanoseconds() + delay : nil
            }
            return matched
        case .doubleClick:
            return true
        }
    }

    /// The wait after `failures` wrong passcodes, in nanoseconds.
    static func passcodeDelay(afterFailures failures: Int) -> UInt64 {
        let minutes: UInt64
        switch failures {
        case ..<5: minutes = 0
        case 5: minutes = 1
        case 6: minutes = 5
        case 7, 8: minutes = 15
        default: minutes = 60
        }
        return minutes * 60 * 1_000_000_000
    }

    private func passcodeVerifier(_ passcode: SecureBytes, salt: [UInt8]) -> [UInt8] {
        // Entangled with the enclave's own key, so a copy of the store cannot be brute-forced elsewhere.
        passcode.withUnsafeBytes { bytes in
            HMAC<SHA256>.authenticationCode(
                for: Array("orchard-passcode-v1".utf8) + salt + Array(bytes), using: persisted.uidKey)
        }
    }

    // MARK: Signing and persistence

    private var pairingID: [UInt8] { SHA256.hash(persisted.elementPublicKey.x963Representation) }

    static func digest(_ authorizationRandom: SecureBytes) -> [UInt8] {
        authorizationRandom.withUnsafeBytes { SHA256.hash(Array("orchard-ar-v1".utf8) + Array($0)) }
    }

    private func sign(_ statement: EnclaveStatement) throws(SecureElementError) -> SignedEnclaveStatement {
        do {
            return SignedEnclaveStatement(
                statement: statement, signature: try persisted.pairingKey.signature(for: statement.encoded))
        } catch {
            throw SecureElementError(.internalFailure, "signing with the pairing key failed")
        }
    }

    /// Applies `change` to a copy, persists it with the next generation, and only then adopts it.
    func update(_ change: (inout Persisted) -> Void) throws(SecureElementError) {
        var next = persisted
        change(&next)
        next.generation += 1
        let sealed = try sealer.seal(try Self.encode(next), kind: Self.recordKind, id: Self.recordID)
        try storage.write([SealedRecordChange(kind: Self.recordKind, id: Self.recordID, sealed: sealed)])
        persisted = next
    }

    private enum Tag {
        static let version: UInt8 = 0x00
        static let kind: UInt8 = 0x01
        static let biometry: UInt8 = 0x02
        static let account: UInt8 = 0x03
        static let uid: UInt8 = 0x04
        static let pairingKey: UInt8 = 0x05
        static let elementKey: UInt8 = 0x06
        static let passcodeSalt: UInt8 = 0x07
        static let passcodeVerifier: UInt8 = 0x08
        static let authorizationRandom: UInt8 = 0x09
        static let generation: UInt8 = 0x0A
        static let biometricFailures: UInt8 = 0x0B
        static let passcodeFailures: UInt8 = 0x0C
        static let biometricsForPayments: UInt8 = 0x0D
        static let relayEncryptionKey: UInt8 = 0x0E
        static let relaySigningKey: UInt8 = 0x0F
        static let all: Set<UInt8> = Set(0x00...0x0F)
    }

    private static func encode(_ state: Persisted) throws(SecureElementError) -> SecureBytes {
        let pairing: SecureBytes
        do {
            pairing = try state.pairingKey.rawRepresentation
        } catch {
            throw SecureElementError(.internalFailure, "cannot export the pairing key for storage")
        }
        var items: [(tag: UInt8, value: SecureBytes)] = [
            (Tag.version, SecureBytes([1])),
            (Tag.kind, SecretFields.text(state.profile.kind.rawValue)),
            (Tag.biometry, SecretFields.text(state.profile.biometry.rawValue)),
            (Tag.account, SecretFields.text(state.profile.account)),
            (Tag.uid, state.uidKey.bytes),
            (Tag.pairingKey, pairing),
            (Tag.elementKey, SecureBytes(state.elementPublicKey.x963Representation)),
            (Tag.generation, SecretFields.integer(state.generation, 8)),
            (Tag.biometricFailures, SecretFields.integer(UInt64(state.biometricFailures), 2)),
            (Tag.passcodeFailures, SecretFields.integer(UInt64(state.passcodeFailures), 2)),
            (Tag.biometricsForPayments, SecureBytes([state.biometricsForPayments ? 1 : 0])),
        ]
        if let salt = state.passcodeSalt, let verifier = state.passcodeVerifier {
            items.append((Tag.passcodeSalt, SecureBytes(salt)))
            items.append((Tag.passcodeVerifier, SecureBytes(verifier)))
        }
        if let ar = state.authorizationRandom { items.append((Tag.authorizationRandom, ar)) }
        if let encryption = state.relayEncryptionKey, let signing = state.relaySigningKey {
            do {
                items.append((Tag.relayEncryptionKey, try encryption.rawRepresentation))
                items.append((Tag.relaySigningKey, try signing.rawRepresentation))
            } catch {
                throw SecureElementError(.internalFailure, "cannot export the relay keys for storage")
            }
        }
        return try SecretFields.encode(items)
    }

    private static func decode(_ plaintext: SecureBytes) throws(SecureElementError) -> Persisted {
        let fields = try SecretFields.decode(
            plaintext, allowed: Tag.all, code: .corruptState, what: "the enclave state")
        guard try fields.bytes(Tag.version, "version").unsafeCopyOfBytes() == [1] else {
            throw SecureElementError(.corruptState, "the enclave state has an unknown version")
        }
        guard let kind = DeviceKind(rawValue: try fields.text(Tag.kind, "kind")),
            let biometry = Biometry(rawValue: try fields.text(Tag.biometry, "biometry"))
        else { throw SecureElementError(.corruptState, "the enclave state names an unknown device") }
        let profile = try DeviceProfile(
            kind: kind, biometry: biometry, account: try fields.text(Tag.account, "account"))
        let pairingKey: P256.Signing.PrivateKey
        let elementKey: P256.KeyAgreement.PublicKey
        do {
            pairingKey = try P256.Signing.PrivateKey(
                rawRepresentation: try fields.bytes(Tag.pairingKey, "pairing key", count: 32).unsafeCopyOfBytes())
            elementKey = try P256.KeyAgreement.PublicKey(
                x963Representation: try fields.bytes(Tag.elementKey, "element key", count: 65).unsafeCopyOfBytes())
        } catch let error as SecureElementError {
            throw error
        } catch {
            throw SecureElementError(.corruptState, "the enclave state holds an invalid key")
        }
        let salt = try fields.optionalBytes(Tag.passcodeSalt, "passcode salt", count: 16)
        let verifier = try fields.optionalBytes(Tag.passcodeVerifier, "passcode verifier", count: 32)
        guard (salt == nil) == (verifier == nil) else {
            throw SecureElementError(.corruptState, "the enclave state has half a passcode")
        }
        let flag = try fields.bytes(Tag.biometricsForPayments, "biometrics flag", count: 1).unsafeCopyOfBytes()[0]
        let relayEncryption = try fields.optionalBytes(Tag.relayEncryptionKey, "relay encryption key", count: 32)
        let relaySigning = try fields.optionalBytes(Tag.relaySigningKey, "relay signing key", count: 32)
        guard (relayEncryption == nil) == (relaySigning == nil) else {
            throw SecureElementError(.corruptState, "the enclave state has half the relay keys")
        }
        var relayKeys: (P256.KeyAgreement.PrivateKey, P256.Signing.PrivateKey)?
        if let relayEncryption, let relaySigning {
            do {
                relayKeys = (
                    try P256.KeyAgreement.PrivateKey(rawRepresentation: relayEncryption.unsafeCopyOfBytes()),
                    try P256.Signing.PrivateKey(rawRepresentation: relaySigning.unsafeCopyOfBytes())
                )
            } catch {
                throw SecureElementError(.corruptState, "the enclave state holds an invalid relay key")
            }
        }
        return Persisted(
            profile: profile, uidKey: SymmetricKey(try fields.bytes(Tag.uid, "UID key", count: 32)),
            pairingKey: pairingKey, elementPublicKey: elementKey, passcodeSalt: salt?.unsafeCopyOfBytes(),
            passcodeVerifier: verifier?.unsafeCopyOfBytes(),
            authorizationRandom: try fields.optionalBytes(Tag.authorizationRandom, "AR", count: 32),
            generation: try fields.integer(Tag.generation, "generation", count: 8),
            biometricFailures: Int(try fields.integer(Tag.biometricFailures, "biometric failures", count: 2)),
            passcodeFailures: Int(try fields.integer(Tag.passcodeFailures, "passcode failures", count: 2)),
            biometricsForPayments: flag == 1, relayEncryptionKey: relayKeys?.0, relaySigningKey: relayKeys?.1)
    }
}

/// A P-256 signing key from `random` (retrying the rare scalar outside the group order).
func freshSigningKey(_ random: any RandomSource) throws(SecureElementError) -> P256.Signing.PrivateKey {
    for _ in 0..<4 {
        var scalar = random.bytes(32)
        defer { for index in scalar.indices { scalar[index] = 0 } }
        if let key = try? P256.Signing.PrivateKey(rawRepresentation: scalar) { return key }
    }
    throw SecureElementError(.internalFailure, "no valid P-256 scalar drawn")
}

/// A P-256 key-agreement key from `random`.
func freshAgreementKey(_ random: any RandomSource) throws(SecureElementError) -> P256.KeyAgreement.PrivateKey {
    for _ in 0..<4 {
        var scalar = random.bytes(32)
        defer { for index in scalar.indices { scalar[index] = 0 } }
        if let key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: scalar) { return key }
    }
    throw SecureElementError(.internalFailure, "no valid P-256 scalar drawn")
}

extension SealedRecordStorage {
    /// `records(kind:)` with the storage's error mapped to ``SecureElementError/Code/storageFailure``.
    func loadRecords(kind: String) throws(SecureElementError) -> [(id: String, sealed: [UInt8])] {
        do {
            return try records(kind: kind)
        } catch {
            throw SecureElementError(.storageFailure, "reading the device store failed: \(error)")
        }
    }

    /// `apply(_:)` with the storage's error mapped to ``SecureElementError/Code/storageFailure``.
    func write(_ changes: [SealedRecordChange]) throws(SecureElementError) {
        do {
            try apply(changes)
        } catch {
            throw SecureElementError(.storageFailure, "writing the device store failed: \(error)")
        }
    }
}
