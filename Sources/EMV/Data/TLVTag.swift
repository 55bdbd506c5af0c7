/// A BER-TLV tag as EMV uses it: one to four bytes, held big-endian in ``rawValue`` (`0x9F26`).
///
/// The first byte carries the class (b8–b7) and the constructed flag (b6); when its low five bits are all
/// set, more bytes follow, each with b8 set except the last.
public struct TLVTag: Hashable, Sendable, Comparable, ExpressibleByIntegerLiteral, CustomStringConvertible {
    /// The tag bytes as a big-endian integer, e.g. `0x9F26`.
    public let rawValue: UInt32

    /// A tag from its big-endian value as written in the specifications (`0x9F26`). Meant for literals in
    /// code; use ``init(bytes:)`` for input.
    public init(integerLiteral value: UInt32) { rawValue = value }

    /// Validates tag bytes: a multi-byte tag must announce itself in its first byte, continue with b8 set
    /// and end with b8 clear.
    public init(bytes: some Collection<UInt8>) throws(EMVError) {
        let b = Array(bytes)
        guard (1...4).contains(b.count) else { throw EMVError(.malformedTLV, "a tag is 1 to 4 bytes") }
        if b.count == 1 {
            guard b[0] & 0x1F != 0x1F else { throw EMVError(.malformedTLV, "tag \(b.hexString) is incomplete") }
        } else {
            guard b[0] & 0x1F == 0x1F else {
                throw EMVError(.malformedTLV, "tag \(b.hexString) has bytes after a one-byte tag")
            }
            for (index, byte) in b.enumerated().dropFirst() {
                let isLast = index == b.count - 1
                guard (byte & 0x80 == 0) == isLast else {
                    throw EMVError(.malformedTLV, "tag \(b.hexString) has a wrong continuation bit")
                }
            }
        }
        rawValue = b.reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// The tag's bytes (leading zero bytes of ``rawValue`` dropped).
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        var started = false
        for shift in stride(from: 24, through: 0, by: -8) {
            let byte = UInt8(truncatingIfNeeded: rawValue >> UInt32(shift))
            if byte != 0 || started || shift == 0 {
                out.append(byte)
                started = true
            }
        }
        return out
    }

    /// The first byte (class, constructed flag, tag number or `1F`).
    var leadingByte: UInt8 { bytes[0] }

    /// Whether the value is itself a sequence of TLV objects (b6 of the first byte).
    public var isConstructed: Bool { leadingByte & 0x20 != 0 }

    /// The upper-case hex of the tag bytes.
    public var description: String { bytes.hexString }

    /// The EMV name of the tag, when Orchard knows it.
    public var name: String? { TLVTag.names[rawValue] }

    public static func < (a: TLVTag, b: TLVTag) -> Bool { a.rawValue < b.rawValue }
}

