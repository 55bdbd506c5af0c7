public import OrchardCrypto

/// The reader's contactless kernel: entry point (PPSE, candidate list, application selection), then the
/// Visa-style (Kernel 3) or Mastercard-style (Kernel 2) flow, and an outcome with what the acquirer needs.
///
/// Card misbehaviour (refusals, malformed or missing data) ends in an outcome value with the transcript;
/// only a failing link or an unusable configuration throws. The authorization's chip data is built from the
/// terminal's own amount, currency, date and unpredictable number; a card that answers with other values for
/// any of the terminal's data objects ends the application (no cryptogram goes online).
public struct TerminalKernel: Sendable {
    /// The reader's configuration: accepted applications, country, currency and limits.
    public let configuration: TerminalConfiguration
    private let random: any RandomSource

    /// A kernel for a reader configured by `configuration`; it keeps no state between transactions.
    ///
    /// - Parameters:
    ///   - configuration: the accepted applications, country, currency and limits.
    ///   - random: the source of unpredictable numbers (tests and simulations fix it).
    public init(configuration: TerminalConfiguration, random: any RandomSource = SystemRandom()) {
        self.configuration = configuration
        self.random = random
    }

    /// The terminal data for `transaction`: everything a PDOL or CDOL may ask for.
    public func terminalData(for transaction: TransactionParameters) throws(EMVError) -> [TLVTag: [UInt8]] {
        var ttq = configuration.terminalTransactionQualifiers
        guard ttq.count == 4 else { throw EMVError(.invalidArgument, "the TTQ is 4 bytes") }
        if let limit = configuration.cvmRequiredLimit, transaction.amount >= limit { ttq[1] |= 0x40 }
        let un = transaction.unpredictableNumber ?? random.bytes(4)
        guard un.count == 4 else { throw EMVError(.invalidArgument, "the unpredictable number is 4 bytes") }
        guard (0...999).contains(configuration.countryCode), (0...999).contains(configuration.currencyCode) else {
            throw EMVError(.invalidArgument, "country and currency codes are 3 digits")
        }
        return [
            .terminalTransactionQualifiers: ttq,
            .amountAuthorised: try EMVNumeric.amount(transaction.amount),
            .amountOther: try EMVNumeric.amount(transaction.otherAmount),
            .terminalCountryCode: try EMVNumeric.numeric(UInt64(configuration.countryCode), byteCount: 2),
            .terminalVerificationResults: [0, 0, 0, 0, 0],
            .transactionCurrencyCode: try EMVNumeric.numeric(UInt64(configuration.currencyCode), byteCount: 2),
            .transactionDate: transaction.date.bytes,
            .transactionType: [transaction.type],
            .unpredictableNumber: un,
            .terminalType: [configuration.terminalType],
            .cvmResults: [0x3F, 0x00, 0x00],  // no CVM performed by the terminal
        ]
    }

