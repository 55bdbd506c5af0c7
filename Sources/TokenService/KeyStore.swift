public import CardBasics
import Foundation
import Issuer
public import NetworkAuthorizationAPI
public import OrchardCrypto
public import PaymentCredential

/// What a key held by the HSM may be used for. A key does exactly one job; the usage is bound to the
/// wrapped key cryptographically (it is authenticated data of the wrapping), so a handle relabelled with
/// another usage no longer unwraps.
public enum HSMKeyUsage: String, Hashable, Sendable, Codable, CaseIterable {
    /// Issuer master key for proximity (contactless) cryptograms, IMK-AC: two-key TDES.
    case proximityIssuerMasterKey
    /// Issuer master key for remote (in-app, web) cryptograms: two-key TDES.
    case remoteIssuerMasterKey
    /// The vault's key-encryption key: AES-256-GCM over FPANs.
    case vaultEncryption
    /// The vault's lookup key: HMAC-SHA256 of a PAN, to find a card without decrypting.
    case panLookup
    /// The token service's P-256 key that wallets seal card data to.
    case provisioningDecryption
    /// The token service's P-256 ECDSA key that signs card installs (``PaymentCredential/SignedPersonalisation``);
    /// the Orchard root certifies it and Secure Elements pin it at manufacture.
    case personalisationSigning
}

/// A reference to a key inside the HSM: an identifier, the usage, and the key wrapped under the HSM's
/// local master key. Safe to persist and to print (the wrapped bytes are not shown).
public struct KeyHandle: Hashable, Sendable, Codable, CustomStringConvertible {
    public let id: String
    public let usage: HSMKeyUsage
    /// The key encrypted and authenticated under the HSM's local master key.
    public let wrappedKey: [UInt8]

    public init(id: String, usage: HSMKeyUsage, wrappedKey: [UInt8]) {
        self.id = id
        self.usage = usage
        self.wrappedKey = wrappedKey
    }

    public var description: String { "KeyHandle(\(id), \(usage.rawValue))" }
}

extension CryptogramKind {
    /// The only issuer-master-key usage that may verify this kind.
    public var requiredKeyUsage: HSMKeyUsage {
        switch self {
        case .proximityARQC: return .proximityIssuerMasterKey
        case .remote: return .remoteIssuerMasterKey
        }
    }
}

/// The transaction fields a verified cryptogram covers, so the token service can compare them with the
/// authorization request (an amount changed after the cryptogram was made is declined).
public struct AuthenticatedTransaction: Hashable, Sendable {
    public let amount: Money
    public let applicationTransactionCounter: UInt16
    /// SHA-256 of the merchant ID the cryptogram covers, for a kind that binds one (remote: the Apple-style
    /// merchant ID); nil when the kind binds none (a contactless ARQC).
    public let merchantIdentifierHash: [UInt8]?

    public init(amount: Money, applicationTransactionCounter: UInt16, merchantIdentifierHash: [UInt8]? = nil) {
        self.amount = amount
        self.applicationTransactionCounter = applicationTransactionCounter
        self.merchantIdentifierHash = merchantIdentifierHash
    }
}

/// A verification outcome, as a value the token service branches on.
public enum TokenCryptogramVerification: Hashable, Sendable {
    case valid(AuthenticatedTransaction)
    /// Not verified; `reason` explains (without secrets).
    case invalid(reason: String)
}

/// Checks one kind of cryptogram with the card's master key. Installed in the HSM when it is made (its
/// "firmware"): the HSM derives the card master key and lends it to the verifier, so callers never see it.
///
/// The EMV module provides the proximity ARQC check; until then tests install a test double.
public protocol TokenCryptogramVerifier: Sendable {
    /// The kind this verifier checks.
    var kind: CryptogramKind { get }
    /// Checks `submission` with the card master key the HSM derived for the token's `pan` (the DPAN) and
    /// `panSequenceNumber`, both from the vault. Returns `.invalid` for a wrong cryptogram; throws only when
    /// the data cannot be parsed.
    func verify(
        _ submission: CryptogramSubmission, pan: PrimaryAccountNumber, panSequenceNumber: UInt8,
        cardMasterKey: SymmetricKey
    ) throws -> TokenCryptogramVerification
}

