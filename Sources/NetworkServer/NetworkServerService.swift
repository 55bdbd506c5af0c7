import AccessPolicy
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
import PayAPI
import PaymentCredential
import TokenService

/// The card network as a deployment service (`orchard serve network`): the token service with its vault and
/// software HSM, the demo issuer and the acquirer, in one process with one SQLite file each
/// (`network.sqlite`, `issuer.sqlite`, `acquirer.sqlite`), serving `NetworkRoutes` over HTTPS.
///
/// Who may call which routes: the token requestor group needs a root-issued client certificate with role
/// ``ServiceRole/tokenRequestor`` (the Pay server's `pki/pay-client`), acquiring ``ServiceRole/acquiring``,
/// the issuer group ``ServiceRole/issuer``.
public struct NetworkServerService: OrchardService {
    /// The network's files in `DIR/pki/`.
    public enum Files {
        /// The software HSM's local master key: 32 raw bytes, mode 0600. Every other key is wrapped under it.
        public static let localMasterKey = "network-hsm"
        /// The token service's wrapped keys and token ranges (`pki/network-hsm-keys.json`, 0600): key blocks
        /// only the HSM can open, as a real HSM's host keeps them.
        public static let wrappedKeys = "network-hsm-keys.json"
        /// The root's certificate for the token service's provisioning key (`OU=token-service-provisioning`):
        /// wallets seal card data to that key only after checking it chains to the root.
        public static let provisioningCertificate = "token-service-provisioning"
        /// The root's certificate for the token service's install-signing key
        /// (`OU=token-service-personalisation`): a Secure Element pins its key at manufacture and installs only
        /// what it signed (`SignedPersonalisation`).
        public static let personalisationCertificate = "token-service-personalisation"
    }

    /// The token ranges `init` makes (never overlapping the test cards' BINs).
    public static let visaTokenPrefix = CardNetwork.visa.tokenRanges[0].lowerPrefix
    public static let mastercardTokenPrefix = CardNetwork.mastercard.tokenRanges[0].lowerPrefix
    /// The acquirer's identifier.
    public static let acquirerID = "orchard-acquirer"

    /// `network.reconcileAfterSeconds`: how old an issuer hold with no answer recorded at the token service
    /// must be before reconciliation reverses it (default 300: an authorization takes well under a second, so a
    /// five-minute-old hold without an answer is one a crash left behind).
    public static let reconcileAfterSeconds = ConfigurationKey<Int>.integer(
        "network", "reconcileAfterSeconds", default: 300, range: 10...86_400)
    /// `network.reconcileIntervalSeconds`: how often the running network reconciles (default 60; it also does at
    /// start).
    public static let reconcileIntervalSeconds = ConfigurationKey<Int>.integer(
        "network", "reconcileIntervalSeconds", default: 60, range: 1...86_400)

    /// Told at each durable step of every authorization; only crash tests pass one.
    let authorizationProbe: (any AuthorizationProbe)?

    public init() { authorizationProbe = nil }

    /// A network service that tells `authorizationProbe` at each durable step of every authorization: the seam
    /// crash tests kill the process at (`Tests/NetworkCrasher`).
    public init(authorizationProbe: any AuthorizationProbe) { self.authorizationProbe = authorizationProbe }

    public var name: ServiceName { .network }
    public var configurationKeys: [AnyConfigurationKey] {
        [
            Self.reconcileAfterSeconds.erased, Self.reconcileIntervalSeconds.erased, NetworkMasterKey.kekFile.erased,
            StoreSettings.database(.network).erased,
        ]
    }

