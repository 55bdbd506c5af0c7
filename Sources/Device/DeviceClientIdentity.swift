import Foundation
public import OrchardCrypto
public import OrchardRuntime
public import OrchardX509
public import SecureElement

/// The device's TLS client identity for the Pay server: a P-256 signing key of its own (the Secure Element's key
/// agrees keys for personalisation and never signs TLS handshakes) and a certificate from the device CA with the
/// same subject as the Secure Element certificate (`O=Orchard device, OU=<kind>, UID=<account>, CN=<name>`),
/// extended key usage clientAuth. The Pay server takes the device's name, kind and account from it.
///
/// Files: `DIR/devices/<name>/client.pem` (leaf, then the device CA) and `client.key` (0600).
public struct DeviceClientIdentity: Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The leaf and the device CA, PEM.
    public let certificateChainPEM: String
    /// The private key, PKCS#8 PEM.
    public let privateKeyPEM: SecureBytes
    public let certificate: Certificate

    public var description: String { "DeviceClientIdentity(\(certificate.subject.commonName ?? "?"), <key redacted>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }

    static func certificatePath(of name: String, in deployment: DeploymentDirectory) -> String {
        Device.directory(of: name, in: deployment) + "/client.pem"
    }

    static func keyPath(of name: String, in deployment: DeploymentDirectory) -> String {
        Device.directory(of: name, in: deployment) + "/client.key"
    }
}

extension Device {
    /// The client identity of device `name`, issued now from the device CA when the device has none yet
    /// (devices made before client identities existed get one on first use).
    public static func clientIdentity(
        of name: String, in deployment: DeploymentDirectory, clock: any WallClock = SystemClock(),
        random: any RandomSource = SystemRandom()
    ) throws -> DeviceClientIdentity {
        let certificatePath = DeviceClientIdentity.certificatePath(of: name, in: deployment)
        let keyPath = DeviceClientIdentity.keyPath(of: name, in: deployment)
        if FileManager.default.fileExists(atPath: certificatePath), FileManager.default.fileExists(atPath: keyPath) {
            let chain: String
            let key: SecureBytes
            do {
                chain = String(decoding: try SecureFile.read(certificatePath), as: UTF8.self)
                key = try SecureFile.readSecret(keyPath)
            } catch {
                throw DeviceError(.storageFailure, "cannot read the client identity of \(name): \(error.message)")
            }
            return DeviceClientIdentity(
                certificateChainPEM: chain, privateKeyPEM: key, certificate: try Certificate(pemEncoded: chain))
        }
        let identity = try self.identity(of: name, in: deployment)
        guard let authority = try DeviceCertificateAuthority.load(from: deployment) else {
            throw DeviceError(.notFound, "the deployment has no device CA (pki/device-ca.pem)")
        }
        let key = try DeviceCertificateAuthority.freshKey(random)
        let certificate = try authority.issueClientCertificate(
            name: name, profile: identity.profile, key: key.publicKey, clock: clock, random: random)
        let chain = certificate.pemRepresentation + authority.certificate.pemRepresentation
        let keyPEM = SecureBytes(Array(try key.pemRepresentation.utf8))
        do {
            try SecureFile.writeSecret(keyPEM, to: keyPath)
            try SecureFile.write(Array(chain.utf8), to: certificatePath, mode: 0o644)
        } catch {
            throw DeviceError(.storageFailure, "cannot write the client identity of \(name): \(error.message)")
        }
        return DeviceClientIdentity(certificateChainPEM: chain, privateKeyPEM: keyPEM, certificate: certificate)
    }
}

extension DeviceCertificateAuthority {
    /// Certifies a device's TLS client key: the subject of its Secure Element certificate, key usage digital
    /// signature, extended key usage clientAuth.
    public func issueClientCertificate(
        name: String, profile: DeviceProfile, key: P256.Signing.PublicKey, clock: any WallClock = SystemClock(),
        random: any RandomSource = SystemRandom()
    ) throws -> Certificate {
        let now = clock.now()
        return try Certificate.issue(
            subject: DistinguishedName([
                .organization("Orchard device"), .organizationalUnit(profile.kind.rawValue), .userID(profile.account),
                .commonName(name),
            ]),
            publicKey: CertificatePublicKey(key), issuer: .certificate(certificate, key: self.key),
            notValidBefore: now.addingTimeInterval(-300),
            notValidAfter: now.addingTimeInterval(Self.deviceCertificateLifetime),
            extensions: [
                .basicConstraints(isCA: false), .keyUsage([.digitalSignature]), .extendedKeyUsage([.clientAuth]),
            ],
            random: random)
    }
}
