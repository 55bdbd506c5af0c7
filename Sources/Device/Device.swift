public import CardBasics
public import Foundation
public import OrchardCrypto
public import OrchardRuntime
import OrchardStore
public import OrchardX509
public import SecureElement
public import Wallet

/// The clocks a device needs: wall time for the wallet's dates, monotonic time for the Secure Element's and
/// Secure Enclave's timeouts and delays.
public typealias DeviceClock = WallClock & MonotonicClock

/// The display data the provisioning flow gives the wallet for a new card (from the issuer's decision).
public struct CardDisplayInput: Sendable, Hashable {
    public let type: CardType
    /// The last four digits of the card number.
    public let suffix: String
    public let displayName: String

    public init(type: CardType, suffix: String, displayName: String) {
        self.type = type
        self.suffix = suffix
        self.displayName = displayName
    }
}

/// What a device shows about itself: nothing secret.
public struct DeviceStatus: Sendable, Hashable, Codable {
    public let name: String
    public let profile: DeviceProfile
    public let enclave: SecureEnclaveStatus
    public let cards: [WalletCard]
    public let defaultCard: String?
    /// `idle`, `armed` or `in-field`.
    public let contactless: String
    /// Whether the account owner put the device in lost mode (as the Pay server last said, ``Device/isInLostMode``).
    public let lostMode: Bool
}

/// One user device of a deployment: its Secure Enclave, Secure Element and wallet, wired to
/// `DIR/device-<name>.sqlite` and the per-device storage key `DIR/devices/<name>/storage.key` (0600), which
/// stands in for the hardware key that encrypts the Secure Element's store.
///
/// The methods here are the device's user-level operations (add a card, authenticate, tap, reset); each
/// passes the components' own refusals (`SecureElementError`, `WalletError`) through unchanged.
public final class Device: Sendable {
    public let name: String
    public let profile: DeviceProfile
    public let secureElement: SecureElement
    public let secureEnclave: SecureEnclave
    public let wallet: Wallet
    private let database: DeviceDatabase
    private let clock: any DeviceClock

    // MARK: Files

    /// `DIR/devices/<name>`.
    public static func directory(of name: String, in deployment: DeploymentDirectory) -> String {
        "\(deployment.path)/devices/\(name)"
    }

    /// `DIR/devices/<name>/storage.key`.
    public static func storageKeyPath(of name: String, in deployment: DeploymentDirectory) -> String {
        directory(of: name, in: deployment) + "/storage.key"
    }

    /// `DIR/devices/<name>/control.sock`: the control API of a running device process.
    public static func controlSocketPath(of name: String, in deployment: DeploymentDirectory) -> String {
        directory(of: name, in: deployment) + "/control.sock"
    }

    /// `DIR/devices/<name>/device.pem`: the device certificate (public).
    public static func certificatePath(of name: String, in deployment: DeploymentDirectory) -> String {
        directory(of: name, in: deployment) + "/device.pem"
    }

    /// `DIR/device-<name>.sqlite`.
    public static func databasePath(of name: String, in deployment: DeploymentDirectory) throws(DeviceError) -> String {
        do {
            return deployment.databasePath(for: try Party.device(name))
        } catch {
            throw DeviceError(.invalidArgument, error.message)
        }
    }

