/// How the reader understood the cardholder's verification.
public enum CardholderVerification: String, Hashable, Sendable, CustomStringConvertible {
    /// The card reports a consumer-device CVM (CTQ byte 2 b8).
    case consumerDevice = "consumer device CVM"
    /// The card asks for online PIN (CTQ byte 1 b8).
    case onlinePIN = "online PIN"
    /// The card asks for a signature (CTQ byte 1 b7).
    case signature = "signature"
    /// No cardholder verification.
    case none = "none"
    /// The kernel has no indication (Mastercard-style cards report it only inside the MAC'd IAD).
    case notIndicated = "not indicated"

    public var description: String { rawValue }
}

/// What the card gave the reader, as the acquirer needs it: the PAN (a DPAN for a device), expiry, PSN,
/// Track 2 equivalent data, and the chip data for ISO 8583 field 55.
public struct CardReadData: Hashable, Sendable, CustomStringConvertible {
    /// The scheme of the application the reader selected.
    public let scheme: PaymentScheme
    /// The application identifier the reader selected.
    public let aid: [UInt8]
    /// The card's PAN (tag 5A; a DPAN for a device). `description` shows only `maskedPAN`.
    public let pan: String
    /// `YYMM`.
    public let expiry: String
    /// The PAN sequence number (tag 5F34), when the card gave one.
    public let panSequenceNumber: Int?
    /// The Track 2 equivalent data (tag 57), when the card gave it.
    public let track2EquivalentData: [UInt8]?
    /// The application cryptogram (tag 9F26), 8 bytes.
    public let cryptogram: [UInt8]
    /// The cryptogram's type from the cryptogram information data (tag 9F27).
    public let cryptogramType: CryptogramType
    /// The application transaction counter (tag 9F36).
    public let atc: UInt16
    /// The issuer application data (tag 9F10), as the card sent it.
    public let issuerApplicationData: [UInt8]
    /// How the cardholder was verified (on the device, or not at all).
    public let cardholderVerification: CardholderVerification
    /// The chip data for field 55, in the usual order (9F26 9F27 9F10 9F37 9F36 95 9A 9C 9F02 5F2A 82 9F1A
    /// 9F03 9F34 9F35 84 9F66 9F6C, each when present). The terminal's data objects (9F37, 9F02, 9F03, 5F2A,
    /// 9A, 9C, 95, 9F1A, 9F34, 9F35, 9F66) are always the values the terminal sent, never the card's copy.
    public let field55: [TLV]

    /// The encoded field 55.
    public var field55Bytes: [UInt8] { field55.encoded }

    /// The PAN with all but the first 6 and last 4 digits masked.
    public var maskedPAN: String {
        let digits = Array(pan)
        guard digits.count > 10 else { return String(repeating: "*", count: digits.count) }
        return String(digits.prefix(6)) + String(repeating: "*", count: digits.count - 10) + String(digits.suffix(4))
    }

    public var description: String {
        "\(scheme) \(maskedPAN) exp \(expiry) ATC \([UInt8(atc >> 8), UInt8(atc & 0xFF)].hexString) \(cryptogramType)"
    }
}

/// The end of a contactless transaction at the reader.
public struct TerminalOutcome: Sendable, CustomStringConvertible {
    /// How the transaction ended at the reader.
    public enum Status: String, Hashable, Sendable, CustomStringConvertible {
        /// The card produced an ARQC: send ``TerminalOutcome/card`` to the acquirer for online authorization.
        case onlineRequest = "online request"
        /// The card or the kernel declined.
        case declined = "declined"
        /// Contactless cannot be used (amount above the contactless limit, no common application, no PPSE).
        case tryAnotherInterface = "try another interface"
        /// The card refused (a status word) or answered something unusable; see ``TerminalOutcome/reason``.
        case endApplication = "end application"

        public var description: String { rawValue }
    }

    /// How the transaction ended; only `onlineRequest` carries card data to send for authorization.
    public let status: Status
    /// Why, for every status but an online request.
    public let reason: String?
    /// The status word with which the card refused, if it did.
    public let refusal: StatusWord?
    /// What the card released (present when it produced a cryptogram).
    public let card: CardReadData?
    /// Every APDU exchanged, in order.
    public let transcript: [APDUExchange]

    public var description: String {
        var text = status.description
        if let card { text += ": \(card)" }
        if let reason { text += " (\(reason))" }
        return text
    }
}
