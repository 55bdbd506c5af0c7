import AccessPolicy
import Foundation
import OrchardHTTP
import OrchardLogging
public import OrchardRuntime
public import OrchardServices
public import OrchardStore
public import OrchardX509
import PayAPI
public import PaymentToken

/// The Orchard Pay server: its state (store, token-signing chain, merchant registry) and its routes.
///
/// Built by ``build(configuration:directory:environment:)`` from what `init` wrote. It answers `GET /health`
/// (no client certificate), `GET /v1/merchant/identity` (mutual TLS with a merchant identity certificate), and
/// the device routes (mutual TLS with a device's certificate): registration, the provisioning relay, lifecycle
/// and notifications (`DeviceRoutes.swift`, docs/provisioning.md).
public final class PayServer: Sendable {
    public let store: Store
    /// The chain the server signs tokens with (root → integration CA → signing leaf).
    public let tokenSigning: TokenSigningPKI
    /// Merchant IDs, their certificates and app entitlements.
    public let merchants: MerchantRegistry

    /// The CA whose certificates are merchant identities.
    public let merchantCA: Certificate
    /// Registered devices.
    let devices: DeviceRegistry
    /// The network's token-requestor routes.
    let network: NetworkClient
    let clock: any WallClock
    /// Challenges (leaving lost mode).
    let random: any RandomSource

    /// The in-app payment endpoints (nonces, credential exchange).
    let inApp: InAppPayments

    init(
        store: Store, tokenSigning: TokenSigningPKI, merchants: MerchantRegistry, merchantCA: Certificate,
        devices: DeviceRegistry, network: NetworkClient, clock: any WallClock, random: any RandomSource,
        inApp: InAppPayments
    ) {
        self.random = random
        self.store = store
        self.tokenSigning = tokenSigning
        self.merchants = merchants
        self.merchantCA = merchantCA
        self.devices = devices
        self.network = network
        self.clock = clock
        self.inApp = inApp
    }

    /// Builds the Pay server of `directory` without binding: reads its keys and certificates, opens
    /// `pay.sqlite`, sets up TLS. The store is closed when the service stops.
    public static func build(
        configuration: Configuration, directory: DeploymentDirectory, environment: ServiceEnvironment
    ) async throws -> HTTPServiceInstance {
        let tokenSigning = try PayService.loadTokenSigningPKI(from: directory)
        let merchantCA = try CertificateAuthority.load(named: PayService.Files.merchantCA, from: directory)
        let logger = try ServiceLogging.logger(for: .pay, configuration: configuration, directory: directory)
        let deviceCA = try DeploymentPKI.readCertificate(named: PKIFiles.deviceCA, from: directory)
        let network = try NetworkClient(directory: directory, peers: environment.peers)
        let store = try PayStore.open(in: directory)
        do {
            let devices = DeviceRegistry(store: store, deviceCA: deviceCA, clock: environment.wallClock)
            let server = PayServer(
                store: store, tokenSigning: tokenSigning,
                merchants: MerchantRegistry(
                    store: store, authority: merchantCA, clock: environment.wallClock, random: environment.random),
                merchantCA: merchantCA.certificate, devices: devices, network: network, clock: environment.wallClock,
                random: environment.random,
                inApp: try InAppPayments.load(
                    directory: directory, store: store, devices: devices, tokenSigning: tokenSigning,
                    environment: environment, noncesPerMinute: configuration[PayService.noncesPerMinute]))
            return try HTTPServiceInstance(
                name: .pay, configuration: configuration, directory: directory, router: server.routes(),
                logger: logger, clock: environment.wallClock, onStop: { await store.close() })
        } catch {
            await store.close()
            throw error
        }
    }

    /// The Pay server's routes (besides `/health`, which every service has).
    func routes() -> Router {
        var router = Router()
        let merchants = self.merchants
        // The listener already verified the certificate chains to the Orchard root; the device role accepts only
        // the device CA's certificates, the merchant-identity role only the merchant CA's (each gets 403 on the
        // other's routes).
        router.roles[CallerRoles.device] = devices.requirement
        router.roles[CallerRoles.merchantIdentity] = .required(where: isMerchantIdentity)
        router.add(PayAPI.Declared.merchantIdentity) { request in
            guard let presented = request.clientCertificate,
                let merchantIdentifier = Self.merchantIdentifier(presented.derRepresentation),
                let displayName = try await merchants.merchant(merchantIdentifier)
            else {
                throw HTTPError(.clientCertificateNotAllowed, "this identity certificate names no registered merchant")
            }
            return try HTTPResponse.json(["merchantIdentifier": merchantIdentifier, "displayName": displayName])
        }
        installDeviceRoutes(into: &router)
        installAnonymousAnalytics(into: &router)
        inApp.addRoutes(to: &router)
        return router
    }

    /// Whether `presented` was issued by the merchant CA for identity use (extended key usage clientAuth).
    @Sendable func isMerchantIdentity(_ presented: ClientCertificate) -> Bool {
        guard let certificate = try? Certificate(derEncoded: presented.derRepresentation),
            let authorityKey = try? merchantCA.publicKey
        else { return false }
        return certificate.issuer == merchantCA.subject && certificate.isSignature(validUnder: authorityKey)
            && (try? certificate.extendedKeyUsage)?.contains(.clientAuth) == true
    }

    /// The merchant ID in an identity certificate's subject UID.
    static func merchantIdentifier(_ der: [UInt8]) -> String? {
        (try? Certificate(derEncoded: der))?.subject.userID
    }
}
