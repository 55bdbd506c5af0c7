import CardBasics
public import EMV
import Foundation
public import OrchardCrypto
import PaymentCredential

/// A card as the Secure Element shows it to the wallet: display data only, never the DPAN or a key.
public struct CardDisplayData: Sendable, Hashable, Codable {
    public enum State: String, Sendable, Hashable, Codable {
        case active
        /// Terminated: its keys and DPAN are gone; it must be provisioned again.
        case terminated
    }
    public let card: CardIdentifier
    /// The token service's reference of the token (for lifecycle notifications).
    public let tokenReference: String
    /// `visa`, `masterCard`, ...
    public let network: String
    /// The last four digits of the DPAN.
    public let deviceAccountSuffix: String
    public let state: State
}

/// Where a contactless command came from. Only the NFC controller marks commands from a terminal's field.
public enum CommandSource: Sendable, Hashable {
    /// From a terminal in the NFC field (marked by the NFC controller).
    case nfcField
    /// From the application processor (an app or the operating system): never answered as contactless.
    case applicationProcessor
}

/// The state of the contactless interface, for status displays.
public enum ContactlessStatus: Sendable, Hashable {
    /// No field; nothing authorized.
    case idle(presented: CardIdentifier?)
    /// An authorization for `card` waits for a field.
    case armed(card: CardIdentifier)
    /// In a terminal's field, presenting `presented`; `authorized` while an unused authorization is loaded.
    case inField(presented: CardIdentifier?, authorized: Bool)
}