    public func initialize(_ context: InitializationContext) async throws {
        let directory = context.directory
        let localMasterKey = SecureBytes(randomCount: 32, using: context.random)
        try directory.writePrivateKey(localMasterKey, named: Files.localMasterKey)
        let hsm = try SoftwareHSM(
            localMasterKey: SymmetricKey(localMasterKey), verifiers: Self.verifiers(), random: context.random)
        let ranges = [
            try TokenRange(
                rangeID: "visa-tokens", issuerID: TestCards.issuerID, network: .visa, prefix: Self.visaTokenPrefix,
                proximityKey: try hsm.generateKey(usage: .proximityIssuerMasterKey, id: "visa-imk-ac"),
                remoteKey: try hsm.generateKey(usage: .remoteIssuerMasterKey, id: "visa-imk-rp")),
            try TokenRange(
                rangeID: "mc-tokens", issuerID: TestCards.issuerID, network: .mastercard,
                prefix: Self.mastercardTokenPrefix,
                proximityKey: try hsm.generateKey(usage: .proximityIssuerMasterKey, id: "mc-imk-ac"),
                remoteKey: try hsm.generateKey(usage: .remoteIssuerMasterKey, id: "mc-imk-rp")),
        ]
        let keys = try TokenServiceKeys.generate(in: hsm)
        try NetworkKeyFile(keys: keys, ranges: ranges).write(to: directory)
        try Self.certifyProvisioningKey(try hsm.publicKey(of: keys.provisioningKey), context: context)
        try Self.certifyPersonalisationKey(
            try hsm.signingPublicKey(of: keys.personalisationSigningKey), context: context)
        context.trace(
            "network: HSM master key pki/network/\(Files.localMasterKey).key (wrap it under a key outside DIR with "
                + "`orchard network wrap-hsm-key`); vault, lookup and provisioning keys and issuer master keys for "
                + "token ranges \(Self.visaTokenPrefix)…, \(Self.mastercardTokenPrefix)… "
                + "(pki/network/\(Files.wrappedKeys))")

        // The vault starts empty; the issuer gets its test cards.
        let configuration = context.currentConfiguration
        func location(_ party: Party) throws -> StoreLocation {
            try StoreSettings.location(for: party, configuration: configuration, directory: directory)
        }
        await (try SQLiteTokenVaultStore(location: try location(.network))).store.close()
        // The acquirer starts without merchants; the merchant's step onboards itself through this.
        let acquirerStore = try SQLiteAcquirerStore(location: try location(.acquirer))
        context.atEnd { await acquirerStore.store.close() }
        context.provideAcquirer(
            StoreAcquirerOnboarding(
                store: acquirerStore,
                acquirer: Acquirer(
                    acquirerID: Self.acquirerID, store: acquirerStore, network: OfflineNetwork(),
                    clock: context.clock, random: context.random)))
        // The issuer's own key seals its card records (pki/network/network-issuer-vault.key).
        let issuerStore = try await SQLiteIssuerStore.open(
            location: try location(.issuer),
            key: try IssuerStorageKey.create(in: directory, random: context.random))
        let issuer = Issuer(
            configuration: TestCards.configuration, store: issuerStore,
            cardVerificationKey: TestCards.insecureDemoCardVerificationKey, clock: context.clock,
            random: context.random)
        do {
            try await TestCards.seed(into: issuer)
        } catch {
            await issuerStore.store.close()
            throw error
        }
        await issuerStore.store.close()
        context.trace(
            "network: issuer \(TestCards.issuerName) with \(TestCards.cards.count) test cards in issuer.sqlite (sealed "
                + "under pki/network/\(IssuerStorageKey.fileName).key)")
        context.report(
            "testCards", TestCards.cards.map(\.pan).map { "\($0.prefix(6))…\($0.suffix(4))" }.joined(separator: ", "))
    }

    /// The root certifies the provisioning key: subject `O=Orchard, OU=token-service-provisioning,
    /// CN=token-service` (the envelope recipient name), key usage key agreement, valid as long as the root.
    static func certifyProvisioningKey(
        _ key: P256.KeyAgreement.PublicKey, context: InitializationContext
    ) throws {
        let now = context.clock.now()
        let certificate = try Certificate.issue(
            subject: DistinguishedName([
                .organization("Orchard"), .organizationalUnit(PayAPI.ProvisioningCertificate.organizationalUnit),
                .commonName(TokenServiceConfiguration().serviceName),
            ]),
            publicKey: CertificatePublicKey(try P256.Signing.PublicKey(x963Representation: key.x963Representation)),
            issuer: context.rootCA.issuer, notValidBefore: now.addingTimeInterval(-300),
            notValidAfter: context.rootCA.certificate.notValidAfter,
            extensions: [.basicConstraints(isCA: false), .keyUsage([.keyAgreement])], random: context.random)
        try DeploymentPKI.writeCertificates([certificate], named: Files.provisioningCertificate, to: context.directory)
        context.trace(
            "network: pki/network/\(Files.provisioningCertificate).pem: the root certifies the provisioning key wallets "
                + "seal card data to")
    }