    /// Runs one contactless transaction with the card behind `link`.
    public func run(
        _ transaction: TransactionParameters, card link: some CardTransport
    ) async throws(EMVError)
        -> TerminalOutcome
    {
        var session = Session(link: link)
        if let limit = configuration.contactlessTransactionLimit, transaction.amount > limit {
            return session.outcome(.tryAnotherInterface, "the amount is above the contactless limit")
        }
        let terminal = try terminalData(for: transaction)

        // Entry point: the PPSE's candidates, the preferred AID first, then by priority.
        var candidates: [(aid: [UInt8], scheme: PaymentScheme)] = []
        let ppse = try await session.exchange(.select(CommandAPDU.ppseName))
        if ppse.statusWord == .success, let fci = try? TLV.decode(ppse.data) {
            let entries = fci.all(.directoryEntry).compactMap { entry -> (aid: [UInt8], priority: Int)? in
                guard let aid = entry.children.value(.applicationIdentifier), (5...16).contains(aid.count) else {
                    return nil
                }
                let indicator = entry.children.value(.applicationPriorityIndicator)?.first ?? 0
                let priority = indicator & 0x0F == 0 ? 16 : Int(indicator & 0x0F)
                return (aid, priority)
            }
            for entry in entries.enumerated().sorted(by: {
                ($0.element.priority, $0.offset) < ($1.element.priority, $1.offset)
            }) {
                if let scheme = supportedScheme(entry.element.aid) { candidates.append((entry.element.aid, scheme)) }
            }
            if let preferred = configuration.preferredAID, let i = candidates.firstIndex(where: { $0.aid == preferred })
            {
                candidates.insert(candidates.remove(at: i), at: 0)
            }
        } else if let preferred = configuration.preferredAID, let scheme = supportedScheme(preferred) {
            candidates = [(preferred, scheme)]
        }
        guard !candidates.isEmpty else {
            return session.outcome(
                .tryAnotherInterface, "no application the terminal accepts", refusal: ppse.statusWord)
        }

        // Final selection: the first candidate the card selects.
        var selected: (aid: [UInt8], scheme: PaymentScheme, fci: [TLV])?
        for candidate in candidates {
            let answer = try await session.exchange(.select(candidate.aid))
            guard answer.statusWord == .success, let fci = try? TLV.decode(answer.data),
                fci.first(.fciTemplate) != nil
            else { continue }
            let name = fci.value(.dedicatedFileName) ?? candidate.aid
            selected = (name, candidate.scheme, fci)
            break
        }
        guard let selected else { return session.outcome(.tryAnotherInterface, "the card selected no candidate") }

        // GET PROCESSING OPTIONS with the PDOL data.
        let pdol: DataObjectList
        do { pdol = try DataObjectList(bytes: selected.fci.value(.pdol) ?? []) } catch {
            return session.outcome(.endApplication, "the card's PDOL is malformed: \(error.message)")
        }
        let gpo = try await session.exchange(.getProcessingOptions(pdolData: pdol.build(from: terminal)))
        guard gpo.statusWord == .success else {
            return session.outcome(.endApplication, "the card refused GET PROCESSING OPTIONS", refusal: gpo.statusWord)
        }
        var cardData: [TLVTag: [UInt8]] = [:]
        do throws(EMVError) {
            let objects = try TLV.decode(gpo.data)
            if let format1 = objects.first, format1.tag == .responseMessageTemplateFormat1 {
                guard format1.value.count >= 2 else {
                    throw EMVError(.protocolViolation, "format 1 response too short")
                }
                cardData[.applicationInterchangeProfile] = Array(format1.value.prefix(2))
                cardData[.applicationFileLocator] = Array(format1.value.dropFirst(2))
            } else {
                guard let template = objects.first(.responseMessageTemplateFormat2) else {
                    throw EMVError(.protocolViolation, "the GPO response is neither format 1 nor format 2")
                }
                merge(template.children, into: &cardData)
            }
        } catch {
            return session.outcome(.endApplication, "the GPO response is malformed: \(error.message)")
        }
        guard cardData[.applicationInterchangeProfile]?.count == 2 else {
            return session.outcome(.endApplication, "the card returned no AIP")
        }

        // READ RECORD for every record the AFL names.
        do throws(EMVError) {
            for (sfi, record) in try aflRecords(cardData[.applicationFileLocator] ?? []) {
                let answer = try await session.exchange(.readRecord(record, sfi: sfi))
                guard answer.statusWord == .success else {
                    return session.outcome(.endApplication, "the card refused READ RECORD", refusal: answer.statusWord)
                }
                let objects = try TLV.decode(answer.data)
                guard objects.count == 1, objects[0].tag == .recordTemplate else {
                    throw EMVError(.protocolViolation, "a record is not one record template (70)")
                }
                merge(objects[0].children, into: &cardData)
            }
        } catch {
            if error.code == .transportFailure { throw error }
            return session.outcome(.endApplication, "reading records failed: \(error.message)")
        }

        // Kernel 2: GENERATE AC over CDOL1 (ARQC requested: this reader is online only).
        if selected.scheme.kernel == .mChip {
            let cdol1: DataObjectList
            do throws(EMVError) {
                guard let bytes = cardData[.cdol1] else { throw EMVError(.protocolViolation, "the card has no CDOL1") }
                cdol1 = try DataObjectList(bytes: bytes)
            } catch {
                return session.outcome(.endApplication, "CDOL1: \(error.message)")
            }
            let answer = try await session.exchange(.generateAC(0x80, cdolData: cdol1.build(from: terminal)))
            guard answer.statusWord == .success else {
                return session.outcome(.endApplication, "the card refused GENERATE AC", refusal: answer.statusWord)
            }
            do throws(EMVError) {
                let objects = try TLV.decode(answer.data)
                guard let template = objects.first(.responseMessageTemplateFormat2) else {
                    throw EMVError(.protocolViolation, "the GENERATE AC response is not format 2")
                }
                merge(template.children, into: &cardData)
            } catch {
                return session.outcome(.endApplication, "the GENERATE AC response is malformed: \(error.message)")
            }
        }

        return finish(session: session, scheme: selected.scheme, aid: selected.aid, card: cardData, terminal: terminal)
    }

