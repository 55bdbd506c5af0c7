/// How the device verified its user before the card released a cryptogram (consumer device CVM).
public struct CDCVMMethod: Hashable, Sendable, CustomStringConvertible {
    /// The 4-bit code carried in the issuer application data.
    public let code: UInt8

    private init(_ code: UInt8) { self.code = code }

    /// No verification (never used by Orchard's devices, which have no express mode; kept for decoding).
    public static let none = CDCVMMethod(0)
    /// The device passcode.
    public static let passcode = CDCVMMethod(1)
    /// A fingerprint (Touch ID).
    public static let fingerprint = CDCVMMethod(2)
    /// A face match (Face ID).
    public static let face = CDCVMMethod(3)
    /// An unlocked watch on the wrist, authorized with a double-click of its side button.
    public static let wristDetection = CDCVMMethod(4)

    /// Every defined method, in code order: what decoding accepts.
    public static let all: [CDCVMMethod] = [.none, .passcode, .fingerprint, .face, .wristDetection]

    /// The method with this code, or nil for a code Orchard does not define.
    public init?(code: UInt8) {
        guard let known = CDCVMMethod.all.first(where: { $0.code == code }) else { return nil }
        self = known
    }

    public var description: String {
        switch code {
        case 0: "none"
        case 1: "passcode"
        case 2: "fingerprint"
        case 3: "face"
        case 4: "wrist detection"
        default: "code \(code)"
        }
    }
}

/// The CDCVM outcome the card puts into the MAC'd issuer application data: whether a verification was
/// performed and succeeded, and by which method. One byte: b8 performed, b4–b1 the method code.
public struct CDCVMResult: Hashable, Sendable, CustomStringConvertible {
    /// Whether a verification was performed and succeeded (bit 8 of the byte).
    public let performed: Bool
    /// The method the device verified the user with.
    public let method: CDCVMMethod

    /// A result from its parts; `byte` encodes it and `init?(byte:)` decodes it back.
    public init(performed: Bool, method: CDCVMMethod) {
        self.performed = performed
        self.method = method
    }

    /// The one-byte encoding: b8 set when performed, b4–b1 the method code.
    public var byte: UInt8 { (performed ? 0x80 : 0) | method.code }

    /// Decodes the byte; nil for reserved bits or an unknown method.
    public init?(byte: UInt8) {
        guard byte & 0x70 == 0, let method = CDCVMMethod(code: byte & 0x0F) else { return nil }
        self.init(performed: byte & 0x80 != 0, method: method)
    }

    public var description: String { performed ? "performed (\(method))" : "not performed" }
}

/// The cryptogram types of CID (9F27) b8–b7 and the CVR.
public enum CryptogramType: UInt8, Hashable, Sendable, CustomStringConvertible {
    /// Application authentication cryptogram: the card declines.
    case aac = 0x00
    /// Transaction certificate: offline approval (Orchard's cards are online only and never return one).
    case tc = 0x40
    /// Authorization request cryptogram: go online.
    case arqc = 0x80

    /// The type a CID byte announces, or nil for the reserved value.
    public init?(cid: UInt8) { self.init(rawValue: cid & 0xC0) }

    /// The type a GENERATE AC reference control parameter (P1) asks for.
    init?(referenceControl p1: UInt8) { self.init(rawValue: p1 & 0xC0) }

    /// The first-AC bits of the CVR's first byte (b6–b5), with b8–b7 "second AC not requested".
    var cvrFirstByte: UInt8 {
        switch self {
        case .aac: 0x80
        case .tc: 0x90
        case .arqc: 0xA0
        }
    }

    public var description: String {
        switch self {
        case .aac: "AAC"
        case .tc: "TC"
        case .arqc: "ARQC"
        }
    }
}

/// Visa issuer application data, format 0/1/3 ("VIS"): `06 DKI CVN 03 CVR(3)`, then optionally issuer
/// discretionary data (its length, then its bytes).
///
/// Orchard's issuer discretionary data is `01 <CDCVM byte>` (format 1): Visa's 4-byte CVR has no
/// CDCVM bits, and under CVN 18 the whole IAD is MAC'd, so the CDCVM result cannot be altered unseen.
public struct VisaIssuerApplicationData: Hashable, Sendable {
    /// The derivation key index (DKI): which issuer master key derived the card's key.
    public var derivationKeyIndex: UInt8
    /// The cryptogram version number (CVN) byte.
    public var cryptogramVersionNumber: UInt8
    /// The three CVR bytes after the CVR's length byte.
    public var cardVerificationResults: [UInt8]
    /// Orchard's issuer discretionary data, if present.
    public var cdcvm: CDCVMResult?

