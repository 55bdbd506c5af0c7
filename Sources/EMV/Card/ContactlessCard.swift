/// What the card's host (the Secure Element, after checking the Secure Enclave's signed authorization)
/// tells the card about the user's verification. Single use: the next transaction consumes it.
public struct CardholderAuthorization: Hashable, Sendable {
    /// The CDCVM result the card puts into the issuer application data of the next cryptogram.
    public let cdcvm: CDCVMResult

    /// The user was verified on the device by `method`.
    public init(verifiedBy method: CDCVMMethod) { cdcvm = CDCVMResult(performed: true, method: method) }

    /// An authorization carrying `cdcvm` as given, including a result that says no verification was performed.
    public init(cdcvm: CDCVMResult) { self.cdcvm = cdcvm }
}

/// One payment application on the card: its personalisation data and its ATC store.
public struct CardApplication: Sendable {
    /// The application's personalisation data (scheme, PAN, keys, cryptogram version).
    public let profile: CardApplicationProfile
    /// Where the application's transaction counter persists: the card increments it before it releases a cryptogram.
    public let atcStore: any ATCStore

    /// Pairs a personalisation with its counter store; nothing is read or written until the card runs a transaction.
    public init(profile: CardApplicationProfile, atcStore: any ATCStore) {
        self.profile = profile
        self.atcStore = atcStore
    }
}

/// A contactless EMV card, as the Secure Element's applet runs it: a PPSE listing the applications, and for
/// each application the Visa-style (Kernel 3: cryptogram in the GET PROCESSING OPTIONS response) or
/// Mastercard-style (Kernel 2: READ RECORD, then GENERATE AC over CDOL1) command set.
///
/// Guarantees, each answered with a status word rather than a crash:
/// - nothing card-specific (PAN, Track 2, cryptogram) leaves without a ``CardholderAuthorization`` from the
///   host: GET PROCESSING OPTIONS answers `6985`, and READ RECORD and GENERATE AC need a started transaction;
/// - the ATC is incremented and stored through the application's ``ATCStore`` before any cryptogram is
///   computed; at `FFFF` every GET PROCESSING OPTIONS answers `6985`; a store failure answers `6581`;
/// - online only: a request for a TC gets an ARQC;
/// - `6E00` for an unknown class, `6D00` for an unknown instruction, `6700` for a wrong length, `6A82` for
///   an unknown application or file, `6A83` for an unknown record, `6A86` for wrong P1/P2.
public struct ContactlessCard: Sendable {
    /// The PDOL of the Visa-style application: TTQ, amount, other amount, terminal country, TVR, currency,
    /// date, type, unpredictable number (33 bytes of data).
    public static let visaPDOL = DataObjectList([
        .init(.terminalTransactionQualifiers, 4), .init(.amountAuthorised, 6), .init(.amountOther, 6),
        .init(.terminalCountryCode, 2), .init(.terminalVerificationResults, 5), .init(.transactionCurrencyCode, 2),
        .init(.transactionDate, 3), .init(.transactionType, 1), .init(.unpredictableNumber, 4),
    ])

    /// The CDOL1 of the Mastercard-style application: the cryptogram's transaction data, then terminal
    /// type and CVM results (which the cryptogram does not cover).
    public static let mastercardCDOL1 = DataObjectList(
        CryptogramData.transactionDataObjects + [.init(.terminalType, 1), .init(.cvmResults, 3)])

    private enum State: Sendable {
        case idle
        case ppseSelected
        case selected(Int)
        /// A transaction started by GET PROCESSING OPTIONS (ATC already stored).
        case started(Int, atc: UInt16, cdcvm: CDCVMResult)
        /// The cryptogram was released; only READ RECORD remains.
        case completed(Int)
    }

    /// The card's payment applications, in the order the PPSE lists them.
    public let applications: [CardApplication]
    private var state: State = .idle
    /// The host's authorization waiting for the next transaction.
    public private(set) var pendingAuthorization: CardholderAuthorization?

    /// A card with one or more applications (distinct AIDs).
    public init(applications: [CardApplication]) throws(EMVError) {
        guard !applications.isEmpty else { throw EMVError(.invalidArgument, "a card needs at least one application") }
        guard Set(applications.map(\.profile.aid)).count == applications.count else {
            throw EMVError(.invalidArgument, "two applications share an AID")
        }
        self.applications = applications
    }

