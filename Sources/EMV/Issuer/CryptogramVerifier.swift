public import OrchardCrypto

/// The chip data of an online authorization as the token service receives it: the PAN (a DPAN), the PAN
/// sequence number, and the field 55 data objects.
public struct ChipAuthorizationData: Sendable, CustomStringConvertible {
    /// The primary account number (for a device, the DPAN): the card master key is derived from it.
    public let pan: String
    /// The PAN sequence number (tag 5F34), 0 to 99; it enters the master key derivation.
    public let panSequenceNumber: Int
    /// The primitive data objects of field 55, in order.
    public let elements: [TLV]

    /// Keeps only the primitive data objects of `elements` (constructed ones are flattened), in order.
    public init(pan: String, panSequenceNumber: Int, elements: [TLV]) {
        self.pan = pan
        self.panSequenceNumber = panSequenceNumber
        self.elements = elements.primitives
    }

    /// Decodes field 55 (with the default TLV limits).
    public init(pan: String, panSequenceNumber: Int, field55: some Collection<UInt8>) throws(EMVError) {
        self.init(pan: pan, panSequenceNumber: panSequenceNumber, elements: try TLV.decode(field55))
    }

    /// What a reader's outcome hands the acquirer.
    public init(_ card: CardReadData) {
        self.init(pan: card.pan, panSequenceNumber: card.panSequenceNumber ?? 0, elements: card.field55)
    }

    /// The first value of `tag`.
    public func value(_ tag: TLVTag) -> [UInt8]? { elements.first { $0.tag == tag }?.value }

    /// The scheme from the AID (84, 4F or 9F06), else from the PAN's first digits.
    public var scheme: PaymentScheme? {
        for tag: TLVTag in [.dedicatedFileName, .applicationIdentifier, 0x9F06] {
            if let aid = value(tag) { return PaymentScheme(aid: aid) }
        }
        return PaymentScheme(pan: pan)
    }

    /// The ATC (9F36), if present and 2 bytes.
    public var atc: UInt16? {
        guard let bytes = value(.applicationTransactionCounter), bytes.count == 2 else { return nil }
        return UInt16(bytes[0]) << 8 | UInt16(bytes[1])
    }

    /// The derivation key index in the IAD: which issuer master key made this card's key.
    public var derivationKeyIndex: UInt8? {
        guard let iad = value(.issuerApplicationData), let scheme else { return nil }
        let offset = scheme.issuerApplicationDataLayout.derivationKeyIndexOffset
        return iad.count > offset ? iad[offset] : nil
    }

    public var description: String { "ChipAuthorizationData(…\(pan.suffix(4)), \(elements.count) data objects)" }
}

/// Why a cryptogram was refused.
public struct CryptogramRejection: Hashable, Sendable, CustomStringConvertible {
    /// A kind of refusal; new reasons may be added, so a `switch` over them needs a default.
    public struct Reason: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }

        /// A data object the CVN needs is absent or has the wrong length.
        public static let missingData = Reason("missingData")
        /// The IAD or another object is malformed, or the scheme is unknown.
        public static let malformedData = Reason("malformedData")
        /// The CVN is not one the verifier accepts.
        public static let unsupportedVersion = Reason("unsupportedVersion")
        /// The CID says the card did not ask to go online (AAC or TC).
        public static let notAnARQC = Reason("notAnARQC")
        /// The recomputed cryptogram differs: changed data, wrong key, or a forgery.
        public static let cryptogramMismatch = Reason("cryptogramMismatch")
        /// The ATC is not above the last one seen: a replay or an old cryptogram.
        public static let atcReplayed = Reason("atcReplayed")
        /// The ATC is too far above the last one seen.
        public static let atcOutOfWindow = Reason("atcOutOfWindow")

        public var description: String { name }
    }

    /// Why the cryptogram was refused: what callers branch on.
    public let reason: Reason
    /// What exactly failed, without keys or card numbers.
    public let message: String

    /// A refusal for `reason`; `message` must hold no key or card number.
    public init(_ reason: Reason, _ message: String) {
        self.reason = reason
        self.message = message
    }

    public var description: String { "\(reason): \(message)" }
}

