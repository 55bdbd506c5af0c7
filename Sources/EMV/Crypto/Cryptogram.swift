import CardBasics
public import OrchardCrypto

/// A payment scheme's flavour of EMV: its RID and AIDs, the contactless kernel that processes its
/// applications, the cryptogram versions its cards compute and the layout of its issuer application data.
///
/// A struct of static members, so a scheme can be added without breaking callers: code reads a scheme's
/// fields, and where behaviour differs by kernel or IAD layout it switches on ``kernel`` or
/// ``issuerApplicationDataLayout``, never on the scheme. Two schemes are equal when their names are.
public struct PaymentScheme: Hashable, Sendable, CustomStringConvertible {
    /// The contactless kernel (EMV Contactless Book C-n) that processes a scheme's applications.
    public enum Kernel: Hashable, Sendable, CustomStringConvertible {
        /// Kernel 2, M/Chip: records read, then the cryptogram from GENERATE AC over CDOL1.
        case mChip
        /// Kernel 3, qVSDC: the cryptogram in the GET PROCESSING OPTIONS response over the PDOL data;
        /// the card reports the cardholder verification in its CTQ.
        case qVSDC

        /// The number of the EMV Contactless book that specifies the kernel (2 or 3).
        public var number: Int {
            switch self {
            case .mChip: 2
            case .qVSDC: 3
            }
        }

        public var description: String {
            switch self {
            case .mChip: "Kernel 2 (M/Chip)"
            case .qVSDC: "Kernel 3 (qVSDC)"
            }
        }
    }

    /// Where the derivation key index and the cryptogram version sit in a scheme's issuer application data
    /// (tag 9F10), and how the rest of it is parsed.
    public enum IssuerApplicationDataLayout: Hashable, Sendable {
        /// Visa format 0/1/3, "VIS" (``VisaIssuerApplicationData``): `06 DKI CVN 03 CVR(3)`, then optional
        /// issuer discretionary data.
        case vis
        /// M/Chip (``MastercardIssuerApplicationData``), 18 bytes: `DKI CVN CVR(6) DAC(2) counters(8)`.
        case mChip

        /// The offset of the derivation key index.
        public var derivationKeyIndexOffset: Int {
            switch self {
            case .vis: 1
            case .mChip: 0
            }
        }

        /// The offset of the cryptogram version number.
        public var cryptogramVersionNumberOffset: Int {
            switch self {
            case .vis: 2
            case .mChip: 1
            }
        }
    }

    /// The scheme's name as Orchard stores and prints it (`visa`, `mastercard`); unique among the schemes.
    public let name: String
    /// The name for people (`Visa`, `Mastercard`).
    public let displayName: String
    /// The registered application provider identifier (first five bytes of every AID of the scheme).
    public let rid: [UInt8]
    /// The AIDs the scheme's applications answer to, the credit/debit AID first.
    public let applicationIdentifiers: [[UInt8]]
    /// The application label (tag 50) a card uses when its profile names none.
    public let defaultApplicationLabel: String
    /// The contactless kernel that processes the scheme's applications.
    public let kernel: Kernel
    /// The CVN bytes of the cryptogram versions Orchard implements for the scheme, the default first.
    public let cryptogramVersionNumbers: [UInt8]
    /// The layout of the scheme's issuer application data.
    public let issuerApplicationDataLayout: IssuerApplicationDataLayout

    private init(
        name: String, displayName: String, rid: [UInt8], applicationIdentifierSuffixes: [[UInt8]],
        defaultApplicationLabel: String, kernel: Kernel, cryptogramVersionNumbers: [UInt8],
        issuerApplicationDataLayout: IssuerApplicationDataLayout
    ) {
        self.name = name
        self.displayName = displayName
        self.rid = rid
        self.applicationIdentifiers = applicationIdentifierSuffixes.map { rid + $0 }
        self.defaultApplicationLabel = defaultApplicationLabel
        self.kernel = kernel
        self.cryptogramVersionNumbers = cryptogramVersionNumbers
        self.issuerApplicationDataLayout = issuerApplicationDataLayout
    }