    /// Records the host's authorization for the next transaction (replacing an unused one).
    public mutating func authorize(_ authorization: CardholderAuthorization) { pendingAuthorization = authorization }

    /// Drops an unused authorization (the user cancelled, or the device locked).
    public mutating func revokeAuthorization() { pendingAuthorization = nil }

    /// The field went away: forget the selection and any transaction in progress (the authorization too).
    public mutating func reset() {
        state = .idle
        pendingAuthorization = nil
    }

    /// Processes raw command bytes and returns raw response bytes (data ‖ SW1 SW2).
    public mutating func process(bytes: some Collection<UInt8>) -> [UInt8] {
        guard let command = try? CommandAPDU(bytes: bytes) else { return StatusWord.wrongLength.bytes }
        return process(command).encoded
    }

    /// Processes one command APDU.
    public mutating func process(_ command: CommandAPDU) -> ResponseAPDU {
        guard command.cla == 0x00 || command.cla == 0x80 else { return ResponseAPDU(.classNotSupported) }
        let proprietary: Bool
        switch command.ins {
        case 0xA4, 0xB2: proprietary = false
        case 0xA8, 0xAE: proprietary = true
        default: return ResponseAPDU(.instructionNotSupported)
        }
        guard (command.cla == 0x80) == proprietary else { return ResponseAPDU(.classNotSupported) }
        switch command.ins {
        case 0xA4: return select(command)
        case 0xA8: return getProcessingOptions(command)
        case 0xB2: return readRecord(command)
        default: return generateAC(command)
        }
    }

    // MARK: SELECT

    private mutating func select(_ command: CommandAPDU) -> ResponseAPDU {
        guard command.p1 == 0x04, command.p2 == 0x00 else { return ResponseAPDU(.incorrectP1P2) }
        guard (1...16).contains(command.data.count) else { return ResponseAPDU(.wrongLength) }
        if command.data == CommandAPDU.ppseName {
            state = .ppseSelected
            return ResponseAPDU(data: ppseFCI.encoded, statusWord: .success)
        }
        // Exact AID, or a partial name of at least the RID (EMV's partial selection), first match wins.
        let index =
            applications.firstIndex { $0.profile.aid == command.data }
            ?? applications.firstIndex { command.data.count >= 5 && $0.profile.aid.starts(with: command.data) }
        guard let index else {
            state = .idle
            return ResponseAPDU(.fileNotFound)
        }
        state = .selected(index)
        return ResponseAPDU(data: applicationFCI(applications[index].profile).encoded, statusWord: .success)
    }

    private var ppseFCI: TLV {
        let entries = applications.map { app in
            TLV(
                .directoryEntry,
                children: [
                    TLV(.applicationIdentifier, app.profile.aid), TLV(.applicationLabel, Array(app.profile.label.utf8)),
                    TLV(.applicationPriorityIndicator, [app.profile.priority]),
                ])
        }
        return TLV(
            .fciTemplate,
            children: [
                TLV(.dedicatedFileName, CommandAPDU.ppseName),
                TLV(.fciProprietaryTemplate, children: [TLV(.fciIssuerDiscretionaryData, children: entries)]),
            ])
    }

    private func applicationFCI(_ profile: CardApplicationProfile) -> TLV {
        var proprietary = [TLV(.applicationLabel, Array(profile.label.utf8))]
        if profile.scheme.kernel == .qVSDC { proprietary.append(TLV(.pdol, ContactlessCard.visaPDOL.encoded)) }
        return TLV(
            .fciTemplate,
            children: [TLV(.dedicatedFileName, profile.aid), TLV(.fciProprietaryTemplate, children: proprietary)])
    }

    // MARK: GET PROCESSING OPTIONS

