/// An ISO/IEC 7816-4 status word (SW1 SW2).
public struct StatusWord: Hashable, Sendable, CustomStringConvertible {
    /// The two bytes as one number, SW1 in the high byte.
    public let rawValue: UInt16

    /// The status word with this value (SW1 in the high byte).
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }
    /// The status word made of `sw1` and `sw2`.
    public init(sw1: UInt8, sw2: UInt8) { rawValue = UInt16(sw1) << 8 | UInt16(sw2) }

    /// The first status byte.
    public var sw1: UInt8 { UInt8(rawValue >> 8) }
    /// The second status byte.
    public var sw2: UInt8 { UInt8(rawValue & 0xFF) }
    /// `[sw1, sw2]`, as the status word ends a response APDU.
    public var bytes: [UInt8] { [sw1, sw2] }

    /// `9000` (or `61xx`, more data available).
    public var isSuccess: Bool { rawValue == 0x9000 || sw1 == 0x61 }

    /// `9000` the command succeeded.
    public static let success = StatusWord(0x9000)
    /// `6581` the card's memory failed (here: the ATC could not be stored).
    public static let memoryFailure = StatusWord(0x6581)
    /// `6700` Lc or Le is wrong for this command.
    public static let wrongLength = StatusWord(0x6700)
    /// `6982` security status not satisfied.
    public static let securityStatusNotSatisfied = StatusWord(0x6982)
    /// `6985` conditions of use not satisfied (no authorization, wrong state, ATC exhausted).
    public static let conditionsNotSatisfied = StatusWord(0x6985)
    /// `6A80` incorrect data in the command.
    public static let incorrectData = StatusWord(0x6A80)
    /// `6A81` function not supported.
    public static let functionNotSupported = StatusWord(0x6A81)
    /// `6A82` file or application not found.
    public static let fileNotFound = StatusWord(0x6A82)
    /// `6A83` record not found.
    public static let recordNotFound = StatusWord(0x6A83)
    /// `6A86` incorrect P1 or P2.
    public static let incorrectP1P2 = StatusWord(0x6A86)
    /// `6D00` instruction not supported.
    public static let instructionNotSupported = StatusWord(0x6D00)
    /// `6E00` class not supported.
    public static let classNotSupported = StatusWord(0x6E00)

    public var description: String { bytes.hexString }
}

/// An ISO/IEC 7816-4 command APDU: header, optional data (Lc) and optional expected length (Le).
///
/// Short form (Lc ≤ 255, Le ≤ 256) and extended form (Lc ≤ 65535, Le ≤ 65536) are both parsed and encoded;
/// encoding picks the short form whenever it fits. An Le of 256 (short) or 65536 (extended) is sent as zeros.
public struct CommandAPDU: Hashable, Sendable, CustomStringConvertible {
    /// The class byte (CLA).
    public var cla: UInt8
    /// The instruction byte (INS).
    public var ins: UInt8
    /// The first parameter byte (P1).
    public var p1: UInt8
    /// The second parameter byte (P2).
    public var p2: UInt8
    /// The command data (Lc is its length; empty for none).
    public var data: [UInt8]
    /// The maximum response length expected, or nil when the command has no Le field.
    public var le: Int?

    /// A command from its fields; nothing is checked until it is encoded (data up to 65535 bytes, Le up to 65536).
    public init(cla: UInt8, ins: UInt8, p1: UInt8, p2: UInt8, data: [UInt8] = [], le: Int? = nil) {
        self.cla = cla
        self.ins = ins
        self.p1 = p1
        self.p2 = p2
        self.data = data
        self.le = le
    }

    /// Parses the four cases of ISO/IEC 7816-3 §12.1.3 in short and extended form.
    public init(bytes: some Collection<UInt8>) throws(EMVError) {
        let b = Array(bytes)
        guard b.count >= 4 else { throw EMVError(.malformedAPDU, "a command APDU is at least 4 bytes, not \(b.count)") }
        cla = b[0]
        ins = b[1]
        p1 = b[2]
        p2 = b[3]
        data = []
        le = nil
        let body = b.count - 4
        if body == 0 { return }  // case 1
        if body == 1 {  // case 2S
            le = b[4] == 0 ? 256 : Int(b[4])
            return
        }
        if b[4] != 0 {  // case 3S or 4S
            let lc = Int(b[4])
            if body == 1 + lc {
                data = Array(b[5..<5 + lc])
            } else if body == 2 + lc {
                data = Array(b[5..<5 + lc])
                le = b[5 + lc] == 0 ? 256 : Int(b[5 + lc])
            } else {
                throw EMVError(.malformedAPDU, "Lc says \(lc) data bytes but the APDU body is \(body) bytes")
            }
            return
        }
        // Extended: 00 then two bytes.
        guard body >= 3 else { throw EMVError(.malformedAPDU, "truncated extended length field") }
        let field = Int(b[5]) << 8 | Int(b[6])
        if body == 3 {  // case 2E
            le = field == 0 ? 65536 : field
            return
        }
        guard field != 0 else { throw EMVError(.malformedAPDU, "extended Lc of zero") }
        if body == 3 + field {
            data = Array(b[7..<7 + field])
        } else if body == 5 + field {
            data = Array(b[7..<7 + field])
            let leField = Int(b[7 + field]) << 8 | Int(b[8 + field])
            le = leField == 0 ? 65536 : leField
        } else {
            throw EMVError(.malformedAPDU, "extended Lc says \(field) data bytes but the APDU body is \(body) bytes")
        }
    }

