import CardBasics
public import Device
import EMV
public import Foundation
public import OrchardCrypto
public import OrchardRuntime
import OrchardX509
import PaymentCredential
public import SecureElement
import Wallet

/// Test cards for a device: personalisation envelopes as a token service seals them, with keys derived from a
/// known issuer master key (shared by the device and device-process tests).
public enum TestCards {
    public static let issuerMasterKey = SymmetricKey(
        data: [UInt8](repeating: 0x31, count: 8) + [UInt8](repeating: 0x42, count: 8))
    public static let remoteKey = SymmetricKey(data: [UInt8](repeating: 0x6B, count: 16))
    public static let visaDPAN = "4761739001010119"
    public static let mastercardDPAN = "5204740009900014"
    public static let passcode = "739146"

    /// The card master key a token service derives for `dpan` (PSN 0).
    public static func masterKey(_ dpan: String) throws -> SymmetricKey {
        try EMVKeyDerivation.masterKey(issuerMasterKey: issuerMasterKey, pan: dpan, panSequenceNumber: 0)
    }

    /// What a token service would send: a personalisation envelope sealed to the device's Secure Element, bound to
    /// its certificate and a fresh install ID, signed by ``TestInstallAuthority`` (which ``makeDevice(in:name:kind:biometry:clock:)``
    /// pins).
    public static func envelope(
        for identity: DeviceIdentity, dpan: String, network: String = "visa", tokenReference: String? = nil
    ) throws -> [UInt8] {
        let data = try PersonalisationData(
            tokenReference: tokenReference ?? "tok_\(dpan.suffix(8))", dpan: dpan, panSequenceNumber: 0,
            expiry: "3011", network: network, proximityMasterKey: try masterKey(dpan), remoteMasterKey: remoteKey)
        let sealed = try data.encoded().withUnsafeBytes { bytes in
            // As a token service does: the recipient key comes from the device certificate.
            try SealedEnvelope.seal(
                bytes, to: try identity.certificate.secureElementKey, purpose: PersonalisationData.envelopePurpose)
        }
        return try TestInstallAuthority.sign(sealed, for: identity.certificate.derRepresentation)
    }

    /// The wallet's display data for the test card.
    public static var display: CardDisplayInput {
        CardDisplayInput(type: .credit, suffix: "4242", displayName: "Orchard Bank Visa")
    }
}

/// The token service key a test device pins at manufacture, for deployments without `orchard init`: a fixed
/// P-256 key whose certificate ``pin(in:)`` writes where the factory looks (`pki/token-service-personalisation.pem`).
public enum TestInstallAuthority {
    /// Fixed, so tests in other processes sign with the same key. Never a deployment's.
    public static let insecureTestKey: P256.Signing.PrivateKey = {
        // A valid scalar (0x01 repeated); the constant is checked by every test that signs.
        guard let key = try? P256.Signing.PrivateKey(rawRepresentation: [UInt8](repeating: 0x01, count: 32)) else {
            preconditionFailure("the test install key is a valid P-256 scalar")
        }
        return key
    }()

    /// Makes `deployment`'s next devices pin `key` (by default ``insecureTestKey``). A deployment with a root
    /// (`orchard init`) has its token service's certificate already; this is for bare test directories.
    public static func pin(
        _ key: P256.Signing.PublicKey = insecureTestKey.publicKey, in deployment: DeploymentDirectory
    ) throws {
        let issuerKey = CertificatePrivateKey(try P256.Signing.PrivateKey())
        let now = Date()
        let issuer = try Certificate.issue(
            subject: DistinguishedName([.commonName("Test install CA")]), publicKey: issuerKey.publicKey,
            issuer: .selfSigned(issuerKey), notValidBefore: now.addingTimeInterval(-3600),
            notValidAfter: now.addingTimeInterval(86_400 * 3650),
            extensions: [.basicConstraints(isCA: true)])
        let certificate = try Certificate.issue(
            subject: DistinguishedName([
                .organization("Orchard"), .organizationalUnit(SignedPersonalisation.signerOrganizationalUnit),
                .commonName("token-service"),
            ]),
            publicKey: CertificatePublicKey(key), issuer: .certificate(issuer, key: issuerKey),
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(86_400 * 3650),
            extensions: [.keyUsage([.digitalSignature])])
        try deployment.create()
        try deployment.writeCertificate(certificate.pemRepresentation, named: "token-service-personalisation")
    }

    /// A signed install of `envelope` for the Secure Element certified by `certificate` (DER).
    public static func sign(
        _ envelope: [UInt8], for certificate: [UInt8], key: P256.Signing.PrivateKey = insecureTestKey,
        installID: [UInt8]? = nil
    ) throws -> [UInt8] {
        try SignedPersonalisation(
            installID: installID ?? SystemRandom().bytes(16),
            certificateDigest: SHA256.hash(certificate), envelope: envelope,
            sign: { content in try key.signature(for: content) }
        ).serialized
    }
}

/// Creates a device named `name` in `deployment` with the test passcode set and returns it opened.
public func makeDevice(
    in deployment: DeploymentDirectory, name: String = "alice-phone", kind: DeviceKind = .phone,
    biometry: Biometry = .face,
    clock: ManualClock = ManualClock(now: Date(timeIntervalSince1970: 1_750_000_000))
) async throws -> (Device, DeviceIdentity) {
    if try !FileManager.default.fileExists(atPath: deployment.certificatePath(named: "token-service-personalisation")) {
        try TestInstallAuthority.pin(in: deployment)
    }
    let identity = try Device.create(
        in: deployment, name: name, profile: try DeviceProfile(kind: kind, biometry: biometry, account: "alice"),
        clock: clock)
    let device = try await Device.open(in: deployment, name: name, clock: clock)
    try await device.secureEnclave.setPasscode(SecureBytes(Array(TestCards.passcode.utf8)), current: nil)
    return (device, identity)
}
