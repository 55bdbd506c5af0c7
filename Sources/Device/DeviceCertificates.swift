public import Foundation
public import OrchardCrypto
public import OrchardRuntime
public import OrchardX509
import PaymentCredential
public import SecureElement

/// The deployment's device CA (`DIR/pki/device-ca.pem` and `.key`): it certifies each device's Secure
/// Element key, so a token service takes the key it seals personalisation envelopes to from a certificate
/// chained to it, never from a relay.
///
/// `orchard init` creates it signed by the Orchard root (``create(in:issuer:clock:random:)`` with the
/// root as issuer); a deployment without one gets a self-signed device CA at the first device.
public struct DeviceCertificateAuthority: Sendable {
    /// The PKI file name (`pki/device-ca.pem`, `pki/device-ca.key`).
    public static let fileName = "device-ca"
    /// How long a device certificate is valid.
    public static let deviceCertificateLifetime: TimeInterval = 10 * 365 * 86_400

    public let certificate: Certificate
    let key: CertificatePrivateKey

    /// The device CA of `deployment`, or nil when it has none.
    public static func load(from deployment: DeploymentDirectory) throws -> DeviceCertificateAuthority? {
        let certificatePath = try deployment.certificatePath(named: fileName)
        guard FileManager.default.fileExists(atPath: certificatePath) else { return nil }
        let certificate = try Certificate(pemEncoded: try deployment.readCertificate(named: fileName))
        let pem = try deployment.readPrivateKey(named: fileName)
        let key = try pem.withUnsafeBytes { bytes in
            try P256.Signing.PrivateKey(pemRepresentation: String(decoding: bytes, as: UTF8.self))
        }
        guard CertificatePublicKey(key.publicKey) == (try CertificatePublicKey(certificate.subjectPublicKeyInfo)) else {
            throw DeviceError(.storageFailure, "pki/\(fileName).key is not the key of pki/\(fileName).pem")
        }
        return DeviceCertificateAuthority(certificate: certificate, key: CertificatePrivateKey(key))
    }

    /// The token service's install-signing key a Secure Element made in `deployment` pins: the key of
    /// `pki/network/token-service-personalisation.pem` (`OU=token-service-personalisation`), which must chain to the
    /// deployment's root (`pki/root/root-ca.pem`) at `now` when it has one. Nil in a deployment without a token
    /// service (a device made there installs no card).
    public static func installAuthority(
        in deployment: DeploymentDirectory, at now: Date
    ) throws -> P256.Signing.PublicKey? {
        let name = "token-service-personalisation"
        guard FileManager.default.fileExists(atPath: try deployment.certificatePath(named: name)) else { return nil }
        let certificate = try Certificate(pemEncoded: try deployment.readCertificate(named: name))
        guard certificate.subject.organizationalUnit == SignedPersonalisation.signerOrganizationalUnit else {
            throw DeviceError(.storageFailure, "pki/\(name).pem is not a token service install-signing certificate")
        }
        let rootPath = try deployment.certificatePath(named: "root-ca")
        if FileManager.default.fileExists(atPath: rootPath) {
            // The deployment's root, or the network party's imported one (a party deployed on its own), never
            // another party's.
            let roots = try Certificate.certificates(fromPEM: try deployment.rootCertificate(ofParty: "network"))
            let verifier = try CertificateChainVerifier(trustRoots: roots, cacheCapacity: 0)
            guard case .valid = verifier.verify(leaf: certificate, at: now) else {
                throw DeviceError(.storageFailure, "pki/\(name).pem was not issued by the deployment's root")
            }
        }
        return try P256.Signing.PublicKey(derRepresentation: certificate.subjectPublicKeyInfo.derRepresentation)
    }

    /// Makes a P-256 device CA valid for 20 years, signed by `issuer` (the Orchard root) or self-signed when
    /// nil, and writes it to `pki/` (key 0600). Refuses to replace an existing one.
    public static func create(
        in deployment: DeploymentDirectory, issuer: CertificateIssuer? = nil, clock: any WallClock = SystemClock(),
        random: any RandomSource = SystemRandom()
    ) throws -> DeviceCertificateAuthority {
        guard try load(from: deployment) == nil else {
            throw DeviceError(.alreadyExists, "the deployment already has a device CA")
        }
        let signingKey = try freshKey(random)
        let key = CertificatePrivateKey(signingKey)
        let now = clock.now()
        let certificate = try Certificate.issue(
            subject: DistinguishedName([.organization("Orchard"), .commonName("Orchard Device CA")]),
            publicKey: key.publicKey, issuer: issuer ?? .selfSigned(key), notValidBefore: now.addingTimeInterval(-300),
            notValidAfter: now.addingTimeInterval(20 * 365 * 86_400),
            extensions: [.basicConstraints(isCA: true, pathLength: 0), .keyUsage([.keyCertSign, .cRLSign])],
            random: random)
        try deployment.create()
        try deployment.writePrivateKey(SecureBytes(Array(try signingKey.pemRepresentation.utf8)), named: fileName)
        try deployment.writeCertificate(certificate.pemRepresentation, named: fileName)
        return DeviceCertificateAuthority(certificate: certificate, key: key)
    }

    /// The device CA of `deployment`, created self-signed when it has none.
    public static func loadOrCreate(
        in deployment: DeploymentDirectory, clock: any WallClock = SystemClock(),
        random: any RandomSource = SystemRandom()
    ) throws -> DeviceCertificateAuthority {
        if let existing = try load(from: deployment) { return existing }
        return try create(in: deployment, clock: clock, random: random)
    }

    /// Certifies a device's Secure Element key: subject CN = the device name, O = "Orchard device",
    /// OU = its kind, UID = its account; key usage key agreement; not a CA.
    public func issueDeviceCertificate(
        name: String, profile: DeviceProfile, elementKey: P256.KeyAgreement.PublicKey,
        clock: any WallClock = SystemClock(), random: any RandomSource = SystemRandom()
    ) throws -> Certificate {
        let now = clock.now()
        return try Certificate.issue(
            subject: DistinguishedName([
                .organization("Orchard device"), .organizationalUnit(profile.kind.rawValue), .userID(profile.account),
                .commonName(name),
            ]),
            publicKey: CertificatePublicKey(
                try P256.Signing.PublicKey(x963Representation: elementKey.x963Representation)),
            issuer: .certificate(certificate, key: key), notValidBefore: now.addingTimeInterval(-300),
            notValidAfter: now.addingTimeInterval(Self.deviceCertificateLifetime),
            extensions: [.basicConstraints(isCA: false), .keyUsage([.keyAgreement])], random: random)
    }

    static func freshKey(_ random: any RandomSource) throws -> P256.Signing.PrivateKey {
        for _ in 0..<4 {
            var scalar = random.bytes(32)
            defer { for index in scalar.indices { scalar[index] = 0 } }
            if let key = try? P256.Signing.PrivateKey(rawRepresentation: scalar) { return key }
        }
        throw DeviceError(.internalFailure, "no valid P-256 scalar drawn")
    }
}

extension Certificate {
    /// The Secure Element key a device certificate certifies (for sealing personalisation envelopes).
    public var secureElementKey: P256.KeyAgreement.PublicKey {
        get throws {
            guard let key = try CertificatePublicKey(subjectPublicKeyInfo).p256 else {
                throw DeviceError(.invalidArgument, "the device certificate does not hold a P-256 key")
            }
            return try P256.KeyAgreement.PublicKey(x963Representation: key.x963Representation)
        }
    }
}
