import Foundation
public import OrchardCrypto

/// EMV key derivation (EMV Book 2 Annex A1.4 and A1.3; Mastercard's M/Chip session key), over two-key
/// Triple DES. Every derived key is adjusted to odd parity, which changes its hex and key check value but
/// no DES result.
public enum EMVKeyDerivation {
    /// How a card's master key is derived from the issuer master key.
    public enum MasterKeyOption: Sendable, Hashable, CustomStringConvertible {
        /// Option A: the rightmost 16 digits of PAN ‖ PSN.
        case optionA
        /// Option B: 16 digits decimalised from SHA-1 of PAN ‖ PSN for PANs over 16 digits; EMV defines
        /// it as option A for shorter PANs.
        case optionB
        /// Option A for PANs of at most 16 digits, option B above (the same as ``optionB``).
        case automatic

        /// The option actually used for a PAN of `panLength` digits.
        public func resolved(panLength: Int) -> MasterKeyOption {
            switch self {
            case .optionA: .optionA
            case .optionB, .automatic: panLength > 16 ? .optionB : .optionA
            }
        }

        public var description: String {
            switch self {
            case .optionA: "A"
            case .optionB: "B"
            case .automatic: "automatic"
            }
        }
    }

    /// The 8-byte block Y that is enciphered to make the master key: option A's rightmost 16 digits of
    /// PAN ‖ PSN, or option B's decimalised SHA-1.
    ///
    /// - Parameters:
    ///   - pan: 12 to 19 decimal digits (not checked for Luhn: published vectors use PANs that fail it).
    ///   - panSequenceNumber: 0 to 99 (tag 5F34; 0 when the card has none).
    ///   - option: how Y is made; `.automatic` uses option A up to 16 digits and option B above.
    public static func masterKeyDerivationData(
        pan: String, panSequenceNumber: Int, option: MasterKeyOption = .automatic
    ) throws(EMVError) -> [UInt8] {
        let digits = try validated(pan: pan, panSequenceNumber: panSequenceNumber)
        switch option.resolved(panLength: pan.utf8.count) {
        case .optionB:
            let x = digits.count % 2 == 1 ? "0" + digits : digits
            let hash = SHA1.hash(try EMVNumeric.packDigits(x))
            return try EMVNumeric.packDigits(decimalised(hash))
        default:
            let rightmost = String(digits.suffix(16))
            return try EMVNumeric.packDigits(rightmost, byteCount: 8)
        }
    }

    /// The card's master key (e.g. MK-AC) from the issuer master key (IMK-AC): `3DES(IMK, Y) ‖ 3DES(IMK, Y ⊕ FF…FF)`.
    public static func masterKey(
        issuerMasterKey: SymmetricKey, pan: String, panSequenceNumber: Int, option: MasterKeyOption = .automatic
    ) throws(EMVError) -> SymmetricKey {
        try requireDoubleLength(issuerMasterKey, "the issuer master key")
        let y = try masterKeyDerivationData(pan: pan, panSequenceNumber: panSequenceNumber, option: option)
        return try encipherPair(issuerMasterKey, y, y.map { $0 ^ 0xFF })
    }

    /// The EMV common session key (EMV Book 2 A1.3.1): `R = ATC ‖ 00×6`, `SK = 3DES(MK, F1) ‖ 3DES(MK, F2)`
    /// with byte 3 of R set to `F0` in F1 and to `0F` in F2.
    public static func commonSessionKey(masterKey: SymmetricKey, atc: UInt16) throws(EMVError) -> SymmetricKey {
        try requireDoubleLength(masterKey, "the master key")
        return try sessionKey(masterKey, r: [UInt8(atc >> 8), UInt8(atc & 0xFF), 0, 0, 0, 0, 0, 0])
    }

    /// Mastercard's session key for M/Chip CVN 16 and 17: as the common session key, with
    /// `R = ATC ‖ 0000 ‖ UN` (the terminal's 4-byte unpredictable number).
    public static func mastercardSessionKey(
        masterKey: SymmetricKey, atc: UInt16, unpredictableNumber: [UInt8]
    ) throws(EMVError) -> SymmetricKey {
        try requireDoubleLength(masterKey, "the master key")
        guard unpredictableNumber.count == 4 else {
            throw EMVError(.invalidArgument, "the unpredictable number is 4 bytes, not \(unpredictableNumber.count)")
        }
        return try sessionKey(masterKey, r: [UInt8(atc >> 8), UInt8(atc & 0xFF), 0, 0] + unpredictableNumber)
    }

