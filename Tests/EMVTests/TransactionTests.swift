import EMV
import Foundation
import OrchardCrypto
import Testing

@Suite("Contactless transactions: card, kernel and verifier")
struct TransactionTests {
    let verifier = CryptogramVerifier()

    /// V9's whole transcript, byte for byte, from Orchard's card (with the plain 7-byte VIS IAD V9 uses)
    /// and Orchard's kernel.
    @Test func v9TranscriptIsReproducedExactly() async throws {
        let v = try PrimitiveVectorTests.vector("V9")
        let outcome = try await V9.run(try V9.card([try V9.visaProfile(carriesCDCVMInIAD: false)]))
        let expected: [(String, String)] = [
            (v.inputs["SELECT PPSE C-APDU"]!, v.outputs["PPSE R-APDU (w/o SW)"]!),
            (v.inputs["SELECT AID C-APDU"]!, v.outputs["SELECT AID R-APDU (w/o SW)"]!),
            (v.inputs["GPO C-APDU"]!, v.outputs["GPO R-APDU format 2 (w/o SW)"]!),
            (v.inputs["READ RECORD C-APDU"]!, v.outputs["READ RECORD R-APDU (w/o SW)"]!),
        ]
        #expect(outcome.transcript.count == expected.count)
        for (exchange, (command, response)) in zip(outcome.transcript, expected) {
            #expect(hexString(exchange.command) == command)
            #expect(hexString(exchange.response) == response + v.outputs["SW"]!)
        }
        #expect(outcome.status == .onlineRequest)
        let card = try #require(outcome.card)
        #expect(card.pan == V9.visaPAN && card.expiry == "2812" && card.panSequenceNumber == 0)
        #expect(card.track2EquivalentData == hex(v.outputs["Track 2 equivalent (57)"]!))
        #expect(card.cryptogram == hex("15679C552AA1BFD3") && card.atc == 0x2A && card.cryptogramType == .arqc)
        #expect(card.cardholderVerification == .consumerDevice)
        #expect(card.maskedPAN == "489537******5671")
        // The verifier accepts it; without the discretionary data no CDCVM result is authenticated.
        let result = try verifier.verify(ChipAuthorizationData(card), issuerMasterKey: V9.imk, lastSeenATC: 0x29)
        guard case .valid(let verified) = result else { Issue.record("rejected: \(result)"); return }
        #expect(verified.version == .visa18 && verified.atc == 0x2A && verified.cdcvm == nil)
        // ARPC method 2 over V9's ARQC is V6's.
        #expect(
            try verified.issuerAuthenticationData(responseCode: hex("3030"), cardStatusUpdate: hex("00800000"))
                == hex("121FB77800800000"))
    }

    /// V9's GPO response as published, with the terminal's PDOL data, verifies as it stands.
    @Test func verifierAcceptsV9sPublishedResponse() throws {
        let v = try PrimitiveVectorTests.vector("V9")
        let gpo = try TLV.decode(hex(v.outputs["GPO R-APDU format 2 (w/o SW)"]!))
        let pdolData = Array(hex(v.inputs["GPO C-APDU"]!)[7..<40])
        let terminal = try ContactlessCard.visaPDOL.split(pdolData)
        let data = ChipAuthorizationData(pan: V9.visaPAN, panSequenceNumber: 0, elements: gpo + terminal)
        #expect(data.scheme == .visa && data.derivationKeyIndex == 1 && data.atc == 0x2A)
        #expect(try verifier.verify(data, issuerMasterKey: V9.imk, lastSeenATC: nil).isValid)
        #expect(try !verifier.verify(data, issuerMasterKey: V9.imk, lastSeenATC: 0x2A).isValid)
    }

    @Test func orchardsVisaIADCarriesTheCDCVMUnderTheMAC() async throws {
        let outcome = try await V9.run(try V9.card([try V9.visaProfile()]), method: .face)
        let card = try #require(outcome.card)
        #expect(card.issuerApplicationData == hex("06011203A00000020183"))
        let result = try verifier.verify(ChipAuthorizationData(card), issuerMasterKey: V9.imk, lastSeenATC: 0x29)
        guard case .valid(let verified) = result else { Issue.record("rejected: \(result)"); return }
        #expect(verified.cdcvm == CDCVMResult(performed: true, method: .face))
        // The same cryptogram as a recomputation over V9's data with this IAD.
        let values = try ContactlessCard.visaPDOL.split(
            hex("36C04000000000015000000000000000084000000000000840260115007A3B9C01"))
        let data = try CryptogramData(
            values: { values.value($0) }, applicationInterchangeProfile: [0x20, 0x00], atc: 0x2A,
            issuerApplicationData: card.issuerApplicationData)
        #expect(
            try ApplicationCryptogram.generate(.visa18, masterKey: try V9.masterKey(V9.visaPAN), data: data)
                == card.cryptogram)
    }

    @Test(arguments: [CryptogramVersion.mastercard16, .mastercard20])
    func mastercardStyleTransaction(version: CryptogramVersion) async throws {
        let outcome = try await V9.run(try V9.card([try V9.mastercardProfile(version)]), method: .passcode)
        #expect(outcome.status == .onlineRequest)
        let commands = outcome.transcript.map { hexString($0.command) }
        #expect(
            commands == [
                CardTests.selectPPSE, CardTests.selectMastercard, "80A800000283000" + "0", "00B2010C00",
                "80AE800021" + CardTests.cdolData + "00",
            ])
        #expect(outcome.transcript.allSatisfy { $0.response.suffix(2) == [0x90, 0x00] })
        let card = try #require(outcome.card)
        #expect(card.scheme == .mastercard && card.pan == V9.mastercardPAN && card.expiry == "2812")
        #expect(card.cardholderVerification == .notIndicated)
        #expect(
            card.field55.map(\.tag).contains(.cvmResults)
                && !card.field55.map(\.tag).contains(.terminalTransactionQualifiers))
        let result = try verifier.verify(ChipAuthorizationData(card), issuerMasterKey: V9.imk, lastSeenATC: 0x29)
        guard case .valid(let verified) = result else { Issue.record("rejected: \(result)"); return }
        #expect(verified.version == version && verified.cdcvm == CDCVMResult(performed: true, method: .passcode))
        // ARPC method 1: with MK for CVN 16, with SK for CVN 20.
        let mk = try V9.masterKey(V9.mastercardPAN)
        let key = version == .mastercard16 ? mk : try EMVKeyDerivation.commonSessionKey(masterKey: mk, atc: 0x2A)
        let arpc = try ApplicationCryptogram.arpcMethod1(key: key, arqc: card.cryptogram, responseCode: hex("3030"))
        #expect(
            try verified.issuerAuthenticationData(responseCode: hex("3030"), cardStatusUpdate: [0, 0, 0, 0]) == arpc
                + hex("3030"))
    }

    /// Field 55 with one data object replaced.
    func tampered(_ card: CardReadData, _ tag: TLVTag, _ change: ([UInt8]) -> [UInt8]) -> ChipAuthorizationData {
        ChipAuthorizationData(
            pan: card.pan, panSequenceNumber: 0,
            elements: card.field55.map { $0.tag == tag ? TLV(tag, change($0.value)) : $0 })
    }

    func reason(_ result: CryptogramVerification) -> CryptogramRejection.Reason? {
        if case .invalid(let rejection) = result { return rejection.reason }
        return nil
    }

    @Test(
        "N2/N3: a changed UN, amount, currency, ATC, date, AIP, CDCVM bit or cryptogram is rejected",
        arguments: [PaymentScheme.visa, .mastercard])
    func changedDataIsRejected(scheme: PaymentScheme) async throws {
        let profile = scheme == .visa ? try V9.visaProfile() : try V9.mastercardProfile()
        let card = try #require(try await V9.run(try V9.card([profile])).card)
        let good = ChipAuthorizationData(card)
        #expect(try verifier.verify(good, issuerMasterKey: V9.imk, lastSeenATC: 0x29).isValid)
        let changes: [(String, TLVTag, ([UInt8]) -> [UInt8])] = [
            ("amount", .amountAuthorised, { _ in hex("000000015001") }),
            ("unpredictable number", .unpredictableNumber, { _ in hex("7A3B9C02") }),
            ("currency", .transactionCurrencyCode, { _ in hex("0978") }),
            ("ATC", .applicationTransactionCounter, { _ in hex("002B") }),
            ("date", .transactionDate, { _ in hex("260116") }),
            ("AIP", .applicationInterchangeProfile, { $0.map { $0 ^ 0x01 } }),
            (
                "CDCVM bit", .issuerApplicationData,
                { iad in
                    var out = iad
                    out[scheme == .visa ? 9 : 7] ^= 0x80  // Visa: discretionary data; Mastercard: CVR byte 6
                    return out
                }
            ),
            ("cryptogram", .applicationCryptogram, { $0.map { $0 ^ 0xFF } }),
        ]
        for (what, tag, change) in changes {
            let result = try verifier.verify(tampered(card, tag, change), issuerMasterKey: V9.imk, lastSeenATC: 0x20)
            #expect(reason(result) == .cryptogramMismatch, "changed \(what): \(result)")
        }
        // Another issuer master key.
        let otherIMK = SymmetricKey(data: hex("FEDCBA98765432100123456789ABCDEF"))
        #expect(reason(try verifier.verify(good, issuerMasterKey: otherIMK, lastSeenATC: nil)) == .cryptogramMismatch)
    }

    @Test("N1: the ATC window: replayed, out of window, and a wider window")
    func theATCWindow() async throws {
        let card = try #require(try await V9.run(try V9.card([try V9.visaProfile()], lastATC: 0x03E8)).card)
        #expect(card.atc == 0x03E9)  // 1001
        let data = ChipAuthorizationData(card)
        #expect(try verifier.verify(data, issuerMasterKey: V9.imk, lastSeenATC: nil).isValid)
        #expect(try verifier.verify(data, issuerMasterKey: V9.imk, lastSeenATC: 0x03E8).isValid)
        #expect(try verifier.verify(data, issuerMasterKey: V9.imk, lastSeenATC: 1).isValid)  // exactly 1,000 above
        #expect(reason(try verifier.verify(data, issuerMasterKey: V9.imk, lastSeenATC: 0x03E9)) == .atcReplayed)
        #expect(reason(try verifier.verify(data, issuerMasterKey: V9.imk, lastSeenATC: 0x0400)) == .atcReplayed)
        #expect(reason(try verifier.verify(data, issuerMasterKey: V9.imk, lastSeenATC: 0)) == .atcOutOfWindow)
        let wider = CryptogramVerifier(atcWindow: 5000)
        #expect(try wider.verify(data, issuerMasterKey: V9.imk, lastSeenATC: 0).isValid)
    }

    @Test("N1: ten transactions verify in order; each one replayed is rejected")
    func replayedTransactionsAreRejected() async throws {
        // Ten transactions verified in order, then each one replayed.
        let link = InProcessCardLink(card: try V9.card([try V9.visaProfile()], lastATC: 0))
        let kernel = TerminalKernel(configuration: V9.terminal, random: InsecureDeterministicRandom(seed: [1]))
        var last: UInt16?
        var accepted: [ChipAuthorizationData] = []
        for _ in 0..<10 {
            await link.authorize(CardholderAuthorization(verifiedBy: .fingerprint))
            let outcome = try await kernel.run(
                TransactionParameters(amount: 250, date: try TransactionDate(yymmdd: "260115")), card: link)
            let data = ChipAuthorizationData(try #require(outcome.card))
            guard case .valid(let verified) = try verifier.verify(data, issuerMasterKey: V9.imk, lastSeenATC: last)
            else {
                Issue.record("transaction rejected")
                return
            }
            last = verified.atc
            accepted.append(data)
        }
        #expect(last == 10)
        for data in accepted {
            #expect(reason(try verifier.verify(data, issuerMasterKey: V9.imk, lastSeenATC: last)) == .atcReplayed)
        }
        // The unpredictable numbers came from the injected random source and differ per transaction.
        #expect(Set(accepted.map { $0.value(.unpredictableNumber) ?? [] }).count == 10)
    }

    @Test func verifierRejectsWhatItCannotCheck() async throws {
        let card = try #require(try await V9.run(try V9.card([try V9.visaProfile()])).card)
        let data = ChipAuthorizationData(card)
        let only10 = CryptogramVerifier(acceptedVersions: [.visa10])
        #expect(reason(try only10.verify(data, issuerMasterKey: V9.imk, lastSeenATC: nil)) == .unsupportedVersion)
        let withoutUN = ChipAuthorizationData(
            pan: card.pan, panSequenceNumber: 0, elements: card.field55.filter { $0.tag != .unpredictableNumber })
        #expect(reason(try verifier.verify(withoutUN, issuerMasterKey: V9.imk, lastSeenATC: nil)) == .missingData)
        #expect(
            reason(
                try verifier.verify(
                    tampered(card, .cryptogramInformationData) { _ in [0x00] }, issuerMasterKey: V9.imk,
                    lastSeenATC: nil))
                == .notAnARQC)
        #expect(
            reason(
                try verifier.verify(
                    tampered(card, .issuerApplicationData) { _ in hex("1F4A6331") }, issuerMasterKey: V9.imk,
                    lastSeenATC: nil))
                == .malformedData)
        #expect(throws: EMVError(.malformedTLV, "")) {
            try ChipAuthorizationData(pan: card.pan, panSequenceNumber: 0, field55: hex("9F2608AABB"))
        }
        #expect(throws: EMVError(.invalidArgument, "")) {
            try verifier.verify(data, issuerMasterKey: SymmetricKey(data: [1, 2, 3]), lastSeenATC: nil)
        }
        // Field 55 survives encoding and decoding.
        let decoded = try ChipAuthorizationData(pan: card.pan, panSequenceNumber: 0, field55: card.field55Bytes)
        #expect(try verifier.verify(decoded, issuerMasterKey: V9.imk, lastSeenATC: nil).isValid)
        // The verified result never prints its key.
        if case .valid(let verified) = try verifier.verify(data, issuerMasterKey: V9.imk, lastSeenATC: nil) {
            var dumped = ""
            dump(verified, to: &dumped)
            let sk = try EMVKeyDerivation.commonSessionKey(masterKey: try V9.masterKey(V9.visaPAN), atc: 0x2A)
            #expect(!dumped.contains(hexString(sk.bytes.unsafeCopyOfBytes())) && !"\(verified)".contains("7F97"))
        }
    }
}

