public import Foundation
public import MerchantKit
import OrchardCrypto
import OrchardHTTP
import OrchardLogging
public import OrchardRuntime
public import OrchardServices
public import OrchardStore
import OrchardX509
import WebMerchantAPI

/// The demo merchant's server: its store, its decryption identity and its routes (docs/merchant-server.md).
///
/// Built by ``build(configuration:directory:environment:)`` from what `init` wrote: `POST /v1/orders`,
/// `POST /v1/orders/{orderID}/payment` and `GET /v1/orders/{orderID}` over TLS (`pki/merchant-tls`; apps need no
/// client certificate), besides `GET /health`. Tokens are verified against the deployment's token root
/// (`pki/pay/token-root`), decrypted with `pki/merchant/merchant-processing` (and
/// `pki/merchant/merchant-processing-rsa` when the deployment has one), and charged at the network's acquirer with
/// `pki/merchant/merchant-acquiring`.
public final class MerchantServer: Sendable {
    public let store: Store
    /// The merchant ID this server sells as.
    public let merchantIdentifier: String
    /// The payment processing identities tokens are decrypted with (P-256 first, then RSA if any).
    public let processingIdentities: [MerchantIdentity]
    let payments: PaymentProcessor

    init(
        store: Store, merchantIdentifier: String, processingIdentities: [MerchantIdentity],
        payments: PaymentProcessor
    ) {
        self.store = store
        self.merchantIdentifier = merchantIdentifier
        self.processingIdentities = processingIdentities
        self.payments = payments
    }

    /// The token root merchants of this deployment trust (`pki/pay/token-root.pem`, written by the Pay server's
    /// init step), not Apple's.
    public static let tokenRootFile = "token-root"
    /// An optional RSA-2048 processing identity (`pki/merchant/merchant-processing-rsa.pem` / `.key`).
    public static let rsaProcessingFile = "merchant-processing-rsa"
    /// How far a token's signing time may lie from now, either way.
    public static let freshnessWindow: TimeInterval = 300

    /// Builds the merchant server of `directory` without binding: reads its processing identities and the
    /// token root, opens `merchant.sqlite`, sets up TLS and the acquirer client. The store is closed when the
    /// service stops. Charges a stopped process left unresolved are reversed once the server listens.
    public static func build(
        configuration: Configuration, directory: DeploymentDirectory, environment: ServiceEnvironment
    ) async throws -> any ServiceInstance {
        let gateway = try AcquirerHTTPSGateway(directory: directory, peers: environment.peers)
        return try await build(
            configuration: configuration, directory: directory, environment: environment, gateway: gateway)
    }

    static func build(
        configuration: Configuration, directory: DeploymentDirectory, environment: ServiceEnvironment,
        gateway: any AcquirerGateway
    ) async throws -> any ServiceInstance {
        var identities = [try MerchantService.loadProcessingIdentity(from: directory)]
        if let rsa = try loadRSAProcessingIdentity(from: directory) { identities.append(rsa) }
        let root = try DeploymentPKI.readCertificate(named: tokenRootFile, from: directory)
        let decryptor = try PaymentTokenDecryptor(
            identities: identities, trustRoots: [root], freshnessWindow: freshnessWindow,
            clock: environment.wallClock)
        let logger = try ServiceLogging.logger(for: .merchant, configuration: configuration, directory: directory)
        let store = try MerchantService.openStore(in: directory, configuration: configuration)
        let merchantID = configuration[MerchantService.merchantIdentifier]
        let payments = PaymentProcessor(
            merchantIdentifier: merchantID, store: store, decryptor: decryptor, gateway: gateway,
            clock: environment.wallClock, random: environment.random, logger: logger)
        let server = MerchantServer(
            store: store, merchantIdentifier: merchantID, processingIdentities: identities, payments: payments)
        do {
            let http = try HTTPServiceInstance(
                name: .merchant, configuration: configuration, directory: directory, router: server.routes(),
                logger: logger, clock: environment.wallClock, onStop: { await store.close() })
            // The site's Apple Pay routes: sessions from the gateway (Apple's hosts or the sandbox's name).
            let sessions = MerchantSessionClient(
                merchantIdentifier: merchantID, displayName: configuration[MerchantService.displayName],
                sandboxGateways: [WebMerchantAPI.HostNames.gateway],
                transport: try CurlMerchantSessionTransport(
                    directory: directory, hostNames: configuration.hostNames, peers: environment.peers))
            let site = try MerchantSite(configuration: configuration, directory: directory, logger: logger) { router in
                payments.addWebRoutes(to: &router, sessions: sessions, domain: WebMerchantAPI.HostNames.store)
            }
            return MerchantServiceInstance(
                http: http, payments: payments, site: site,
                interval: configuration[MerchantService.reconcileIntervalSeconds])
        } catch {
            await store.close()
            throw error
        }
    }