    /// Visa-style: qVSDC, Kernel 3, cryptogram in the GET PROCESSING OPTIONS response; RID `A000000003`,
    /// AID `A0000000031010`, CVN 18 (default) and 10.
    public static let visa = PaymentScheme(
        name: "visa", displayName: "Visa", rid: [0xA0, 0x00, 0x00, 0x00, 0x03],
        applicationIdentifierSuffixes: [[0x10, 0x10]], defaultApplicationLabel: "VISA", kernel: .qVSDC,
        cryptogramVersionNumbers: [0x12, 0x0A], issuerApplicationDataLayout: .vis)

    /// Mastercard-style: M/Chip, Kernel 2, cryptogram from GENERATE AC; RID `A000000004`, AID
    /// `A0000000041010`, CVN 16 (default) and 20.
    public static let mastercard = PaymentScheme(
        name: "mastercard", displayName: "Mastercard", rid: [0xA0, 0x00, 0x00, 0x00, 0x04],
        applicationIdentifierSuffixes: [[0x10, 0x10]], defaultApplicationLabel: "MASTERCARD", kernel: .mChip,
        cryptogramVersionNumbers: [0x10, 0x14], issuerApplicationDataLayout: .mChip)

    /// Every scheme Orchard implements.
    public static let all: [PaymentScheme] = [.visa, .mastercard]

    /// The credit/debit AID (`A0000000031010`, `A0000000041010`).
    public var aid: [UInt8] { applicationIdentifiers[0] }

    /// The cryptogram versions Orchard implements for the scheme, the default first.
    public var cryptogramVersions: [CryptogramVersion] {
        cryptogramVersionNumbers.compactMap { CryptogramVersion(scheme: self, number: $0) }
    }

    /// The version a card of the scheme computes when its profile names none (Visa CVN 18, Mastercard CVN 16).
    public var defaultCryptogramVersion: CryptogramVersion { cryptogramVersions[0] }

    /// The scheme an AID belongs to, by its RID; nil for an AID of no scheme in ``all``.
    public init?(aid: some Collection<UInt8>) {
        let prefix = Array(aid.prefix(5))
        guard let known = PaymentScheme.all.first(where: { $0.rid == prefix }) else { return nil }
        self = known
    }

    /// The scheme named `name` (its ``name``, as ``description`` prints it), or nil.
    public init?(name: String) {
        guard let known = PaymentScheme.all.first(where: { $0.name == name }) else { return nil }
        self = known
    }

    /// The scheme of the card network whose card number ranges hold `pan` (`CardBasics.CardNetwork`, the one table
    /// of them), for chip data that names no AID; nil for a number of no network with a scheme in ``all``.
    public init?(pan: String) {
        guard let name = CardNetwork(pan: pan)?.paymentSchemeName, let known = PaymentScheme(name: name) else {
            return nil
        }
        self = known
    }

    /// Schemes are equal when their names are.
    public static func == (a: Self, b: Self) -> Bool { a.name == b.name }
    /// Hashes the name.
    public func hash(into hasher: inout Hasher) { hasher.combine(name) }

    /// ``name``: `visa`, `mastercard`.
    public var description: String { name }
}

/// A cryptogram version number (CVN): which session key, which data after the transaction data, which
/// padding, and which ARPC method (../shared/notes/emv.md §2.1).
///
/// | CVN | session key | after transaction data, AIP, ATC | padding | ARPC |
/// |---|---|---|---|---|
/// | Visa 10 (`0A`) | none (MK) | CVR, 4 bytes of the IAD | method 1 | method 1 with MK |
/// | Visa 18 (`12`) | common (ATC) | the whole IAD | method 2 | method 2 with SK |
/// | Mastercard 16 (`10`) | Mastercard (ATC, UN) | CVR, 6 bytes | method 2 | method 1 with MK |
/// | Mastercard 20 (`14`) | common (ATC) | CVR, 6 bytes | method 2 | method 1 with SK |
public struct CryptogramVersion: Hashable, Sendable, CustomStringConvertible {
    /// The scheme whose IAD carries this CVN.
    public let scheme: PaymentScheme
    /// The CVN byte in the IAD.
    public let number: UInt8
    /// How this version derives the key that computes the cryptogram from the card's master key.
    public let sessionKeyMethod: SessionKeyMethod
    /// The ISO/IEC 9797-1 padding method of the MAC input.
    public let padding: RetailMAC.Padding
    /// How an issuer computes the ARPC answering a cryptogram of this version, and with which key.
    public let arpcMethod: ARPCMethod
    /// The bytes of the IAD after the transaction data, AIP and ATC: nil for the whole IAD.
    private let macSuffixBytes: Range<Int>?

