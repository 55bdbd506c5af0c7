import Foundation
import MerchantServer
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardStore
import OrchardX509
import PayAPI
import PayServer
import Testing

/// The Pay server's listener: `/health` without a client certificate, mutual TLS required per route.
@Suite("Pay server: client certificates per route")
struct PayServerTests {
    let temporary: TemporaryDirectory
    let directory: DeploymentDirectory
    init() throws {
        temporary = try TemporaryDirectory()
        directory = DeploymentDirectory(path: temporary.child("deployment"))
    }

    @Test func merchantIdentityRouteNeedsTheMerchantsCertificate() async throws {
        let registry = try ServiceRegistry([PayService(), MerchantService()])
        _ = try await DeploymentInitializer.initialize(directory, registry: registry)
        let connections = try await ServiceConnections.connect([.pay], directory: directory, registry: registry)
        let base = try connections.baseURL(of: .pay)
        let url = base + "/v1/merchant/identity"

        let anonymous = try connections.client()
        #expect(try await anonymous.get(base + "/health").status == .ok)
        #expect(try await anonymous.get(url).status == .unauthorized)
        anonymous.shutdown()

        let merchant = try connections.client(
            identity: try TLSIdentity.load(named: MerchantService.Files.identity, from: directory))
        let response = try await merchant.get(url)
        #expect(response.status == .ok)
        let body = try JSONSerialization.jsonObject(with: response.body) as? [String: String]
        #expect(body?["merchantIdentifier"] == "merchant.dev.orchard.demo")
        #expect(body?["displayName"] == "Orchard Demo Store")
        merchant.shutdown()

        // Chains to the Orchard root, but through the device CA: verified by TLS, refused by the route.
        let deviceCA = try CertificateAuthority.load(named: PKIFiles.deviceCA, from: directory)
        let device = try connections.client(
            identity: try issueClientIdentity(from: deviceCA, uid: "merchant.dev.orchard.demo"))
        #expect(try await device.get(url).status == .forbidden)
        device.shutdown()

        // A merchant CA certificate for an unregistered merchant ID.
        let merchantCA = try CertificateAuthority.load(named: PayService.Files.merchantCA, from: directory)
        let unknown = try connections.client(
            identity: try issueClientIdentity(from: merchantCA, uid: "merchant.dev.unknown"))
        #expect(try await unknown.get(url).status == .forbidden)
        unknown.shutdown()

        // From a CA outside the deployment: the handshake itself fails.
        let foreignCA = try CertificateAuthority.create(
            subject: DistinguishedName([.commonName("Elsewhere CA")]), issuer: nil, lifetime: 3600,
            clock: SystemClock(), random: SystemRandom())
        let foreign = try connections.client(
            identity: try issueClientIdentity(from: foreignCA, uid: "merchant.dev.orchard.demo"))
        await #expect(throws: HTTPError.self) { try await foreign.get(url) }
        foreign.shutdown()
        await connections.close()
    }

    /// `orchard merchant certs --revoke` takes effect at once on every route of the running server.
    @Test("S7: A revoked identity certificate is refused (403 client_certificate_revoked) on every route, at once")
    func aRevokedIdentityCertificateIsRefusedOnEveryRoute() async throws {
        let registry = try ServiceRegistry([PayService(), MerchantService()])
        _ = try await DeploymentInitializer.initialize(directory, registry: registry)
        let connections = try await ServiceConnections.connect([.pay], directory: directory, registry: registry)
        let base = try connections.baseURL(of: .pay)
        let merchant = try connections.client(
            identity: try TLSIdentity.load(named: MerchantService.Files.identity, from: directory))
        #expect(try await merchant.get(base + "/v1/merchant/identity").status == .ok)

        // Revoked as the command does, in pay.sqlite, while the server runs.
        let store = try PayStore.open(in: directory)
        let certificates = MerchantCertificates(store: store, clock: SystemClock())
        let identity = try #require(
            try await certificates.list(merchantIdentifier: "merchant.dev.orchard.demo").first { $0.kind == "identity" }
        )
        try await certificates.revoke(serial: identity.serial)
        await store.close()

        // The identity route, /health, and a POST whose handler would refuse a certificate itself: the check
        // comes first on each.
        let purchase = AnonymousPurchase(amountBucket: "0-5", hour: "2026-03-01T12", region: "840")
        for refused in [
            try await merchant.get(base + "/v1/merchant/identity"), try await merchant.get(base + "/health"),
            try await merchant.post(base + PayAPI.Route.anonymousPurchases, json: purchase),
        ] {
            #expect(refused.status == .forbidden && refused.errorBody?.code == "client_certificate_revoked")
        }
        merchant.shutdown()
        // Without a certificate, /health still answers.
        let anonymous = try connections.client()
        #expect(try await anonymous.get(base + "/health").status == .ok)
        anonymous.shutdown()
        await connections.close()
    }
}