    /// The merchant's routes (besides `/health`, which every service has).
    func routes() -> Router {
        var router = Router()
        payments.addRoutes(to: &router)
        return router
    }

    /// The RSA processing identity, if the deployment has `pki/merchant/merchant-processing-rsa`.
    static func loadRSAProcessingIdentity(from directory: DeploymentDirectory) throws -> MerchantIdentity? {
        let certificatePath = try directory.certificatePath(named: rsaProcessingFile)
        guard FileManager.default.fileExists(atPath: certificatePath) else { return nil }
        let certificates = try DeploymentPKI.readCertificates(named: rsaProcessingFile, from: directory)
        guard let leaf = certificates.first else {
            throw ServicesError(.pkiFailure, "pki/\(rsaProcessingFile).pem holds no certificate")
        }
        let pem = try directory.readPrivateKey(named: rsaProcessingFile)
        return try pem.withUnsafeBytes { bytes throws(MerchantKitError) in
            try MerchantIdentity(certificate: leaf, privateKeyPEM: String(decoding: bytes, as: UTF8.self))
        }
    }
}

/// The merchant's HTTPS service, which also reverses the charges left without an outcome (by a stopped process,
/// or a reversal the acquirer did not take): once it listens, then every `interval` seconds until shutdown.
final class MerchantServiceInstance: ServiceInstance, @unchecked Sendable {
    /// Internal for the access matrix test, which reads the routes its server registered.
    let http: HTTPServiceInstance
    private let payments: PaymentProcessor
    /// The demo website (`store.orchard.test`) on its own listener.
    let site: MerchantSite
    private let interval: Int
    // Guarded by `lock`.
    private let lock = NSLock()
    private var loop: Task<Void, Never>?

    init(http: HTTPServiceInstance, payments: PaymentProcessor, site: MerchantSite, interval: Int) {
        self.http = http
        self.payments = payments
        self.site = site
        self.interval = interval
    }

    func start() async throws -> ServiceEndpoint {
        var endpoint = try await http.start()
        do {
            try site.server.start()
        } catch {
            await http.shutdown()
            throw ServicesError(.startFailed, "the merchant's site cannot listen", underlying: error)
        }
        endpoint.ports["site"] = site.server.port
        let payments = self.payments
        let interval = self.interval
        let task = Task {
            while !Task.isCancelled {
                await payments.resolveUnfinished()
                // try?: a cancelled sleep ends the loop at its next check.
                try? await Task.sleep(for: .seconds(interval))
            }
        }
        lock.withLock { loop = task }
        return endpoint
    }

    func shutdown() async {
        // A pass in progress finishes before the store closes under it.
        if let loop = lock.withLock({ loop }) {
            loop.cancel()
            await loop.value
        }
        await site.server.shutdown()
        await http.shutdown()
    }

    func forceShutdown() {
        lock.withLock { loop }?.cancel()
        site.server.forceShutdown()
        http.forceShutdown()
    }
}