    private init(
        _ scheme: PaymentScheme, _ number: UInt8, sessionKey: SessionKeyMethod, padding: RetailMAC.Padding,
        arpc: ARPCMethod, macSuffix: Range<Int>?
    ) {
        self.scheme = scheme
        self.number = number
        self.sessionKeyMethod = sessionKey
        self.padding = padding
        self.arpcMethod = arpc
        self.macSuffixBytes = macSuffix
    }

    /// Visa CVN 10: the master key computes the cryptogram, ISO 9797-1 padding method 1.
    public static let visa10 = CryptogramVersion(
        .visa, 0x0A, sessionKey: .none, padding: .method1, arpc: .method1(usesMasterKey: true), macSuffix: 3..<7)
    /// Visa CVN 18: EMV common session key, the whole IAD in the MAC, ARPC method 2.
    public static let visa18 = CryptogramVersion(
        .visa, 0x12, sessionKey: .common, padding: .method2, arpc: .method2, macSuffix: nil)
    /// Mastercard CVN 16: Mastercard's session key from the ATC and the unpredictable number.
    public static let mastercard16 = CryptogramVersion(
        .mastercard, 0x10, sessionKey: .mastercard, padding: .method2, arpc: .method1(usesMasterKey: true),
        macSuffix: 2..<8)
    /// Mastercard CVN 20: EMV common session key, ARPC method 1 with the session key.
    public static let mastercard20 = CryptogramVersion(
        .mastercard, 0x14, sessionKey: .common, padding: .method2, arpc: .method1(usesMasterKey: false),
        macSuffix: 2..<8)

    /// Every version Orchard implements.
    public static let all: [CryptogramVersion] = [.visa10, .visa18, .mastercard16, .mastercard20]

    /// The implemented version with this scheme and CVN byte, or nil.
    public init?(scheme: PaymentScheme, number: UInt8) {
        guard let known = CryptogramVersion.all.first(where: { $0.scheme == scheme && $0.number == number }) else {
            return nil
        }
        self = known
    }

    /// How the key that computes the cryptogram comes from the card's master key.
    public enum SessionKeyMethod: Sendable, Hashable {
        /// The master key itself.
        case none
        /// The EMV common session key from the ATC.
        case common
        /// Mastercard's session key from the ATC and the unpredictable number.
        case mastercard
    }

    /// The ARPC method and whether it uses the master key or the session key.
    public enum ARPCMethod: Sendable, Hashable {
        /// `3DES(key, ARQC ⊕ (ARC ‖ 00×6))`, 8 bytes; tag 91 is ARPC ‖ ARC.
        case method1(usesMasterKey: Bool)
        /// `MAC3(SK, pad2(ARQC ‖ CSU ‖ proprietary data))`, first 4 bytes; tag 91 is ARPC ‖ CSU ‖ data.
        case method2
    }

    /// The bytes of the IAD this version puts after the transaction data, AIP and ATC.
    public func macSuffix(issuerApplicationData iad: [UInt8]) throws(EMVError) -> [UInt8] {
        guard let range = macSuffixBytes else { return iad }
        guard iad.count >= range.upperBound else {
            throw EMVError(.invalidArgument, "a \(scheme.displayName) IAD is at least \(range.upperBound) bytes")
        }
        return Array(iad[range])
    }

