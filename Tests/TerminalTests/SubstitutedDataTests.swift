import CardBasics
import EMV
import Foundation
import NFCLink
import OrchardCrypto
import Terminal
import Testing

/// A card behind a man in the middle: the terminal's unpredictable number, amount or currency is replaced
/// on its way to the card (the card computes its cryptogram over the substituted value), and the card's
/// answer may echo the substituted value back to the terminal, as a relay passing off a pre-played
/// cryptogram would.
actor SubstitutingCardTarget: NFCTarget {
    private var card: ContactlessCard
    private let tag: TLVTag
    private let value: [UInt8]
    private let echo: Bool

    init(scheme: PaymentScheme, substituting tag: TLVTag, with value: [UInt8], echo: Bool) throws {
        let dpan = scheme == .visa ? TestIssuer.visaDPAN : TestIssuer.mastercardDPAN
        let profile = try CardApplicationProfile(
            scheme: scheme, pan: dpan, expiry: "3106", masterKey: try TestIssuer.cardMasterKey(dpan))
        card = try ContactlessCard(applications: [CardApplication(profile: profile, atcStore: InMemoryATCStore())])
        self.tag = tag
        self.value = value
        self.echo = echo
    }

    func fieldOn(_ polling: NFCPolling) async -> NFCFieldAnswer {
        card.authorize(CardholderAuthorization(verifiedBy: .face))
        return .join(ready: true)
    }

    func isAuthorized() async -> Bool { true }

    func transceive(_ bytes: [UInt8]) async throws(NFCRefusal) -> [UInt8] {
        guard var command = try? CommandAPDU(bytes: bytes), command.cla == 0x80,
            command.ins == 0xA8 || command.ins == 0xAE
        else { return card.process(bytes: bytes) }
        // The data the cryptogram covers: the PDOL data of a Visa GPO, the CDOL1 data of GENERATE AC.
        let isGPO = command.ins == 0xA8
        let list = isGPO ? ContactlessCard.visaPDOL : ContactlessCard.mastercardCDOL1
        let data = isGPO ? (try? TLV.decode(command.data))?.value(.commandTemplate) ?? [] : command.data
        guard let objects = try? list.split(data) else { return card.process(bytes: bytes) }
        var values: [TLVTag: [UInt8]] = [:]
        for object in objects { values[object.tag] = object.value }
        values[tag] = value
        let substituted = list.build(from: values)
        command.data = isGPO ? TLV(.commandTemplate, substituted).encoded : substituted
        guard let encoded = try? command.encoded() else { return card.process(bytes: bytes) }
        let answer = card.process(bytes: encoded)
        guard echo, answer.suffix(2) == [0x90, 0x00],
            let template = try? TLV.decodeSingle(answer.dropLast(2)),
            template.tag == .responseMessageTemplateFormat2
        else { return answer }
        let echoed = TLV(.responseMessageTemplateFormat2, children: template.children + [TLV(tag, value)])
        return echoed.encoded + [0x90, 0x00]
    }

    func fieldOff() async { card.reset() }
}

@Suite("In store: the terminal's own data in the authorization")
struct SubstitutedDataTests {
    /// Each substitution, for a card of each kernel: what the MITM puts in the card's command.
    static let substitutions: [(what: String, tag: TLVTag, value: [UInt8])] = [
        ("unpredictable number", .unpredictableNumber, [0xDE, 0xAD, 0xBE, 0xEF]),
        ("amount", .amountAuthorised, [0x00, 0x00, 0x00, 0x00, 0x00, 0x01]),
        ("currency", .transactionCurrencyCode, [0x09, 0x78]),
    ]

    @Test(
        "N2/N3/C5: a card that echoes another UN, amount or currency is refused at the terminal; nothing goes online",
        arguments: [PaymentScheme.visa, .mastercard])
    func echoedValuesAreRefused(scheme: PaymentScheme) async throws {
        for substitution in Self.substitutions {
            let directory = try TemporaryDirectory()
            let target = try SubstitutingCardTarget(
                scheme: scheme, substituting: substitution.tag, with: substitution.value, echo: true)
            let antenna = try NFCAntenna(path: directory.antenna, kind: .phone, target: target)
            defer { antenna.stop() }
            let acquirer = TestAcquirer()
            let terminal = try await makeTerminal(gateway: acquirer)
            let result = try await terminal.charge(try usd("12.34"), antenna: directory.antenna)
            #expect(!result.isApproved && result.responseCode == "Z1", "\(substitution.what): \(result)")
            #expect(result.reason.contains("other values for the terminal's data (\(substitution.tag))"))
            #expect(await acquirer.requests.isEmpty, "\(substitution.what) went online")
        }
    }

