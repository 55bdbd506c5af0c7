import Acquirer
import CardBasics
import Foundation
import Issuer
public import NetworkAuthorizationAPI
import OrchardCrypto
import OrchardHTTP
import OrchardLogging
public import OrchardRuntime
public import OrchardServices
import OrchardStore
import OrchardX509
import TokenService

/// The network's parties wired for one process: token service, issuer and acquirer over their SQLite stores.
///
/// Token-status notifications go to a durable outbox in `network.sqlite`, which the Pay server reads
/// (`GET /v1/notifications`).
public enum NetworkServer {
    /// Builds the network of `directory` without binding: opens the HSM with the local master key, the three
    /// stores, and the device CA the token service takes Secure Element keys from; sets up TLS and the routes.
    /// Once started, the instance reconciles open holds at once and every `network.reconcileIntervalSeconds`.
    ///
    /// `authorizationProbe` is told at each durable step of every authorization (crash tests kill the process
    /// there); a deployment passes none.
    public static func build(
        configuration: Configuration, directory: DeploymentDirectory, environment: ServiceEnvironment,
        authorizationProbe: (any AuthorizationProbe)? = nil
    ) async throws -> any ServiceInstance {
        let root = try DeploymentPKI.readCertificate(named: PKIFiles.rootCA, from: directory)
        let provisioningCertificate = try DeploymentPKI.readCertificate(
            named: NetworkServerService.Files.provisioningCertificate, from: directory)
        let logger = try ServiceLogging.logger(for: .network, configuration: configuration, directory: directory)
        let parties = try await Parties.open(
            directory: directory, environment: environment, kekPath: configuration[NetworkMasterKey.kekFile],
            authorizationProbe: authorizationProbe, logger: logger)
        do {
            var router = Router()
            NetworkRoutes.install(
                into: &router, tokenService: parties.tokenService, acquirer: parties.acquirer,
                issuerID: TestCards.issuerID,
                access: NetworkAccess(
                    tokenRequestor: ServiceAccess.requirement([.tokenRequestor], root: root),
                    acquiring: ServiceAccess.requirement([.acquiring], root: root),
                    issuer: ServiceAccess.requirement([.issuer], root: root)),
                provisioningCertificate: provisioningCertificate.derRepresentation, outbox: parties.outbox)
            // The client certificates the network issued to a party that re-keyed since (`registrations.json`).
            router.revocations = try RegisteredCertificateRevocations.ofParty(in: directory)
            let http = try HTTPServiceInstance(
                name: .network, configuration: configuration, directory: directory, router: router, logger: logger,
                clock: environment.wallClock,
                onStop: parties.close)
            return NetworkServiceInstance(
                http: http, reconciler: parties.reconciler(configuration: configuration, clock: environment.wallClock),
                interval: configuration[NetworkServerService.reconcileIntervalSeconds], logger: logger)
        } catch {
            await parties.close()
            throw error
        }
    }

    /// Runs one reconciliation pass over the stores of `directory` (`orchard network reconcile`). Refuses with
    /// ``ServicesError/Code/startFailed`` while the network service runs for `directory`: its token service and
    /// issuer serialize each transaction in memory, which a second process would bypass, and the running
    /// service reconciles by itself.
    public static func reconcileOnce(
        configuration: Configuration, directory: DeploymentDirectory, environment: ServiceEnvironment
    ) async throws -> NetworkReconciliationReport {
        if let running = try directory.runningService(.network) {
            throw ServicesError(
                .startFailed,
                "the network service runs for \(directory) (pid \(running.pid)) and reconciles by itself; stop it "
                    + "to reconcile from the command line")
        }
        let parties = try await Parties.open(
            directory: directory, environment: environment, kekPath: configuration[NetworkMasterKey.kekFile])
        do {
            let report = try await parties.reconciler(configuration: configuration, clock: environment.wallClock)
                .run()
            await parties.close()
            return report
        } catch {
            await parties.close()
            throw error
        }
    }