    /// The root certifies the install-signing key: subject `O=Orchard, OU=token-service-personalisation,
    /// CN=token-service`, key usage digital signature, valid as long as the root.
    static func certifyPersonalisationKey(_ key: P256.Signing.PublicKey, context: InitializationContext) throws {
        let now = context.clock.now()
        let certificate = try Certificate.issue(
            subject: DistinguishedName([
                .organization("Orchard"), .organizationalUnit(SignedPersonalisation.signerOrganizationalUnit),
                .commonName(TokenServiceConfiguration().serviceName),
            ]),
            publicKey: CertificatePublicKey(key), issuer: context.rootCA.issuer,
            notValidBefore: now.addingTimeInterval(-300), notValidAfter: context.rootCA.certificate.notValidAfter,
            extensions: [.basicConstraints(isCA: false), .keyUsage([.digitalSignature])], random: context.random)
        try DeploymentPKI.writeCertificates(
            [certificate], named: Files.personalisationCertificate, to: context.directory)
        context.trace(
            "network: pki/\(Files.personalisationCertificate).pem: the root certifies the key that signs card "
                + "installs (Secure Elements pin it when they are made)")
    }

    /// Answers another party's request (`orchard pki import` of its bundle), the network deployed on its own:
    /// the Pay side's token requestor gets a client certificate (role token requestor, CN the 11-digit token
    /// requestor ID the network assigns it, as a token service registers a requestor: the one its root already
    /// holds, else the next free one from 40010075001; ``PartyRegistrations/tokenRequestorID(for:)``); a merchant gets its account at
    /// the acquirer and a client certificate for its charges (role acquiring, UID `merchant:<ID>`). Both are issued
    /// by the network's root, which its routes check.
    public func answer(_ request: PartyRequest, context: PartyRequestContext) async throws -> [PartyIssued]? {
        guard request.to == .network else { return nil }
        switch request.kind {
        case PartyRequest.Kind.tokenRequestor:
            guard request.from == .pay else {
                throw ServicesError(.invalidBundle, "only the Pay side asks for a token requestor certificate")
            }
            let signing = try ServiceAccess.signingRequest(named: PartyRequest.Keys.payClient, in: request)
            // The network assigns the ID (whatever the request's subject says): the one this Pay side's root holds,
            // else the next free one.
            let requestor = context.registrations.tokenRequestorID(for: context.peerRoot)
            let certificate = try ServiceAccess.issueClientCertificate(
                for: signing.publicKey, role: .tokenRequestor, commonName: requestor, by: context.rootCA,
                clock: context.clock, random: context.random)
            context.trace("network: token requestor \(requestor) assigned and certified")
            return [
                PartyIssued(
                    to: .pay, name: PartyRequest.Keys.payClient, certificates: [certificate.pemRepresentation],
                    identity: PartyRegistrations.Identity.tokenRequestor(requestor))
            ]
        case PartyRequest.Kind.acquiring:
            guard request.from == .merchant, let merchantID = request.merchantIdentifier,
                let name = request.displayName, let category = request.categoryCode, let country = request.countryCode
            else {
                throw ServicesError(
                    .invalidBundle, "an acquiring request names the merchant, its name, category and country")
            }
            let signing = try ServiceAccess.signingRequest(named: PartyRequest.Keys.merchantAcquiring, in: request)
            let store = try SQLiteAcquirerStore(
                location: try StoreSettings.location(
                    for: .acquirer, configuration: context.configuration, directory: context.directory))
            do {
                try await StoreAcquirerOnboarding(
                    store: store,
                    acquirer: Acquirer(
                        acquirerID: Self.acquirerID, store: store, network: OfflineNetwork(), clock: context.clock,
                        random: context.random)
                ).onboardMerchant(
                    identifier: merchantID, name: name, categoryCode: category, countryCode: country,
                    terminalIDs: request.terminalIDs ?? [], appleMerchantIDs: [merchantID])
                await store.store.close()
            } catch {
                await store.store.close()
                throw error
            }
            let certificate = try ServiceAccess.issueClientCertificate(
                for: signing.publicKey, role: .acquiring, commonName: merchantID,
                identity: CallerIdentity(kind: CallerIdentity.merchant, identifier: merchantID), by: context.rootCA,
                clock: context.clock, random: context.random)
            var issued = [
                PartyIssued(
                    to: .merchant, name: PartyRequest.Keys.merchantAcquiring,
                    certificates: [certificate.pemRepresentation],
                    identity: PartyRegistrations.Identity.merchant(merchantID))
            ]
            // Each of its terminals that sent a signing request: certified in the merchant's name only.
            for terminal in request.terminalIDs ?? [] {
                let name = PartyRequest.Keys.terminalClient(terminal)
                guard request.signingRequests[name] != nil else { continue }
                let terminalRequest = try ServiceAccess.signingRequest(named: name, in: request)
                let terminalCertificate = try ServiceAccess.issueClientCertificate(
                    for: terminalRequest.publicKey, role: .acquiring, commonName: terminal,
                    identity: CallerIdentity(kind: CallerIdentity.terminal, identifier: terminal, owner: merchantID),
                    by: context.rootCA, clock: context.clock, random: context.random)
                issued.append(
                    PartyIssued(
                        to: .merchant, name: name, certificates: [terminalCertificate.pemRepresentation],
                        identity: PartyRegistrations.Identity.terminal(terminal, merchant: merchantID)))
            }
            context.trace(
                "network: merchant \(merchantID) onboarded at the acquirer; acquiring certificates issued for it and "
                    + "\(issued.count - 1) terminal(s)")
            return issued
        default:
            return nil
        }
    }