    @Test(
        "N2/N3/C5: a cryptogram over a substituted UN, amount or currency goes online with the terminal's values: 88",
        arguments: [PaymentScheme.visa, .mastercard])
    func substitutedValuesFailAtTheIssuer(scheme: PaymentScheme) async throws {
        for substitution in Self.substitutions {
            let directory = try TemporaryDirectory()
            let target = try SubstitutingCardTarget(
                scheme: scheme, substituting: substitution.tag, with: substitution.value, echo: false)
            let antenna = try NFCAntenna(path: directory.antenna, kind: .phone, target: target)
            defer { antenna.stop() }
            let acquirer = TestAcquirer()
            let terminal = try await makeTerminal(gateway: acquirer)
            let result = try await terminal.charge(try usd("12.34"), antenna: directory.antenna)
            #expect(result.responseCode == "88" && result.reason == "cryptogramMismatch", "\(substitution.what)")
            let request = try #require(await acquirer.requests.first)
            let chip = try TLV.decode(request.chipData)
            // Field 55 carries what the terminal sent, never the substituted value.
            #expect(chip.value(substitution.tag) != substitution.value, "\(substitution.what) reached field 55")
            #expect(chip.value(.amountAuthorised) == (try EMVNumeric.amount(1234)))
            #expect(chip.value(.transactionCurrencyCode) == [0x08, 0x40])
        }
    }

    @Test("N2/N3: the same card without a man in the middle is approved (the doubles above change only one value)")
    func unchangedIsApproved() async throws {
        let directory = try TemporaryDirectory()
        // Substituting the terminal's own currency changes nothing.
        let target = try SubstitutingCardTarget(
            scheme: .mastercard, substituting: .transactionCurrencyCode, with: [0x08, 0x40], echo: true)
        let antenna = try NFCAntenna(path: directory.antenna, kind: .phone, target: target)
        defer { antenna.stop() }
        let result = try await makeTerminal(gateway: TestAcquirer()).charge(
            try usd("12.34"), antenna: directory.antenna)
        #expect(result.isApproved, "\(result)")
    }

    @Test("C6: with limits, a charge in another currency is refused before the tap; without limits it is taken")
    func limitsHoldInAnotherCurrency() async throws {
        let directory = try TemporaryDirectory()
        let antenna = try NFCAntenna(path: directory.antenna, kind: .phone, target: try CardTarget())
        defer { antenna.stop() }
        let euros = try Money(parsing: "150.00", currency: try Currency("EUR"))
        let yen = try Money(parsing: "15000", currency: try Currency("JPY"))
        for settings in [
            try TerminalSettings(terminalID: "T-TEST-1", contactlessLimit: 10000),
            try TerminalSettings(terminalID: "T-TEST-1", cvmRequiredLimit: 5000),
        ] {
            let acquirer = TestAcquirer()
            let store: any TerminalStore = InMemoryTerminalStore()
            let terminal = try await makeTerminal(gateway: acquirer, store: store, settings: settings)
            for amount in [euros, yen] {
                await #expect(throws: TerminalError(.currencyNotAccepted, "")) {
                    try await terminal.charge(amount, antenna: directory.antenna)
                }
            }
            // Nothing journaled, nothing sent; the terminal's own currency still charges.
            #expect(try await store.transactions(terminalID: "T-TEST-1", limit: 10).isEmpty)
            #expect(await acquirer.requests.isEmpty)
            #expect(try await terminal.charge(try usd("12.00"), antenna: directory.antenna).isApproved)
        }
        // A terminal without limits has none to escape: it charges in another currency.
        let acquirer = TestAcquirer()
        let unlimited = try await makeTerminal(gateway: acquirer)
        #expect(try await unlimited.charge(euros, antenna: directory.antenna).isApproved)
        #expect(await acquirer.requests.last?.amount.currency.code == "EUR")
    }
}
