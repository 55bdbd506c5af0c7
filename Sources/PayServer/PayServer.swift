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
import WebMerchantAPI

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
    /// Web merchants' domains and association files.
    public let domains: WebDomains
    /// The web gateway's merchant sessions.
    public let sessions: MerchantSessions
    /// Capability statements for `canMakePaymentsWithActiveCard`.
    public let capabilities: CapabilityStatements
    /// The devices waiting for relay frames (long polls).
    let relayMailboxes = RelayMailboxes()

    init(
        store: Store, tokenSigning: TokenSigningPKI, merchants: MerchantRegistry, merchantCA: Certificate,
        devices: DeviceRegistry, network: NetworkClient, clock: any WallClock, random: any RandomSource,
        inApp: InAppPayments, domains: WebDomains, sessions: MerchantSessions, capabilities: CapabilityStatements
    ) {
        self.random = random
        self.sessions = sessions
        self.capabilities = capabilities
        self.domains = domains
        self.store = store
        self.tokenSigning = tokenSigning
        self.merchants = merchants
        self.merchantCA = merchantCA
        self.devices = devices
        self.network = network
        self.clock = clock
        self.inApp = inApp
    }

    /// How often the Pay server's periodic pass runs: it checks the domains whose check is due (daily, at their
    /// site certificate's expiry, and the retries 15 minutes apart, ``WebDomains``).
    public static let domainRecheckInterval: Duration = .seconds(60)
    /// How often that pass also purges what expired (merchant sessions, payment nonces on PostgreSQL).
    public static let purgeInterval: Duration = .seconds(3600)

    /// Builds the Pay server of `directory` without binding: reads its keys and certificates, opens
    /// `pay.sqlite`, sets up TLS. The store is closed when the service stops.
    public static func build(
        configuration: Configuration, directory: DeploymentDirectory, environment: ServiceEnvironment
    ) async throws -> any ServiceInstance {
        let (leaves, issued) = try SigningLeaves.load(
            from: directory, clock: environment.wallClock, random: environment.random)
        let tokenSigning = leaves.paymentToken
        let merchantCA = try CertificateAuthority.load(named: PayService.Files.merchantCA, from: directory)
        let logger = try ServiceLogging.logger(for: .pay, configuration: configuration, directory: directory)
        if !issued.isEmpty {
            logger.notice(
                "issued the signing leaves this deployment lacked: \(issued.map { SigningLeaves.fileName($0) })")
        }
        let deviceCA = try DeploymentPKI.readCertificate(named: PKIFiles.deviceCA, from: directory)
        let network = try NetworkClient(directory: directory, peers: environment.peers)
        let root = try DeploymentPKI.readCertificate(named: PKIFiles.rootCA, from: directory)
        let files = try AssociationFiles(
            tokenSigning: leaves.domainAssociationFile, legacy: leaves.legacyAssociationFileSigner,
            clock: environment.wallClock)
        // A Pay side deployed on its own also reaches the host names of the parties it imported (the merchant's
        // store.orchard.test), whose sites chain to their imported roots.
        let hostNames = PeerAddresses.read(from: directory).hostNames.merging(configuration.hostNames) { $1 }
        // The ports the Pay server's own names map to (its gateway and public side), whatever port it took.
        let ownPorts = Set(PayService().hostNames.compactMap { hostNames[$0.name] })
        let validator = DomainValidator(
            hostNames: hostNames, trustedRootsPEM: try Self.siteRootsPEM(in: directory), files: files,
            servicePorts: { [peers = environment.peers] in
                ownPorts.union(Self.servicePorts(of: directory, configuration: configuration, peers: peers))
            })
        let store = try PayStore.open(in: directory, configuration: configuration)
        do {
            let devices = DeviceRegistry(store: store, deviceCA: deviceCA, clock: environment.wallClock)
            let domains = WebDomains(store: store, validator: validator, files: files, clock: environment.wallClock)
            let server = PayServer(
                store: store, tokenSigning: tokenSigning,
                merchants: MerchantRegistry(
                    store: store, authority: merchantCA, clock: environment.wallClock, random: environment.random),
                merchantCA: merchantCA.certificate, devices: devices, network: network, clock: environment.wallClock,
                random: environment.random,
                inApp: try InAppPayments.load(
                    directory: directory, store: store, devices: devices, tokenSigning: tokenSigning,
                    environment: environment, noncesPerMinute: configuration[PayService.noncesPerMinute]),
                domains: domains,
                sessions: try MerchantSessions(
                    store: store, tokenSigning: leaves.merchantSession, clock: environment.wallClock,
                    random: environment.random),
                capabilities: CapabilityStatements(
                    store: store, tokenSigning: leaves.capabilityStatement, clock: environment.wallClock,
                    monotonic: environment.monotonicClock))
            var router = server.routes(root: root)
            // Also refused: the certificates this side issued to a party that re-keyed since (`registrations.json`).
            router.revocations = CombinedCertificateRevocations(
                [router.revocations, try RegisteredCertificateRevocations.ofParty(in: directory)].compactMap { $0 })
            let http = try HTTPServiceInstance(
                name: .pay, configuration: configuration, directory: directory, router: router,
                logger: logger, clock: environment.wallClock, onStop: { await store.close() })
            return PayServiceInstance(
                http: http, domains: domains, sessions: server.sessions, inApp: server.inApp,
                interval: domainRecheckInterval, purgeEvery: Int(purgeInterval / domainRecheckInterval),
                logger: logger)
        } catch {
            await store.close()
            throw error
        }
    }

    /// The roots a merchant's site may answer domain validation with: the deployment's own, and (a Pay side
    /// deployed on its own) the merchant party's imported root, never another party's.
    static func siteRootsPEM(in directory: DeploymentDirectory) throws -> String {
        let own = try directory.readCertificate(named: PKIFiles.rootCA)
        // try?: no merchant imported yet (or none in this directory): the sites of no merchant validate then.
        guard let merchant = try? PeerAddresses.trustedRootPEM(for: .merchant, in: directory), merchant != own else {
            return own
        }
        return own + (own.hasSuffix("\n") ? "" : "\n") + merchant
    }

    /// Every port an Orchard service of `directory` (or a peer party's) is configured for or listens on now, the
    /// merchant's website listener (`site`) aside: the domain validator fetches from none of them.
    static func servicePorts(
        of directory: DeploymentDirectory, configuration: Configuration, peers: ServicePeers
    ) -> Set<Int> {
        var ports = Set<Int>()
        for name in ServiceName.all {
            ports.insert(configuration[ServiceSettings.port(name)])
            ports.formUnion(configuration[ServiceSettings.instancePorts(name)].compactMap { Int($0) })
            for endpoint in peers.endpoints(of: name, in: directory) {
                ports.insert(endpoint.port)
                for (key, port) in endpoint.ports where key != "site" { ports.insert(port) }
            }
        }
        ports.remove(0)
        return ports
    }

    /// The Pay server's routes (besides `/health`, which every service has).
    func routes(root: Certificate) -> Router {
        var router = Router()
        let merchants = self.merchants
        // The listener already verified the certificate chains to the Orchard root; the device role accepts only
        // the device CA's certificates, the merchant-identity role only the merchant CA's (each gets 403 on the
        // other's routes).
        router.roles[CallerRoles.device] = devices.requirement
        router.roles[CallerRoles.merchantIdentity] = .required(where: isMerchantIdentity)
        // A revoked certificate (`orchard merchant certs --revoke`) is refused on every route.
        router.revocations = MerchantCertificateRevocations(store: store, merchantCA: merchantCA)
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
        installRelayRoutes(into: &router)
        installAddressSyncRoutes(into: &router)
        installAnonymousAnalytics(into: &router)
        inApp.addRoutes(to: &router)
        installWebMerchantRoutes(into: &router, root: root)
        installGatewayRoutes(into: &router)
        installCapabilityRoute(into: &router)
        installScriptRoutes(into: &router)
        return router
    }

    /// Whether `presented` was issued by the merchant CA for identity use (extended key usage clientAuth).
    @Sendable func isMerchantIdentity(_ presented: ClientCertificate) -> Bool {
        // try?: a certificate that does not parse is no merchant identity.
        guard let certificate = try? Certificate(derEncoded: presented.derRepresentation),
            // try?: a merchant CA whose key cannot be read admits no merchant.
            let authorityKey = try? merchantCA.publicKey
        else { return false }
        return certificate.issuer == merchantCA.subject && certificate.isSignature(validUnder: authorityKey)
            // try?: an extended key usage that cannot be read is no clientAuth.
            && (try? certificate.extendedKeyUsage)?.contains(.clientAuth) == true
    }

    /// The merchant ID in an identity certificate's subject UID.
    static func merchantIdentifier(_ der: [UInt8]) -> String? {
        // try?: a certificate that does not parse names no merchant.
        (try? Certificate(derEncoded: der))?.subject.userID
    }
}