    /// The names of the devices in a deployment (those with a store).
    public static func names(in deployment: DeploymentDirectory) -> [String] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: deployment.path)) ?? []
        return entries.compactMap { entry in
            guard entry.hasPrefix("device-"), entry.hasSuffix(".sqlite") else { return nil }
            return String(entry.dropFirst("device-".count).dropLast(".sqlite".count))
        }.sorted()
    }

    // MARK: Factory

    /// The factory: makes the Secure Element's and Secure Enclave's key pairs and pairs them, issues the
    /// device certificate for the Secure Element's key from the deployment's device CA (made self-signed if
    /// the deployment has none), and writes the storage key (0600) and the device's store. Refuses a name
    /// already used in the deployment.
    public static func create(
        in deployment: DeploymentDirectory, name: String, profile: DeviceProfile,
        clock: any DeviceClock = SystemClock(),
        random: any RandomSource = SystemRandom()
    ) throws -> DeviceIdentity {
        let databasePath = try databasePath(of: name, in: deployment)
        let keyPath = storageKeyPath(of: name, in: deployment)
        let fileManager = FileManager.default
        guard !fileManager.fileExists(atPath: databasePath), !fileManager.fileExists(atPath: keyPath) else {
            throw DeviceError(.alreadyExists, "a device named \(name) already exists in \(deployment.path)")
        }
        do {
            try deployment.create()
            try SecureFile.createDirectory(deployment.path + "/devices", mode: 0o700)
            try SecureFile.createDirectory(directory(of: name, in: deployment), mode: 0o700)
        } catch {
            throw DeviceError(.storageFailure, "cannot create the device's directory: \(error.message)")
        }
        let authority = try DeviceCertificateAuthority.loadOrCreate(in: deployment, clock: clock, random: random)
        let storageKey = SecureBytes(randomCount: 32, using: random)
        let database: DeviceDatabase
        do {
            database = try DeviceDatabase(path: databasePath)
        } catch {
            throw DeviceError(.storageFailure, "cannot create \(databasePath): \(error.message)")
        }
        let installAuthority = try DeviceCertificateAuthority.installAuthority(in: deployment, at: clock.now())
        var issued: Certificate?
        let keys = try SecureElement.manufacture(
            profile: profile, elementStorage: SealedRecordTable(database: database, owner: "secure-element"),
            enclaveStorage: SealedRecordTable(database: database, owner: "secure-enclave"),
            storageKey: SymmetricKey(storageKey), random: random, installAuthority: installAuthority,
            certify: { elementKey in
                let certificate = try authority.issueDeviceCertificate(
                    name: name, profile: profile, elementKey: elementKey, clock: clock, random: random)
                issued = certificate
                return certificate.derRepresentation
            })
        guard let certificate = issued else {
            throw DeviceError(.storageFailure, "the factory issued no device certificate")
        }
        let createdAt = clock.now()
        try database.write { db in
            try db.execute(
                """
                INSERT INTO device
                    (id, name, kind, biometry, account, created_at, element_public_key, enclave_public_key)
                VALUES (1, ?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(name), .text(profile.kind.rawValue), .text(profile.biometry.rawValue), .text(profile.account),
                    .milliseconds(createdAt), .blob(keys.element.x963Representation),
                    .blob(keys.enclave.x963Representation),
                ])
        }
        // The key is written last: a device without it is incomplete and refused by `open`.
        do {
            try SecureFile.write(
                Array(certificate.pemRepresentation.utf8), to: certificatePath(of: name, in: deployment), mode: 0o644)
            try SecureFile.writeSecret(storageKey, to: keyPath)
        } catch {
            throw DeviceError(.storageFailure, "cannot write the device's files: \(error.message)")
        }
        _ = try clientIdentity(of: name, in: deployment, clock: clock, random: random)
        return DeviceIdentity(
            name: name, profile: profile, createdAt: createdAt, elementPublicKey: keys.element,
            enclavePublicKey: keys.enclave, certificate: certificate)
    }

    /// Reads a device's public identity from its store without its storage key.
    public static func identity(of name: String, in deployment: DeploymentDirectory) throws -> DeviceIdentity {
        let path = try databasePath(of: name, in: deployment)
        guard FileManager.default.fileExists(atPath: path) else {
            throw DeviceError(.notFound, "no device named \(name) in \(deployment.path)")
        }
        let database: DeviceDatabase
        do {
            database = try DeviceDatabase(path: path)
        } catch {
            throw DeviceError(.storageFailure, "cannot open \(path): \(error.message)")
        }
        return try loadIdentity(database, name: name, certificatePath: certificatePath(of: name, in: deployment))
    }

    /// The wallet's cards of a device, read from its store without the storage key (display data only).
    public static func walletCards(of name: String, in deployment: DeploymentDirectory) throws -> [WalletCard] {
        let path = try databasePath(of: name, in: deployment)
        guard FileManager.default.fileExists(atPath: path) else {
            throw DeviceError(.notFound, "no device named \(name) in \(deployment.path)")
        }
        do {
            return try WalletTables.cards(try DeviceDatabase(path: path))
        } catch let error as StoreError {
            throw DeviceError(.storageFailure, "cannot read \(path): \(error.message)")
        }
    }

    private static func loadIdentity(
        _ database: DeviceDatabase, name: String, certificatePath: String
    ) throws
        -> DeviceIdentity
    {
        let row = try database.read { db in
            try db.queryFirst(
                """
                SELECT name, kind, biometry, account, created_at, element_public_key, enclave_public_key FROM device
                """
            ) { row in
                (
                    try row.string(0), try row.string(1), try row.string(2), try row.string(3), try row.date(4),
                    try row.blob(5), try row.blob(6)
                )
            }
        }
        guard let row, row.0 == name, let kind = DeviceKind(rawValue: row.1), let biometry = Biometry(rawValue: row.2)
        else { throw DeviceError(.notFound, "the store of device \(name) holds no device record") }
        let elementKey = try P256.KeyAgreement.PublicKey(x963Representation: row.5)
        let certificate = try Certificate(
            pemEncoded: String(decoding: try SecureFile.read(certificatePath), as: UTF8.self))
        guard try certificate.secureElementKey == elementKey else {
            throw DeviceError(
                .storageFailure, "the device certificate of \(name) does not certify its Secure Element key")
        }
        return DeviceIdentity(
            name: name, profile: try DeviceProfile(kind: kind, biometry: biometry, account: row.3), createdAt: row.4,
            elementPublicKey: elementKey, enclavePublicKey: try P256.Signing.PublicKey(x963Representation: row.6),
            certificate: certificate)
    }

    // MARK: Start-up

    /// Opens a device: reads its storage key (refused when other users can read it), loads the Secure
    /// Element, Secure Enclave and wallet, and lets the Secure Element check the Secure Enclave's status
    /// (a reset or rolled-back Authorization Random terminates the cards).
    public static func open(
        in deployment: DeploymentDirectory, name: String, clock: any DeviceClock = SystemClock(),
        random: any RandomSource = SystemRandom()
    ) async throws -> Device {
        let path = try databasePath(of: name, in: deployment)
        let keyPath = storageKeyPath(of: name, in: deployment)
        guard FileManager.default.fileExists(atPath: path), FileManager.default.fileExists(atPath: keyPath) else {
            throw DeviceError(.notFound, "no device named \(name) in \(deployment.path): run `orchard device create`")
        }
        let storageKey: SymmetricKey
        do {
            storageKey = SymmetricKey(try SecureFile.readSecret(keyPath))
        } catch  where error.code == .insecurePermissions {
            throw DeviceError(.insecurePermissions, error.message)
        } catch {
            throw DeviceError(.storageFailure, "cannot read the storage key: \(error.message)")
        }
        let database: DeviceDatabase
        do {
            database = try DeviceDatabase(path: path)
        } catch {
            throw DeviceError(.storageFailure, "cannot open \(path): \(error.message)")
        }
        let identity = try loadIdentity(
            database, name: name, certificatePath: certificatePath(of: name, in: deployment))
        let element = try SecureElement(
            storage: SealedRecordTable(database: database, owner: "secure-element"), storageKey: storageKey,
            clock: clock, random: random)
        let enclave = try SecureEnclave(
            storage: SealedRecordTable(database: database, owner: "secure-enclave"), storageKey: storageKey,
            clock: clock, random: random)
        guard enclave.profile == identity.profile, element.publicKey == identity.elementPublicKey,
            enclave.pairingPublicKey == identity.enclavePublicKey
        else { throw DeviceError(.storageFailure, "the device record does not match its Secure Element and Enclave") }
        let wallet = try Wallet(
            storage: WalletTables(
                database: database, sealer: try RecordSealer(storageKey: storageKey, owner: "wallet", random: random)),
            deviceCanPay: identity.profile.authorizesPayments)
        let device = Device(
            name: name, profile: identity.profile, secureElement: element, secureEnclave: enclave, wallet: wallet,
            database: database, clock: clock)
        try await device.synchronize()
        return device
    }

    private init(
        name: String, profile: DeviceProfile, secureElement: SecureElement, secureEnclave: SecureEnclave,
        wallet: Wallet, database: DeviceDatabase, clock: any DeviceClock
    ) {
        self.name = name
        self.profile = profile
        self.secureElement = secureElement
        self.secureEnclave = secureEnclave
        self.wallet = wallet
        self.database = database
        self.clock = clock
    }

    /// The Secure Element checks the Secure Enclave's status; terminated cards are marked in the wallet.
    @discardableResult
    public func synchronize() async throws -> [CardIdentifier] {
        let status = try await secureEnclave.status(challenge: await secureElement.challenge())
        let terminated: [CardIdentifier]
        do {
            terminated = try await secureElement.synchronize(status)
        } catch  where error.code == .rollbackDetected {
            try await mirrorCardStates()
            throw error
        }
        try await mirrorCardStates()
        return terminated
    }

    /// Copies the Secure Element's terminations into the wallet.
    private func mirrorCardStates() async throws {
        for card in await secureElement.cards() where card.state == .terminated {
            if let walletCard = try? await wallet.card(id: card.card.hex), walletCard.state != .terminated {
                try await wallet.setState(.terminated, id: card.card.hex)
            }
        }
    }

    // MARK: Status

    public func status() async -> DeviceStatus {
        let contactless: String
        switch await secureElement.contactlessStatus {
        case .idle: contactless = "idle"
        case .armed: contactless = "armed"
        case .inField: contactless = "in-field"
        }
        return DeviceStatus(
            name: name, profile: profile, enclave: await secureEnclave.status, cards: await wallet.allCards,
            defaultCard: await wallet.defaultCard?.id, contactless: contactless, lostMode: isInLostMode)
    }

    // MARK: Lost mode

    /// Whether the account owner put this device in lost mode (Find My), as the Pay server last told it with its
    /// notifications (``setLostMode(_:)``). In lost mode the device starts no payment sheet; its cards are
    /// suspended at the token service as well, so this is what the device shows, not what protects the cards.
    /// False when the store cannot be read (the token service's suspension still refuses the cards).
    public var isInLostMode: Bool {
        (try? database.read { db in
            try db.queryFirst("SELECT lost_mode FROM device", []) { try $0.bool(0) }
        }) ?? false
    }

    /// Records what the Pay server says of lost mode (durably, before it returns).
    public func setLostMode(_ lost: Bool) throws {
        do {
            try database.write { db in _ = try db.execute("UPDATE device SET lost_mode = ?", [.bool(lost)]) }
        } catch {
            throw DeviceError(.storageFailure, "cannot record lost mode: \(error)")
        }
    }

    // MARK: Cards

    /// Installs a card from a signed install (``PaymentCredential/SignedPersonalisation``, from the token service,
    /// for this device's Secure Element), and adds it to the wallet with `display` (type, card suffix, name) and
    /// the Secure Element's network and DPAN suffix.
    public func installCard(envelope: [UInt8], display: CardDisplayInput) async throws -> WalletCard {
        let binding = try await secureEnclave.provisioningBinding(challenge: await secureElement.challenge())
        let installed = try await secureElement.install(envelope, binding: binding)
        try await mirrorCardStates()  // a new Authorization Random terminates the older cards
        if let existing = try? await wallet.card(id: installed.card.hex) { return existing }
        let card = try WalletCard(
            id: installed.card.hex, network: installed.network, type: display.type, suffix: display.suffix,
            deviceAccountSuffix: installed.deviceAccountSuffix, displayName: display.displayName,
            addedAt: clock.now())
        try await wallet.add(card)
        return card
    }

    /// What a token-status notification from the token service (relayed by the Pay server) asks of a card.
    public enum TokenStatusChange: String, Sendable {
        /// The token is usable again: the wallet shows the card active (unless it was terminated here).
        case active
        /// Suspended at the token service (lost mode, the issuer): the wallet stops offering the card.
        case suspended
        /// Deleted at the token service (erase, the issuer): the Secure Element erases the card's DPAN and keys.
        case deleted
    }

    /// Applies a token-status change to the card installed for `tokenReference`; nil when no card here has that
    /// token (it was removed, or it belongs to another device).
    @discardableResult
    public func applyTokenStatus(tokenReference: String, _ change: TokenStatusChange) async throws -> WalletCard? {
        guard let installed = await secureElement.cards().first(where: { $0.tokenReference == tokenReference }),
            let card = try? await wallet.card(id: installed.card.hex)
        else { return nil }
        switch change {
        case .deleted:
            if installed.state != .terminated { try await secureElement.terminate(installed.card) }
            try await wallet.setState(.terminated, id: card.id)
        case .suspended:
            if card.state == .active { try await wallet.setState(.suspended, id: card.id) }
        case .active:
            if card.state == .suspended, installed.state == .active { try await wallet.setState(.active, id: card.id) }
        }
        return try await wallet.card(id: card.id)
    }

    /// Removes a card from the wallet and deletes its applet.
    public func removeCard(_ id: String) async throws {
        let identifier = try CardIdentifier(hex: id)
        _ = try await wallet.card(id: id)
        do {
            try await secureElement.remove(identifier)
        } catch  where error.code == .cardNotFound {
            // Already gone from the Secure Element: finish the removal in the wallet.
        }
        try await wallet.remove(id: id)
    }

    /// The user chooses a card by hand for the next payment: the wallet remembers it and the Secure Element
    /// presents it.
    public func chooseCard(_ id: String) async throws {
        try await wallet.choose(id)
        try await secureElement.present(try CardIdentifier(hex: id))
    }

    // MARK: Authentication

    /// Authenticates the user for a payment of `type` with `card` (by default the card the wallet would offer
    /// in a field). A contactless authorization is handed to the Secure Element at once; an in-app or web
    /// authorization is returned for the payment flow.
    public func authenticate(
        _ evidence: AuthenticationEvidence, for type: TransactionType = .contactless, card: String? = nil,
        amount: PaymentAmount? = nil
    ) async throws -> AuthenticationOutcome {
        let cardID: String
        if let card {
            cardID = card
        } else if let offered = await wallet.cardForField() {
            cardID = offered.card.id
        } else {
            throw WalletError(.cardNotFound, "the wallet has no active card")
        }
        let request = AuthorizationRequest(
            transactionType: type, card: try CardIdentifier(hex: cardID), amount: amount,
            challenge: await secureElement.challenge())
        let outcome = try await secureEnclave.authorizePayment(request, evidence: evidence)
        if case .authorized(let statement) = outcome, type == .contactless {
            do {
                try await secureElement.authorizeContactless(statement)
            } catch  where error.code == .cardTerminated {
                try await mirrorCardStates()
                throw error
            }
        }
        return outcome
    }

    /// A double-click of the side button. On a watch: activates and authorizes the default card (an unlocked
    /// watch on the wrist; a locked one pays nothing). On other devices: presents the default card for the
    /// user to authenticate.
    public func doubleClick() async throws -> AuthenticationOutcome? {
        guard let card = await wallet.defaultCard else {
            throw WalletError(.cardNotFound, "the wallet has no default card")
        }
        if profile.kind == .watch {
            return try await authenticate(.doubleClick, for: .contactless, card: card.id)
        }
        guard await wallet.currentSettings.doubleClickPresentsCards else { return nil }
        try await secureElement.present(try CardIdentifier(hex: card.id))
        return nil
    }

    /// Unlocks the device.
    public func unlock(_ evidence: AuthenticationEvidence) async throws -> UnlockOutcome {
        try await secureEnclave.unlock(evidence)
    }

    /// Locks the device.
    public func lock() async { await secureEnclave.lock() }

    // MARK: NFC

    /// A terminal's field appeared. The wallet picks the card to offer (the hand-made choice, automatic
    /// selection for the terminal's networks, or the default) unless a card is already authorized.
    public func fieldOn(requestedNetworks: [String] = []) async throws {
        guard profile.kind.joinsNFCField else {
            throw DeviceError(.unsupported, "a \(profile.kind) does not join an NFC field")
        }
        switch await secureElement.contactlessStatus {
        case .armed: break
        default:
            if let offered = await wallet.cardForField(requestedNetworks: requestedNetworks) {
                try await secureElement.present(try CardIdentifier(hex: offered.card.id))
            }
        }
        try await secureElement.fieldOn()
    }

    /// The field went away; a hand-made choice is forgotten once its authorization was used.
    public func fieldOff() async throws {
        try await secureElement.fieldOff()
        if case .idle = await secureElement.contactlessStatus { await wallet.clearChoice() }
    }

    /// One command APDU from the terminal in the field.
    public func transceive(_ command: [UInt8]) async throws -> [UInt8] {
        try await secureElement.transceive(command, from: .nfcField)
    }

    // MARK: Resets

    /// Discards the Authorization Random (sign-out, recovery restore, watch unpairing, ...): the Secure
    /// Element terminates every card at once and the wallet shows them terminated.
    @discardableResult
    public func resetAuthorizationRandom(reason: AuthorizationRandomResetReason) async throws -> [CardIdentifier] {
        try await secureEnclave.resetAuthorizationRandom(reason: reason)
        return try await synchronize()
    }

    /// Turns the passcode off: the Authorization Random goes with it and every card is terminated.
    @discardableResult
    public func removePasscode(current: SecureBytes) async throws -> [CardIdentifier] {
        try await secureEnclave.removePasscode(current: current)
        return try await synchronize()
    }

    /// Erases the device: every card is terminated and removed, the wallet's contacts and the Secure
    /// Enclave's user data are deleted.
    public func erase() async throws {
        try await secureEnclave.erase()
        try await synchronize()
        for card in await secureElement.cards() { try await secureElement.remove(card.card) }
        for card in await wallet.allCards { try await wallet.remove(id: card.id) }
        try await wallet.clearRecentContacts()
        try await wallet.update(WalletSettings(room: await wallet.currentSettings.room))  // it stays where it is
        try setLostMode(false)  // the Pay server leaves lost mode on erase too
    }

    /// Writes the write-ahead log back into the database file.
    public func checkpoint() throws { try database.checkpoint() }
}

/// A device's public identity: name, profile and the public keys made at the factory.
public struct DeviceIdentity: Sendable, Equatable {
    public let name: String
    public let profile: DeviceProfile
    public let createdAt: Date
    /// The Secure Element's key: token services seal personalisation envelopes to it.
    public let elementPublicKey: P256.KeyAgreement.PublicKey
    /// The Secure Enclave's pairing key.
    public let enclavePublicKey: P256.Signing.PublicKey
    /// The device certificate: the Secure Element's key, certified by the deployment's device CA.
    public let certificate: Certificate
}
