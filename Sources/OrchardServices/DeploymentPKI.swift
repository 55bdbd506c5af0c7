public import Foundation
public import OrchardCrypto
public import OrchardRuntime
public import OrchardX509

/// The names of the deployment-wide files in `DIR/pki/` (a service names its own files in its module).
public enum PKIFiles {
    /// The Orchard root CA (`root-ca.pem`, `root-ca.key`): it issues every service's TLS certificate, the device
    /// CA and the Pay server's merchant CA, so one root is all a client trusts on loopback.
    public static let rootCA = "root-ca"
    /// The device CA (`device-ca.pem`, `device-ca.key`), issued by the root: it certifies each device's Secure
    /// Element key (the device module's `DeviceCertificateAuthority` reads exactly these names).
    public static let deviceCA = "device-ca"

    /// `<service>-tls`: the service's TLS server certificate (for 127.0.0.1, ::1 and localhost) and key.
    public static func tlsServer(_ service: ServiceName) -> String { "\(service.rawValue)-tls" }
}

/// A certificate authority held in `DIR/pki/`: its certificate and its P-256 signing key.
///
/// The key never prints (``CertificatePrivateKey`` redacts); it is read from a 0600 file and only used to sign.
public struct CertificateAuthority: Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The CA's certificate.
    public let certificate: Certificate
    let signingKey: P256.Signing.PrivateKey

    /// The key, for APIs that sign with a ``CertificatePrivateKey`` (it never prints).
    public var privateKey: CertificatePrivateKey { CertificatePrivateKey(signingKey) }

    /// Who signs: this CA with its key, for `Certificate.issue`.
    public var issuer: CertificateIssuer { .certificate(certificate, key: CertificatePrivateKey(signingKey)) }

    init(certificate: Certificate, signingKey: P256.Signing.PrivateKey) {
        self.certificate = certificate
        self.signingKey = signingKey
    }

    /// Makes a P-256 CA valid from `now - 5 minutes` for `lifetime`: self-signed when `issuer` is nil (a root),
    /// else issued by `issuer` with path length 0 (it issues leaves only).
    public static func create(
        subject: DistinguishedName, issuer: CertificateAuthority?, lifetime: TimeInterval, clock: any WallClock,
        random: any RandomSource
    ) throws(ServicesError) -> CertificateAuthority {
        let key = try DeploymentPKI.newSigningKey()
        let now = clock.now()
        let pathLength: Int? = issuer == nil ? nil : 0
        do {
            let certificate = try Certificate.issue(
                subject: subject, publicKey: CertificatePublicKey(key.publicKey),
                issuer: issuer?.issuer ?? .selfSigned(CertificatePrivateKey(key)),
                notValidBefore: now.addingTimeInterval(-300), notValidAfter: now.addingTimeInterval(lifetime),
                extensions: [
                    .basicConstraints(isCA: true, pathLength: pathLength), .keyUsage([.keyCertSign, .cRLSign]),
                ],
                random: random)
            return CertificateAuthority(certificate: certificate, signingKey: key)
        } catch {
            throw ServicesError(.pkiFailure, "cannot issue the certificate of \(subject)", underlying: error)
        }
    }

    /// Reads `pki/<name>.pem` and `pki/<name>.key` and checks the key is the certificate's.
    public static func load(
        named name: String, from directory: DeploymentDirectory
    ) throws(ServicesError)
        -> CertificateAuthority
    {
        let certificate = try DeploymentPKI.readCertificate(named: name, from: directory)
        let key = try DeploymentPKI.readSigningKey(named: name, from: directory)
        guard
            CertificatePublicKey(key.publicKey).derRepresentation == certificate.subjectPublicKeyInfo.derRepresentation
        else {
            throw ServicesError(.pkiFailure, "pki/\(name).key is not the key of pki/\(name).pem")
        }
        return CertificateAuthority(certificate: certificate, signingKey: key)
    }

    /// The subject only; never the key.
    public var description: String { "CertificateAuthority(\(certificate.subject), <redacted key>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["certificate": certificate], displayStyle: .struct) }

    /// Writes the key (0600) and the certificate (0644) as `pki/<name>.key` and `pki/<name>.pem`.
    public func write(named name: String, to directory: DeploymentDirectory) throws(ServicesError) {
        try DeploymentPKI.writeSigningKey(signingKey, named: name, to: directory)
        try DeploymentPKI.writeCertificates([certificate], named: name, to: directory)
    }
}

