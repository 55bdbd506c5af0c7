import Foundation
import Issuer
import NetworkServer
import NetworkTestSupport
import OrchardCrypto
import OrchardX509
import Testing
import TokenService

/// A test device CA: a root, an intermediate, and SE certificates issued under either.
struct TestDeviceCA {
    static let start = NetworkHarness.start.addingTimeInterval(-86_400)
    static let end = NetworkHarness.start.addingTimeInterval(365 * 86_400)
    let rootKey: CertificatePrivateKey
    let root: Certificate
    let intermediateKey: CertificatePrivateKey
    let intermediate: Certificate

    init(name: String = "Orchard Device CA") throws {
        let rootSigning = try P256.Signing.PrivateKey()
        rootKey = CertificatePrivateKey(rootSigning)
        root = try Certificate.issue(
            subject: DistinguishedName([.commonName(name)]), publicKey: CertificatePublicKey(rootSigning.publicKey),
            issuer: .selfSigned(rootKey), notValidBefore: Self.start, notValidAfter: Self.end,
            extensions: [.basicConstraints(isCA: true), .keyUsage([.keyCertSign, .cRLSign])])
        let intermediateSigning = try P256.Signing.PrivateKey()
        intermediateKey = CertificatePrivateKey(intermediateSigning)
        intermediate = try Certificate.issue(
            subject: DistinguishedName([.commonName(name + " SE 1")]),
            publicKey: CertificatePublicKey(intermediateSigning.publicKey), issuer: .certificate(root, key: rootKey),
            notValidBefore: Self.start, notValidAfter: Self.end,
            extensions: [.basicConstraints(isCA: true, pathLength: 0), .keyUsage([.keyCertSign, .cRLSign])])
    }

    /// An SE certificate for `key`, named `commonName`, issued by the intermediate (chain of two) or the root.
    func certify(
        _ key: P256.KeyAgreement.PublicKey, commonName: String, organization: String = "Orchard device",
        viaIntermediate: Bool = true,
        notValidAfter: Date = end
    ) throws -> [[UInt8]] {
        let leaf = try Certificate.issue(
            subject: DistinguishedName([.organization(organization), .commonName(commonName)]),
            publicKey: CertificatePublicKey(try P256.Signing.PublicKey(x963Representation: key.x963Representation)),
            issuer: viaIntermediate
                ? .certificate(intermediate, key: intermediateKey) : .certificate(root, key: rootKey),
            notValidBefore: Self.start, notValidAfter: notValidAfter,
            extensions: [.basicConstraints(isCA: false), .keyUsage([.keyAgreement])])
        return viaIntermediate ? [leaf.derRepresentation, intermediate.derRepresentation] : [leaf.derRepresentation]
    }
}

@Suite("Device CA check of SE certificates")
struct DeviceCAKeyVerifierTests {
    @Test func acceptsAChainToTheDeviceCANamingTheSE() throws {
        let ca = try TestDeviceCA()
        let clock = ManualClock(now: NetworkHarness.start)
        let verifier = try DeviceCAKeyVerifier(deviceCARoots: [ca.root], clock: clock)
        let se = try P256.KeyAgreement.PrivateKey()
        for chain in [
            try ca.certify(se.publicKey, commonName: "se-1"),
            try ca.certify(se.publicKey, commonName: "se-1", viaIntermediate: false),
        ] {
            #expect(
                try verifier.verifiedSecureElementKey(certificateChain: chain, deviceID: "se-1") == se.publicKey)
        }
    }

    @Test func refusesEveryOtherChain() throws {
        let ca = try TestDeviceCA()
        let rogue = try TestDeviceCA(name: "Rogue CA")
        let clock = ManualClock(now: NetworkHarness.start)
        let verifier = try DeviceCAKeyVerifier(deviceCARoots: [ca.root], clock: clock)
        let se = try P256.KeyAgreement.PrivateKey()
        let good = try ca.certify(se.publicKey, commonName: "se-1")
        // Another device's name, another organisation, another CA, a missing intermediate, a self-made leaf,
        // too many certificates, none.
        let cases: [(String, [[UInt8]])] = [
            ("se-2", good),
            ("se-1", try ca.certify(se.publicKey, commonName: "se-1", organization: "Orchard merchant")),
            ("se-1", try rogue.certify(se.publicKey, commonName: "se-1")),
            ("se-1", [good[0]]),
            ("se-1", [se.publicKey.derRepresentation]),
            ("se-1", good + good + good),
            ("se-1", []),
        ]
        for (name, chain) in cases {
            #expect(throws: (any Error).self) {
                try verifier.verifiedSecureElementKey(certificateChain: chain, deviceID: name)
            }
        }
        // A certificate that has expired by now.
        let shortLived = try ca.certify(
            se.publicKey, commonName: "se-1", notValidAfter: NetworkHarness.start.addingTimeInterval(60))
        #expect(throws: Never.self) {
            try verifier.verifiedSecureElementKey(certificateChain: shortLived, deviceID: "se-1")
        }
        clock.advance(by: 120)
        #expect(throws: TokenServiceError(.deviceNotTrusted, "")) {
            try verifier.verifiedSecureElementKey(certificateChain: shortLived, deviceID: "se-1")
        }
    }

    @Test func provisioningWithTheRealCheck() async throws {
        let ca = try TestDeviceCA()
        let h = try await NetworkHarness(
            deviceKeyVerifier: try DeviceCAKeyVerifier(
                deviceCARoots: [ca.root], clock: ManualClock(now: NetworkHarness.start)))
        let phone = try SimulatedDevice(deviceID: "phone-1", kind: "phone")
        phone.certificateChain = try ca.certify(phone.secureElementPublicKey, commonName: phone.deviceID)
        let card = try await h.provision("4111111111111111", on: phone)
        #expect(try await h.authorize(card, on: phone, amount: 100).responseCode == .approved)
        // A device presenting another SE's certificate cannot get a token sealed to its own key.
        let thief = try SimulatedDevice(deviceID: "phone-2", kind: "phone")
        thief.certificateChain = try ca.certify(thief.secureElementPublicKey, commonName: phone.deviceID)
        let sessionID = try #require(try await h.checkCard("5555555555554444", on: thief).sessionID)
        await #expect(throws: TokenServiceError(.deviceNotTrusted, "")) { try await h.link(sessionID, on: thief) }
    }
}
