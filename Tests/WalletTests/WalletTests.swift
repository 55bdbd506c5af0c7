import CardBasics
import Foundation
import Testing
import Wallet

@Suite("Wallet: cards, default, selection, contacts, settings")
struct WalletTests {
    static let start = Date(timeIntervalSince1970: 1_750_000_000)

    static func card(
        _ n: Int, network: String = "visa", type: CardType = .credit, automatic: Bool = false,
        state: CardState = .active
    ) throws -> WalletCard {
        try WalletCard(
            id: String(repeating: String(n % 10), count: 32), network: network, type: type, suffix: "424\(n % 10)",
            deviceAccountSuffix: "000\(n % 10)", displayName: "Card \(n)", state: state, automaticSelection: automatic,
            addedAt: start.addingTimeInterval(Double(n)))
    }

    static func expectCode<T>(
        _ code: WalletError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> T
    ) async {
        do {
            _ = try await body()
            Issue.record("expected \(code)", sourceLocation: sourceLocation)
        } catch let error as WalletError {
            #expect(error.code == code, "got \(error)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
        }
    }

    @Test("The first active card is the default; removing or suspending the default picks the next")
    func defaultCard() async throws {
        let wallet = try Wallet(storage: InMemoryWalletStorage(), deviceCanPay: true)
        #expect(await wallet.defaultCard == nil)
        try await wallet.add(try Self.card(1))
        try await wallet.add(try Self.card(2, network: "masterCard"))
        #expect(await wallet.defaultCard?.id == (try Self.card(1)).id)
        try await wallet.setDefault(try Self.card(2).id)
        #expect(await wallet.defaultCard?.id == (try Self.card(2)).id)
        try await wallet.remove(id: try Self.card(2).id)
        #expect(await wallet.defaultCard?.id == (try Self.card(1)).id)
        try await wallet.setState(.suspended, id: try Self.card(1).id)
        #expect(await wallet.defaultCard == nil)
        await Self.expectCode(.cardNotActive) { try await wallet.setDefault(try Self.card(1).id) }
        try await wallet.setState(.active, id: try Self.card(1).id)
        #expect(await wallet.defaultCard?.id == (try Self.card(1)).id)
        await Self.expectCode(.cardNotFound) { try await wallet.setDefault(try Self.card(7).id) }
        await Self.expectCode(.duplicateCard) { try await wallet.add(try Self.card(1)) }
        // A terminated card added first does not become the default.
        let other = try Wallet(storage: InMemoryWalletStorage(), deviceCanPay: true)
        try await other.add(try Self.card(3, state: .terminated))
        #expect(await other.defaultCard == nil)
    }

    @Test("In a field: the hand-made choice, else automatic selection for the terminal's network, else the default")
    func selection() async throws {
        let wallet = try Wallet(storage: InMemoryWalletStorage(), deviceCanPay: true)
        #expect(await wallet.cardForField() == nil)
        try await wallet.add(try Self.card(1))
        try await wallet.add(try Self.card(2, network: "masterCard", automatic: true))
        try await wallet.add(try Self.card(3, network: "amex"))
        let plain = await wallet.cardForField()
        #expect(plain?.card.id == (try Self.card(1)).id && plain?.reason == .default)
        let automatic = await wallet.cardForField(requestedNetworks: ["masterCard"])
        #expect(automatic?.card.id == (try Self.card(2)).id && automatic?.reason == .automatic)
        // Automatic selection off for amex: the default is offered.
        #expect(await wallet.cardForField(requestedNetworks: ["amex"])?.reason == .default)
        try await wallet.setAutomaticSelection(true, id: try Self.card(3).id)
        #expect(await wallet.cardForField(requestedNetworks: ["amex", "masterCard"])?.card.id == (try Self.card(3)).id)
        try await wallet.setAutomaticSelection(false, id: try Self.card(2).id)
        #expect(await wallet.cardForField(requestedNetworks: ["masterCard"])?.reason == .default)
        try await wallet.choose(try Self.card(2).id)
        let chosen = await wallet.cardForField(requestedNetworks: ["amex"])
        #expect(chosen?.card.id == (try Self.card(2)).id && chosen?.reason == .chosen)
        await wallet.clearChoice()
        #expect(await wallet.cardForField(requestedNetworks: ["amex"])?.reason == .automatic)
        try await wallet.setState(.terminated, id: try Self.card(3).id)
        await Self.expectCode(.cardNotActive) { try await wallet.choose(try Self.card(3).id) }
        #expect(await wallet.cardForField(requestedNetworks: ["amex"])?.reason == .default)
    }

