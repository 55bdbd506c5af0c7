import Device
import DeviceTestSupport
import Foundation
import OrchardCrypto
import OrchardRuntime
import OrchardX509
import SecureElement
import Testing

@Suite("Device certificates")
struct CertificateTests {
    @Test("The factory certifies the Secure Element key with the deployment's device CA")
    func selfSignedDeviceCA() async throws {
        let directory = try TemporaryDirectory()
        let (_, identity) = try await makeDevice(in: directory.deployment)
        let authority = try #require(try DeviceCertificateAuthority.load(from: directory.deployment))
        #expect(SecureFile.mode(of: try directory.deployment.privateKeyPath(named: "device-ca")) == 0o600)
        #expect(try identity.certificate.secureElementKey == identity.elementPublicKey)
        #expect(identity.certificate.subject.description.contains("alice-phone"))
        let verifier = try CertificateChainVerifier(trustRoots: [authority.certificate])
        guard case .valid = verifier.verify(leaf: identity.certificate, at: Date()) else {
            Issue.record("the device certificate must chain to the device CA")
            return
        }
        // A second device reuses the same CA; a device of another deployment does not chain to it.
        let (_, second) = try await makeDevice(
            in: directory.deployment, name: "alice-watch", kind: .watch, biometry: .none)
        #expect(second.certificate.issuer == identity.certificate.issuer)
        let elsewhere = try TemporaryDirectory()
        let (_, foreign) = try await makeDevice(in: elsewhere.deployment)
        guard case .invalid = verifier.verify(leaf: foreign.certificate, at: Date()) else {
            Issue.record("a device of another deployment must not chain to this device CA")
            return
        }
        await expectError(code(DeviceError.Code.alreadyExists)) {
            try DeviceCertificateAuthority.create(in: directory.deployment)
        }
    }

    @Test("A device CA signed by the Orchard root gives device certificates that chain to the root")
    func rootSignedDeviceCA() async throws {
        let directory = try TemporaryDirectory()
        let rootKey = CertificatePrivateKey(try P256.Signing.PrivateKey())
        let now = Date()
        let root = try Certificate.issue(
            subject: DistinguishedName([.commonName("Orchard Root")]), publicKey: rootKey.publicKey,
            issuer: .selfSigned(rootKey), notValidBefore: now.addingTimeInterval(-60),
            notValidAfter: now.addingTimeInterval(86_400 * 365), extensions: [.basicConstraints(isCA: true)])
        let authority = try DeviceCertificateAuthority.create(
            in: directory.deployment, issuer: .certificate(root, key: rootKey))
        let (_, identity) = try await makeDevice(in: directory.deployment)
        let verifier = try CertificateChainVerifier(trustRoots: [root])
        guard
            case .valid(let chain) = verifier.verify(
                leaf: identity.certificate, intermediates: [authority.certificate], at: now)
        else {
            Issue.record("the device certificate must chain to the root through the device CA")
            return
        }
        #expect(chain.certificates.count == 3)
        // The certificate file is public; changing it makes the device refuse to open.
        let path = Device.certificatePath(of: "alice-phone", in: directory.deployment)
        #expect(SecureFile.mode(of: path) == 0o644)
        let (_, other) = try await makeDevice(in: directory.deployment, name: "bob-phone")
        try SecureFile.write(Array(other.certificate.pemRepresentation.utf8), to: path, mode: 0o644)
        await expectError(code(DeviceError.Code.storageFailure)) {
            try await Device.open(in: directory.deployment, name: "alice-phone")
        }
    }
}
