import Foundation
import MerchantServer
import OrchardCrypto
import OrchardRuntime
import OrchardServices
import OrchardStore
import OrchardX509
import Testing

@testable import PayServer

/// Which client certificates the Pay server looks up in its revocations, and that only those cost a read.
@Suite("Pay server: the revocation lookup")
struct RevocationLookupTests {
    let temporary: TemporaryDirectory
    let directory: DeploymentDirectory
    init() throws {
        temporary = try TemporaryDirectory()
        directory = DeploymentDirectory(path: temporary.child("deployment"))
    }

    @Test("The merchant CA's certificates are looked up; another CA's are not, and cost no read of pay.sqlite")
    func onlyTheMerchantCAsCertificatesAreLookedUp() async throws {
        let registry = try ServiceRegistry([PayService(), MerchantService()])
        _ = try await DeploymentInitializer.initialize(directory, registry: registry)
        let merchantCA = try CertificateAuthority.load(named: PayService.Files.merchantCA, from: directory)
        let deviceCA = try CertificateAuthority.load(named: PKIFiles.deviceCA, from: directory)
        let store = try PayStore.open(in: directory)
        let revocations = MerchantCertificateRevocations(store: store, merchantCA: merchantCA.certificate)
        let identity = try #require(
            try await store.read { db in
                try db.queryFirst(
                    "SELECT serial, der FROM merchant_certificates WHERE kind = 'identity'", [],
                    { (try $0.string(0), try $0.blob(1)) })
            })
        let device = try Self.certificate(from: deviceCA)

        #expect(try await revocations.isRevoked(der: identity.1) == false)
        try await MerchantCertificates(store: store, clock: SystemClock()).revoke(serial: identity.0)
        #expect(try await revocations.isRevoked(der: identity.1))
        #expect(try await revocations.isRevoked(der: device) == false)

        // With the store closed, a lookup fails: the device's certificate still gets its answer, so it made none.
        await store.close()
        #expect(try await revocations.isRevoked(der: device) == false)
        await #expect(throws: (any Error).self) { try await revocations.isRevoked(der: identity.1) }
        // Bytes that are no certificate are looked up (and so fail here), never waved through.
        await #expect(throws: (any Error).self) { try await revocations.isRevoked(der: [0x30, 0x03, 0x02, 0x01]) }
    }

    static func certificate(from authority: CertificateAuthority) throws -> [UInt8] {
        let key = try P256.Signing.PrivateKey()
        return try Certificate.issue(
            subject: DistinguishedName([.organization("Orchard device"), .commonName("phone-1")]),
            publicKey: CertificatePublicKey(key.publicKey), issuer: authority.issuer,
            notValidBefore: Date().addingTimeInterval(-60), notValidAfter: Date().addingTimeInterval(3600),
            extensions: [.basicConstraints(isCA: false), .extendedKeyUsage([.clientAuth])]
        ).derRepresentation
    }
}
