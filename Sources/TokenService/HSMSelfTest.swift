import EMV
import Foundation
import OrchardCrypto

/// The known answers the HSM checks before it starts (FIPS 140-style power-up self-test). A mismatch
/// throws ``TokenServiceError/Code/selfTestFailed`` and the HSM is not created.
///
/// The standard set: EMV card master key derivation (the EMV module's) option A and option B (vectors V1 and V2 of
/// `Tests/Fixtures/emv`, from pyemv), HMAC-SHA256 (RFC 4231 case 2), HKDF-SHA256 (RFC 5869 case 1),
/// AES-256-GCM (McGrew–Viega test case 16), and a P-256 ECDH pairwise-consistency check.
public struct HSMSelfTest: Sendable {
    public struct MasterKeyAnswer: Sendable {
        public var issuerMasterKey: String
        public var pan: String
        public var panSequenceNumber: UInt8
        public var cardMasterKey: String
    }

    public var optionA: MasterKeyAnswer
    public var optionB: MasterKeyAnswer
    /// HMAC-SHA256: key, message, MAC (hex).
    public var hmac: (key: String, message: String, mac: String)
    /// HKDF-SHA256: IKM, salt, info, output (hex).
    public var hkdf: (ikm: String, salt: String, info: String, okm: String)
    /// AES-256-GCM: key, IV, plaintext, AAD, ciphertext, tag (hex).
    public var aesGCM: (key: String, iv: String, plaintext: String, aad: String, ciphertext: String, tag: String)

    public static let standard = HSMSelfTest(
        optionA: MasterKeyAnswer(
            issuerMasterKey: "0123456789ABCDEFFEDCBA9876543210", pan: "4895370012345671", panSequenceNumber: 0,
            cardMasterKey: "7AA1D352E6D5C2E629ADC4C78329866E"),
        optionB: MasterKeyAnswer(
            issuerMasterKey: "0123456789ABCDEFFEDCBA9876543210", pan: "4895370012345678904", panSequenceNumber: 1,
            cardMasterKey: "577580A1EAD3612A67F73EF7F8F4DFF7"),
        hmac: (
            "4a656665", "7768617420646f2079612077616e7420666f72206e6f7468696e673f",
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        ),
        hkdf: (
            "0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b", "000102030405060708090a0b0c", "f0f1f2f3f4f5f6f7f8f9",
            "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
        ),
        aesGCM: (
            "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888",
            "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a72"
                + "1c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
            "feedfacedeadbeeffeedfacedeadbeefabaddad2",
            "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa"
                + "8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
            "76fc6ece0f4e1768cddf8853bb2d551b"
        )
    )

    /// Runs every check; throws at the first mismatch, naming it.
    public func run() throws(TokenServiceError) {
        do {
            for (name, answer) in [("EMV option A", optionA), ("EMV option B", optionB)] {
                let key = try EMVKeyDerivation.masterKey(
                    issuerMasterKey: SymmetricKey(data: try hexBytes(answer.issuerMasterKey)), pan: answer.pan,
                    panSequenceNumber: Int(answer.panSequenceNumber), option: .automatic)
                try expect(key.bytes == SecureBytes(try hexBytes(answer.cardMasterKey)), name)
            }
            let mac = HMAC<SHA256>.authenticationCode(
                for: try hexBytes(hmac.message), using: SymmetricKey(data: try hexBytes(hmac.key)))
            try expect(mac == (try hexBytes(hmac.mac)), "HMAC-SHA256")
            let okm = try HKDF.deriveKey(
                inputKeyMaterial: SymmetricKey(data: try hexBytes(hkdf.ikm)), salt: try hexBytes(hkdf.salt),
                info: try hexBytes(hkdf.info), outputByteCount: try hexBytes(hkdf.okm).count)
            try expect(okm.bytes == SecureBytes(try hexBytes(hkdf.okm)), "HKDF-SHA256")
            let gcmKey = SymmetricKey(data: try hexBytes(aesGCM.key))
            let box = try AES.GCM.seal(
                try hexBytes(aesGCM.plaintext), using: gcmKey, iv: try hexBytes(aesGCM.iv),
                authenticating: try hexBytes(aesGCM.aad))
            try expect(
                box.ciphertext == (try hexBytes(aesGCM.ciphertext)) && box.tag == (try hexBytes(aesGCM.tag)),
                "AES-256-GCM seal")
            let opened = try AES.GCM.open(
                box, using: gcmKey, iv: try hexBytes(aesGCM.iv), authenticating: try hexBytes(aesGCM.aad))
            try expect(opened == (try hexBytes(aesGCM.plaintext)), "AES-256-GCM open")
            let a = try P256.KeyAgreement.PrivateKey()
            let b = try P256.KeyAgreement.PrivateKey()
            try expect(
                try a.sharedSecretFromKeyAgreement(with: b.publicKey)
                    == (try b.sharedSecretFromKeyAgreement(with: a.publicKey)), "P-256 ECDH pairwise consistency")
        } catch let error as TokenServiceError {
            throw error
        } catch {
            throw TokenServiceError(.selfTestFailed, "the HSM self-test could not run: \(error)")
        }
    }

    private func expect(_ condition: Bool, _ name: String) throws(TokenServiceError) {
        guard condition else { throw TokenServiceError(.selfTestFailed, "the HSM self-test failed: \(name)") }
    }
}

/// Decodes hexadecimal text (upper or lower case, even length) with OrchardCrypto's ``Hex``, as the token
/// service's typed error.
func hexBytes(_ text: String) throws(TokenServiceError) -> [UInt8] {
    guard let bytes = Hex.decode(text) else { throw TokenServiceError(.invalidRequest, "not hex text of even length") }
    return bytes
}

/// Lower-case hexadecimal text (OrchardCrypto's ``Hex``), the form of the token service's identifiers.
func hexString(_ bytes: some Sequence<UInt8>) -> String { Hex.encode(bytes, lowercase: true) }