    // MARK: the outcome

    private func finish(
        session: Session<some CardTransport>, scheme: PaymentScheme, aid: [UInt8], card: [TLVTag: [UInt8]],
        terminal: [TLVTag: [UInt8]]
    ) -> TerminalOutcome {
        // What the terminal sent (unpredictable number, amount, currency, date, TVR...) is the terminal's. A
        // card that answers with other values for it computed its cryptogram over data the terminal never
        // sent (a relay substituted them, or a pre-played cryptogram is being passed off): refused here.
        let substituted = terminal.keys.filter { tag in card[tag].map { $0 != terminal[tag] } ?? false }.sorted()
        guard substituted.isEmpty else {
            let tags = substituted.map(\.description).joined(separator: ", ")
            return session.outcome(
                .endApplication, "the card answered with other values for the terminal's data (\(tags))")
        }
        guard let cid = card[.cryptogramInformationData], cid.count == 1, let type = CryptogramType(cid: cid[0]),
            let ac = card[.applicationCryptogram], ac.count == 8, let atcBytes = card[.applicationTransactionCounter],
            atcBytes.count == 2, let iad = card[.issuerApplicationData], (1...32).contains(iad.count)
        else {
            return session.outcome(.endApplication, "the card released no complete cryptogram (9F26, 9F27, 9F36, 9F10)")
        }
        let track2 = card[.track2EquivalentData]
        let fromTrack2 = track2.flatMap(TerminalKernel.parseTrack2)
        let pan = card[.pan].flatMap { EMVNumeric.digits(ofCompressedNumeric: $0) } ?? fromTrack2?.pan
        let expiry = card[.expirationDate].flatMap { EMVNumeric.digits(ofNumeric: $0.prefix(2)) } ?? fromTrack2?.expiry
        guard let pan, (12...19).contains(pan.count), let expiry, expiry.count == 4 else {
            return session.outcome(.endApplication, "the card released no usable PAN and expiry")
        }
        let psn = card[.panSequenceNumber].flatMap { EMVNumeric.value(ofNumeric: $0) }.map { Int($0) }

        var cvm = CardholderVerification.notIndicated
        if scheme.kernel == .qVSDC {
            let ctq = card[.cardTransactionQualifiers] ?? [0, 0]
            if ctq.count == 2, ctq[1] & 0x80 != 0 {
                cvm = .consumerDevice
            } else if ctq.count == 2, ctq[0] & 0x80 != 0 {
                cvm = .onlinePIN
            } else if ctq.count == 2, ctq[0] & 0x40 != 0 {
                cvm = .signature
            } else {
                cvm = .none
            }
        }

        // Field 55 carries the terminal's own data, never the card's copy: a cryptogram computed over
        // substituted values then fails at the issuer even when the card does not echo them.
        var field55: [TLV] = []
        let order: [TLVTag] = [
            .applicationCryptogram, .cryptogramInformationData, .issuerApplicationData, .unpredictableNumber,
            .applicationTransactionCounter, .terminalVerificationResults, .transactionDate, .transactionType,
            .amountAuthorised, .transactionCurrencyCode, .applicationInterchangeProfile, .terminalCountryCode,
            .amountOther, .cvmResults, .terminalType, .dedicatedFileName, .terminalTransactionQualifiers,
            .cardTransactionQualifiers,
        ]
        for tag in order {
            if tag == .dedicatedFileName {
                field55.append(TLV(tag, aid))
            } else if let value = terminal[tag] {
                if scheme.kernel == .qVSDC && tag == .cvmResults { continue }
                if scheme.kernel == .mChip && tag == .terminalTransactionQualifiers { continue }
                field55.append(TLV(tag, value))
            } else if let value = card[tag] {
                field55.append(TLV(tag, value))
            }
        }
        let data = CardReadData(
            scheme: scheme, aid: aid, pan: pan, expiry: expiry, panSequenceNumber: psn, track2EquivalentData: track2,
            cryptogram: ac, cryptogramType: type, atc: UInt16(atcBytes[0]) << 8 | UInt16(atcBytes[1]),
            issuerApplicationData: iad, cardholderVerification: cvm, field55: field55)

        switch type {
        case .aac:
            return session.outcome(.declined, "the card declined (AAC)", card: data)
        case .tc:
            return session.outcome(
                .endApplication, "the card approved offline (TC); this reader is online only", card: data)
        case .arqc:
            let ttq = terminal[.terminalTransactionQualifiers] ?? []
            if scheme.kernel == .qVSDC, ttq.count == 4, ttq[1] & 0x40 != 0, cvm == .none {
                return session.outcome(
                    .declined, "a cardholder verification is required and none was performed", card: data)
            }
            return session.outcome(.onlineRequest, nil, card: data)
        }
    }

