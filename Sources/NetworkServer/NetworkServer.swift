import Acquirer
import Foundation
import Issuer
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
    public static func build(
        configuration: Configuration, directory: DeploymentDirectory, environment: ServiceEnvironment
    ) async throws -> HTTPServiceInstance {
        let keyFile = try NetworkKeyFile.read(from: directory)
        let localMasterKey = try directory.readPrivateKey(named: NetworkServerService.Files.localMasterKey)
        guard localMasterKey.count == 32 else {
            throw ServicesError(.pkiFailure, "pki/\(NetworkServerService.Files.localMasterKey).key is not 32 bytes")
        }
        let hsm = try SoftwareHSM(
            localMasterKey: SymmetricKey(localMasterKey), verifiers: NetworkServerService.verifiers(),
            random: environment.random)
        let deviceCA = try DeploymentPKI.readCertificate(named: PKIFiles.deviceCA, from: directory)
        let root = try DeploymentPKI.readCertificate(named: PKIFiles.rootCA, from: directory)
        let provisioningCertificate = try DeploymentPKI.readCertificate(
            named: NetworkServerService.Files.provisioningCertificate, from: directory)
        let logger = try ServiceLogging.logger(for: .network, configuration: configuration, directory: directory)

        let vault = try SQLiteTokenVaultStore(path: directory.databasePath(for: .network))
        let issuerStore = try SQLiteIssuerStore(path: directory.databasePath(for: .issuer))
        let acquirerStore = try SQLiteAcquirerStore(path: directory.databasePath(for: .acquirer))
        let closeStores: @Sendable () async -> Void = {
            await vault.store.close()
            await issuerStore.store.close()
            await acquirerStore.store.close()
        }
        do {
            let issuer = Issuer(
                configuration: TestCards.configuration, store: issuerStore,
                cardVerificationKey: TestCards.insecureDemoCardVerificationKey, clock: environment.wallClock,
                random: environment.random)
            let outbox = SQLiteNotificationOutbox(vault: vault)
            let tokenService = try TokenService(
                keyStore: hsm, keys: keyFile.keys, ranges: keyFile.ranges,
                issuers: [
                    IssuerRoute(issuerID: TestCards.issuerID, cardBINPrefixes: TestCards.cardBINPrefixes, host: issuer)
                ],
                vault: vault,
                deviceKeys: try Self.deviceKeyVerifier(deviceCA: deviceCA, root: root, clock: environment.wallClock),
                notifier: outbox, clock: environment.wallClock, random: environment.random)
            await issuer.connect(to: tokenService)
            let acquirer = Acquirer(
                acquirerID: NetworkServerService.acquirerID, store: acquirerStore, network: tokenService,
                clock: environment.wallClock, random: environment.random)
            var router = Router()
            NetworkRoutes.install(
                into: &router, tokenService: tokenService, acquirer: acquirer, issuerID: TestCards.issuerID,
                access: NetworkAccess(
                    tokenRequestor: ServiceAccess.requirement([.tokenRequestor], root: root),
                    acquiring: ServiceAccess.requirement([.acquiring], root: root),
                    issuer: ServiceAccess.requirement([.issuer], root: root)),
                provisioningCertificate: provisioningCertificate.derRepresentation, outbox: outbox)
            return try HTTPServiceInstance(
                name: .network, configuration: configuration, directory: directory, router: router, logger: logger,
                clock: environment.wallClock,
                onStop: closeStores)
        } catch {
            await closeStores()
            throw error
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