/// The Secure Element: one EMV card applet per provisioned card (the `EMV` module's ``ContactlessCard``),
/// its key pair for personalisation envelopes, and the public pairing key of its Secure Enclave.
///
/// Guarantees:
/// - it installs an applet only from a ``SealedEnvelope`` addressed to its key with purpose
///   `PersonalisationData.envelopePurpose` and a provisioning binding signed by its Secure Enclave; an altered envelope
///   is refused and changes nothing;
/// - it releases a cryptogram only after a contactless payment authorization signed by its Secure
///   Enclave, for that card, answering a challenge it issued (single use, ``challengeLifetime``), bound to the
///   current Authorization Random, and used within ``authorizationLifetime``; an in-app or web authorization
///   is refused for contactless and a contactless one for in-app or web; a named amount caps the terminal's;
/// - it answers contactless commands only from the NFC field, and only while a field is present;
/// - a changed or reset Authorization Random, or a Secure Enclave state older than one already seen,
///   terminates every card: keys and DPAN are erased and the applet answers nothing;
/// - the ATC is stored before any cryptogram is computed (the `EMV` applet calls the store first);
/// - everything is stored encrypted (AES-256-GCM under the device storage key, ``RecordSealer``); the wallet
///   gets ``CardDisplayData`` only.
public actor SecureElement {
    /// How long a challenge may wait for its statement.
    public static let challengeLifetime: UInt64 = 60 * 1_000_000_000
    /// How long an accepted contactless authorization waits for its transaction.
    public static let authorizationLifetime: UInt64 = 60 * 1_000_000_000
    static let owner = "secure-element"
    static let maximumOutstandingChallenges = 16

    private enum RecordKind {
        static let identity = "identity"
        static let applet = "applet"
        static let atc = "atc"
        static let identityID = "element"
        /// One per install identifier used (its token reference), kept for the Secure Element's life.
        static let install = "install"
    }

    /// A contactless authorization accepted for one transaction.
    private struct Armed {
        let card: CardIdentifier
        let method: AuthenticationMethod
        let amount: PaymentAmount?
        let expiresAt: UInt64
        /// The card consumed it (GET PROCESSING OPTIONS); its amount still caps the rest of the transaction.
        var used = false
    }

    /// The contactless interface: the explicit state machine of the Secure Element.
    private enum Interface {
        case idle(presented: CardIdentifier?)
        case armed(Armed)
        case inField(presented: CardIdentifier?, armed: Armed?)
    }

    private struct Identity {
        let key: P256.KeyAgreement.PrivateKey
        let enclaveKey: P256.Signing.PublicKey
        var boundAuthorizationRandom: [UInt8]?
        var highestGeneration: UInt64
        /// The token service's install-signing key, pinned at manufacture; nil: the SE installs nothing.
        var installAuthority: P256.Signing.PublicKey?
        /// SHA-256 of the device certificate issued for ``key`` at manufacture.
        var certificateDigest: [UInt8]?
    }

    private struct Applet {
        var record: AppletRecord
        /// The EMV card; nil once terminated.
        var card: ContactlessCard?
    }

    private var identity: Identity
    private var applets: [CardIdentifier: Applet] = [:]
    private var interface: Interface = .idle(presented: nil)
    private var challenges: [[UInt8]: UInt64] = [:]
    private let storage: any SealedRecordStorage
    private let sealer: RecordSealer
    private let clock: any MonotonicClock
    private let random: any RandomSource

    /// The public key personalisation envelopes are sealed to (and the device certificate certifies).
    public nonisolated let publicKey: P256.KeyAgreement.PublicKey
    private let pairingID: [UInt8]

    // MARK: Factory and start-up

    /// The factory step for a Secure Element and its Secure Enclave: makes both key pairs, pairs them (each
    /// learns the other's public key) and writes their initial encrypted state. Returns the public keys.
    ///
    /// - Parameters:
    ///   - installAuthority: the token service's install-signing key, pinned for the Secure Element's life: it
    ///     installs only cards this key signed (``install(_:binding:)``). Nil makes a Secure Element that installs
    ///     nothing.
    ///   - certify: issues the device certificate for the Secure Element's new key and returns its DER; the
    ///     Secure Element keeps its SHA-256, so an install bound to another certificate is refused.
    public static func manufacture(
        profile: DeviceProfile, elementStorage: any SealedRecordStorage, enclaveStorage: any SealedRecordStorage,
        storageKey: SymmetricKey, random: any RandomSource, installAuthority: P256.Signing.PublicKey?,
        certify: (P256.KeyAgreement.PublicKey) throws -> [UInt8]
    ) throws(SecureElementError) -> (element: P256.KeyAgreement.PublicKey, enclave: P256.Signing.PublicKey) {
        let sealer = try RecordSealer(storageKey: storageKey, owner: owner, random: random)
        guard try elementStorage.loadRecords(kind: RecordKind.identity).isEmpty else {
            throw SecureElementError(.illegalTransition, "this Secure Element was already manufactured")
        }
        let key = try freshAgreementKey(random)
        let certificate: [UInt8]
        do {
            certificate = try certify(key.publicKey)
        } catch {
            throw SecureElementError(.internalFailure, "the device certificate could not be issued: \(error)")
        }
        let enclaveKey = try SecureEnclave.manufacture(
            profile: profile, elementPublicKey: key.publicKey, storage: enclaveStorage, storageKey: storageKey,
            random: random)
        let identity = Identity(
            key: key, enclaveKey: enclaveKey, boundAuthorizationRandom: nil, highestGeneration: 0,
            installAuthority: installAuthority, certificateDigest: SHA256.hash(certificate))
        try elementStorage.write([try identityChange(identity, sealer)])
        return (key.publicKey, enclaveKey)
    }

    /// Loads the Secure Element: its identity, applets and counters.
    public init(
        storage: any SealedRecordStorage, storageKey: SymmetricKey, clock: any MonotonicClock,
        random: any RandomSource
    ) throws(SecureElementError) {
        let sealer = try RecordSealer(storageKey: storageKey, owner: Self.owner, random: random)
        guard
            let record = try storage.loadRecords(kind: RecordKind.identity).first(where: {
                $0.id == RecordKind.identityID
            })
        else {
            throw SecureElementError(.notProvisioned, "this device has no Secure Element state: run the factory step")
        }
        identity = try Self.decodeIdentity(
            try sealer.open(record.sealed, kind: RecordKind.identity, id: RecordKind.identityID))
        publicKey = identity.key.publicKey
        pairingID = SHA256.hash(identity.key.publicKey.x963Representation)
        self.storage = storage
        self.sealer = sealer
        self.clock = clock
        self.random = random
        var counters: [String: UInt16] = [:]
        for item in try storage.loadRecords(kind: RecordKind.atc) {
            let value = try sealer.open(item.sealed, kind: RecordKind.atc, id: item.id).unsafeCopyOfBytes()
            guard value.count == 2 else { throw SecureElementError(.corruptState, "an ATC record is 2 bytes") }
            counters[item.id] = UInt16(value[0]) << 8 | UInt16(value[1])
        }
        for item in try storage.loadRecords(kind: RecordKind.applet) {
            let record = try AppletRecord(
                decoding: try sealer.open(item.sealed, kind: RecordKind.applet, id: item.id), id: item.id)
            let card =
                record.state == .active
                ? try Self.makeCard(record, lastATC: counters[item.id] ?? 0, storage: storage, sealer: sealer) : nil
            applets[record.card] = Applet(record: record, card: card)
        }
    }

    // MARK: Wallet view

    /// Every card's display data, ordered by identifier.
    public func cards() -> [CardDisplayData] { applets.values.map(\.record.display).sorted { $0.card < $1.card } }

    /// One card's display data.
    public func card(_ id: CardIdentifier) throws(SecureElementError) -> CardDisplayData {
        try applet(id).record.display
    }

    /// The last ATC a card used (0 before its first transaction); not secret.
    public func lastATC(_ id: CardIdentifier) throws(SecureElementError) -> UInt16 {
        guard let store = try applet(id).card?.applications.first?.atcStore else {
            throw SecureElementError(.cardTerminated, "card \(id) is terminated")
        }
        do {
            return try store.currentATC()
        } catch {
            throw SecureElementError(.storageFailure, "cannot read the ATC of card \(id)")
        }
    }

    // MARK: Challenges and Secure Enclave statements

    /// A fresh challenge for the next Secure Enclave statement (authorization, provisioning binding, status).
    public func challenge() -> AuthorizationChallenge {
        let now = clock.nanoseconds()
        challenges = challenges.filter { now &- $0.value <= Self.challengeLifetime }
        if challenges.count >= Self.maximumOutstandingChallenges,
            let oldest = challenges.min(by: { $0.value < $1.value })
        {
            challenges[oldest.key] = nil
        }
        let challenge = AuthorizationChallenge(fresh: random)
        challenges[challenge.bytes] = now
        return challenge
    }

    /// Checks a statement's signature, addressee, kind and challenge (consuming it) and its generation.
    /// Returns the statement and the identity to persist with the caller's changes.
    private func accept(
        _ signed: SignedEnclaveStatement, kind: EnclaveStatement.Kind
    ) throws(SecureElementError)
        -> (EnclaveStatement, Identity)
    {
        let statement = signed.statement
        guard identity.enclaveKey.isValidSignature(signed.signature, for: statement.encoded) else {
            throw SecureElementError(.invalidAuthorization, "the statement is not signed by the paired Secure Enclave")
        }
        guard constantTimeEquals(statement.pairingID, pairingID) else {
            throw SecureElementError(.invalidAuthorization, "the statement is for another Secure Element")
        }
        guard statement.kind == kind else {
            throw SecureElementError(.invalidAuthorization, "expected a \(kind) statement, got a \(statement.kind)")
        }
        guard let issuedAt = challenges.removeValue(forKey: statement.challenge.bytes) else {
            throw SecureElementError(
                .authorizationReplayed, "the statement answers no outstanding challenge (already used or never issued)")
        }
        guard clock.nanoseconds() &- issuedAt <= Self.challengeLifetime else {
            throw SecureElementError(.authorizationExpired, "the statement's challenge has expired")
        }
        var next = identity
        if statement.generation < identity.highestGeneration {
            throw SecureElementError(
                .rollbackDetected,
                "the statement reflects a Secure Enclave state older than one already seen (superseded, or a restored"
                    + " snapshot)")
        }
        next.highestGeneration = statement.generation
        return (statement, next)
    }

    /// Applies a Secure Enclave status (at start-up and after an AR reset): a reset or changed Authorization
    /// Random terminates every card; a generation older than one already seen means the Secure Enclave's
    /// storage was rolled back: every card is terminated and the status refused. Returns the cards terminated.
    @discardableResult
    public func synchronize(_ signed: SignedEnclaveStatement) throws(SecureElementError) -> [CardIdentifier] {
        let statement = signed.statement
        do {
            var (_, next) = try accept(signed, kind: .status)
            let changed = statement.authorizationRandomDigest != identity.boundAuthorizationRandom
            next.boundAuthorizationRandom = statement.authorizationRandomDigest
            return try commit(identity: next, terminatingAll: changed || statement.authorizationRandomDigest == nil)
        } catch let error where error.code == .rollbackDetected {
            _ = try commit(identity: identity, terminatingAll: true)
            throw error
        }
    }

    // MARK: Provisioning

    /// Installs a card applet from a ``PaymentCredential/SignedPersonalisation``: signed by the token service key
    /// pinned at manufacture, bound to this Secure Element's certificate and an install identifier not used
    /// before, its envelope sealed to this Secure Element's key; under the Authorization Random named by
    /// `binding` (a provisioning binding from the Secure Enclave). A new AR terminates the cards bound to the
    /// previous one. The same install again (a retry) returns the card it installed while that card is active;
    /// anything else refused changes nothing.
    public func install(
        _ signedInstall: [UInt8], binding: SignedEnclaveStatement
    ) throws(SecureElementError)
        -> CardDisplayData
    {
        let install = try verifiedInstall(signedInstall)
        let installRecordID = Hex.encode(install.installID, lowercase: true)
        let usedBefore = try !storage.loadRecords(kind: RecordKind.install).filter { $0.id == installRecordID }
            .isEmpty
        var (statement, nextIdentity) = try accept(binding, kind: .provisioningBinding)
        guard let arDigest = statement.authorizationRandomDigest else {
            throw SecureElementError(.invalidAuthorization, "a provisioning binding names the Authorization Random")
        }
        let plaintext: SecureBytes
        do {
            plaintext = try SealedEnvelope.open(
                install.envelope, with: identity.key, purpose: PersonalisationData.envelopePurpose)
        } catch {
            throw SecureElementError(
                .invalidEnvelope, "the personalisation envelope is not addressed to this Secure Element or was altered")
        }
        let data: PersonalisationData
        do {
            data = try PersonalisationData(decoding: plaintext)
        } catch {
            throw SecureElementError(.invalidEnvelope, "the personalisation data: \(error.message)")
        }
        guard let scheme = Self.scheme(data.network) else {
            throw SecureElementError(.unsupportedNetwork, "no contactless applet for network \(data.network)")
        }
        let arChanged = identity.boundAuthorizationRandom != nil && identity.boundAuthorizationRandom != arDigest
        if !arChanged,
            let existing = applets.values.first(where: {
                $0.record.state == .active && $0.record.tokenReference == data.tokenReference
            })
        {
            _ = try commit(identity: nextIdentity, terminatingAll: false)
            return existing.record.display
        }
        // One install, one card: a used identifier whose card is gone (removed, terminated) is a replay.
        guard !usedBefore else {
            throw SecureElementError(.untrustedInstall, "this install was used before; provision the card again")
        }
        nextIdentity.boundAuthorizationRandom = arDigest
        let record = AppletRecord(
            card: CardIdentifier(random: random), tokenReference: data.tokenReference, dpan: data.dpan,
            dpanSuffix: data.dpanSuffix, panSequenceNumber: data.panSequenceNumber, expiry: data.expiry,
            network: data.network, proximityMasterKey: data.proximityMasterKey, remoteMasterKey: data.remoteMasterKey,
            authorizationRandomDigest: arDigest, state: .active)
        do throws(EMVError) {
            _ = try CardApplicationProfile(
                scheme: scheme, pan: record.dpanString ?? "", expiry: data.expiry,
                panSequenceNumber: Int(data.panSequenceNumber), masterKey: data.proximityMasterKey)
        } catch {
            throw SecureElementError(.invalidEnvelope, "the personalisation data is not a valid card: \(error.message)")
        }
        let appletChanges = [
            SealedRecordChange(
                kind: RecordKind.applet, id: record.card.hex,
                sealed: try sealer.seal(try record.encoded(), kind: RecordKind.applet, id: record.card.hex)),
            SealedRecordChange(
                kind: RecordKind.atc, id: record.card.hex,
                sealed: try sealer.seal(SecureBytes([0, 0]), kind: RecordKind.atc, id: record.card.hex)),
            // Kept for the Secure Element's life: the identifier is spent.
            SealedRecordChange(
                kind: RecordKind.install, id: installRecordID,
                sealed: try sealer.seal(
                    SecureBytes(Array(data.tokenReference.utf8)), kind: RecordKind.install, id: installRecordID)),
        ]
        _ = try commit(identity: nextIdentity, terminatingAll: arChanged, extra: appletChanges)
        applets[record.card] = Applet(
            record: record, card: try Self.makeCard(record, lastATC: 0, storage: storage, sealer: sealer))
        return record.display
    }

    /// The install, if the key pinned at manufacture signed it for this Secure Element's certificate.
    private func verifiedInstall(_ bytes: [UInt8]) throws(SecureElementError) -> SignedPersonalisation {
        let install: SignedPersonalisation
        do {
            install = try SignedPersonalisation(serialized: bytes)
        } catch {
            throw SecureElementError(.invalidEnvelope, "not a signed card install: \(error.message)")
        }
        guard let authority = identity.installAuthority, let certificateDigest = identity.certificateDigest else {
            throw SecureElementError(
                .untrustedInstall,
                "this Secure Element pins no token service key: it was made before the deployment's token service "
                    + "(run `orchard init` first, then create the device again)")
        }
        guard install.isSigned(by: authority) else {
            throw SecureElementError(.untrustedInstall, "the install is not signed by the token service")
        }
        guard constantTimeEquals(install.certificateDigest, certificateDigest) else {
            throw SecureElementError(.untrustedInstall, "the install is for another Secure Element's certificate")
        }
        return install
    }

    /// Deletes a card's applet, keys and counter (the user removed it from the wallet).
    public func remove(_ id: CardIdentifier) throws(SecureElementError) {
        _ = try applet(id)
        try storage.write([
            SealedRecordChange(kind: RecordKind.applet, id: id.hex, sealed: nil),
            SealedRecordChange(kind: RecordKind.atc, id: id.hex, sealed: nil),
        ])
        applets[id] = nil
        dropFromInterface(id)
    }

    /// Terminates one card (the issuer or token service deleted its token): keys and DPAN are erased.
    public func terminate(_ id: CardIdentifier) throws(SecureElementError) {
        guard var applet = applets[id] else { throw SecureElementError(.cardNotFound, "no card \(id)") }
        guard applet.record.state == .active else { return }
        applet.record = applet.record.terminated
        try storage.write([try appletChange(applet.record)])
        applet.card = nil
        applets[id] = applet
        dropFromInterface(id)
    }

    // MARK: Contactless

    /// Shows `id` to the next terminal (the wallet's choice, the default or an automatic selection). The card
    /// answers SELECT, but releases nothing before an authorization. A different card drops an authorization
    /// made for the previous one.
    public func present(_ id: CardIdentifier) throws(SecureElementError) {
        guard try applet(id).card != nil else { throw SecureElementError(.cardTerminated, "card \(id) is terminated") }
        switch interface {
        case .idle:
            interface = .idle(presented: id)
        case .armed(let armed):
            interface = armed.card == id ? .armed(armed) : .idle(presented: id)
        case .inField(let presented, let armed):
            if presented != id, let presented { applets[presented]?.card?.reset() }
            interface = .inField(presented: id, armed: armed?.card == id ? armed : nil)
        }
    }

    /// Accepts a contactless payment authorization from the Secure Enclave and arms its card. Refused: any
    /// other transaction type, a card not installed or terminated, an AR that is not the card's (the AR
    /// changed: every card is terminated), a replayed, foreign or expired statement.
    public func authorizeContactless(_ signed: SignedEnclaveStatement) throws(SecureElementError) {
        let armed = try checkPayment(signed, for: [.contactless])
        switch interface {
        case .idle, .armed:
            interface = .armed(armed)
        case .inField(let presented, _):
            if let presented, presented != armed.card { applets[presented]?.card?.reset() }
            applets[armed.card]?.card?.authorize(
                CardholderAuthorization(verifiedBy: Self.cdcvmMethod(armed.method)))
            interface = .inField(presented: armed.card, armed: armed)
        }
    }

    /// Checks an in-app or web payment authorization for `card` and `amount` and consumes it. Refused: a
    /// contactless authorization, another card or amount, and everything ``authorizeContactless(_:)``
    /// refuses. The payment credential itself is computed by the in-app flow.
    public func authorizeRemote(
        _ signed: SignedEnclaveStatement, card: CardIdentifier, amount: PaymentAmount
    )
        throws(SecureElementError) -> TransactionType
    {
        let armed = try checkPayment(signed, for: [.inApp, .web])
        guard armed.card == card else { throw SecureElementError(.wrongCard, "the authorization names another card") }
        guard armed.amount == amount else {
            throw SecureElementError(.wrongCard, "the authorization names another amount or currency")
        }
        return signed.statement.transactionType ?? .inApp
    }

    /// The state of the contactless interface.
    public var contactlessStatus: ContactlessStatus {
        switch interface {
        case .idle(let presented): return .idle(presented: presented)
        case .armed(let armed): return .armed(card: armed.card)
        case .inField(let presented, let armed):
            let loaded = presented.flatMap { applets[$0]?.card?.pendingAuthorization } != nil
            return .inField(presented: presented, authorized: armed.map { !$0.used } == true && loaded)
        }
    }

    /// A terminal's field appeared (the NFC controller detected it).
    public func fieldOn() throws(SecureElementError) {
        switch interface {
        case .idle(let presented):
            interface = .inField(presented: presented, armed: nil)
        case .armed(let armed):
            guard clock.nanoseconds() < armed.expiresAt else {
                interface = .inField(presented: armed.card, armed: nil)
                return
            }
            applets[armed.card]?.card?.authorize(CardholderAuthorization(verifiedBy: Self.cdcvmMethod(armed.method)))
            interface = .inField(presented: armed.card, armed: armed)
        case .inField:
            throw SecureElementError(.illegalTransition, "the field is already on")
        }
    }

    /// The field went away: the card forgets the transaction. An authorization not yet used stays armed
    /// until it expires.
    public func fieldOff() throws(SecureElementError) {
        guard case .inField(let presented, let armed) = interface else {
            throw SecureElementError(.illegalTransition, "there is no field to leave")
        }
        let unused = presented.flatMap { applets[$0]?.card?.pendingAuthorization } != nil
        if let presented { applets[presented]?.card?.reset() }
        if let armed, !armed.used, unused, clock.nanoseconds() < armed.expiresAt {
            interface = .armed(armed)
        } else {
            interface = .idle(presented: presented)
        }
    }

    /// Answers one command APDU from a terminal. Throws when the command did not come from the NFC field or
    /// no field is present; otherwise every answer is APDU bytes (data ‖ SW1 SW2), `6985` when nothing may be
    /// released.
    public func transceive(_ command: [UInt8], from source: CommandSource) throws(SecureElementError) -> [UInt8] {
        guard source == .nfcField else {
            throw SecureElementError(.notFromField, "a contactless command must come from the NFC field")
        }
        guard case .inField(let presented, var armed) = interface else {
            throw SecureElementError(.fieldNotActive, "no NFC field is present")
        }
        guard let presented, var card = applets[presented]?.card else {
            return StatusWord.fileNotFound.bytes
        }
        if let current = armed, !current.used, clock.nanoseconds() >= current.expiresAt {
            card.revokeAuthorization()
            armed = nil
        }
        if let amount = armed?.amount, !Self.amountFits(command, amount) {
            return StatusWord.conditionsNotSatisfied.bytes
        }
        let response = card.process(bytes: command)
        if card.pendingAuthorization == nil { armed?.used = true }  // consumed: single use
        applets[presented]?.card = card
        interface = .inField(presented: presented, armed: armed)
        return response
    }

    // MARK: Checks

    private func checkPayment(
        _ signed: SignedEnclaveStatement, for types: Set<TransactionType>
    )
        throws(SecureElementError) -> Armed
    {
        let (statement, next) = try accept(signed, kind: .paymentAuthorization)
        guard let type = statement.transactionType, let method = statement.method, let card = statement.card,
            let arDigest = statement.authorizationRandomDigest
        else { throw SecureElementError(.invalidAuthorization, "a payment authorization is incomplete") }
        if arDigest != identity.boundAuthorizationRandom {
            // The Secure Enclave has another AR than the cards were provisioned under.
            _ = try commit(identity: next, terminatingAll: true)
            throw SecureElementError(
                .cardTerminated, "the Authorization Random changed: every card was terminated; add them again")
        }
        try persist(identity: next)
        guard types.contains(type) else {
            throw SecureElementError(
                .wrongTransactionType,
                "an authorization for \(type) is not valid for "
                    + types.map(\.description).sorted().joined(separator: " or "))
        }
        guard let applet = applets[card] else { throw SecureElementError(.cardNotFound, "no card \(card)") }
        guard applet.card != nil, applet.record.authorizationRandomDigest == arDigest else {
            throw SecureElementError(.cardTerminated, "card \(card) is terminated")
        }
        return Armed(
            card: card, method: method, amount: statement.amount,
            expiresAt: clock.nanoseconds() + Self.authorizationLifetime)
    }

    /// Whether the amount and currency a GET PROCESSING OPTIONS (Visa) or GENERATE AC (Mastercard) carries
    /// fit the authorized amount. Other commands carry none and fit.
    private static func amountFits(_ bytes: [UInt8], _ authorized: PaymentAmount) -> Bool {
        guard let command = try? CommandAPDU(bytes: bytes), command.cla == 0x80 else { return true }
        let values: [TLV]
        switch command.ins {
        case 0xA8:
            guard let template = try? TLV.decodeSingle(command.data), template.tag == .commandTemplate,
                let split = try? ContactlessCard.visaPDOL.split(template.value)
            else { return true }  // the card refuses it itself
            values = split
        case 0xAE:
            guard let split = try? ContactlessCard.mastercardCDOL1.split(command.data) else { return true }
            values = split
        default:
            return true
        }
        guard let amount = values.value(.amountAuthorised).flatMap({ EMVNumeric.value(ofNumeric: $0) }),
            let currency = values.value(.transactionCurrencyCode).flatMap({ EMVNumeric.value(ofNumeric: $0) })
        else { return false }
        return currency == UInt64(authorized.currency) && amount <= UInt64(authorized.minorUnits)
    }

    // MARK: State changes

    private func applet(_ id: CardIdentifier) throws(SecureElementError) -> Applet {
        guard let applet = applets[id] else { throw SecureElementError(.cardNotFound, "no card \(id)") }
        return applet
    }

    private func dropFromInterface(_ id: CardIdentifier) {
        switch interface {
        case .idle(let presented):
            if presented == id { interface = .idle(presented: nil) }
        case .armed(let armed):
            if armed.card == id { interface = .idle(presented: nil) }
        case .inField(let presented, _):
            if presented == id { interface = .inField(presented: nil, armed: nil) }
        }
    }

    private func persist(identity next: Identity) throws(SecureElementError) {
        guard
            next.highestGeneration != identity.highestGeneration
                || next.boundAuthorizationRandom != identity.boundAuthorizationRandom
        else { return }
        try storage.write([try Self.identityChange(next, sealer)])
        identity = next
    }

    /// Stores the identity, optionally every active card terminated, and `extra` changes in one transaction,
    /// then adopts them. Returns the cards terminated.
    private func commit(
        identity next: Identity, terminatingAll: Bool, extra: [SealedRecordChange] = []
    )
        throws(SecureElementError) -> [CardIdentifier]
    {
        var changes = [try Self.identityChange(next, sealer)]
        var terminated: [CardIdentifier: AppletRecord] = [:]
        if terminatingAll {
            for (id, applet) in applets where applet.record.state == .active {
                let record = applet.record.terminated
                terminated[id] = record
                changes.append(try appletChange(record))
            }
        }
        try storage.write(changes + extra)
        identity = next
        for (id, record) in terminated {
            applets[id] = Applet(record: record, card: nil)
            dropFromInterface(id)
        }
        return terminated.keys.sorted()
    }

    private func appletChange(_ record: AppletRecord) throws(SecureElementError) -> SealedRecordChange {
        SealedRecordChange(
            kind: RecordKind.applet, id: record.card.hex,
            sealed: try sealer.seal(try record.encoded(), kind: RecordKind.applet, id: record.card.hex))
    }

    private static func makeCard(
        _ record: AppletRecord, lastATC: UInt16, storage: any SealedRecordStorage, sealer: RecordSealer
    ) throws(SecureElementError) -> ContactlessCard {
        guard let scheme = scheme(record.network), let key = record.proximityMasterKey, let pan = record.dpanString
        else { throw SecureElementError(.corruptState, "card \(record.card) has no usable applet data") }
        do {
            let profile = try CardApplicationProfile(
                scheme: scheme, pan: pan, expiry: record.expiry, panSequenceNumber: Int(record.panSequenceNumber),
                masterKey: key)
            let store = SealedATCStore(
                card: record.card, lastUsed: lastATC, storage: storage, sealer: sealer, kind: RecordKind.atc)
            return try ContactlessCard(applications: [CardApplication(profile: profile, atcStore: store)])
        } catch {
            throw SecureElementError(.corruptState, "card \(record.card) has invalid applet data")
        }
    }

    /// The EMV scheme of the network named `network` (its Apple Pay JS or PassKit name, any case), or nil
    /// when the network has no contactless applet.
    static func scheme(_ network: String) -> PaymentScheme? {
        CardNetwork(named: network)?.paymentSchemeName.flatMap(PaymentScheme.init(name:))
    }

    static func cdcvmMethod(_ method: AuthenticationMethod) -> CDCVMMethod {
        switch method {
        case .faceID: return .face
        case .touchID: return .fingerprint
        case .passcode: return .passcode
        case .doubleClick: return .wristDetection
        }
    }

    // MARK: Identity record

    private enum IdentityTag {
        static let version: UInt8 = 0x00
        static let key: UInt8 = 0x01
        static let enclaveKey: UInt8 = 0x02
        static let authorizationRandom: UInt8 = 0x03
        static let generation: UInt8 = 0x04
        static let installAuthority: UInt8 = 0x05
        static let certificateDigest: UInt8 = 0x06
        static let all: Set<UInt8> = [
            version, key, enclaveKey, authorizationRandom, generation, installAuthority, certificateDigest,
        ]
    }

    private static func identityChange(
        _ identity: Identity, _ sealer: RecordSealer
    ) throws(SecureElementError)
        -> SealedRecordChange
    {
        let key: SecureBytes
        do {
            key = try identity.key.rawRepresentation
        } catch {
            throw SecureElementError(.internalFailure, "cannot export the Secure Element key for storage")
        }
        var items: [(tag: UInt8, value: SecureBytes)] = [
            (IdentityTag.version, SecureBytes([1])), (IdentityTag.key, key),
            (IdentityTag.enclaveKey, SecureBytes(identity.enclaveKey.x963Representation)),
            (IdentityTag.generation, SecretFields.integer(identity.highestGeneration, 8)),
        ]
        if let ar = identity.boundAuthorizationRandom {
            items.append((IdentityTag.authorizationRandom, SecureBytes(ar)))
        }
        if let authority = identity.installAuthority {
            items.append((IdentityTag.installAuthority, SecureBytes(authority.x963Representation)))
        }
        if let digest = identity.certificateDigest {
            items.append((IdentityTag.certificateDigest, SecureBytes(digest)))
        }
        return SealedRecordChange(
            kind: RecordKind.identity, id: RecordKind.identityID,
            sealed: try sealer.seal(
                try SecretFields.encode(items), kind: RecordKind.identity, id: RecordKind.identityID))
    }

    private static func decodeIdentity(_ plaintext: SecureBytes) throws(SecureElementError) -> Identity {
        let what = "the Secure Element identity"
        let fields = try SecretFields.decode(plaintext, allowed: IdentityTag.all, code: .corruptState, what: what)
        guard try fields.bytes(IdentityTag.version, "version").unsafeCopyOfBytes() == [1] else {
            throw SecureElementError(.corruptState, "\(what) has an unknown version")
        }
        do {
            return Identity(
                key: try P256.KeyAgreement.PrivateKey(
                    rawRepresentation: try fields.bytes(IdentityTag.key, "key", count: 32).unsafeCopyOfBytes()),
                enclaveKey: try P256.Signing.PublicKey(
                    x963Representation: try fields.bytes(IdentityTag.enclaveKey, "enclave key", count: 65)
                        .unsafeCopyOfBytes()),
                boundAuthorizationRandom: try fields.optionalBytes(IdentityTag.authorizationRandom, "AR", count: 32)?
                    .unsafeCopyOfBytes(),
                highestGeneration: try fields.integer(IdentityTag.generation, "generation", count: 8),
                installAuthority: try fields.optionalBytes(IdentityTag.installAuthority, "install authority", count: 65)
                    .map { try P256.Signing.PublicKey(x963Representation: $0.unsafeCopyOfBytes()) },
                certificateDigest: try fields.optionalBytes(IdentityTag.certificateDigest, "certificate", count: 32)?
                    .unsafeCopyOfBytes())
        } catch let error as SecureElementError {
            throw error
        } catch {
            throw SecureElementError(.corruptState, "\(what) holds an invalid key")
        }
    }
}

