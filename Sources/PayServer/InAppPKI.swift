import Foundation
import OrchardCrypto
import OrchardRuntime
import OrchardServices
import OrchardX509
import PayAPI
import PaymentToken

/// The Pay server's keys for in-app and web payments, written by its init step:
///
/// - `pki/pay-credential.pem` / `.key`: the device-to-server credential key (P-256, key agreement) that Secure
///   Elements seal payment credentials to, certified by the Orchard root (O=Orchard, CN=Orchard Pay
///   credential, key usage keyAgreement);
/// - `pki/pay/token-signing-rsa.pem` / `.key`: an RSA-2048 token-signing leaf under the token integration CA
///   (marker 1.2.840.113635.100.6.29), which signs RSA_v1 tokens as Apple's `rsa-smp-broker-sign` leaf does.
public enum InAppPKI {
    public enum Files {
        /// The device-to-server credential key and certificate.
        public static let credential = "pay-credential"
        /// The RSA token-signing leaf.
        public static let rsaTokenSigning = "token-signing-rsa"
    }

    /// Writes both; called from ``PayService``'s init step after the token-signing chain exists.
    static func initialize(_ context: InitializationContext, tokenSigning: TokenSigningPKI) throws {
        let directory = context.directory
        let now = context.clock.now()
        let agreementKey = try P256.KeyAgreement.PrivateKey()
        let certificate = try Certificate.issue(
            subject: DistinguishedName([.organization("Orchard"), .commonName(PayAPI.CredentialCertificate.commonName)]
            ),
            publicKey: CertificatePublicKey(
                try P256.Signing.PublicKey(x963Representation: agreementKey.publicKey.x963Representation)),
            issuer: context.rootCA.issuer, notValidBefore: now.addingTimeInterval(-300),
            notValidAfter: now.addingTimeInterval(DeploymentPKI.caLifetime),
            extensions: [.basicConstraints(isCA: false), .keyUsage([.keyAgreement])], random: context.random)
        try directory.writePrivateKey(SecureBytes(Array(agreementKey.pemRepresentation.utf8)), named: Files.credential)
        try DeploymentPKI.writeCertificates([certificate], named: Files.credential, to: directory)
        context.trace(
            "pay: device-to-server credential key pki/\(Files.credential).pem (key agreement, under the root)")

        let rsaKey = try RSA.PrivateKey(keySize: 2048)
        let rsaLeaf = try Certificate.issue(
            subject: DistinguishedName([.commonName("orchard-rsa-smp-broker-sign"), .organization("Orchard")]),
            publicKey: CertificatePublicKey(rsaKey.publicKey),
            issuer: .certificate(tokenSigning.intermediate, key: tokenSigning.intermediateKey),
            notValidBefore: tokenSigning.leaf.notValidBefore, notValidAfter: tokenSigning.leaf.notValidAfter,
            extensions: [.basicConstraints(isCA: false), .keyUsage([.digitalSignature]), .appleTokenSigningLeafMarker],
            random: context.random)
        try directory.writePrivateKey(SecureBytes(Array(rsaKey.pemRepresentation.utf8)), named: Files.rsaTokenSigning)
        try DeploymentPKI.writeCertificates([rsaLeaf], named: Files.rsaTokenSigning, to: directory)
        context.trace(
            "pay: RSA token-signing leaf pki/\(Files.rsaTokenSigning).pem (1.2.840.113635.100.6.29) for RSA_v1 tokens")
    }

    /// What the in-app endpoints need, read from `pki/`.
    struct Loaded: Sendable {
        let credentialKey: P256.KeyAgreement.PrivateKey
        let credentialCertificate: Certificate
        let rsaLeaf: Certificate
        let rsaKey: CertificatePrivateKey
        let deviceCA: Certificate
    }

    /// Reads the credential key, the RSA leaf and the device CA, checking each key matches its certificate.
    static func load(from directory: DeploymentDirectory) throws -> Loaded {
        let credentialCertificate = try DeploymentPKI.readCertificate(named: Files.credential, from: directory)
        let credentialPEM = try directory.readPrivateKey(named: Files.credential)
        let credentialKey = try credentialPEM.withUnsafeBytes { bytes in
            try P256.KeyAgreement.PrivateKey(pemRepresentation: String(decoding: bytes, as: UTF8.self))
        }
        guard
            try CertificatePublicKey(credentialCertificate.subjectPublicKeyInfo).p256?.x963Representation
                == credentialKey.publicKey.x963Representation
        else {
            throw ServicesError(.pkiFailure, "pki/\(Files.credential).key is not the key of its certificate")
        }
        let rsaLeaf = try DeploymentPKI.readCertificate(named: Files.rsaTokenSigning, from: directory)
        let rsaPEM = try directory.readPrivateKey(named: Files.rsaTokenSigning)
        let rsaKey = try rsaPEM.withUnsafeBytes { bytes in
            try RSA.PrivateKey(pemRepresentation: String(decoding: bytes, as: UTF8.self))
        }
        guard CertificatePublicKey(rsaKey.publicKey).derRepresentation == rsaLeaf.subjectPublicKeyInfo.derRepresentation
        else {
            throw ServicesError(.pkiFailure, "pki/\(Files.rsaTokenSigning).key is not the key of its certificate")
        }
        let deviceCA = try DeploymentPKI.readCertificate(named: PKIFiles.deviceCA, from: directory)
        return Loaded(
            credentialKey: credentialKey, credentialCertificate: credentialCertificate, rsaLeaf: rsaLeaf,
            rsaKey: CertificatePrivateKey(rsaKey), deviceCA: deviceCA)
    }
}
