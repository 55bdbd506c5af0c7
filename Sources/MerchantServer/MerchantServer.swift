import Foundation
import MerchantKit
import OrchardHTTP
import OrchardLogging
public import OrchardRuntime
public import OrchardServices
public import OrchardStore

/// The demo merchant's server: its store, its decryption identity and its routes.
///
/// Built by ``build(configuration:directory:environment:)`` from what `init` wrote; today it answers
/// `GET /health`. The in-app issue adds the order and payment routes.
public final class MerchantServer: Sendable {
    public let store: Store
    /// The merchant ID this server sells as.
    public let merchantIdentifier: String
    /// The payment processing identity tokens are decrypted with.
    public let processingIdentity: MerchantIdentity

    init(store: Store, merchantIdentifier: String, processingIdentity: MerchantIdentity) {
        self.store = store
        self.merchantIdentifier = merchantIdentifier
        self.processingIdentity = processingIdentity
    }

    /// Builds the merchant server of `directory` without binding: reads its processing identity, opens
    /// `merchant.sqlite`, sets up TLS. The store is closed when the service stops.
    public static func build(
        configuration: Configuration, directory: DeploymentDirectory, environment: ServiceEnvironment
    ) async throws -> HTTPServiceInstance {
        let identity = try MerchantService.loadProcessingIdentity(from: directory)
        let logger = try ServiceLogging.logger(for: .merchant, configuration: configuration, directory: directory)
        let store = try MerchantService.openStore(in: directory)
        let server = MerchantServer(
            store: store, merchantIdentifier: configuration[MerchantService.merchantIdentifier],
            processingIdentity: identity)
        do {
            return try HTTPServiceInstance(
                name: .merchant, configuration: configuration, directory: directory, router: server.routes(),
                logger: logger, onStop: { await store.close() })
        } catch {
            await store.close()
            throw error
        }
    }

    /// The merchant's routes (besides `/health`, which every service has).
    func routes() -> Router {
        Router()
    }
}