extension AuthorizationChallenge {
    /// A challenge of random bytes (the length is right by construction).
    init(fresh random: any RandomSource) { bytes = random.bytes(Self.byteCount) }
}

/// The ATC store of one applet: every increment is sealed and written durably before the new value is
/// returned to the card, which computes nothing before that.
final class SealedATCStore: ATCStore, @unchecked Sendable {
    // @unchecked: `last` is guarded by `lock`; the other fields are immutable.
    private let lock = NSLock()
    private var last: UInt16
    private let card: CardIdentifier
    private let storage: any SealedRecordStorage
    private let sealer: RecordSealer
    private let kind: String

    init(card: CardIdentifier, lastUsed: UInt16, storage: any SealedRecordStorage, sealer: RecordSealer, kind: String) {
        self.card = card
        self.last = lastUsed
        self.storage = storage
        self.sealer = sealer
        self.kind = kind
    }

    func currentATC() throws(EMVError) -> UInt16 { lock.withLock { last } }

    func incrementATC() throws(EMVError) -> UInt16? {
        lock.lock()
        defer { lock.unlock() }
        guard last < 0xFFFF else { return nil }
        let next = last + 1
        do throws(SecureElementError) {
            let sealed = try sealer.seal(SecureBytes([UInt8(next >> 8), UInt8(next & 0xFF)]), kind: kind, id: card.hex)
            try storage.write([SealedRecordChange(kind: kind, id: card.hex, sealed: sealed)])
        } catch {
            throw EMVError(.storeFailure, "the ATC could not be stored: \(error.message)")
        }
        last = next
        return next
    }
}

