import EMV
import OrchardCrypto
import Testing

/// A relay between kernel and card that replaces one of the terminal's data objects in the Visa GPO's PDOL
/// data, and optionally makes the card's answer echo the replacement.
actor SubstitutingLink: CardTransport {
    let card: InProcessCardLink
    let tag: TLVTag
    let value: [UInt8]
    let echo: Bool

    init(_ card: InProcessCardLink, substituting tag: TLVTag, with value: [UInt8], echo: Bool) {
        self.card = card
        self.tag = tag
        self.value = value
        self.echo = echo
    }

    func transmit(_ command: CommandAPDU) async throws -> ResponseAPDU {
        guard command.ins == 0xA8, let data = try TLV.decode(command.data).value(.commandTemplate) else {
            return await card.transmit(command)
        }
        let list = ContactlessCard.visaPDOL
        var values: [TLVTag: [UInt8]] = [:]
        for object in try list.split(data) { values[object.tag] = object.value }
        values[tag] = value
        var substituted = command
        substituted.data = TLV(.commandTemplate, list.build(from: values)).encoded
        var answer = await card.transmit(substituted)
        if echo, answer.statusWord == .success {
            let template = try TLV.decodeSingle(answer.data)
            answer.data = TLV(template.tag, children: template.children + [TLV(tag, value)]).encoded
        }
        return answer
    }
}

@Suite("Terminal kernel: the chip data is the terminal's")
struct SubstitutedDataKernelTests {
    let verifier = CryptogramVerifier()

    func link(_ tag: TLVTag, _ value: [UInt8], echo: Bool) async throws -> SubstitutingLink {
        let card = InProcessCardLink(card: try V9.card([try V9.visaProfile()]))
        await card.authorize(CardholderAuthorization(verifiedBy: .face))
        return SubstitutingLink(card, substituting: tag, with: value, echo: echo)
    }

    static let substitutions: [(TLVTag, [UInt8])] = [
        (.unpredictableNumber, hex("11223344")), (.amountAuthorised, hex("000000000001")),
        (.transactionCurrencyCode, hex("0978")), (.transactionDate, hex("260116")),
        (.terminalVerificationResults, hex("0000008000")),
    ]

    @Test("N2/N3/C5: a card echoing another UN, amount, currency, date or TVR ends the application, no cryptogram")
    func echoedValuesEndTheApplication() async throws {
        let kernel = TerminalKernel(configuration: V9.terminal)
        for (tag, value) in Self.substitutions {
            let outcome = try await kernel.run(try V9.transaction(), card: try await link(tag, value, echo: true))
            #expect(outcome.status == .endApplication && outcome.card == nil, "\(tag): \(outcome)")
            #expect(outcome.reason?.contains("other values for the terminal's data (\(tag))") == true)
        }
    }

    @Test("N2/N3/C5: without the echo, field 55 carries the terminal's values and the issuer's MAC check fails")
    func substitutedValuesFailVerification() async throws {
        let kernel = TerminalKernel(configuration: V9.terminal)
        for (tag, value) in Self.substitutions {
            let outcome = try await kernel.run(try V9.transaction(), card: try await link(tag, value, echo: false))
            let card = try #require(outcome.card, "\(tag): \(outcome)")
            #expect(outcome.status == .onlineRequest)
            let terminal = try kernel.terminalData(for: try V9.transaction())
            #expect(card.field55.value(tag) == terminal[tag] && card.field55.value(tag) != value)
            let result = try verifier.verify(ChipAuthorizationData(card), issuerMasterKey: V9.imk, lastSeenATC: 0x29)
            guard case .invalid(let rejection) = result else {
                Issue.record("\(tag): a cryptogram over a substituted value verified")
                continue
            }
            #expect(rejection.reason == .cryptogramMismatch)
        }
        // The same relay passing the terminal's own values changes nothing: approved.
        let outcome = try await kernel.run(
            try V9.transaction(), card: try await link(.unpredictableNumber, hex("7A3B9C01"), echo: true))
        let card = try #require(outcome.card)
        #expect(try verifier.verify(ChipAuthorizationData(card), issuerMasterKey: V9.imk, lastSeenATC: 0x29).isValid)
    }
}