    /// The diversification blocks F1 and F2 of a session key derivation from R (for displaying the steps).
    public static func sessionKeyDiversification(r: [UInt8]) -> (f1: [UInt8], f2: [UInt8]) {
        var f1 = r
        var f2 = r
        f1[2] = 0xF0
        f2[2] = 0x0F
        return (f1, f2)
    }

    /// The 3-byte key check value: the first bytes of the encryption of eight zero bytes.
    public static func keyCheckValue(_ key: SymmetricKey) throws(EMVError) -> [UInt8] {
        do { return try TripleDES.keyCheckValue(key) } catch {
            throw EMVError(.cryptoFailure, "cannot compute a key check value: \(error.message)")
        }
    }

    /// The key with every byte set to odd parity (b1 adjusted).
    public static func oddParity(_ key: SymmetricKey) -> SymmetricKey {
        var adjusted = key.withUnsafeBytes { raw in raw.map(oddParity) }
        defer { zeroize(&adjusted) }
        return SymmetricKey(data: adjusted)
    }

    // MARK: internals

    static func oddParity(_ byte: UInt8) -> UInt8 {
        (byte & 0xFE).nonzeroBitCount % 2 == 0 ? (byte & 0xFE) | 1 : byte & 0xFE
    }

    static func sessionKey(_ masterKey: SymmetricKey, r: [UInt8]) throws(EMVError) -> SymmetricKey {
        let (f1, f2) = sessionKeyDiversification(r: r)
        return try encipherPair(masterKey, f1, f2)
    }

    /// `oddParity(3DES(key, a) ‖ 3DES(key, b))`, with the intermediate copies dropped quickly.
    static func encipherPair(_ key: SymmetricKey, _ a: [UInt8], _ b: [UInt8]) throws(EMVError) -> SymmetricKey {
        do {
            var z = try TripleDES.encryptECB(a + b, key: key)
            defer { zeroize(&z) }
            for i in z.indices { z[i] = oddParity(z[i]) }
            return SymmetricKey(data: z)
        } catch {
            throw EMVError(.cryptoFailure, "Triple DES failed: \(error.message)")
        }
    }

    /// Overwrites a temporary copy of key bytes before it is released (best effort: the key itself is
    /// held in `SecureBytes`, which OpenSSL cleanses).
    static func zeroize(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { raw in
            guard let base = raw.baseAddress else { return }
            _ = memset(base, 0, raw.count)
        }
    }

    static func requireDoubleLength(_ key: SymmetricKey, _ what: String) throws(EMVError) {
        guard key.byteCount == 16 else {
            throw EMVError(.invalidArgument, "\(what) is a 16-byte two-key Triple DES key, not \(key.byteCount) bytes")
        }
    }

    static func validated(pan: String, panSequenceNumber: Int) throws(EMVError) -> String {
        guard (12...19).contains(pan.utf8.count), pan.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw EMVError(.invalidArgument, "a PAN is 12 to 19 decimal digits")
        }
        guard (0...99).contains(panSequenceNumber) else {
            throw EMVError(.invalidArgument, "the PAN sequence number is 0 to 99")
        }
        let psn = panSequenceNumber < 10 ? "0\(panSequenceNumber)" : "\(panSequenceNumber)"
        return pan + psn
    }

    /// EMV's decimalisation: the decimal digits of the hex string in order, then (if fewer than 16) the
    /// digits A–F mapped to 0–5, in order; the first 16 taken.
    static func decimalised(_ hash: [UInt8]) -> String {
        let nibbles = hash.flatMap { [$0 >> 4, $0 & 0x0F] }
        var out = nibbles.filter { $0 < 10 }.map { Character(Unicode.Scalar(0x30 + $0)) }
        if out.count < 16 {
            out += nibbles.filter { $0 >= 10 }.map { Character(Unicode.Scalar(0x30 + $0 - 10)) }
        }
        return String(out.prefix(16))
    }
}