/// A cryptogram that verified, with what the issuer needs to answer: the CVN, the ATC to record as the
/// last seen, the authenticated CDCVM result, and the key for the ARPC (held privately, never printed).
public struct VerifiedCryptogram: Sendable, CustomStringConvertible, CustomReflectable {
    /// The cryptogram version (CVN) the cryptogram was verified under.
    public let version: CryptogramVersion
    /// The card's application transaction counter: the issuer records it as the last seen.
    public let atc: UInt16
    /// The verified application cryptogram (the ARQC), 8 bytes.
    public let cryptogram: [UInt8]
    /// The CDCVM result, when the CVN's MAC covers it (Visa CVN 18 with Orchard's IAD; Mastercard CVN 16/20);
    /// nil when the cryptogram does not authenticate one.
    public let cdcvm: CDCVMResult?
    private let arpcKey: SymmetricKey

    init(version: CryptogramVersion, atc: UInt16, cryptogram: [UInt8], cdcvm: CDCVMResult?, arpcKey: SymmetricKey) {
        self.version = version
        self.atc = atc
        self.cryptogram = cryptogram
        self.cdcvm = cdcvm
        self.arpcKey = arpcKey
    }

    /// The ARPC by the CVN's method: method 1 over the ARC, or method 2 over the CSU and proprietary data.
    public func arpc(
        responseCode arc: [UInt8], cardStatusUpdate csu: [UInt8], proprietaryData: [UInt8] = []
    )
        throws(EMVError) -> [UInt8]
    {
        switch version.arpcMethod {
        case .method1: try ApplicationCryptogram.arpcMethod1(key: arpcKey, arqc: cryptogram, responseCode: arc)
        case .method2:
            try ApplicationCryptogram.arpcMethod2(
                key: arpcKey, arqc: cryptogram, cardStatusUpdate: csu, proprietaryData: proprietaryData)
        }
    }

    /// The value of tag 91 (issuer authentication data): ARPC ‖ ARC (method 1) or ARPC ‖ CSU ‖ data (method 2).
    public func issuerAuthenticationData(
        responseCode arc: [UInt8], cardStatusUpdate csu: [UInt8], proprietaryData: [UInt8] = []
    ) throws(EMVError) -> [UInt8] {
        let arpc = try arpc(responseCode: arc, cardStatusUpdate: csu, proprietaryData: proprietaryData)
        switch version.arpcMethod {
        case .method1: return arpc + arc
        case .method2: return arpc + csu + proprietaryData
        }
    }

    public var description: String {
        "VerifiedCryptogram(\(version), ATC \([UInt8(atc >> 8), UInt8(atc & 0xFF)].hexString), CDCVM "
            + (cdcvm.map { "\($0)" } ?? "not authenticated") + ")"
    }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

/// The verifier's answer, as a value callers branch on.
public enum CryptogramVerification: Sendable, CustomStringConvertible {
    /// The cryptogram matched and its ATC is fresh.
    case valid(VerifiedCryptogram)
    /// The cryptogram was refused, and why.
    case invalid(CryptogramRejection)

    /// True for `.valid`.
    public var isValid: Bool {
        if case .valid = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .valid(let verified): "valid: \(verified)"
        case .invalid(let rejection): "invalid: \(rejection)"
        }
    }
}

/// The issuer's (or token service's) check of an ARQC: rebuild the MAC input from the received data
/// objects in the order the CVN fixes, derive the keys, compare in constant time, and accept the ATC only
/// above the last one seen and at most ``atcWindow`` above it.
public struct CryptogramVerifier: Sendable {
    /// How far above the last seen ATC a new one may be.
    public var atcWindow: UInt16
    /// The CVNs accepted.
    public var acceptedVersions: [CryptogramVersion]
    /// How card master keys are derived from the issuer master key.
    public var masterKeyOption: EMVKeyDerivation.MasterKeyOption

    /// A verifier accepting ATCs up to `atcWindow` above the last seen, the CVNs in `acceptedVersions`, and deriving
    /// card master keys with `masterKeyOption`.
    public init(
        atcWindow: UInt16 = 1000, acceptedVersions: [CryptogramVersion] = CryptogramVersion.all,
        masterKeyOption: EMVKeyDerivation.MasterKeyOption = .automatic
    ) {
        self.atcWindow = atcWindow
        self.acceptedVersions = acceptedVersions
        self.masterKeyOption = masterKeyOption
    }