    /// Versions are equal when their scheme and CVN byte are.
    public static func == (a: Self, b: Self) -> Bool { a.scheme == b.scheme && a.number == b.number }
    /// Hashes the scheme and the CVN byte.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(scheme)
        hasher.combine(number)
    }

    public var description: String { "\(scheme.displayName) CVN \(number) (\([number].hexString))" }
}

/// The data an application cryptogram covers, in the order EMV Book 2 recommends (and Visa CVN 18 and
/// M/Chip CVN 16/20 use): amount, other amount, terminal country, TVR, currency, date, type, unpredictable
/// number, then AIP and ATC, then the CVN's part of the IAD.
public struct CryptogramData: Hashable, Sendable {
    /// The transaction data tags in MAC order, with their lengths.
    public static let transactionDataObjects: [DataObjectList.Entry] = [
        .init(.amountAuthorised, 6), .init(.amountOther, 6), .init(.terminalCountryCode, 2),
        .init(.terminalVerificationResults, 5), .init(.transactionCurrencyCode, 2), .init(.transactionDate, 3),
        .init(.transactionType, 1), .init(.unpredictableNumber, 4),
    ]

    /// 9F02 ‖ 9F03 ‖ 9F1A ‖ 95 ‖ 5F2A ‖ 9A ‖ 9C ‖ 9F37 (29 bytes).
    public let transactionData: [UInt8]
    /// 82, 2 bytes.
    public let applicationInterchangeProfile: [UInt8]
    /// 9F36.
    public let atc: UInt16
    /// 9F10, whole.
    public let issuerApplicationData: [UInt8]

    /// Checks the sizes: transaction data 29 bytes, AIP 2 bytes, IAD 1 to 32 bytes.
    public init(
        transactionData: [UInt8], applicationInterchangeProfile: [UInt8], atc: UInt16, issuerApplicationData: [UInt8]
    ) throws(EMVError) {
        guard transactionData.count == 29 else {
            throw EMVError(.invalidArgument, "the transaction data is 29 bytes, not \(transactionData.count)")
        }
        guard applicationInterchangeProfile.count == 2 else { throw EMVError(.invalidArgument, "the AIP is 2 bytes") }
        guard (1...32).contains(issuerApplicationData.count) else {
            throw EMVError(.invalidArgument, "the IAD is 1 to 32 bytes")
        }
        self.transactionData = transactionData
        self.applicationInterchangeProfile = applicationInterchangeProfile
        self.atc = atc
        self.issuerApplicationData = issuerApplicationData
    }

    /// Collects the transaction data from tagged values (a PDOL or CDOL1 split, or field 55). Returns the
    /// first tag that is missing or has the wrong length as an error.
    public init(
        values: (TLVTag) -> [UInt8]?, applicationInterchangeProfile: [UInt8], atc: UInt16,
        issuerApplicationData: [UInt8]
    ) throws(EMVError) {
        var data: [UInt8] = []
        for entry in CryptogramData.transactionDataObjects {
            guard let value = values(entry.tag) else {
                throw EMVError(.invalidArgument, "tag \(entry.tag) is missing from the cryptogram data")
            }
            guard value.count == entry.length else {
                throw EMVError(.invalidArgument, "tag \(entry.tag) is \(value.count) bytes, expected \(entry.length)")
            }
            data += value
        }
        try self.init(
            transactionData: data, applicationInterchangeProfile: applicationInterchangeProfile, atc: atc,
            issuerApplicationData: issuerApplicationData)
    }

    /// The unpredictable number (the last 4 bytes of the transaction data).
    public var unpredictableNumber: [UInt8] { Array(transactionData.suffix(4)) }

    /// The unpadded MAC input for `version`.
    public func macInput(for version: CryptogramVersion) throws(EMVError) -> [UInt8] {
        transactionData + applicationInterchangeProfile + [UInt8(atc >> 8), UInt8(atc & 0xFF)]
            + (try version.macSuffix(issuerApplicationData: issuerApplicationData))
    }
}