/// The NFC controller's route from a terminal's field to the Secure Element, as an `EMV` ``CardTransport``:
/// every command is marked as coming from the field. A refusal of the Secure Element itself (no field)
/// becomes a transport failure for the reader.
public struct SecureElementFieldLink: CardTransport {
    public let secureElement: SecureElement

    public init(_ secureElement: SecureElement) { self.secureElement = secureElement }

    public func transmit(_ command: CommandAPDU) async throws -> ResponseAPDU {
        let response = try await secureElement.transceive(try command.encoded(), from: .nfcField)
        return try ResponseAPDU(bytes: response)
    }
}

// MARK: - Remote payment credentials (used by RemoteCredential.swift)

/// What the remote credential needs from an active card: its DPAN, expiry (YYMM), network and remote master
/// key, its one ATC store (shared with contactless), and the Secure Element's key as an ECDSA signing key.
struct RemoteCardMaterial: Sendable {
    let dpan: SecureBytes
    let expiry: String
    let network: String
    let remoteMasterKey: SymmetricKey
    let atcStore: any ATCStore
    let signingKey: P256.Signing.PrivateKey
    let random: any RandomSource
}

extension SecureElement {
    /// The material of active card `id` for a remote credential.
    func remoteCardMaterial(_ id: CardIdentifier) throws(SecureElementError) -> RemoteCardMaterial {
        let applet = try applet(id)
        guard let card = applet.card, let store = card.applications.first?.atcStore, let dpan = applet.record.dpan,
            let key = applet.record.remoteMasterKey
        else { throw SecureElementError(.cardTerminated, "card \(id) is terminated") }
        let signingKey: P256.Signing.PrivateKey
        do {
            let raw = try identity.key.rawRepresentation
            signingKey = try raw.withUnsafeBytes { (bytes) throws(CryptoError) in
                try P256.Signing.PrivateKey(rawRepresentation: bytes)
            }
        } catch {
            throw SecureElementError(.internalFailure, "the Secure Element key cannot sign")
        }
        return RemoteCardMaterial(
            dpan: dpan, expiry: applet.record.expiry, network: applet.record.network, remoteMasterKey: key,
            atcStore: store, signingKey: signingKey, random: random)
    }
}
