import Foundation
import Issuer
import OrchardCrypto

/// EMV Book 2 Annex A1.4: the card (ICC) master key from an issuer master key, option A for PANs of up to
/// 16 digits and option B above. Used only inside the HSM.
///
/// Kept here until the EMV module's key derivation is on main; the HSM's self-test runs the published
/// vectors V1 and V2 (pyemv) through it at every start.
enum EMVMasterKeyDerivation {
    /// `MK = odd-parity(3DES(IMK, Y) ‖ 3DES(IMK, Y ⊕ FF…FF))`.
    static func deriveCardMasterKey(
        issuerMasterKey: SymmetricKey, pan: String, panSequenceNumber: UInt8
    )
        throws(CryptoError) -> SymmetricKey
    {
        guard issuerMasterKey.byteCount == 16 else {
            throw CryptoError(.invalidParameter, "an issuer master key is a 16-byte two-key TDES key")
        }
        let psn = String(panSequenceNumber % 100)
        let digits =
            Array(pan.utf8).map { $0 - 0x30 } + Array((psn.count == 1 ? "0" + psn : psn).utf8).map { $0 - 0x30 }
        let y = pan.utf8.count <= 16 ? optionAInput(digits) : optionBInput(digits)
        let left = try TripleDES.encryptECB(y, key: issuerMasterKey)
        let right = try TripleDES.encryptECB(y.map { $0 ^ 0xFF }, key: issuerMasterKey)
        var key = (left + right).map(oddParity)
        defer { wipe(&key) }
        return SymmetricKey(data: key)
    }

    /// Option A: the rightmost 16 digits of PAN ‖ PSN, left-padded with zeros, packed as 8 bytes.
    static func optionAInput(_ digits: [UInt8]) -> [UInt8] {
        let sixteen = [UInt8](repeating: 0, count: max(0, 16 - digits.count)) + digits.suffix(16)
        return pack(sixteen)
    }

    /// Option B: SHA-1 of PAN ‖ PSN (packed, left-padded to whole bytes), decimalised to 16 digits:
    /// its decimal nibbles first, then the hexadecimal ones minus ten.
    static func optionBInput(_ digits: [UInt8]) -> [UInt8] {
        let even = digits.count % 2 == 1 ? [0] + digits : digits
        let hash = SHA1.hash(pack(even))
        let nibbles = hash.flatMap { [$0 >> 4, $0 & 0x0F] }
        let decimal = nibbles.filter { $0 < 10 } + nibbles.filter { $0 >= 10 }.map { $0 - 10 }
        return pack(Array(decimal.prefix(16)))
    }

    static func pack(_ nibbles: [UInt8]) -> [UInt8] {
        stride(from: 0, to: nibbles.count - 1, by: 2).map { nibbles[$0] << 4 | nibbles[$0 + 1] }
    }

    /// Sets each byte's lowest bit so the byte has an odd number of one bits (DES key parity).
    static func oddParity(_ byte: UInt8) -> UInt8 {
        let high = byte & 0xFE
        return high.nonzeroBitCount % 2 == 0 ? high | 1 : high
    }
}
