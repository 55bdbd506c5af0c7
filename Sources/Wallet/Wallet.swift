public import CardBasics
import Foundation

/// Where a wallet keeps its cards, settings and recent contacts. Synchronous and durable: when a call
/// returns, the change survives a crash; when it throws, nothing changed.
public protocol WalletStorage: Sendable {
    func loadCards() throws -> [WalletCard]
    func saveCard(_ card: WalletCard) throws
    func deleteCard(id: String) throws
    func loadSettings() throws -> (settings: WalletSettings, defaultCardID: String?)
    func saveSettings(_ settings: WalletSettings, defaultCardID: String?) throws
    func loadRecentContacts(_ role: ContactRole) throws -> [Contact]
    func saveRecentContacts(_ contacts: [Contact], role: ContactRole) throws
}

/// A ``WalletStorage`` in memory, for tests and simulations.
public final class InMemoryWalletStorage: WalletStorage, @unchecked Sendable {
    // @unchecked: every field is guarded by `lock`.
    private let lock = NSLock()
    private var cards: [String: WalletCard] = [:]
    private var settings = WalletSettings()
    private var defaultCardID: String?
    private var contacts: [ContactRole: [Contact]] = [:]

    public init() {}

    public func loadCards() throws -> [WalletCard] { lock.withLock { Array(cards.values) } }
    public func saveCard(_ card: WalletCard) throws { lock.withLock { cards[card.id] = card } }
    public func deleteCard(id: String) throws { lock.withLock { cards[id] = nil } }
    public func loadSettings() throws -> (settings: WalletSettings, defaultCardID: String?) {
        lock.withLock { (settings, defaultCardID) }
    }
    public func saveSettings(_ settings: WalletSettings, defaultCardID: String?) throws {
        lock.withLock {
            self.settings = settings
            self.defaultCardID = defaultCardID
        }
    }
    public func loadRecentContacts(_ role: ContactRole) throws -> [Contact] { lock.withLock { contacts[role] ?? [] } }
    public func saveRecentContacts(_ contacts: [Contact], role: ContactRole) throws {
        lock.withLock { self.contacts[role] = contacts }
    }
}