@Suite("Terminal kernel: entry point and outcomes")
struct KernelTests {
    @Test func choosesByPriorityOrPreference() async throws {
        let card = try V9.card([try V9.visaProfile(priority: 2), try V9.mastercardProfile(priority: 1)])
        let byPriority = try await V9.run(card)
        #expect(byPriority.card?.scheme == .mastercard)
        let ppse = try TLV.decode(byPriority.transcript[0].response.dropLast(2))
        #expect(ppse.all(.directoryEntry).count == 2)
        var preferring = V9.terminal
        preferring.preferredAID = PaymentScheme.visa.aid
        #expect(try await V9.run(card, configuration: preferring).card?.scheme == .visa)
        // A reader that accepts only Mastercard never selects the Visa application.
        var mastercardOnly = V9.terminal
        mastercardOnly.supportedApplications = [.init(aid: PaymentScheme.mastercard.aid, scheme: .mastercard)]
        mastercardOnly.preferredAID = PaymentScheme.visa.aid
        #expect(try await V9.run(card, configuration: mastercardOnly).card?.scheme == .mastercard)
        var nothing = V9.terminal
        nothing.supportedApplications = [.init(aid: hex("A000000025"), scheme: .visa)]
        let none = try await V9.run(card, configuration: nothing)
        #expect(none.status == .tryAnotherInterface && none.transcript.count == 1)
    }