    private mutating func getProcessingOptions(_ command: CommandAPDU) -> ResponseAPDU {
        guard case .selected(let index) = state else { return ResponseAPDU(.conditionsNotSatisfied) }
        guard command.p1 == 0x00, command.p2 == 0x00 else { return ResponseAPDU(.incorrectP1P2) }
        let app = applications[index]
        let pdol = app.profile.scheme.kernel == .qVSDC ? ContactlessCard.visaPDOL : DataObjectList([])
        // The data is one command template (83) holding exactly the PDOL's data.
        guard command.data.count >= 2, command.data[0] == 0x83 else { return ResponseAPDU(.incorrectData) }
        guard let template = try? TLV.decodeSingle(command.data), template.tag == .commandTemplate,
            template.encoded == command.data
        else { return ResponseAPDU(.wrongLength) }
        guard let values = try? pdol.split(template.value) else { return ResponseAPDU(.wrongLength) }
        guard let authorization = pendingAuthorization else { return ResponseAPDU(.conditionsNotSatisfied) }

        var ctq: [UInt8] = [0x00, 0x00]
        if app.profile.scheme.kernel == .qVSDC {
            let ttq = values.value(.terminalTransactionQualifiers) ?? []
            // Only qVSDC (TTQ byte 1 b6); no magnetic-stripe mode.
            guard ttq.count == 4, ttq[0] & 0x20 != 0 else { return ResponseAPDU(.conditionsNotSatisfied) }
            if authorization.cdcvm.performed {
                ctq = [0x00, 0x80]  // consumer device CVM performed
            } else if ttq[1] & 0x40 != 0 {  // the reader requires a CVM
                if ttq[0] & 0x04 != 0 {
                    ctq = [0x80, 0x00]  // online PIN required
                } else if ttq[0] & 0x02 != 0 {
                    ctq = [0x40, 0x00]  // signature required
                } else {
                    return ResponseAPDU(.conditionsNotSatisfied)
                }
            }
        }

        // The ATC is stored before anything is computed or released.
        let atc: UInt16
        do {
            guard let next = try app.atcStore.incrementATC() else { return ResponseAPDU(.conditionsNotSatisfied) }
            atc = next
        } catch {
            return ResponseAPDU(.memoryFailure)
        }
        pendingAuthorization = nil

        let profile = app.profile
        if profile.scheme.kernel == .mChip {
            state = .started(index, atc: atc, cdcvm: authorization.cdcvm)
            let response = TLV(
                .responseMessageTemplateFormat2,
                children: [
                    TLV(.applicationInterchangeProfile, ContactlessCard.mastercardAIP),
                    TLV(.applicationFileLocator, ContactlessCard.mastercardAFL),
                ])
            return ResponseAPDU(data: response.encoded, statusWord: .success)
        }

        // Visa-style: the cryptogram over the PDOL data (without the TTQ), AIP, ATC and the whole IAD.
        state = .completed(index)
        let iad = VisaIssuerApplicationData(
            derivationKeyIndex: profile.derivationKeyIndex, cryptogramVersionNumber: profile.cryptogramVersion.number,
            cardVerificationResults: [CryptogramType.arqc.cvrFirstByte, 0x00, 0x00],
            cdcvm: profile.carriesCDCVMInIAD ? authorization.cdcvm : nil
        ).encoded
        guard
            let data = try? CryptogramData(
                values: { values.value($0) }, applicationInterchangeProfile: ContactlessCard.visaAIP, atc: atc,
                issuerApplicationData: iad),
            let arqc = try? ApplicationCryptogram.generate(
                profile.cryptogramVersion, masterKey: profile.masterKey, data: data)
        else { return ResponseAPDU(.unknownError) }
        let response = TLV(
            .responseMessageTemplateFormat2,
            children: [
                TLV(.applicationInterchangeProfile, ContactlessCard.visaAIP),
                TLV(.applicationFileLocator, ContactlessCard.visaAFL),
                TLV(.track2EquivalentData, profile.track2EquivalentData),
                TLV(.panSequenceNumber, [Self.bcd(profile.panSequenceNumber)]),
                TLV(.issuerApplicationData, iad),
                TLV(.applicationCryptogram, arqc),
                TLV(.cryptogramInformationData, [CryptogramType.arqc.rawValue]),
                TLV(.applicationTransactionCounter, [UInt8(atc >> 8), UInt8(atc & 0xFF)]),
                TLV(.cardTransactionQualifiers, ctq),
            ])
        return ResponseAPDU(data: response.encoded, statusWord: .success)
    }

    // MARK: READ RECORD

    private func readRecord(_ command: CommandAPDU) -> ResponseAPDU {
        guard command.p2 & 0x07 == 0x04, command.p1 != 0 else { return ResponseAPDU(.incorrectP1P2) }
        let index: Int
        switch state {
        case .started(let i, _, _), .completed(let i): index = i
        default: return ResponseAPDU(.conditionsNotSatisfied)
        }
        let sfi = command.p2 >> 3
        let profile = applications[index].profile
        let records = records(profile)
        guard records.contains(where: { $0.sfi == sfi }) else { return ResponseAPDU(.fileNotFound) }
        guard let record = records.first(where: { $0.sfi == sfi && $0.number == command.p1 }) else {
            return ResponseAPDU(.recordNotFound)
        }
        return ResponseAPDU(data: record.template.encoded, statusWord: .success)
    }