    @Test("Everything but the hand-made choice survives a restart")
    func persistence() async throws {
        let storage = InMemoryWalletStorage()
        let wallet = try Wallet(storage: storage, deviceCanPay: true)
        try await wallet.add(try Self.card(1))
        try await wallet.add(try Self.card(2))
        try await wallet.setDefault(try Self.card(2).id)
        try await wallet.setAutomaticSelection(true, id: try Self.card(1).id)
        try await wallet.choose(try Self.card(1).id)
        try await wallet.update(WalletSettings(allowWebsiteQueries: false, doubleClickPresentsCards: false))
        let reopened = try Wallet(storage: storage, deviceCanPay: true)
        #expect(await reopened.allCards.map(\.id) == [try Self.card(1).id, try Self.card(2).id])
        #expect(await reopened.defaultCard?.id == (try Self.card(2)).id)
        #expect(await reopened.allCards.first?.automaticSelection == true)
        #expect(await reopened.cardForField()?.reason == .default)
        #expect(
            await reopened.currentSettings
                == WalletSettings(allowWebsiteQueries: false, doubleClickPresentsCards: false))
    }

    @Test("Recent contacts: most recent first, no duplicates, at most ten per role")
    func recentContacts() async throws {
        let wallet = try Wallet(storage: InMemoryWalletStorage(), deviceCanPay: true)
        let home = Contact(
            name: "Ada",
            postalAddress: PostalAddress(
                street: "1 Main St", locality: "Springfield", administrativeArea: "IL", postalCode: "62701",
                countryCode: "US"))
        let work = Contact(name: "Ada", emailAddress: "ada@example.com")
        try await wallet.recordUse(home, as: .shipping)
        try await wallet.recordUse(work, as: .shipping)
        try await wallet.recordUse(home, as: .shipping)
        #expect(try await wallet.recentContacts(.shipping) == [home, work])
        #expect(try await wallet.recentContacts(.billing).isEmpty)
        for n in 0..<12 { try await wallet.recordUse(Contact(phoneNumber: "+1555000\(n)"), as: .contact) }
        let contacts = try await wallet.recentContacts(.contact)
        #expect(contacts.count == Wallet.recentContactLimit && contacts.first?.phoneNumber == "+155500011")
        await Self.expectCode(.invalidArgument) { try await wallet.recordUse(Contact(), as: .billing) }
        var bad = home
        bad.postalAddress?.countryCode = "usa"
        await Self.expectCode(.invalidArgument) { try await wallet.recordUse(bad, as: .billing) }
        #expect(home.postalAddress?.redacted.street == "" && home.postalAddress?.redacted.postalCode == "62701")
        try await wallet.clearRecentContacts()
        #expect(try await wallet.recentContacts(.shipping).isEmpty)
    }

    @Test(
        "W6: Website queries: canMakePayments answers at once; off, the active-card query answers the same without asking; on, only after the merchant check"
    )
    func websiteQueries() async throws {
        let wallet = try Wallet(storage: InMemoryWalletStorage(), deviceCanPay: true)
        try await wallet.add(try Self.card(1, type: .debit))
        let calls = Counter()
        let verified: @Sendable () async throws -> Bool = {
            calls.increment()
            return true
        }
        #expect(
            try await wallet.answer(.canMakePaymentsWithActiveCard(networks: ["visa"]), verifyMerchantSession: verified)
        )
        // No card of the network: no question to the Pay server.
        #expect(
            !(try await wallet.answer(
                .canMakePaymentsWithActiveCard(networks: ["amex"]), verifyMerchantSession: verified)))
        #expect(calls.value == 1)
        // A statement that does not verify: false.
        #expect(!(await wallet.answer(.canMakePaymentsWithActiveCard(networks: ["visa"])) { false }))
        // canMakePayments() is the device's capability, at once, asking nobody.
        #expect(await wallet.answer(.canMakePayments) { false })
        #expect(try await wallet.answer(.canMakePayments, verifyMerchantSession: verified))
        #expect(calls.value == 1)
        // Website queries off (WebKit): canMakePaymentsWithActiveCard answers like canMakePayments, asking no server.
        try await wallet.update(WalletSettings(allowWebsiteQueries: false))
        #expect(try await wallet.answer(.canMakePayments, verifyMerchantSession: verified))
        #expect(try await wallet.answer(.canMakePaymentsWithActiveCard(networks: []), verifyMerchantSession: verified))
        #expect(
            try await wallet.answer(.canMakePaymentsWithActiveCard(networks: ["amex"]), verifyMerchantSession: verified)
        )
        #expect(calls.value == 1)
        let mac = try Wallet(storage: InMemoryWalletStorage(), deviceCanPay: false)
        #expect(!(try await mac.answer(.canMakePayments, verifyMerchantSession: verified)))
        #expect(
            !(try await mac.answer(.canMakePaymentsWithActiveCard(networks: []), verifyMerchantSession: verified)))
        #expect(calls.value == 1)
        #expect(await wallet.hasActiveCard(networks: ["visa"], types: [.debit]))
        #expect(!(await wallet.hasActiveCard(types: [.credit])))
    }

    @Test("Display fields are checked, also when decoded")
    func validation() throws {
        let id = String(repeating: "a", count: 32)
        #expect(throws: WalletError.self) {
            try WalletCard(
                id: "xyz", network: "visa", type: .credit, suffix: "1234", deviceAccountSuffix: "5678",
                displayName: "A", addedAt: Self.start)
        }
        #expect(throws: WalletError.self) {
            try WalletCard(
                id: id, network: "visa", type: .credit, suffix: "12345", deviceAccountSuffix: "5678", displayName: "A",
                addedAt: Self.start)
        }
        #expect(throws: WalletError.self) {
            try WalletCard(
                id: id, network: "vi sa", type: .credit, suffix: "1234", deviceAccountSuffix: "5678", displayName: "A",
                addedAt: Self.start)
        }
        #expect(throws: WalletError.self) {
            try WalletCard(
                id: id, network: "visa", type: .credit, suffix: "1234", deviceAccountSuffix: "5678", displayName: "",
                addedAt: Self.start)
        }
        let card = try WalletCard(
            id: id, network: "visa", type: .prepaid, suffix: "1234", deviceAccountSuffix: "5678", displayName: "Gift",
            addedAt: Self.start)
        let json = try JSONEncoder().encode(card)
        #expect(try JSONDecoder().decode(WalletCard.self, from: json) == card)
        let tampered = Data(
            String(decoding: json, as: UTF8.self).replacingOccurrences(of: "1234", with: "12345678").utf8)
        #expect(throws: (any Error).self) { try JSONDecoder().decode(WalletCard.self, from: tampered) }
    }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}
