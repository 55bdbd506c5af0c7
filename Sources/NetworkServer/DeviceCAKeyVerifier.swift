import Foundation
public import OrchardCrypto
public import OrchardX509
public import TokenService

/// The token service's check of a device certificate: the chain (DER, leaf first) verifies to the Orchard
/// device CA at the current time, the leaf's subject is `O=Orchard device, CN=<the device's name>` (the
/// device ID it provisions under), and its key is a P-256 key: the Secure Element's, which becomes the
/// recipient of the personalisation envelope. This is the certificate `Device` issues
/// (`DeviceCertificateAuthority.issueDeviceCertificate`).
public final class DeviceCAKeyVerifier: DeviceKeyVerifier {
    /// The organisation every device certificate names.
    public static let organization = "Orchard device"
    private let verifier: CertificateChainVerifier
    private let clock: any WallClock
    /// Set when the device CA is not itself a root: it must be the leaf's issuer in every accepted chain.
    private let requiredIssuer: Certificate?

    /// `deviceCARoots` are the only anchors an SE certificate may chain to (self-signed device CAs).
    public init(deviceCARoots: [Certificate], clock: any WallClock = SystemClock()) throws {
        verifier = try CertificateChainVerifier(trustRoots: deviceCARoots, clock: clock)
        self.clock = clock
        requiredIssuer = nil
    }

    /// A device CA issued by `root` (as `orchard init` makes it): chains must run leaf → `deviceCA` → `root`,
    /// so nothing else the root certified (service TLS certificates, merchant CAs) can stand in for a device.
    public init(deviceCA: Certificate, root: Certificate, clock: any WallClock = SystemClock()) throws {
        verifier = try CertificateChainVerifier(trustRoots: [root], clock: clock)
        self.clock = clock
        requiredIssuer = deviceCA
    }

    public func verifiedSecureElementKey(
        certificateChain: [[UInt8]], deviceID: String
    ) throws
        -> P256.KeyAgreement.PublicKey
    {
        guard (1...4).contains(certificateChain.count) else {
            throw TokenServiceError(.deviceNotTrusted, "an SE certificate chain has 1 to 4 certificates")
        }
        let certificates = try certificateChain.map { try Certificate(derEncoded: $0) }
        let leaf = certificates[0]
        let intermediates = Array(certificates.dropFirst()) + (requiredIssuer.map { [$0] } ?? [])
        switch verifier.verify(leaf: leaf, intermediates: intermediates, at: clock.now()) {
        case .valid(let chain):
            if let requiredIssuer, chain.certificates.count < 2 || chain.certificates[1] != requiredIssuer {
                throw TokenServiceError(.deviceNotTrusted, "the SE certificate was not issued by the device CA")
            }
        case .invalid(let failure):
            throw TokenServiceError(
                .deviceNotTrusted, "the SE certificate does not chain to the device CA: \(failure.code)")
        }
        guard leaf.subject.commonName == deviceID, leaf.subject.organization == Self.organization else {
            throw TokenServiceError(.deviceNotTrusted, "the device certificate names another device")
        }
        do {
            return try P256.KeyAgreement.PublicKey(derRepresentation: leaf.subjectPublicKeyInfo.derRepresentation)
        } catch {
            throw TokenServiceError(.deviceNotTrusted, "the SE certificate's key is not a P-256 key")
        }
    }
}