/// Application cryptograms (ARQC, TC, AAC) and issuer response cryptograms (ARPC).
public enum ApplicationCryptogram {
    /// The key that computes the cryptogram for `version`: the master key or a session key from it.
    public static func cryptogramKey(
        for version: CryptogramVersion, masterKey: SymmetricKey, atc: UInt16, unpredictableNumber: [UInt8]
    ) throws(EMVError) -> SymmetricKey {
        switch version.sessionKeyMethod {
        case .none:
            try EMVKeyDerivation.requireDoubleLength(masterKey, "the master key")
            return masterKey
        case .common:
            return try EMVKeyDerivation.commonSessionKey(masterKey: masterKey, atc: atc)
        case .mastercard:
            return try EMVKeyDerivation.mastercardSessionKey(
                masterKey: masterKey, atc: atc, unpredictableNumber: unpredictableNumber)
        }
    }

    /// The 8-byte cryptogram over `data` by `version`, from the card's master key.
    public static func generate(
        _ version: CryptogramVersion, masterKey: SymmetricKey, data: CryptogramData
    ) throws(EMVError) -> [UInt8] {
        let key = try cryptogramKey(
            for: version, masterKey: masterKey, atc: data.atc, unpredictableNumber: data.unpredictableNumber)
        return try mac(key: key, data: try data.macInput(for: version), padding: version.padding)
    }

    /// ISO/IEC 9797-1 MAC algorithm 3 (8 bytes) under a 16-byte key.
    public static func mac(key: SymmetricKey, data: [UInt8], padding: RetailMAC.Padding) throws(EMVError) -> [UInt8] {
        guard key.byteCount == 16 else {
            throw EMVError(.invalidArgument, "MAC algorithm 3 takes a 16-byte key, not \(key.byteCount) bytes")
        }
        do { return try RetailMAC.mac(data, key: key, padding: padding) } catch {
            throw EMVError(.cryptoFailure, "MAC algorithm 3 failed: \(error.message)")
        }
    }

    /// ARPC method 1: `3DES(key, ARQC ⊕ (ARC ‖ 00×6))` (8 bytes). Tag 91 carries ARPC ‖ ARC.
    public static func arpcMethod1(
        key: SymmetricKey, arqc: [UInt8], responseCode arc: [UInt8]
    ) throws(EMVError)
        -> [UInt8]
    {
        guard key.byteCount == 16 else { throw EMVError(.invalidArgument, "the ARPC key is 16 bytes") }
        guard arqc.count == 8 else { throw EMVError(.invalidArgument, "the ARQC is 8 bytes, not \(arqc.count)") }
        guard arc.count == 2 else { throw EMVError(.invalidArgument, "the ARC is 2 bytes, not \(arc.count)") }
        var block = arqc
        block[0] ^= arc[0]
        block[1] ^= arc[1]
        do { return try TripleDES.encryptECB(block, key: key) } catch {
            throw EMVError(.cryptoFailure, "Triple DES failed: \(error.message)")
        }
    }

    /// ARPC method 2: the first 4 bytes of `MAC3(key, pad2(ARQC ‖ CSU ‖ proprietary data))`. Tag 91 carries
    /// ARPC ‖ CSU ‖ proprietary data.
    public static func arpcMethod2(
        key: SymmetricKey, arqc: [UInt8], cardStatusUpdate csu: [UInt8], proprietaryData: [UInt8] = []
    ) throws(EMVError) -> [UInt8] {
        guard arqc.count == 8 else { throw EMVError(.invalidArgument, "the ARQC is 8 bytes, not \(arqc.count)") }
        guard csu.count == 4 else { throw EMVError(.invalidArgument, "the CSU is 4 bytes, not \(csu.count)") }
        guard proprietaryData.count <= 8 else {
            throw EMVError(.invalidArgument, "proprietary authentication data is at most 8 bytes")
        }
        return Array(try mac(key: key, data: arqc + csu + proprietaryData, padding: .method2).prefix(4))
    }
}
