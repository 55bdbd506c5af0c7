import Foundation
public import OrchardCrypto
public import OrchardRuntime
import OrchardServices

/// The issuer's own key for its card records in `issuer.sqlite`, kept as the token vault keeps card numbers: a
/// keyed hash (HMAC-SHA256) is the lookup column, and the record itself (which holds the card number) is sealed
/// (AES-256-GCM, the table and the lookup as associated data, so a record moved to another row does not open).
///
/// One 32-byte secret, `pki/network/network-issuer-vault.key` (0600), of the issuer alone (not the token
/// service's HSM): HKDF-SHA256 derives the lookup key and the sealing key from it. Never printed.
public struct IssuerStorageKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// `network-issuer-vault`: `pki/network/network-issuer-vault.key`.
    public static let fileName = "network-issuer-vault"

    let lookupKey: SymmetricKey
    let sealingKey: SymmetricKey
    let random: any RandomSource

    /// The keys derived from `secret` (32 bytes).
    public init(secret: SecureBytes, random: any RandomSource = SystemRandom()) throws {
        guard secret.count == 32 else { throw CryptoError(.invalidKey, "the issuer's storage key is not 32 bytes") }
        let master = SymmetricKey(secret)
        let salt = Array("orchard issuer storage".utf8)
        lookupKey = try HKDF.deriveKey(
            inputKeyMaterial: master, salt: salt, info: Array("card lookup".utf8), outputByteCount: 32)
        sealingKey = try HKDF.deriveKey(
            inputKeyMaterial: master, salt: salt, info: Array("record sealing".utf8), outputByteCount: 32)
        self.random = random
    }

    /// A fresh key (tests, and `init`).
    public static func generate(random: any RandomSource = SystemRandom()) throws -> IssuerStorageKey {
        try IssuerStorageKey(secret: SecureBytes(randomCount: 32, using: random), random: random)
    }

    /// Writes a fresh secret to `pki/network/network-issuer-vault.key` (0600) and returns its key.
    public static func create(in directory: DeploymentDirectory, random: any RandomSource) throws -> IssuerStorageKey {
        let secret = SecureBytes(randomCount: 32, using: random)
        try directory.writePrivateKey(secret, named: fileName)
        return try IssuerStorageKey(secret: secret, random: random)
    }

    /// Reads `pki/network/network-issuer-vault.key`, or `.wrapped` with the KEK at `kekPath` (the production
    /// layout, see ``NetworkMasterKey``). A deployment made before the key existed gets one here (its clear records
    /// are sealed under it when `issuer.sqlite` next opens; see ``SQLiteIssuerStore``); it is made only in the
    /// development layout: with a KEK, a missing key is refused.
    public static func load(
        from directory: DeploymentDirectory, kekPath: String = "", random: any RandomSource
    ) throws -> IssuerStorageKey {
        if let secret = try NetworkMasterKey.loadSecret(fileName, from: directory, kekPath: kekPath) {
            return try IssuerStorageKey(secret: secret, random: random)
        }
        guard kekPath.isEmpty else {
            throw ServicesError(
                .pkiFailure,
                "\(directory) has no issuer storage key (pki/network/\(fileName).wrapped); restore it from the backup")
        }
        return try create(in: directory, random: random)
    }

    /// The lookup value of `digits`: hex HMAC-SHA256.
    func lookup(_ digits: String) -> String {
        Hex.encode(HMAC<SHA256>.authenticationCode(for: Array(digits.utf8), using: lookupKey), lowercase: true)
    }

    /// A check value stored beside the records: another key gives another value, so a store opened with the wrong
    /// key is refused instead of misread.
    var checkValue: String { lookup("orchard issuer storage key check") }

    /// `IV (12) ‖ ciphertext ‖ tag (16)`, authenticated with `context`.
    func seal(_ plaintext: [UInt8], context: String) throws -> [UInt8] {
        let iv = random.bytes(12)
        let box = try AES.GCM.seal(plaintext, using: sealingKey, iv: iv, authenticating: Array(context.utf8))
        return iv + box.combined
    }

    /// The plaintext of ``seal(_:context:)``'s output; throws when the record, the key or the context differs.
    func open(_ sealed: [UInt8], context: String) throws -> [UInt8] {
        guard sealed.count >= 12 + AES.GCM.tagByteCount else {
            throw CryptoError(.authenticationFailure, "a sealed issuer record is too short")
        }
        return try AES.GCM.open(
            try AES.GCM.SealedBox(combined: sealed[12...]), using: sealingKey, iv: sealed[..<12],
            authenticating: Array(context.utf8))
    }

    public var description: String { "IssuerStorageKey(<redacted>)" }
    public var debugDescription: String { description }
}