    public func build(
        configuration: Configuration, directory: DeploymentDirectory, environment: ServiceEnvironment
    ) async throws -> any ServiceInstance {
        try await NetworkServer.build(
            configuration: configuration, directory: directory, environment: environment,
            authorizationProbe: authorizationProbe)
    }

    /// The HSM's cryptogram checks: the EMV module's ARQC check for proximity. Remote cryptograms have no
    /// verifier until the in-app issue defines them, so they are declined.
    static func verifiers() -> [any TokenCryptogramVerifier] {
        [EMVProximityCryptogramVerifier(), RemoteCryptogramVerifier()]
    }
}

/// `pki/network-hsm-keys.json`: the token service's key handles and token ranges (wrapped keys only).
struct NetworkKeyFile: Codable {
    var version = 1
    let keys: TokenServiceKeys
    let ranges: [TokenRange]

    init(keys: TokenServiceKeys, ranges: [TokenRange]) {
        self.keys = keys
        self.ranges = ranges
    }

    /// `pki/network/network-hsm-keys.json` (or where an existing deployment keeps it).
    static func path(in directory: DeploymentDirectory) throws -> String {
        try directory.pkiFilePath(named: NetworkServerService.Files.wrappedKeys)
    }

    func write(to directory: DeploymentDirectory) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try directory.writePKIFile(
            SecureBytes(Array(try encoder.encode(self))), named: NetworkServerService.Files.wrappedKeys)
    }

    static func read(from directory: DeploymentDirectory) throws -> NetworkKeyFile {
        let file = try JSONDecoder().decode(
            NetworkKeyFile.self, from: Data(try SecureFile.read(try path(in: directory), limit: 1 << 20)))
        guard file.version == 1 else {
            throw ServicesError(
                .invalidConfiguration, "pki/\(NetworkServerService.Files.wrappedKeys) has version \(file.version)")
        }
        return file
    }
}