    /// The token service, issuer and acquirer over the deployment's SQLite stores.
    struct Parties {
        let tokenService: TokenService
        let issuer: Issuer
        let acquirer: Acquirer
        let outbox: SQLiteNotificationOutbox
        let close: @Sendable () async -> Void

        static func open(
            directory: DeploymentDirectory, environment: ServiceEnvironment, kekPath: String,
            authorizationProbe: (any AuthorizationProbe)? = nil, logger: Logger = .disabled
        ) async throws -> Parties {
            let keyFile = try NetworkKeyFile.read(from: directory)
            let localMasterKey = try NetworkMasterKey.load(from: directory, kekPath: kekPath)
            let hsm = try SoftwareHSM(
                localMasterKey: SymmetricKey(localMasterKey), verifiers: NetworkServerService.verifiers(),
                random: environment.random)
            let deviceCA = try DeploymentPKI.readCertificate(named: PKIFiles.deviceCA, from: directory)
            // The root that issued the device CA: the deployment's own, or (the network deployed on its own) the Pay
            // party's, imported with its device CA (`orchard pki import`), never another party's.
            let root = try Certificate(pemEncoded: try directory.rootCertificate(ofParty: DeploymentParty.pay.rawValue))

            let vault = try SQLiteTokenVaultStore(location: try StoreSettings.location(for: .network, in: directory))
            let issuerStore: SQLiteIssuerStore
            do {
                issuerStore = try await SQLiteIssuerStore.open(
                    in: directory, kekPath: kekPath, random: environment.random)
            } catch {
                await vault.store.close()
                throw error
            }
            let acquirerStore = try SQLiteAcquirerStore(
                location: try StoreSettings.location(for: .acquirer, in: directory))
            let closeStores: @Sendable () async -> Void = {
                await vault.store.close()
                await issuerStore.store.close()
                await acquirerStore.store.close()
            }
            do {
                let issuer = Issuer(
                    configuration: TestCards.configuration, store: issuerStore,
                    cardVerificationKey: TestCards.insecureDemoCardVerificationKey, clock: environment.wallClock,
                    random: environment.random, monotonicClock: environment.monotonicClock)
                let outbox = SQLiteNotificationOutbox(vault: vault, logger: logger)
                // Orchard Pay, and each Pay side deployed on its own under the ID this network assigned it.
                let assigned = try PartyRegistrations.read(from: directory).tokenRequestorIDs
                let requestors =
                    [TokenRequestor.orchardPay]
                    + assigned.filter { $0 != TokenRequestor.orchardPay.id }.map {
                        TokenRequestor(id: $0, name: "Pay side \($0)", allowedDomains: .all)
                    }
                let tokenService = try TokenService(
                    configuration: TokenServiceConfiguration(tokenRequestors: requestors), keyStore: hsm,
                    keys: keyFile.keys, ranges: keyFile.ranges,
                    issuers: [
                        IssuerRoute(
                            issuerID: TestCards.issuerID, cardBINPrefixes: TestCards.cardBINPrefixes, host: issuer)
                    ],
                    vault: vault,
                    deviceKeys: try NetworkServer.deviceKeyVerifier(
                        deviceCA: deviceCA, root: root, clock: environment.wallClock),
                    notifier: outbox, clock: environment.wallClock, random: environment.random,
                    authorizationProbe: authorizationProbe, monotonicClock: environment.monotonicClock)
                await issuer.connect(to: tokenService)
                let acquirer = Acquirer(
                    acquirerID: NetworkServerService.acquirerID, store: acquirerStore, network: tokenService,
                    clock: environment.wallClock, random: environment.random, authorizationProbe: authorizationProbe)
                return Parties(
                    tokenService: tokenService, issuer: issuer, acquirer: acquirer, outbox: outbox,
                    close: closeStores)
            } catch {
                await closeStores()
                throw error
            }
        }

