public import OrchardCrypto

/// A payment scheme's flavour of EMV, which decides IAD layout, AIDs and cryptogram versions.
public enum PaymentScheme: String, Hashable, Sendable, CustomStringConvertible {
    /// Visa-style: qVSDC, Kernel 3, cryptogram in the GET PROCESSING OPTIONS response.
    case visa
    /// Mastercard-style: M/Chip, Kernel 2, cryptogram from GENERATE AC.
    case mastercard

    /// The registered application provider identifier (first five bytes of the AID).
    public var rid: [UInt8] {
        switch self {
        case .visa: [0xA0, 0x00, 0x00, 0x00, 0x03]
        case .mastercard: [0xA0, 0x00, 0x00, 0x00, 0x04]
        }
    }

    /// The credit/debit AID (`A0000000031010`, `A0000000041010`).
    public var aid: [UInt8] { rid + [0x10, 0x10] }

    /// The scheme an AID belongs to, by its RID.
    public init?(aid: some Collection<UInt8>) {
        let prefix = Array(aid.prefix(5))
        if prefix == PaymentScheme.visa.rid {
            self = .visa
        } else if prefix == PaymentScheme.mastercard.rid {
            self = .mastercard
        } else {
            return nil
        }
    }

    public var description: String { rawValue }
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

    private init(_ scheme: PaymentScheme, _ number: UInt8) {
        self.scheme = scheme
        self.number = number
    }

    /// Visa CVN 10: the master key computes the cryptogram, ISO 9797-1 padding method 1.
    public static let visa10 = CryptogramVersion(.visa, 0x0A)
    /// Visa CVN 18: EMV common session key, the whole IAD in the MAC, ARPC method 2.
    public static let visa18 = CryptogramVersion(.visa, 0x12)
    /// Mastercard CVN 16: Mastercard's session key from the ATC and the unpredictable number.
    public static let mastercard16 = CryptogramVersion(.mastercard, 0x10)
    /// Mastercard CVN 20: EMV common session key, ARPC method 1 with the session key.
    public static let mastercard20 = CryptogramVersion(.mastercard, 0x14)

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

    /// How this version derives the key that computes the cryptogram from the card's master key.
    public var sessionKeyMethod: SessionKeyMethod {
        switch number {
        case 0x0A where scheme == .visa: .none
        case 0x10 where scheme == .mastercard: .mastercard
        default: .common
        }
    }

    /// The ISO/IEC 9797-1 padding method of the MAC input.
    public var padding: RetailMAC.Padding { self == .visa10 ? .method1 : .method2 }

    /// How an issuer computes the ARPC answering a cryptogram of this version, and with which key.
    public var arpcMethod: ARPCMethod {
        switch self {
        case .visa18: .method2
        case .mastercard20: .method1(usesMasterKey: false)
        default: .method1(usesMasterKey: true)
        }
    }

    /// The bytes of the IAD this version puts after the transaction data, AIP and ATC.
    public func macSuffix(issuerApplicationData iad: [UInt8]) throws(EMVError) -> [UInt8] {
        switch self {
        case .visa18:
            return iad
        case .visa10:
            guard iad.count >= 7 else { throw EMVError(.invalidArgument, "a Visa IAD is at least 7 bytes") }
            return Array(iad[3..<7])
        default:
            guard iad.count >= 8 else { throw EMVError(.invalidArgument, "a Mastercard IAD is at least 8 bytes") }
            return Array(iad[2..<8])
        }
    }

    public var description: String {
        "\(scheme == .visa ? "Visa" : "Mastercard") CVN \(number) (\([number].hexString))"
    }
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