    /// Verifies with the issuer master key (the card's master key is derived from the PAN and PSN).
    /// Throws only for an unusable key or a PAN of the wrong form.
    public func verify(
        _ data: ChipAuthorizationData, issuerMasterKey: SymmetricKey, lastSeenATC: UInt16?
    )
        throws(EMVError) -> CryptogramVerification
    {
        let masterKey = try EMVKeyDerivation.masterKey(
            issuerMasterKey: issuerMasterKey, pan: data.pan, panSequenceNumber: data.panSequenceNumber,
            option: masterKeyOption)
        return try verify(data, masterKey: masterKey, lastSeenATC: lastSeenATC)
    }

    /// Verifies with the card's master key (MK-AC). Throws only for an unusable key.
    public func verify(
        _ data: ChipAuthorizationData, masterKey: SymmetricKey, lastSeenATC: UInt16?
    )
        throws(EMVError) -> CryptogramVerification
    {
        guard masterKey.byteCount == 16 else { throw EMVError(.invalidArgument, "the master key is 16 bytes") }
        func reject(_ reason: CryptogramRejection.Reason, _ message: String) -> CryptogramVerification {
            .invalid(CryptogramRejection(reason, message))
        }
        guard let scheme = data.scheme else {
            return reject(.malformedData, "the scheme is unknown (no AID, PAN prefix)")
        }
        guard let iad = data.value(.issuerApplicationData) else { return reject(.missingData, "9F10 is missing") }
        guard let received = data.value(.applicationCryptogram), received.count == 8 else {
            return reject(.missingData, "9F26 is missing or not 8 bytes")
        }
        guard let atc = data.atc else { return reject(.missingData, "9F36 is missing or not 2 bytes") }
        guard let aip = data.value(.applicationInterchangeProfile), aip.count == 2 else {
            return reject(.missingData, "82 is missing or not 2 bytes")
        }
        guard let cid = data.value(.cryptogramInformationData), cid.count == 1 else {
            return reject(.missingData, "9F27 is missing or not 1 byte")
        }
        guard CryptogramType(cid: cid[0]) == .arqc else { return reject(.notAnARQC, "the CID is not an ARQC") }

        // The CVN and the CDCVM result from the IAD's layout for the scheme.
        let version: CryptogramVersion?
        var cdcvm: CDCVMResult?
        switch scheme.issuerApplicationDataLayout {
        case .vis:
            guard let parsed = try? VisaIssuerApplicationData(bytes: iad) else {
                return reject(.malformedData, "9F10 is not a Visa format 0/1/3 IAD")
            }
            version = CryptogramVersion(scheme: scheme, number: parsed.cryptogramVersionNumber)
            cdcvm = parsed.cdcvm
        case .mChip:
            guard let parsed = try? MastercardIssuerApplicationData(bytes: iad) else {
                return reject(.malformedData, "9F10 is not an 18-byte Mastercard IAD")
            }
            version = CryptogramVersion(scheme: scheme, number: parsed.cryptogramVersionNumber)
            cdcvm = parsed.cdcvm
        }
        guard let version, acceptedVersions.contains(version) else {
            return reject(.unsupportedVersion, "the IAD's cryptogram version is not accepted")
        }
        if version == .visa10 { cdcvm = nil }  // CVN 10 MACs the CVR only, not the discretionary data

        let input: CryptogramData
        do {
            input = try CryptogramData(
                values: { data.value($0) }, applicationInterchangeProfile: aip, atc: atc, issuerApplicationData: iad)
        } catch { return reject(.missingData, error.message) }
        let key = try ApplicationCryptogram.cryptogramKey(
            for: version, masterKey: masterKey, atc: atc, unpredictableNumber: input.unpredictableNumber)
        let expected = try ApplicationCryptogram.mac(
            key: key, data: try input.macInput(for: version), padding: version.padding)
        guard constantTimeEquals(expected, received) else {
            return reject(.cryptogramMismatch, "the cryptogram does not match the data (\(version))")
        }

        if let last = lastSeenATC {
            guard atc > last else { return reject(.atcReplayed, "ATC \(atc) is not above the last seen \(last)") }
            guard atc - last <= atcWindow else {
                return reject(.atcOutOfWindow, "ATC \(atc) is more than \(atcWindow) above the last seen \(last)")
            }
        }

        let arpcKey: SymmetricKey
        switch version.arpcMethod {
        case .method1(let usesMasterKey): arpcKey = usesMasterKey ? masterKey : key
        case .method2: arpcKey = key
        }
        return .valid(
            VerifiedCryptogram(version: version, atc: atc, cryptogram: received, cdcvm: cdcvm, arpcKey: arpcKey))
    }
}