    private func records(_ profile: CardApplicationProfile) -> [(sfi: UInt8, number: UInt8, template: TLV)] {
        let country = (try? EMVNumeric.numeric(UInt64(profile.issuerCountryCode), byteCount: 2)) ?? [0, 0]
        switch profile.scheme.kernel {
        case .qVSDC:
            return [
                (
                    3, 1,
                    TLV(
                        .recordTemplate,
                        children: [TLV(.issuerCountryCode, country), TLV(.applicationUsageControl, [0xFF, 0x00])])
                )
            ]
        case .mChip:
            return [
                (
                    1, 1,
                    TLV(
                        .recordTemplate,
                        children: [
                            TLV(.track2EquivalentData, profile.track2EquivalentData),
                            TLV(.pan, (try? EMVNumeric.compressedNumeric(profile.pan)) ?? []),
                            TLV(.expirationDate, profile.expirationDate),
                            TLV(.panSequenceNumber, [Self.bcd(profile.panSequenceNumber)]),
                            TLV(.issuerCountryCode, country),
                            TLV(.cdol1, ContactlessCard.mastercardCDOL1.encoded),
                        ])
                )
            ]
        }
    }

    // MARK: GENERATE AC

    private mutating func generateAC(_ command: CommandAPDU) -> ResponseAPDU {
        guard case .started(let index, let atc, let cdcvm) = state else { return ResponseAPDU(.conditionsNotSatisfied) }
        let profile = applications[index].profile
        guard command.p2 == 0x00, command.p1 & 0x3F == 0, let requested = CryptogramType(referenceControl: command.p1)
        else { return ResponseAPDU(.incorrectP1P2) }
        guard let values = try? ContactlessCard.mastercardCDOL1.split(command.data) else {
            return ResponseAPDU(.wrongLength)
        }
        // Online only: a TC request gets an ARQC; an AAC request is honoured (the terminal declines).
        let type: CryptogramType = requested == .aac ? .aac : .arqc
        let domestic =
            values.value(.terminalCountryCode)
            == (try? EMVNumeric.numeric(UInt64(profile.issuerCountryCode), byteCount: 2))
        let iad = MastercardIssuerApplicationData(
            keyDerivationIndex: profile.derivationKeyIndex, cryptogramVersionNumber: profile.cryptogramVersion.number,
            cardVerificationResults: MastercardIssuerApplicationData.cardVerificationResults(
                type: type, domestic: domestic, cdcvm: cdcvm)
        ).encoded
        state = .completed(index)
        guard
            let data = try? CryptogramData(
                values: { values.value($0) }, applicationInterchangeProfile: ContactlessCard.mastercardAIP, atc: atc,
                issuerApplicationData: iad),
            let ac = try? ApplicationCryptogram.generate(
                profile.cryptogramVersion, masterKey: profile.masterKey, data: data)
        else { return ResponseAPDU(.unknownError) }
        let template = TLV(
            .responseMessageTemplateFormat2,
            children: [
                TLV(.cryptogramInformationData, [type.rawValue]),
                TLV(.applicationTransactionCounter, [UInt8(atc >> 8), UInt8(atc & 0xFF)]),
                TLV(.applicationCryptogram, ac),
                TLV(.issuerApplicationData, iad),
            ])
        return ResponseAPDU(data: template.encoded, statusWord: .success)
    }

    // MARK: constants

    /// Visa-style AIP `2000` (DDA supported, as in vector V9).
    static let visaAIP: [UInt8] = [0x20, 0x00]
    /// Visa-style AFL: SFI 3, record 1.
    static let visaAFL: [UInt8] = [0x18, 0x01, 0x01, 0x00]
    /// Mastercard-style AIP `0280`: on-device cardholder verification supported, EMV mode.
    static let mastercardAIP: [UInt8] = [0x02, 0x80]
    /// Mastercard-style AFL: SFI 1, record 1.
    static let mastercardAFL: [UInt8] = [0x08, 0x01, 0x01, 0x00]

    static func bcd(_ value: Int) -> UInt8 { UInt8(value / 10 % 10) << 4 | UInt8(value % 10) }
}

extension StatusWord {
    /// `6F00` an error the card cannot describe more precisely.
    public static let unknownError = StatusWord(0x6F00)
}
