public import CardBasics
import EMV
import Foundation
import Issuer
public import NetworkAuthorizationAPI
public import OrchardCrypto
public import PaymentCredential

/// A software HSM: the ``KeyStore`` of the token service.
///
/// Keys live outside it only wrapped (AES-256-GCM under the local master key, with the key's identifier and
/// usage as authenticated data), the way real HSMs keep key blocks in the host's database. Every operation
/// unwraps the handle, checks its usage, uses the key and lets it go; no method returns a key in clear.
/// Card master keys come from the EMV module's derivation (option A, option B above 16 digits). Cryptogram
/// checks run the ``TokenCryptogramVerifier`` installed at creation for the submission's kind.
///
/// Creating one runs ``HSMSelfTest`` first: with a failing known answer the HSM refuses to start.
public final class SoftwareHSM: KeyStore {
    private let localMasterKey: SymmetricKey
    private let random: any RandomSource
    private let verifiers: [CryptogramKind: any TokenCryptogramVerifier]

    /// - Parameters:
    ///   - localMasterKey: 32 bytes; wraps every key. Losing it loses every key.
    ///   - verifiers: the cryptogram checks this HSM can run, one per kind.
    ///   - selfTest: the known answers to check before starting (the default is the published set).
    public init(
        localMasterKey: SymmetricKey, verifiers: [any TokenCryptogramVerifier],
        random: any RandomSource = SystemRandom(),
        selfTest: HSMSelfTest = .standard
    ) throws(TokenServiceError) {
        guard localMasterKey.byteCount == 32 else {
            throw TokenServiceError(.configuration, "the HSM's local master key must be 32 bytes")
        }
        try selfTest.run()
        self.localMasterKey = localMasterKey
        self.random = random
        var table: [CryptogramKind: any TokenCryptogramVerifier] = [:]
        for verifier in verifiers {
            guard table[verifier.kind] == nil else {
                throw TokenServiceError(.configuration, "two cryptogram verifiers for \(verifier.kind.rawValue)")
            }
            table[verifier.kind] = verifier
        }
        self.verifiers = table
    }

    // MARK: - Key management

    public func generateKey(usage: HSMKeyUsage, id: String) throws(TokenServiceError) -> KeyHandle {
        let material: SecureBytes
        switch usage {
        case .proximityIssuerMasterKey, .remoteIssuerMasterKey:
            var bytes = random.bytes(16)
            defer { wipe(&bytes) }
            material = EMVKeyDerivation.oddParity(SymmetricKey(data: bytes)).bytes
        case .vaultEncryption, .panLookup:
            material = SecureBytes(randomCount: 32, using: random)
        case .provisioningDecryption:
            do {
                material = try P256.KeyAgreement.PrivateKey().rawRepresentation
            } catch {
                throw TokenServiceError(.cryptoFailure, "generating a P-256 key failed: \(error.code)")
            }
        case .personalisationSigning:
            do {
                material = try P256.Signing.PrivateKey().rawRepresentation
            } catch {
                throw TokenServiceError(.cryptoFailure, "generating a P-256 key failed: \(error.code)")
            }
        }
        return try wrap(material, usage: usage, id: id)
    }

    public func importKey(
        _ material: SecureBytes, usage: HSMKeyUsage, id: String
    ) throws(TokenServiceError)
        -> KeyHandle
    {
        switch usage {
        case .proximityIssuerMasterKey, .remoteIssuerMasterKey:
            guard material.count == 16 else {
                throw TokenServiceError(.invalidRequest, "an issuer master key is 16 bytes (two-key TDES)")
            }
        case .vaultEncryption, .panLookup:
            guard material.count == 32 else { throw TokenServiceError(.invalidRequest, "this key is 32 bytes") }
        case .provisioningDecryption, .personalisationSigning:
            do {
                _ = try P256.KeyAgreement.PrivateKey(rawRepresentation: material.unsafeCopyOfBytes())
            } catch {
                throw TokenServiceError(.invalidRequest, "a P-256 key is a valid 32-byte P-256 scalar")
            }
        }
        return try wrap(material, usage: usage, id: id)
    }

    public func publicKey(of handle: KeyHandle) throws(TokenServiceError) -> P256.KeyAgreement.PublicKey {
        try provisioningKey(handle).publicKey
    }

