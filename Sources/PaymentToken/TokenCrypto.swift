import Foundation
public import OrchardCrypto

/// The symmetric part of Apple's token format, in both directions (the encoder uses it too).
public enum TokenCrypto {
    /// The 16 zero bytes Apple uses as the GCM IV (each key encrypts exactly one message).
    public static let iv = [UInt8](repeating: 0, count: 16)

    /// The length of the algorithm ID (0x0D), the algorithm ID "id-aes256-GCM" and the party U info "Apple".
    private static let ecV1OtherInfoPrefix: [UInt8] = [0x0D] + Array("id-aes256-GCM".utf8) + Array("Apple".utf8)

    /// EC_v1 key derivation: Z = ECDH(private, ephemeral) (32 bytes, leading zeros kept), then
    /// K = SHA-256(00000001 ‖ Z ‖ 0D ‖ "id-aes256-GCM" ‖ "Apple" ‖ SHA-256(merchant identifier)).
    public static func ecV1Key(
        sharedSecret: SecureBytes, merchantIdentifierHash: [UInt8]
    ) throws(CryptoError)
        -> SymmetricKey
    {
        var otherInfo = ecV1OtherInfoPrefix
        otherInfo += merchantIdentifierHash
        return try SingleStepKDF.deriveKey(sharedSecret: sharedSecret, otherInfo: otherInfo, outputByteCount: 32)
    }

    /// AES-GCM with the zero IV over `data` = ciphertext ‖ tag.
    public static func open(_ data: [UInt8], key: SymmetricKey) throws(CryptoError) -> [UInt8] {
        try AES.GCM.open(AES.GCM.SealedBox(combined: data), using: key, iv: iv)
    }

    /// AES-GCM with the zero IV: ciphertext ‖ tag. The zero IV is safe only because every token has a fresh key.
    public static func seal(_ plaintext: [UInt8], key: SymmetricKey) throws(CryptoError) -> [UInt8] {
        try AES.GCM.seal(plaintext, using: key, iv: iv).combined
    }
}