    /// An IAD from its fields; `cardVerificationResults` must be the three CVR bytes for `encoded` to be a valid IAD.
    public init(
        derivationKeyIndex: UInt8, cryptogramVersionNumber: UInt8, cardVerificationResults: [UInt8],
        cdcvm: CDCVMResult?
    ) {
        self.derivationKeyIndex = derivationKeyIndex
        self.cryptogramVersionNumber = cryptogramVersionNumber
        self.cardVerificationResults = cardVerificationResults
        self.cdcvm = cdcvm
    }

    /// Parses the IAD. Issuer discretionary data in another format is accepted and ignored (`cdcvm` nil).
    public init(bytes: [UInt8]) throws(EMVError) {
        guard bytes.count >= 7, bytes[0] == 0x06, bytes[3] == 0x03 else {
            throw EMVError(.invalidArgument, "not a Visa format 0/1/3 IAD (06 DKI CVN 03 CVR...)")
        }
        derivationKeyIndex = bytes[1]
        cryptogramVersionNumber = bytes[2]
        cardVerificationResults = Array(bytes[4..<7])
        cdcvm = nil
        if bytes.count > 7 {
            let length = Int(bytes[7])
            guard bytes.count == 8 + length else {
                throw EMVError(.invalidArgument, "the IAD's issuer discretionary data length is inconsistent")
            }
            if length == 2, bytes[8] == 0x01 {
                guard let result = CDCVMResult(byte: bytes[9]) else {
                    throw EMVError(.invalidArgument, "the IAD's CDCVM byte is not defined")
                }
                cdcvm = result
            }
        }
    }

    /// The IAD bytes: `06 DKI CVN 03 CVR`, then `02 01 <CDCVM byte>` when `cdcvm` is set.
    public var encoded: [UInt8] {
        var out: [UInt8] = [0x06, derivationKeyIndex, cryptogramVersionNumber, 0x03] + cardVerificationResults
        if let cdcvm { out += [0x02, 0x01, cdcvm.byte] }
        return out
    }
}

/// Mastercard (M/Chip) issuer application data, 18 bytes: key derivation index, CVN, CVR (6 bytes),
/// DAC/ICC dynamic number (2 bytes), counters (8 bytes).
///
/// Orchard puts the CDCVM byte in the CVR's last byte (the CVR is what CVN 16 and 20 MAC); Mastercard's
/// own assignments for mobile CDCVM are not public.
public struct MastercardIssuerApplicationData: Hashable, Sendable {
    /// The key derivation index: which issuer master key derived the card's key.
    public var keyDerivationIndex: UInt8
    /// The cryptogram version number (CVN) byte.
    public var cryptogramVersionNumber: UInt8
    /// The six card verification results bytes; the last carries Orchard's CDCVM byte.
    public var cardVerificationResults: [UInt8]
    /// The two-byte data authentication code or ICC dynamic number (zeros when the card computes neither).
    public var dataAuthenticationCode: [UInt8]
    /// The eight bytes of counters (zeros in Orchard's cards).
    public var counters: [UInt8]

    /// An IAD with a zero DAC and zero counters; `cardVerificationResults` must be six bytes.
    public init(keyDerivationIndex: UInt8, cryptogramVersionNumber: UInt8, cardVerificationResults: [UInt8]) {
        self.keyDerivationIndex = keyDerivationIndex
        self.cryptogramVersionNumber = cryptogramVersionNumber
        self.cardVerificationResults = cardVerificationResults
        self.dataAuthenticationCode = [0, 0]
        self.counters = [UInt8](repeating: 0, count: 8)
    }

    /// Parses an 18-byte Mastercard IAD; throws `invalidArgument` for any other length.
    public init(bytes: [UInt8]) throws(EMVError) {
        guard bytes.count == 18 else { throw EMVError(.invalidArgument, "a Mastercard IAD is 18 bytes") }
        keyDerivationIndex = bytes[0]
        cryptogramVersionNumber = bytes[1]
        cardVerificationResults = Array(bytes[2..<8])
        dataAuthenticationCode = Array(bytes[8..<10])
        counters = Array(bytes[10..<18])
    }

    /// The CDCVM result in the CVR's last byte (nil if the byte is not a defined value).
    public var cdcvm: CDCVMResult? { CDCVMResult(byte: cardVerificationResults[5]) }

    /// The CVR of an online-only contactless transaction: the AC type, "offline PIN not performed",
    /// domestic or international, and the CDCVM byte.
    public static func cardVerificationResults(
        type: CryptogramType, domestic: Bool, cdcvm: CDCVMResult
    ) -> [UInt8] {
        [type.cvrFirstByte, 0x00, 0x00, 0x20 | (domestic ? 0x02 : 0x04), 0x00, cdcvm.byte]
    }

    /// The 18 IAD bytes: KDI, CVN, CVR, DAC and counters.
    public var encoded: [UInt8] {
        [keyDerivationIndex, cryptogramVersionNumber] + cardVerificationResults + dataAuthenticationCode + counters
    }
}