extension TLVTag {
    /// `4F` Application Identifier (AID), as the card lists it.
    public static let applicationIdentifier: TLVTag = 0x4F
    /// `50` Application Label.
    public static let applicationLabel: TLVTag = 0x50
    /// `57` Track 2 Equivalent Data.
    public static let track2EquivalentData: TLVTag = 0x57
    /// `5A` Application Primary Account Number (PAN).
    public static let pan: TLVTag = 0x5A
    /// `61` Directory Entry (a PPSE entry).
    public static let directoryEntry: TLVTag = 0x61
    /// `6F` File Control Information (FCI) Template.
    public static let fciTemplate: TLVTag = 0x6F
    /// `70` READ RECORD Response Message Template.
    public static let recordTemplate: TLVTag = 0x70
    /// `77` Response Message Template Format 2.
    public static let responseMessageTemplateFormat2: TLVTag = 0x77
    /// `80` Response Message Template Format 1.
    public static let responseMessageTemplateFormat1: TLVTag = 0x80
    /// `82` Application Interchange Profile (AIP).
    public static let applicationInterchangeProfile: TLVTag = 0x82
    /// `83` Command Template (the PDOL data in GET PROCESSING OPTIONS).
    public static let commandTemplate: TLVTag = 0x83
    /// `84` Dedicated File (DF) Name.
    public static let dedicatedFileName: TLVTag = 0x84
    /// `87` Application Priority Indicator.
    public static let applicationPriorityIndicator: TLVTag = 0x87
    /// `8C` Card Risk Management Data Object List 1 (CDOL1).
    public static let cdol1: TLVTag = 0x8C
    /// `8D` Card Risk Management Data Object List 2 (CDOL2).
    public static let cdol2: TLVTag = 0x8D
    /// `91` Issuer Authentication Data (ARPC and response code).
    public static let issuerAuthenticationData: TLVTag = 0x91
    /// `94` Application File Locator (AFL).
    public static let applicationFileLocator: TLVTag = 0x94
    /// `95` Terminal Verification Results (TVR).
    public static let terminalVerificationResults: TLVTag = 0x95
    /// `9A` Transaction Date, `YYMMDD`.
    public static let transactionDate: TLVTag = 0x9A
    /// `9C` Transaction Type.
    public static let transactionType: TLVTag = 0x9C
    /// `A5` FCI Proprietary Template.
    public static let fciProprietaryTemplate: TLVTag = 0xA5
    /// `5F20` Cardholder Name.
    public static let cardholderName: TLVTag = 0x5F20
    /// `5F24` Application Expiration Date, `YYMMDD`.
    public static let expirationDate: TLVTag = 0x5F24
    /// `5F28` Issuer Country Code (ISO 3166).
    public static let issuerCountryCode: TLVTag = 0x5F28
    /// `5F2A` Transaction Currency Code (ISO 4217).
    public static let transactionCurrencyCode: TLVTag = 0x5F2A
    /// `5F34` PAN Sequence Number (PSN).
    public static let panSequenceNumber: TLVTag = 0x5F34
    /// `9F02` Amount, Authorised (numeric).
    public static let amountAuthorised: TLVTag = 0x9F02
    /// `9F03` Amount, Other (numeric).
    public static let amountOther: TLVTag = 0x9F03
    /// `9F07` Application Usage Control.
    public static let applicationUsageControl: TLVTag = 0x9F07
    /// `9F10` Issuer Application Data (IAD).
    public static let issuerApplicationData: TLVTag = 0x9F10
    /// `9F1A` Terminal Country Code (ISO 3166).
    public static let terminalCountryCode: TLVTag = 0x9F1A
    /// `9F26` Application Cryptogram (AC).
    public static let applicationCryptogram: TLVTag = 0x9F26
    /// `9F27` Cryptogram Information Data (CID).
    public static let cryptogramInformationData: TLVTag = 0x9F27
    /// `9F34` Cardholder Verification Method (CVM) Results.
    public static let cvmResults: TLVTag = 0x9F34
    /// `9F35` Terminal Type.
    public static let terminalType: TLVTag = 0x9F35
    /// `9F36` Application Transaction Counter (ATC).
    public static let applicationTransactionCounter: TLVTag = 0x9F36
    /// `9F37` Unpredictable Number.
    public static let unpredictableNumber: TLVTag = 0x9F37
    /// `9F38` Processing Options Data Object List (PDOL).
    public static let pdol: TLVTag = 0x9F38
    /// `9F66` Terminal Transaction Qualifiers (TTQ).
    public static let terminalTransactionQualifiers: TLVTag = 0x9F66
    /// `9F6C` Card Transaction Qualifiers (CTQ).
    public static let cardTransactionQualifiers: TLVTag = 0x9F6C
    /// `9F6E` Form Factor Indicator.
    public static let formFactorIndicator: TLVTag = 0x9F6E
    /// `BF0C` FCI Issuer Discretionary Data.
    public static let fciIssuerDiscretionaryData: TLVTag = 0xBF0C
}