        func reconciler(configuration: Configuration, clock: any WallClock) -> NetworkReconciliation {
            NetworkReconciliation(
                acquirer: acquirer,
                holds: NetworkReconciler(
                    tokenService: tokenService, issuer: issuer,
                    reconcileAfter: TimeInterval(configuration[NetworkServerService.reconcileAfterSeconds]),
                    clock: clock),
                clock: clock)
        }
    }

    /// `orchard init` issues the device CA under the root; a self-signed device CA is its own anchor.
    static func deviceKeyVerifier(
        deviceCA: Certificate, root: Certificate, clock: any WallClock
    ) throws
        -> DeviceCAKeyVerifier
    {
        if deviceCA.issuer == deviceCA.subject {
            return try DeviceCAKeyVerifier(deviceCARoots: [deviceCA], clock: clock)
        }
        return try DeviceCAKeyVerifier(deviceCA: deviceCA, root: root, clock: clock)
    }
}

/// The network's HTTPS service plus its reconciliation loop: a pass right after the listener starts (what a
/// crash left behind), then one every `interval` seconds until shutdown. Each reversal is logged with the card
/// masked.
final class NetworkServiceInstance: ServiceInstance, @unchecked Sendable {
    let http: HTTPServiceInstance
    let reconciler: NetworkReconciliation
    let interval: Int
    let logger: Logger
    // Guarded by `lock`.
    private let lock = NSLock()
    private var loop: Task<Void, Never>?

    init(http: HTTPServiceInstance, reconciler: NetworkReconciliation, interval: Int, logger: Logger) {
        self.http = http
        self.reconciler = reconciler
        self.interval = interval
        self.logger = logger
    }

    func start() async throws -> ServiceEndpoint {
        let endpoint = try await http.start()
        let reconciler = self.reconciler
        let interval = self.interval
        let logger = self.logger
        let task = Task {
            while !Task.isCancelled {
                await Self.pass(reconciler, logger: logger)
                // try?: a cancelled sleep ends the loop at its next check.
                try? await Task.sleep(for: .seconds(interval))
            }
        }
        lock.withLock { loop = task }
        return endpoint
    }

    /// One pass, logged: a line per hold it acted on, and a warning when the stores could not be read.
    static func pass(_ reconciler: NetworkReconciliation, logger: Logger) async {
        do {
            let report = try await reconciler.run()
            for authorization in report.acquirer {
                logger.notice(
                    "reconciliation: acquirer authorization without a result \(authorization.outcome)",
                    metadata: [
                        "idempotency_key": .string(authorization.idempotencyKey),
                        "card": .string(authorization.maskedPAN),
                        "amount": .integer(Int(authorization.amount.minorUnits)),
                        "currency": .string(authorization.amount.currency.numericString),
                        "age_seconds": .integer(authorization.ageSeconds),
                    ])
            }
            for hold in report.holds {
                logger.notice(
                    "reconciliation: hold without a final answer \(hold.outcome)",
                    metadata: [
                        "network_transaction_id": .string(hold.networkTransactionID),
                        "card": .string(hold.maskedPAN ?? "unknown"), "amount": .integer(Int(hold.amount.minorUnits)),
                        "currency": .string(hold.amount.currency.numericString),
                        "age_seconds": .integer(hold.ageSeconds),
                    ])
            }
        } catch {
            logger.warning("reconciliation: the pass failed; the next one retries")
        }
        // Expired provisioning sessions go on the same schedule.
        do {
            let purged = try await reconciler.holds.tokenService.purgeExpiredSessions()
            if purged > 0 { logger.info("purged \(purged) expired provisioning sessions") }
        } catch {
            logger.warning("provisioning sessions: the purge failed; the next pass retries")
        }
    }

    func shutdown() async {
        // A pass in progress finishes before the stores close under it.
        if let loop = lock.withLock({ loop }) {
            loop.cancel()
            await loop.value
        }
        await http.shutdown()
    }

    func forceShutdown() {
        lock.withLock { loop }?.cancel()
        http.forceShutdown()
    }
}