/// A TLS server identity: the certificate chain (leaf first) and the private key, both PEM.
public struct TLSIdentity: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The leaf, then any intermediates.
    public let certificateChainPEM: String
    /// The leaf's private key (PKCS#8 PEM).
    public let privateKeyPEM: SecureBytes

    public init(certificateChainPEM: String, privateKeyPEM: SecureBytes) {
        self.certificateChainPEM = certificateChainPEM
        self.privateKeyPEM = privateKeyPEM
    }

    /// Reads `pki/<name>.pem` and `pki/<name>.key` (the key refused if wider than 0600).
    public static func load(
        named name: String, from directory: DeploymentDirectory
    ) throws(ServicesError)
        -> TLSIdentity
    {
        do {
            return TLSIdentity(
                certificateChainPEM: try directory.readCertificate(named: name),
                privateKeyPEM: try directory.readPrivateKey(named: name))
        } catch {
            throw ServicesError(.pkiFailure, "cannot read the TLS identity pki/\(name)", underlying: error)
        }
    }

    public var description: String { "TLSIdentity(<redacted key>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

/// Key and certificate helpers over `DIR/pki/`, shared by `orchard init` and the services that read what it wrote.
public enum DeploymentPKI {
    /// How long the Orchard root CA and the CAs under it are valid.
    public static let caLifetime: TimeInterval = 20 * 365 * 86_400
    /// How long a TLS server or client certificate is valid (the CA/Browser limit of 825 days).
    public static let leafLifetime: TimeInterval = 825 * 86_400

    /// A fresh P-256 key from OpenSSL's generator.
    public static func newSigningKey() throws(ServicesError) -> P256.Signing.PrivateKey {
        do {
            return try P256.Signing.PrivateKey()
        } catch {
            throw ServicesError(.pkiFailure, "P-256 key generation failed", underlying: error)
        }
    }

    /// Writes `key` as PKCS#8 PEM to `pki/<name>.key` with mode 0600, atomically.
    public static func writeSigningKey(
        _ key: P256.Signing.PrivateKey, named name: String, to directory: DeploymentDirectory
    ) throws(ServicesError) {
        do {
            try directory.writePrivateKey(SecureBytes(Array(try key.pemRepresentation.utf8)), named: name)
        } catch {
            throw ServicesError(.pkiFailure, "cannot write pki/\(name).key", underlying: error)
        }
    }

    /// Reads the P-256 key in `pki/<name>.key` (refused if the file is wider than 0600).
    public static func readSigningKey(
        named name: String, from directory: DeploymentDirectory
    ) throws(ServicesError)
        -> P256.Signing.PrivateKey
    {
        do {
            let pem = try directory.readPrivateKey(named: name)
            return try pem.withUnsafeBytes { bytes throws(CryptoError) in
                try P256.Signing.PrivateKey(pemRepresentation: String(decoding: bytes, as: UTF8.self))
            }
        } catch {
            throw ServicesError(.pkiFailure, "cannot read the P-256 key pki/\(name).key", underlying: error)
        }
    }

    /// Writes `certificates` (leaf first) as one PEM file `pki/<name>.pem`, mode 0644.
    public static func writeCertificates(
        _ certificates: [Certificate], named name: String, to directory: DeploymentDirectory
    ) throws(ServicesError) {
        do {
            try directory.writeCertificate(certificates.map(\.pemRepresentation).joined(), named: name)
        } catch {
            throw ServicesError(.pkiFailure, "cannot write pki/\(name).pem", underlying: error)
        }
    }

    /// The roots a client of `directory` trusts (``OrchardRuntime/DeploymentDirectory/trustedRootsPEM()``): its
    /// own root, then the other parties' roots it imported.
    public static func trustedRoots(in directory: DeploymentDirectory) throws(ServicesError) -> [Certificate] {
        do {
            return try Certificate.certificates(fromPEM: try directory.trustedRootsPEM())
        } catch {
            throw ServicesError(.pkiFailure, "cannot read the trusted roots", underlying: error)
        }
    }

    /// The first certificate of `pki/<name>.pem`.
    public static func readCertificate(
        named name: String, from directory: DeploymentDirectory
    ) throws(ServicesError)
        -> Certificate
    {
        guard let first = try readCertificates(named: name, from: directory).first else {
            throw ServicesError(.pkiFailure, "pki/\(name).pem holds no certificate")
        }
        return first
    }

    /// Every certificate of `pki/<name>.pem`, in file order.
    public static func readCertificates(
        named name: String, from directory: DeploymentDirectory
    )
        throws(ServicesError) -> [Certificate]
    {
        do {
            return try Certificate.certificates(fromPEM: try directory.readCertificate(named: name))
        } catch {
            throw ServicesError(.pkiFailure, "cannot read the certificate pki/\(name).pem", underlying: error)
        }
    }

    /// Issues a TLS server certificate for a service on loopback (SAN: DNS localhost and `hostNames`, IP
    /// 127.0.0.1 and ::1; extended key usage serverAuth) from `authority`, and writes it and its key as
    /// `pki/<service>-tls`.
    @discardableResult
    public static func issueTLSServerIdentity(
        for service: ServiceName, by authority: CertificateAuthority, to directory: DeploymentDirectory,
        hostNames: [String] = [], clock: any WallClock, random: any RandomSource
    ) throws(ServicesError) -> Certificate {
        let key = try newSigningKey()
        let now = clock.now()
        let loopbackV6 = [UInt8](repeating: 0, count: 15) + [1]
        do {
            let certificate = try Certificate.issue(
                subject: DistinguishedName([.organization("Orchard"), .commonName("Orchard \(service) service")]),
                publicKey: CertificatePublicKey(key.publicKey), issuer: authority.issuer,
                notValidBefore: now.addingTimeInterval(-300), notValidAfter: now.addingTimeInterval(leafLifetime),
                extensions: [
                    .basicConstraints(isCA: false), .keyUsage([.digitalSignature]), .extendedKeyUsage([.serverAuth]),
                    try .subjectAlternativeNames(
                        dnsNames: ["localhost"] + hostNames, ipAddresses: [[127, 0, 0, 1], loopbackV6]),
                ], random: random)
            let name = PKIFiles.tlsServer(service)
            try writeSigningKey(key, named: name, to: directory)
            try writeCertificates([certificate], named: name, to: directory)
            return certificate
        } catch {
            throw ServicesError(.pkiFailure, "cannot issue the TLS certificate of \(service)", underlying: error)
        }
    }
}