extension TLVTag {
    /// The data formats that decide how a DOL entry is padded or truncated (EMV Book 3 §5.4).
    enum Format {
        /// `n`: BCD, right-justified; padded with leading zeros, truncated on the left.
        case numeric
        /// `cn`: BCD, left-justified; padded with trailing `FF`, truncated on the right.
        case compressedNumeric
        /// Everything else (`b`, `an`, `ans`): padded with trailing zeros, truncated on the right.
        case other
    }

    var format: Format {
        switch rawValue {
        case 0x5A, 0x9F20: .compressedNumeric
        case 0x9A, 0x9C, 0x5F24, 0x5F25, 0x5F28, 0x5F2A, 0x5F34, 0x5F36, 0x9F02, 0x9F03, 0x9F11, 0x9F15, 0x9F1A, 0x9F21,
            0x9F41, 0x9F42, 0x9F44:
            .numeric
        default: .other
        }
    }

    static let names: [UInt32: String] = [
        0x42: "Issuer Identification Number",
        0x4F: "Application Identifier (AID)",
        0x50: "Application Label",
        0x57: "Track 2 Equivalent Data",
        0x5A: "Application PAN",
        0x61: "Application Template",
        0x6F: "File Control Information (FCI) Template",
        0x70: "READ RECORD Response Template",
        0x77: "Response Message Template Format 2",
        0x80: "Response Message Template Format 1",
        0x82: "Application Interchange Profile",
        0x83: "Command Template",
        0x84: "Dedicated File (DF) Name",
        0x87: "Application Priority Indicator",
        0x88: "Short File Identifier (SFI)",
        0x8C: "CDOL1",
        0x8D: "CDOL2",
        0x8E: "CVM List",
        0x8F: "Certification Authority Public Key Index",
        0x90: "Issuer Public Key Certificate",
        0x91: "Issuer Authentication Data",
        0x94: "Application File Locator (AFL)",
        0x95: "Terminal Verification Results",
        0x9A: "Transaction Date",
        0x9C: "Transaction Type",
        0xA5: "FCI Proprietary Template",
        0x5F20: "Cardholder Name",
        0x5F24: "Application Expiration Date",
        0x5F25: "Application Effective Date",
        0x5F28: "Issuer Country Code",
        0x5F2A: "Transaction Currency Code",
        0x5F2D: "Language Preference",
        0x5F34: "PAN Sequence Number",
        0x9F02: "Amount, Authorised",
        0x9F03: "Amount, Other",
        0x9F06: "Application Identifier (AID) - terminal",
        0x9F07: "Application Usage Control",
        0x9F08: "Application Version Number",
        0x9F0D: "Issuer Action Code - Default",
        0x9F0E: "Issuer Action Code - Denial",
        0x9F0F: "Issuer Action Code - Online",
        0x9F10: "Issuer Application Data",
        0x9F11: "Issuer Code Table Index",
        0x9F12: "Application Preferred Name",
        0x9F19: "Token Requestor ID",
        0x9F1A: "Terminal Country Code",
        0x9F1E: "Interface Device Serial Number",
        0x9F21: "Transaction Time",
        0x9F24: "Payment Account Reference",
        0x9F26: "Application Cryptogram",
        0x9F27: "Cryptogram Information Data",
        0x9F33: "Terminal Capabilities",
        0x9F34: "CVM Results",
        0x9F35: "Terminal Type",
        0x9F36: "Application Transaction Counter (ATC)",
        0x9F37: "Unpredictable Number",
        0x9F38: "Processing Options Data Object List (PDOL)",
        0x9F40: "Additional Terminal Capabilities",
        0x9F41: "Transaction Sequence Counter",
        0x9F42: "Application Currency Code",
        0x9F46: "ICC Public Key Certificate",
        0x9F4B: "Signed Dynamic Application Data",
        0x9F4C: "ICC Dynamic Number",
        0x9F66: "Terminal Transaction Qualifiers (TTQ)",
        0x9F69: "Card Authentication Related Data",
        0x9F6C: "Card Transaction Qualifiers (CTQ)",
        0x9F6E: "Form Factor Indicator",
        0xBF0C: "FCI Issuer Discretionary Data",
    ]
}