/// The wallet of one device: the cards' display data, the default card, automatic selection per card, the
/// user's choice for the next payment, recently used contacts and the settings.
///
/// Guarantees: it holds display data only (no DPAN, no key); the default card is always an active card
/// of the wallet or none, and the first active card becomes the default when the default goes; every change
/// is stored before it takes effect; with website queries off, ``answer(_:verifyMerchantSession:)``
/// returns false without calling the verifier.
public actor Wallet {
    /// How many contacts each recent list keeps.
    public static let recentContactLimit = 10

    private let storage: any WalletStorage
    private var cards: [WalletCard]
    private var settings: WalletSettings
    private var defaultCardID: String?
    /// The card the user chose by hand for the next payment (not persisted).
    private var chosenCardID: String?
    /// Whether the device can authorize payments at all (a Mac without Touch ID cannot).
    public nonisolated let deviceCanPay: Bool

    /// Loads the wallet from `storage`.
    public init(storage: any WalletStorage, deviceCanPay: Bool) throws(WalletError) {
        self.storage = storage
        self.deviceCanPay = deviceCanPay
        do {
            cards = try storage.loadCards().sorted { ($0.addedAt, $0.id) < ($1.addedAt, $1.id) }
            (settings, defaultCardID) = try storage.loadSettings()
        } catch {
            throw WalletError(.storageFailure, "cannot read the wallet: \(error)")
        }
    }

    // MARK: Cards

    /// The cards in the order they were added.
    public var allCards: [WalletCard] { cards }

    /// The default card, if any.
    public var defaultCard: WalletCard? { cards.first { $0.id == defaultCardID } }

    public var currentSettings: WalletSettings { settings }

    public func card(id: String) throws(WalletError) -> WalletCard {
        guard let card = cards.first(where: { $0.id == id }) else {
            throw WalletError(.cardNotFound, "no card \(id) in the wallet")
        }
        return card
    }

    /// Adds a provisioned card. The first active card becomes the default.
    public func add(_ card: WalletCard) throws(WalletError) {
        guard !cards.contains(where: { $0.id == card.id }) else {
            throw WalletError(.duplicateCard, "card \(card.id) is already in the wallet")
        }
        try persist { try $0.saveCard(card) }
        cards.append(card)
        if defaultCard == nil, card.state == .active { try setDefault(card.id) }
    }

    /// Removes a card (the caller also deletes its applet from the Secure Element).
    public func remove(id: String) throws(WalletError) {
        _ = try card(id: id)
        try persist { try $0.deleteCard(id: id) }
        cards.removeAll { $0.id == id }
        if chosenCardID == id { chosenCardID = nil }
        if defaultCardID == id { try replaceDefault() }
    }

    /// Sets a card's state (from a token-status notification or the Secure Element).
    public func setState(_ state: CardState, id: String) throws(WalletError) {
        var updated = try card(id: id)
        guard updated.state != state else { return }
        updated.state = state
        try replace(updated)
        if state != .active {
            if chosenCardID == id { chosenCardID = nil }
            if defaultCardID == id { try replaceDefault() }
        } else if defaultCard == nil {
            try setDefault(id)
        }
    }

    /// Makes an active card the default.
    public func setDefault(_ id: String) throws(WalletError) {
        let card = try card(id: id)
        guard card.state == .active else {
            throw WalletError(.cardNotActive, "a \(card.state) card cannot be the default")
        }
        try persist { [settings] in try $0.saveSettings(settings, defaultCardID: id) }
        defaultCardID = id
    }

    /// Turns automatic selection on or off for a card.
    public func setAutomaticSelection(_ enabled: Bool, id: String) throws(WalletError) {
        var updated = try card(id: id)
        updated.automaticSelection = enabled
        try replace(updated)
    }

    /// The user chose `id` by hand for the next payment.
    public func choose(_ id: String) throws(WalletError) {
        let card = try card(id: id)
        guard card.state == .active else { throw WalletError(.cardNotActive, "a \(card.state) card cannot pay") }
        chosenCardID = id
    }

    /// Forgets the hand-made choice (after a payment, or when the user closes the wallet).
    public func clearChoice() { chosenCardID = nil }

    /// The card to offer in an NFC field whose terminal asked for `requestedNetworks` (in its order of
    /// preference): the card chosen by hand; else the first active card with automatic selection on for a
    /// requested network; else the default card. Nil when the wallet has no usable card.
    public func cardForField(requestedNetworks: [String] = []) -> (card: WalletCard, reason: CardSelectionReason)? {
        if let chosen = cards.first(where: { $0.id == chosenCardID && $0.state == .active }) {
            return (chosen, .chosen)
        }
        for network in requestedNetworks {
            if let card = cards.first(where: { $0.network == network && $0.automaticSelection && $0.state == .active })
            {
                return (card, .automatic)
            }
        }
        if let card = defaultCard, card.state == .active { return (card, .default) }
        return nil
    }

    /// Whether an active card of one of `networks` (any network when empty) and `types` is in the wallet.
    public func hasActiveCard(networks: [String] = [], types: Set<CardType> = Set(CardType.allCases)) -> Bool {
        cards.contains { card in
            card.state == .active && types.contains(card.type) && (networks.isEmpty || networks.contains(card.network))
        }
    }

    // MARK: Websites

    /// Answers a website's capability query as WebKit does (`shouldDiscloseApplePayCapability`):
    /// `canMakePayments` is the device's capability, answered at once without asking anyone. For
    /// `canMakePaymentsWithActiveCard`, with ``WalletSettings/allowWebsiteQueries`` off the answer is the same as
    /// `canMakePayments` and `verifyMerchantSession` is not called (no server is asked); with it on, the answer is
    /// yes only after `verifyMerchantSession` confirms the Pay server's signed statement that the merchant has the
    /// page's domain validated, and only for an active credit, debit or prepaid card on one of the networks.
    public func answer(
        _ query: WebsiteQuery, verifyMerchantSession: @Sendable () async throws -> Bool
    ) async rethrows -> Bool {
        guard deviceCanPay else { return false }
        switch query {
        case .canMakePayments:
            return true
        case .canMakePaymentsWithActiveCard(let networks):
            guard settings.allowWebsiteQueries else { return true }
            guard hasActiveCard(networks: networks, types: [.credit, .debit, .prepaid]) else { return false }
            return try await verifyMerchantSession()
        }
    }

    // MARK: Settings

    /// Replaces the settings.
    public func update(_ settings: WalletSettings) throws(WalletError) {
        try persist { [defaultCardID] in try $0.saveSettings(settings, defaultCardID: defaultCardID) }
        self.settings = settings
    }

    // MARK: Recent contacts

    /// The recently used contacts of `role`, most recent first.
    public func recentContacts(_ role: ContactRole) throws(WalletError) -> [Contact] {
        do {
            return try storage.loadRecentContacts(role)
        } catch {
            throw WalletError(.storageFailure, "cannot read the recent contacts: \(error)")
        }
    }

    /// Records that `contact` was used as `role`: it moves to the front, duplicates go, and the list keeps
    /// ``recentContactLimit`` entries.
    public func recordUse(_ contact: Contact, as role: ContactRole) throws(WalletError) {
        try contact.validate()
        var list = try recentContacts(role)
        list.removeAll { $0 == contact }
        list.insert(contact, at: 0)
        if list.count > Self.recentContactLimit { list.removeLast(list.count - Self.recentContactLimit) }
        try persist { [list] in try $0.saveRecentContacts(list, role: role) }
    }

    /// Forgets the recent contacts of every role.
    public func clearRecentContacts() throws(WalletError) {
        for role in ContactRole.allCases { try persist { try $0.saveRecentContacts([], role: role) } }
    }

    // MARK: Helpers

    private func replace(_ card: WalletCard) throws(WalletError) {
        try persist { try $0.saveCard(card) }
        if let index = cards.firstIndex(where: { $0.id == card.id }) { cards[index] = card }
    }

    private func replaceDefault() throws(WalletError) {
        let next = cards.first { $0.state == .active }?.id
        try persist { [settings] in try $0.saveSettings(settings, defaultCardID: next) }
        defaultCardID = next
    }

    private func persist(_ body: (any WalletStorage) throws -> Void) throws(WalletError) {
        do {
            try body(storage)
        } catch {
            throw WalletError(.storageFailure, "the wallet's store failed; nothing changed: \(error)")
        }
    }
}