    public func signingPublicKey(of handle: KeyHandle) throws(TokenServiceError) -> P256.Signing.PublicKey {
        try signingKey(handle).publicKey
    }

    // MARK: - Envelopes and the vault

    public func openEnvelope(
        _ envelope: EncryptedEnvelope, key: KeyHandle, label: EncryptedEnvelope.Label
    )
        throws(TokenServiceError) -> SecureBytes
    {
        try envelope.open(with: provisioningKey(key), label: label)
    }

    public func seal(
        _ plaintext: SecureBytes, key: KeyHandle, context: [UInt8]
    ) throws(TokenServiceError)
        -> [UInt8]
    {
        let aesKey = try unwrap(key, expecting: .vaultEncryption)
        let iv = random.bytes(12)
        do {
            let box = try plaintext.withUnsafeBytes { (bytes) throws(CryptoError) in
                try AES.GCM.seal(bytes, using: SymmetricKey(aesKey), iv: iv, authenticating: context)
            }
            return iv + box.ciphertext + box.tag
        } catch {
            throw TokenServiceError(.cryptoFailure, "vault encryption failed: \(error.code)")
        }
    }

    public func open(_ sealed: [UInt8], key: KeyHandle, context: [UInt8]) throws(TokenServiceError) -> SecureBytes {
        let aesKey = try unwrap(key, expecting: .vaultEncryption)
        guard sealed.count >= 12 + 16 else { throw TokenServiceError(.envelopeRejected, "a vault blob is too short") }
        do {
            var plain = try AES.GCM.open(
                AES.GCM.SealedBox(ciphertext: Array(sealed[12..<(sealed.count - 16)]), tag: Array(sealed.suffix(16))),
                using: SymmetricKey(aesKey), iv: Array(sealed.prefix(12)), authenticating: context)
            defer { wipe(&plain) }
            return SecureBytes(plain)
        } catch {
            throw TokenServiceError(.envelopeRejected, "a vault blob did not authenticate under this key and context")
        }
    }

    public func lookupHash(of data: SecureBytes, key: KeyHandle) throws(TokenServiceError) -> [UInt8] {
        let macKey = try unwrap(key, expecting: .panLookup)
        return data.withUnsafeBytes { bytes in
            HMAC<SHA256>.authenticationCode(for: bytes, using: SymmetricKey(macKey))
        }
    }

    // MARK: - Card keys

    public func sealPersonalisation(
        _ token: PersonalisationTemplate, proximityKey: KeyHandle, remoteKey: KeyHandle,
        to recipient: P256.KeyAgreement.PublicKey, label: EncryptedEnvelope.Label,
        install: PersonalisationInstall, signingKey handle: KeyHandle
    ) throws(TokenServiceError) -> SignedPersonalisation {
        let signer = try signingKey(handle)
        let proximity = try cardMasterKey(
            proximityKey, expecting: .proximityIssuerMasterKey, pan: token.dpan, psn: token.panSequenceNumber)
        let remote = try cardMasterKey(
            remoteKey, expecting: .remoteIssuerMasterKey, pan: token.dpan, psn: token.panSequenceNumber)
        let data = try PersonalisationData(token, proximityMasterKey: proximity, remoteMasterKey: remote)
        let envelope = try EncryptedEnvelope.seal(try data.plaintext(), to: recipient, label: label)
        do {
            return try SignedPersonalisation(
                installID: install.installID, certificateDigest: install.certificateDigest,
                envelope: envelope.serialized, sign: { content in try signer.signature(for: content) })
        } catch {
            throw TokenServiceError(.cryptoFailure, "signing the install failed: \(error.message)")
        }
    }

    public func verifyCryptogram(
        _ submission: CryptogramSubmission, issuerMasterKey: KeyHandle, pan: PrimaryAccountNumber,
        panSequenceNumber: UInt8
    ) throws(TokenServiceError) -> TokenCryptogramVerification {
        guard let verifier = verifiers[submission.kind] else {
            return .invalid(reason: "this HSM has no verifier for \(submission.kind.rawValue) cryptograms")
        }
        let masterKey = try cardMasterKey(
            issuerMasterKey, expecting: submission.kind.requiredKeyUsage, pan: pan, psn: panSequenceNumber)
        do {
            return try verifier.verify(
                submission, pan: pan, panSequenceNumber: panSequenceNumber, cardMasterKey: masterKey)
        } catch {
            return .invalid(reason: "the cryptogram data could not be parsed")
        }
    }