    @Test func limitsAndCVM() async throws {
        var limited = V9.terminal
        limited.contactlessTransactionLimit = 10000
        let over = try await V9.run(try V9.card([try V9.visaProfile()]), configuration: limited)
        #expect(over.status == .tryAnotherInterface && over.transcript.isEmpty)
        // The CVM-required limit sets TTQ byte 2 b7 on a reader configured without it.
        var relaxed = V9.terminal
        relaxed.terminalTransactionQualifiers = hex("36804000")
        relaxed.cvmRequiredLimit = 10000
        let kernel = TerminalKernel(configuration: relaxed)
        #expect(try kernel.terminalData(for: try V9.transaction())[.terminalTransactionQualifiers] == hex("36C04000"))
        #expect(
            try kernel.terminalData(for: try V9.transaction(amount: 500))[.terminalTransactionQualifiers]
                == hex("36804000"))
        // A card without CDCVM asked for a CVM answers "online PIN": the outcome says so.
        let link = InProcessCardLink(card: try V9.card([try V9.visaProfile()]))
        await link.authorize(CardholderAuthorization(cdcvm: CDCVMResult(performed: false, method: .none)))
        let pin = try await TerminalKernel(configuration: V9.terminal).run(try V9.transaction(), card: link)
        #expect(pin.status == .onlineRequest && pin.card?.cardholderVerification == .onlinePIN)
    }

    @Test func refusalsEndTheApplicationWithTheTranscript() async throws {
        let outcome = try await V9.run(try V9.card([try V9.visaProfile()]), method: nil)
        #expect(outcome.status == .endApplication && outcome.refusal == .conditionsNotSatisfied && outcome.card == nil)
        #expect(outcome.transcript.count == 3)
        let exhausted = try await V9.run(try V9.card([try V9.mastercardProfile()], lastATC: 0xFFFF))
        #expect(exhausted.status == .endApplication && exhausted.refusal == .conditionsNotSatisfied)
    }

    /// A card link that answers from a script, for cards that misbehave.
    actor ScriptedLink: CardTransport {
        var answers: [String: String]
        let fallback: InProcessCardLink?
        init(_ answers: [String: String], fallback: InProcessCardLink? = nil) {
            self.answers = answers
            self.fallback = fallback
        }
        func transmit(_ command: CommandAPDU) async throws -> ResponseAPDU {
            let key = hexString(try command.encoded())
            if let answer = answers[key] {
                if answer == "drop" { throw EMVError(.transportFailure, "field lost") }
                return try ResponseAPDU(bytes: hex(answer))
            }
            guard let fallback else { return ResponseAPDU(.instructionNotSupported) }
            return await fallback.transmit(command)
        }
    }

    @Test func misbehavingCards() async throws {
        let kernel = TerminalKernel(configuration: V9.terminal)
        let tx = try V9.transaction()
        // No PPSE: only a preferred AID is tried directly.
        let real = InProcessCardLink(card: try V9.card([try V9.visaProfile()]))
        await real.authorize(CardholderAuthorization(verifiedBy: .face))
        let noPPSE = ScriptedLink([CardTests.selectPPSE: "6A82"], fallback: real)
        #expect(try await kernel.run(tx, card: noPPSE).status == .tryAnotherInterface)
        var preferring = V9.terminal
        preferring.preferredAID = PaymentScheme.visa.aid
        let direct = try await TerminalKernel(configuration: preferring).run(tx, card: noPPSE)
        #expect(direct.status == .onlineRequest && direct.transcript.count == 4)
        // Garbage answers: an outcome with the reason, never a crash.
        let garbage = [
            "770582": "truncated template", "7003820120": "wrong template", "77038201": "short AIP",
            "7706820220009402": "AFL cut", "77089F2608AABBCCDD": "overlong value",
        ]
        for (answer, what) in garbage {
            let link = InProcessCardLink(card: try V9.card([try V9.visaProfile()]))
            await link.authorize(CardholderAuthorization(verifiedBy: .face))
            let scripted = ScriptedLink([CardTests.gpoV9: answer + "9000"], fallback: link)
            let outcome = try await kernel.run(tx, card: scripted)
            #expect(outcome.status == .endApplication, "\(what): \(outcome)")
        }
        // A bad AFL and a record that is not a template.
        let badAFL = ScriptedLink([CardTests.gpoV9: "770A8202200094041F0101009000"], fallback: real)
        #expect(try await kernel.run(tx, card: badAFL).status == .endApplication)
        // The link drops: a typed error.
        await #expect(throws: EMVError(.transportFailure, "")) {
            try await kernel.run(tx, card: ScriptedLink([CardTests.selectPPSE: "drop"]))
        }
    }
}
