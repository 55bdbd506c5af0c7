import Foundation
import NetworkServer
import OrchardCrypto
import OrchardX509
import Testing
import TokenService

/// `orchard init` issues the device CA under the Orchard root: device certificates must chain through it.
@Suite("Device CA under the root")
struct DeviceCAChainTests {
    @Test func onlyCertificatesIssuedByTheDeviceCAAreAccepted() throws {
        let now = Date()
        let rootKey = CertificatePrivateKey(try P256.Signing.PrivateKey())
        let root = try Certificate.issue(
            subject: DistinguishedName([.commonName("Orchard Root CA")]), publicKey: rootKey.publicKey,
            issuer: .selfSigned(rootKey), notValidBefore: now - 60, notValidAfter: now + 86_400,
            extensions: [.basicConstraints(isCA: true), .keyUsage([.keyCertSign])])
        let caKey = CertificatePrivateKey(try P256.Signing.PrivateKey())
        let deviceCA = try Certificate.issue(
            subject: DistinguishedName([.commonName("Orchard Device CA")]), publicKey: caKey.publicKey,
            issuer: .certificate(root, key: rootKey), notValidBefore: now - 60, notValidAfter: now + 86_400,
            extensions: [.basicConstraints(isCA: true), .keyUsage([.keyCertSign])])
        let seKey = try P256.Signing.PrivateKey()
        func device(issuedBy issuer: CertificateIssuer) throws -> [UInt8] {
            try Certificate.issue(
                subject: DistinguishedName([.organization(DeviceCAKeyVerifier.organization), .commonName("phone-1")]),
                publicKey: CertificatePublicKey(seKey.publicKey), issuer: issuer, notValidBefore: now - 60,
                notValidAfter: now + 86_400
            ).derRepresentation
        }
        let good = try device(issuedBy: .certificate(deviceCA, key: caKey))
        let byRoot = try device(issuedBy: .certificate(root, key: rootKey))

        let verifier = try DeviceCAKeyVerifier(deviceCA: deviceCA, root: root)
        let key = try verifier.verifiedSecureElementKey(certificateChain: [good], deviceID: "phone-1")
        #expect(key.x963Representation == seKey.publicKey.x963Representation)
        #expect(throws: TokenServiceError.self) {
            try verifier.verifiedSecureElementKey(certificateChain: [byRoot], deviceID: "phone-1")
        }
        #expect(throws: TokenServiceError.self) {
            try verifier.verifiedSecureElementKey(certificateChain: [good], deviceID: "phone-2")
        }
        // The device CA alone is not an anchor OpenSSL accepts: this is why the root is needed.
        let anchoredOnCA = try DeviceCAKeyVerifier(deviceCARoots: [deviceCA])
        #expect(throws: TokenServiceError.self) {
            try anchoredOnCA.verifiedSecureElementKey(certificateChain: [good], deviceID: "phone-1")
        }
    }
}
