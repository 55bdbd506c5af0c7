import Foundation
import MerchantServer
import OrchardCrypto
import OrchardRuntime
import OrchardServices
import OrchardStore
import OrchardX509
import PayServer
import Testing

/// Merchant identity certificates as Apple's (notes/apple-pay-web.md §4): RSA-2048 keys only, clientAuth, the
/// subject the Pay server chooses, the merchant-ID extension and the identity marker, 25 months.
@Suite("Web merchants: identity certificates")
struct IdentityCertificateTests {
    static let merchant = "merchant.dev.web.shop"

    /// A Pay server store and merchant CA in a fresh directory, with `merchant` registered.
    struct Registry {
        let temporary: TemporaryDirectory
        let store: Store
        let registry: MerchantRegistry
        let authority: CertificateAuthority
        let clock: ManualClock

        init() async throws {
            temporary = try TemporaryDirectory()
            let directory = DeploymentDirectory(path: temporary.path)
            clock = ManualClock(now: Date(timeIntervalSince1970: 1_800_000_000))
            authority = try CertificateAuthority.create(
                subject: DistinguishedName([.commonName("Test Merchant CA")]), issuer: nil, lifetime: 20 * 365 * 86_400,
                clock: clock, random: SystemRandom())
            store = try PayStore.open(in: directory)
            registry = MerchantRegistry(store: store, authority: authority, clock: clock, random: SystemRandom())
            try await registry.registerMerchant(identifier: IdentityCertificateTests.merchant, displayName: "Web Shop")
        }

        func close() async { await store.close() }
    }

    static func csr(_ key: CertificatePrivateKey, uid: String = merchant) throws -> CertificateSigningRequest {
        try CertificateSigningRequest.create(subject: DistinguishedName([.userID(uid), .commonName("csr")]), key: key)
    }

    @Test("An RSA-2048 CSR gets Apple's identity certificate: subject, clientAuth, 6.32, 6.46, 25 months")
    func issuedAsApples() async throws {
        let fixture = try await Registry()
        let key = try RSA.PrivateKey(keySize: 2048)
        let chain = try await fixture.registry.issueMerchantIdentityCertificate(
            for: try Self.csr(CertificatePrivateKey(key)), merchantIdentifier: Self.merchant)
        await fixture.close()
        let leaf = chain[0]
        #expect(chain.count == 2 && chain[1] == fixture.authority.certificate)
        #expect(try leaf.publicKey.rsa?.keySizeInBits == 2048)
        let account = MerchantRegistry.accountIdentifier(of: Self.merchant)
        #expect(account.count == 10 && account == account.uppercased())
        #expect(
            leaf.subject.description
                == "UID=\(Self.merchant), CN=Apple Pay Merchant Identity:\(Self.merchant), OU=\(account), O=Web Shop")
        #expect(try leaf.extendedKeyUsage == [.clientAuth])
        #expect(try leaf.keyUsage == [.digitalSignature])
        #expect(try leaf.basicConstraints?.isCA == false)
        // 6.32: DER UTF8String (0C 40) of the 64 upper-case hex digits of SHA-256(merchant ID).
        let hash = Hex.encode(SHA256.hash(Array(Self.merchant.utf8))).uppercased()
        #expect(leaf.extension(.appleMerchantIdentifier)?.value == [0x0C, 0x40] + Array(hash.utf8))
        #expect(leaf.extension(.appleMerchantIdentityMarker)?.value == [0x05, 0x00])
        #expect(leaf.extension(.appleMerchantIdentityMarker)?.isCritical == false)
        #expect(leaf.notValidAfter.timeIntervalSince(fixture.clock.now()) == MerchantRegistry.certificateLifetime)
    }

    @Test("A P-256 or RSA-3072 identity CSR is refused: identity certificates are RSA-2048")
    func otherKeysRefused() async throws {
        let fixture = try await Registry()
        let keys = [
            CertificatePrivateKey(try P256.Signing.PrivateKey()),
            CertificatePrivateKey(try RSA.PrivateKey(keySize: 3072)),
        ]
        for key in keys {
            await #expect {
                _ = try await fixture.registry.issueMerchantIdentityCertificate(
                    for: try Self.csr(key), merchantIdentifier: Self.merchant)
            } throws: { error in
                (error as? ServicesError)?.message.contains("identity certificates are RSA-2048") == true
            }
        }
        // Nothing was issued.
        let issued = try await MerchantCertificates(store: fixture.store, clock: fixture.clock).list()
        #expect(issued.isEmpty)
        // A processing certificate still takes P-256.
        let processing = try await fixture.registry.issuePaymentProcessingCertificate(
            for: try Self.csr(CertificatePrivateKey(try P256.Signing.PrivateKey())), merchantIdentifier: Self.merchant)
        #expect(try processing[0].publicKey.p256 != nil)
        await fixture.close()
    }

    @Test("An RSA identity CSR for another merchant's UID is refused")
    func otherMerchantRefused() async throws {
        let fixture = try await Registry()
        await #expect(throws: ServicesError.self) {
            _ = try await fixture.registry.issueMerchantIdentityCertificate(
                for: try Self.csr(CertificatePrivateKey(try RSA.PrivateKey(keySize: 2048)), uid: "merchant.dev.other"),
                merchantIdentifier: Self.merchant)
        }
        await fixture.close()
    }
}

/// A fresh directory under the system's temporary directory, removed when the value is dropped.
final class TemporaryDirectory: @unchecked Sendable {
    let path: String

    init() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("orchard-web-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        path = base.path
    }

    func child(_ name: String) -> String { path + "/" + name }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}