/// The Pay server's HTTPS service plus its periodic pass: one right after the listener starts, then one every
/// `interval`, each checking the domains whose check is due by the injected clock (``WebDomains/recheckDue()``);
/// the first pass and every `purgeEvery`-th also purge the expired merchant sessions (and, on PostgreSQL, the
/// expired payment nonces).
public final class PayServiceInstance: ServiceInstance, @unchecked Sendable {
    /// The HTTPS service (for tests that read its routes).
    public let http: HTTPServiceInstance
    let domains: WebDomains
    let sessions: MerchantSessions
    let inApp: InAppPayments
    let interval: Duration
    let purgeEvery: Int
    let logger: Logger
    // Guarded by `lock`.
    private let lock = NSLock()
    private var loop: Task<Void, Never>?

    init(
        http: HTTPServiceInstance, domains: WebDomains, sessions: MerchantSessions, inApp: InAppPayments,
        interval: Duration, purgeEvery: Int, logger: Logger
    ) {
        self.http = http
        self.domains = domains
        self.sessions = sessions
        self.inApp = inApp
        self.interval = interval
        self.purgeEvery = max(1, purgeEvery)
        self.logger = logger
    }

    public func start() async throws -> ServiceEndpoint {
        let endpoint = try await http.start()
        let (domains, sessions, inApp) = (self.domains, self.sessions, self.inApp)
        let (interval, purgeEvery, logger) = (self.interval, self.purgeEvery, self.logger)
        let task = Task {
            var pass = 0
            while !Task.isCancelled {
                defer { pass += 1 }
                do {
                    for report in try await domains.recheckDue() {
                        logger.notice(
                            "domain re-check: \(report.record.domain) \(report.verified ? "verified" : "failed")",
                            metadata: ["merchant": .string(report.record.merchantIdentifier)])
                    }
                } catch {
                    logger.warning("domain re-check: the pass failed; the next one retries")
                }
                guard pass % purgeEvery == 0 else {
                    // try?: a cancelled sleep ends the loop at its next check.
                    try? await Task.sleep(for: interval)
                    continue
                }
                do {
                    let purged = try await sessions.purgeExpired()
                    if purged > 0 { logger.info("purged \(purged) expired merchant sessions") }
                } catch {
                    logger.warning("merchant sessions: the purge failed; the next pass retries")
                }
                do {
                    let purged = try await inApp.purgeExpiredNonces()
                    if purged > 0 { logger.info("purged \(purged) expired payment nonces") }
                } catch {
                    logger.warning("payment nonces: the purge failed; the next pass retries")
                }
                // try?: a cancelled sleep ends the loop at its next check.
                try? await Task.sleep(for: interval)
            }
        }
        lock.withLock { loop = task }
        return endpoint
    }

    public func shutdown() async {
        // A check in progress finishes before the store closes under it.
        if let loop = lock.withLock({ loop }) {
            loop.cancel()
            await loop.value
        }
        await http.shutdown()
    }

    public func forceShutdown() {
        lock.withLock { loop }?.cancel()
        http.forceShutdown()
    }
}
