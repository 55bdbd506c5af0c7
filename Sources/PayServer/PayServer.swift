import Foundation
import OrchardHTTP
import OrchardLogging
public import OrchardRuntime
public import OrchardServices
public import OrchardStore
public import PaymentToken

/// The Orchard Pay server: its state (store, token-signing chain, merchant registry) and its routes.
///
/// Built by ``build(configuration:directory:environment:)`` from what `init` wrote; today it answers
/// `GET /health`. Later issues add merchant onboarding, nonces, the credential exchange and the provisioning
/// relay as routes here; those needing mutual TLS declare `requirement: .required`.
public final class PayServer: Sendable {
    public let store: Store
    /// The chain the server signs tokens with (root → integration CA → signing leaf).
    public let tokenSigning: TokenSigningPKI
    /// Merchant IDs, their certificates and app entitlements.
    public let merchants: MerchantRegistry

    init(store: Store, tokenSigning: TokenSigningPKI, merchants: MerchantRegistry) {
        self.store = store
        self.tokenSigning = tokenSigning
        self.merchants = merchants
    }

    /// Builds the Pay server of `directory` without binding: reads its keys and certificates, opens
    /// `pay.sqlite`, sets up TLS. The store is closed when the service stops.
    public static func build(
        configuration: Configuration, directory: DeploymentDirectory, environment: ServiceEnvironment
    ) async throws -> HTTPServiceInstance {
        let tokenSigning = try PayService.loadTokenSigningPKI(from: directory)
        let merchantCA = try CertificateAuthority.load(named: PayService.Files.merchantCA, from: directory)
        let logger = try ServiceLogging.logger(for: .pay, configuration: configuration, directory: directory)
        let store = try PayStore.open(in: directory)
        let server = PayServer(
            store: store, tokenSigning: tokenSigning,
            merchants: MerchantRegistry(
                store: store, authority: merchantCA, clock: environment.wallClock, random: environment.random))
        do {
            return try HTTPServiceInstance(
                name: .pay, configuration: configuration, directory: directory, router: server.routes(),
                logger: logger, onStop: { await store.close() })
        } catch {
            await store.close()
            throw error
        }
    }

    /// The Pay server's routes (besides `/health`, which every service has).
    func routes() -> Router {
        Router()
    }
}