    // MARK: - Internals

    private func cardMasterKey(
        _ handle: KeyHandle, expecting usage: HSMKeyUsage, pan: PrimaryAccountNumber, psn: UInt8
    )
        throws(TokenServiceError) -> SymmetricKey
    {
        let imk = try unwrap(handle, expecting: usage)
        do {
            return try EMVKeyDerivation.masterKey(
                issuerMasterKey: SymmetricKey(imk), pan: pan.digits, panSequenceNumber: Int(psn), option: .automatic)
        } catch {
            throw TokenServiceError(.cryptoFailure, "card master key derivation failed: \(error)")
        }
    }

    private func provisioningKey(_ handle: KeyHandle) throws(TokenServiceError) -> P256.KeyAgreement.PrivateKey {
        let raw = try unwrap(handle, expecting: .provisioningDecryption)
        do {
            return try raw.withUnsafeBytes { (bytes) throws(CryptoError) in
                try P256.KeyAgreement.PrivateKey(rawRepresentation: bytes)
            }
        } catch {
            throw TokenServiceError(.invalidKeyHandle, "the provisioning key does not decode")
        }
    }

    private func signingKey(_ handle: KeyHandle) throws(TokenServiceError) -> P256.Signing.PrivateKey {
        let raw = try unwrap(handle, expecting: .personalisationSigning)
        do {
            return try raw.withUnsafeBytes { (bytes) throws(CryptoError) in
                try P256.Signing.PrivateKey(rawRepresentation: bytes)
            }
        } catch {
            throw TokenServiceError(.invalidKeyHandle, "the personalisation signing key does not decode")
        }
    }

    private static let wrapPrefix = Array("orchard-hsm-key/v1".utf8)

    private static func wrapContext(id: String, usage: HSMKeyUsage) -> [UInt8] {
        wrapPrefix + [0] + Array(id.utf8) + [0] + Array(usage.rawValue.utf8)
    }

    private func wrap(_ material: SecureBytes, usage: HSMKeyUsage, id: String) throws(TokenServiceError) -> KeyHandle {
        guard (1...128).contains(id.utf8.count), !id.utf8.contains(0) else {
            throw TokenServiceError(.invalidRequest, "a key identifier is 1 to 128 bytes without NUL")
        }
        let iv = random.bytes(12)
        do {
            let box = try material.withUnsafeBytes { (bytes) throws(CryptoError) in
                try AES.GCM.seal(
                    bytes, using: localMasterKey, iv: iv, authenticating: Self.wrapContext(id: id, usage: usage))
            }
            return KeyHandle(id: id, usage: usage, wrappedKey: iv + box.ciphertext + box.tag)
        } catch {
            throw TokenServiceError(.cryptoFailure, "wrapping a key failed: \(error.code)")
        }
    }

    /// Checks the usage first, then authenticates the wrapping (which binds identifier and usage).
    private func unwrap(_ handle: KeyHandle, expecting usage: HSMKeyUsage) throws(TokenServiceError) -> SecureBytes {
        guard handle.usage == usage else {
            throw TokenServiceError(
                .keyUsageViolation, "key \(handle.id) is a \(handle.usage.rawValue) key, not a \(usage.rawValue) key")
        }
        let wrapped = handle.wrappedKey
        guard wrapped.count > 12 + 16 else { throw TokenServiceError(.invalidKeyHandle, "a wrapped key is too short") }
        do {
            var plain = try AES.GCM.open(
                AES.GCM.SealedBox(
                    ciphertext: Array(wrapped[12..<(wrapped.count - 16)]), tag: Array(wrapped.suffix(16))),
                using: localMasterKey, iv: Array(wrapped.prefix(12)),
                authenticating: Self.wrapContext(id: handle.id, usage: handle.usage))
            defer { wipe(&plain) }
            return SecureBytes(plain)
        } catch {
            throw TokenServiceError(
                .invalidKeyHandle,
                "key \(handle.id) was not wrapped by this HSM, or its identifier or usage was changed")
        }
    }
}