/// The token service's HSM: issuer master keys per token range, the vault's keys and the provisioning
/// key. Keys never leave it in clear: callers hold ``KeyHandle``s and ask it to derive, seal, open,
/// hash and verify. Every operation checks the handle's usage.
public protocol KeyStore: Sendable {
    /// Makes a new random key for `usage`.
    func generateKey(usage: HSMKeyUsage, id: String) throws(TokenServiceError) -> KeyHandle

    /// Imports a key from clear components (a key ceremony; tests with published vectors).
    func importKey(_ material: SecureBytes, usage: HSMKeyUsage, id: String) throws(TokenServiceError) -> KeyHandle

    /// The public key of a ``HSMKeyUsage/provisioningDecryption`` key, for wallets to seal card data to.
    func publicKey(of handle: KeyHandle) throws(TokenServiceError) -> P256.KeyAgreement.PublicKey

    /// Opens an envelope sealed to a ``HSMKeyUsage/provisioningDecryption`` key.
    func openEnvelope(
        _ envelope: EncryptedEnvelope, key: KeyHandle, label: EncryptedEnvelope.Label
    )
        throws(TokenServiceError) -> SecureBytes

    /// AES-256-GCM under a ``HSMKeyUsage/vaultEncryption`` key; `context` is authenticated and must be given
    /// again to open. Returns `IV ‖ ciphertext ‖ tag`.
    func seal(_ plaintext: SecureBytes, key: KeyHandle, context: [UInt8]) throws(TokenServiceError) -> [UInt8]

    /// Opens what ``seal(_:key:context:)`` made.
    func open(_ sealed: [UInt8], key: KeyHandle, context: [UInt8]) throws(TokenServiceError) -> SecureBytes

    /// HMAC-SHA256 under a ``HSMKeyUsage/panLookup`` key.
    func lookupHash(of data: SecureBytes, key: KeyHandle) throws(TokenServiceError) -> [UInt8]

    /// The public key of a ``HSMKeyUsage/personalisationSigning`` key, for its certificate.
    func signingPublicKey(of handle: KeyHandle) throws(TokenServiceError) -> P256.Signing.PublicKey

    /// Derives the card's proximity and remote master keys (EMV option A, or B for PANs over 16 digits)
    /// from the range's issuer master keys, seals them with the token's data to the device's SE, and signs the
    /// install (bound to the SE's certificate and `installID`) with the ``HSMKeyUsage/personalisationSigning``
    /// key `signingKey`.
    func sealPersonalisation(
        _ token: PersonalisationTemplate, proximityKey: KeyHandle, remoteKey: KeyHandle,
        to recipient: P256.KeyAgreement.PublicKey, label: EncryptedEnvelope.Label,
        install: PersonalisationInstall, signingKey: KeyHandle
    ) throws(TokenServiceError) -> SignedPersonalisation

    /// Derives the card master key from `issuerMasterKey` for `pan`/`panSequenceNumber` and checks
    /// `submission` with the installed verifier for its kind. The key's usage must match the kind.
    func verifyCryptogram(
        _ submission: CryptogramSubmission, issuerMasterKey: KeyHandle, pan: PrimaryAccountNumber,
        panSequenceNumber: UInt8
    ) throws(TokenServiceError) -> TokenCryptogramVerification
}

/// What binds a card install to one Secure Element, once: a random install identifier and the SHA-256 of the
/// Secure Element's device certificate (DER).
public struct PersonalisationInstall: Hashable, Sendable {
    public let installID: [UInt8]
    public let certificateDigest: [UInt8]

    public init(installID: [UInt8], certificateDigest: [UInt8]) {
        self.installID = installID
        self.certificateDigest = certificateDigest
    }
}

/// The non-secret part of the personalisation data; the HSM adds the derived keys.
public struct PersonalisationTemplate: Hashable, Sendable {
    public let tokenReference: String
    public let dpan: PrimaryAccountNumber
    public let panSequenceNumber: UInt8
    public let tokenExpiry: CardExpiry
    public let network: CardNetwork

    public init(
        tokenReference: String, dpan: PrimaryAccountNumber, panSequenceNumber: UInt8, tokenExpiry: CardExpiry,
        network: CardNetwork
    ) {
        self.tokenReference = tokenReference
        self.dpan = dpan
        self.panSequenceNumber = panSequenceNumber
        self.tokenExpiry = tokenExpiry
        self.network = network
    }
}