    // MARK: helpers

    private func supportedScheme(_ aid: [UInt8]) -> PaymentScheme? {
        configuration.supportedApplications.first { aid.starts(with: $0.aid) }?.scheme
    }

    /// Keeps the first value of a repeated tag (EMV forbids repeats across a transaction's responses).
    private func merge(_ objects: [TLV], into store: inout [TLVTag: [UInt8]]) {
        for object in objects.primitives where store[object.tag] == nil { store[object.tag] = object.value }
    }

    /// The (SFI, record) pairs an AFL names.
    func aflRecords(_ afl: [UInt8]) throws(EMVError) -> [(UInt8, UInt8)] {
        guard afl.count % 4 == 0 else { throw EMVError(.protocolViolation, "the AFL is not a multiple of 4 bytes") }
        var out: [(UInt8, UInt8)] = []
        for start in stride(from: 0, to: afl.count, by: 4) {
            let sfi = afl[start] >> 3
            let first = afl[start + 1]
            let last = afl[start + 2]
            guard afl[start] & 0x07 == 0, (1...30).contains(sfi), first >= 1, last >= first,
                afl[start + 3] <= last - first + 1
            else { throw EMVError(.protocolViolation, "AFL entry \(start / 4 + 1) is malformed") }
            for record in first...last { out.append((sfi, record)) }
        }
        return out
    }

    /// PAN and expiry (YYMM) from Track 2 equivalent data.
    static func parseTrack2(_ bytes: [UInt8]) -> (pan: String, expiry: String)? {
        let nibbles = bytes.flatMap { [$0 >> 4, $0 & 0x0F] }
        guard let separator = nibbles.firstIndex(of: 0x0D), nibbles.count >= separator + 5 else { return nil }
        let panNibbles = nibbles[..<separator]
        let expiryNibbles = nibbles[(separator + 1)..<(separator + 5)]
        guard panNibbles.allSatisfy({ $0 < 10 }), expiryNibbles.allSatisfy({ $0 < 10 }) else { return nil }
        let digits = { (n: ArraySlice<UInt8>) in String(n.map { Character(Unicode.Scalar(0x30 + $0)) }) }
        return (digits(panNibbles), digits(expiryNibbles))
    }

    /// The APDUs of one transaction, so outcomes carry the transcript.
    private struct Session<Link: CardTransport> {
        let link: Link
        var transcript: [APDUExchange] = []

        init(link: Link) { self.link = link }

        mutating func exchange(_ command: CommandAPDU) async throws(EMVError) -> ResponseAPDU {
            let bytes = try command.encoded()
            let response: ResponseAPDU
            do { response = try await link.transmit(command) } catch {
                throw EMVError(.transportFailure, "the card link failed: \(error)")
            }
            transcript.append(APDUExchange(command: bytes, response: response.encoded))
            return response
        }

        func outcome(
            _ status: TerminalOutcome.Status, _ reason: String?, refusal: StatusWord? = nil, card: CardReadData? = nil
        ) -> TerminalOutcome {
            TerminalOutcome(status: status, reason: reason, refusal: refusal, card: card, transcript: transcript)
        }
    }
}
