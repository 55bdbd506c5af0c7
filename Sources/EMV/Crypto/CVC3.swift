public import OrchardCrypto

/// Mastercard's dynamic CVC3 for magnetic-stripe mode (the card's answer to COMPUTE CRYPTOGRAPHIC
/// CHECKSUM): `IVCVC3` is the last two bytes of MAC algorithm 3 over the Track 2 template (padding method 2);
/// CVC3 is the last two bytes of `3DES(KD-CVC3, IVCVC3 ‖ UN ‖ ATC)`, read as a decimal number.
public enum DynamicCVC3 {
    /// The 2-byte IVCVC3 of a Track 1 or Track 2 data template.
    public static func ivcvc3(key: SymmetricKey, trackData: [UInt8]) throws(EMVError) -> [UInt8] {
        Array(try ApplicationCryptogram.mac(key: key, data: trackData, padding: .method2).suffix(2))
    }

    /// The CVC3 as a number (the terminal keeps as many low-order digits as the card's bitmap allows).
    public static func cvc3(
        key: SymmetricKey, trackData: [UInt8], unpredictableNumber: [UInt8], atc: UInt16
    ) throws(EMVError) -> UInt16 {
        guard unpredictableNumber.count == 4 else {
            throw EMVError(.invalidArgument, "the unpredictable number is 4 bytes")
        }
        let block =
            try ivcvc3(key: key, trackData: trackData) + unpredictableNumber + [UInt8(atc >> 8), UInt8(atc & 0xFF)]
        let enciphered: [UInt8]
        do { enciphered = try TripleDES.encryptECB(block, key: key) } catch {
            throw EMVError(.cryptoFailure, "Triple DES failed: \(error.message)")
        }
        return UInt16(enciphered[6]) << 8 | UInt16(enciphered[7])
    }
}