    /// The APDU bytes. Throws when the data is longer than 65535 bytes or Le is outside 1…65536.
    public func encoded() throws(EMVError) -> [UInt8] {
        guard data.count <= 0xFFFF else { throw EMVError(.invalidArgument, "APDU data longer than 65535 bytes") }
        if let le, !(1...65536).contains(le) { throw EMVError(.invalidArgument, "Le must be 1 to 65536, not \(le)") }
        var out = [cla, ins, p1, p2]
        let extended = data.count > 255 || (le ?? 0) > 256
        if extended {
            out.append(0)
            if !data.isEmpty {
                out += [UInt8(data.count >> 8), UInt8(data.count & 0xFF)]
                out += data
            }
            if let le {
                let field = le == 65536 ? 0 : le
                out += [UInt8(field >> 8), UInt8(field & 0xFF)]
            }
        } else {
            if !data.isEmpty {
                out.append(UInt8(data.count))
                out += data
            }
            if let le { out.append(le == 256 ? 0 : UInt8(le)) }
        }
        return out
    }

    public var description: String { ((try? encoded()) ?? [cla, ins, p1, p2]).hexString }

    // MARK: EMV commands

    /// The PPSE's name, "2PAY.SYS.DDF01".
    public static let ppseName: [UInt8] = Array("2PAY.SYS.DDF01".utf8)

    /// `00 A4 04 00` SELECT by name, first occurrence, Le 00.
    public static func select(_ name: [UInt8]) -> CommandAPDU {
        CommandAPDU(cla: 0x00, ins: 0xA4, p1: 0x04, p2: 0x00, data: name, le: 256)
    }

    /// `80 A8 00 00` GET PROCESSING OPTIONS with the PDOL data in a command template (tag 83).
    public static func getProcessingOptions(pdolData: [UInt8]) -> CommandAPDU {
        CommandAPDU(cla: 0x80, ins: 0xA8, p1: 0x00, p2: 0x00, data: TLV(.commandTemplate, pdolData).encoded, le: 256)
    }

    /// `00 B2` READ RECORD `record` of file `sfi`.
    public static func readRecord(_ record: UInt8, sfi: UInt8) -> CommandAPDU {
        CommandAPDU(cla: 0x00, ins: 0xB2, p1: record, p2: sfi << 3 | 0x04, le: 256)
    }

    /// `80 AE` GENERATE AC with reference control `p1` (`80` ARQC, `40` TC, `00` AAC) and the CDOL1 data.
    public static func generateAC(_ p1: UInt8, cdolData: [UInt8]) -> CommandAPDU {
        CommandAPDU(cla: 0x80, ins: 0xAE, p1: p1, p2: 0x00, data: cdolData, le: 256)
    }
}

/// An ISO/IEC 7816-4 response APDU: data followed by the status word.
public struct ResponseAPDU: Hashable, Sendable, CustomStringConvertible {
    /// The response data before the status word (empty for none).
    public var data: [UInt8]
    /// The status word ending the response.
    public var statusWord: StatusWord

    /// A response with `data` followed by `statusWord`.
    public init(data: [UInt8] = [], statusWord: StatusWord) {
        self.data = data
        self.statusWord = statusWord
    }

    /// A response with no data: only the status word (a refusal or a bare success).
    public init(_ statusWord: StatusWord) { self.init(data: [], statusWord: statusWord) }

    /// Splits response bytes into data and the trailing status word.
    public init(bytes: some Collection<UInt8>) throws(EMVError) {
        let b = Array(bytes)
        guard b.count >= 2 else { throw EMVError(.malformedAPDU, "a response APDU ends with a 2-byte status word") }
        data = Array(b[..<(b.count - 2)])
        statusWord = StatusWord(sw1: b[b.count - 2], sw2: b[b.count - 1])
    }

    /// The response's bytes: `data` followed by SW1 SW2.
    public var encoded: [UInt8] { data + statusWord.bytes }
    public var description: String { encoded.hexString }
}
