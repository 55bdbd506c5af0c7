import Foundation
public import MerchantKit
import OrchardCrypto
import OrchardHTTP
public import OrchardRuntime
public import OrchardServices
public import OrchardStore
import OrchardX509
import WebMerchantAPI

/// The demo merchant's server as a deployment service (`orchard serve merchant`): its configuration, its init
/// step (keys, CSRs, certificates from the Pay server, the demo app's entitlement) and its build function.
public struct MerchantService: OrchardService {
    /// The merchant's files in `DIR/pki/`.
    public enum Files {
        /// The payment processing certificate (P-256, merchant-ID extension, subject UID) and its key: tokens
        /// are encrypted to it.
        public static let processing = "merchant-processing"
        /// The merchant identity certificate (TLS client certificate, RSA-2048 as Apple's) and its key, for mutual
        /// TLS to the Pay server.
        public static let identity = "merchant-identity"
    }

    /// `merchant.merchantIdentifier`: the merchant ID (default `merchant.dev.orchard.demo`).
    public static let merchantIdentifier = ConfigurationKey<String>.string(
        "merchant", "merchantIdentifier", default: "merchant.dev.orchard.demo",
        validate: {
            isReverseDNS($0, prefix: "merchant.") ? nil : "\"\($0)\" is not a merchant ID (merchant.<reverse DNS>)"
        })
    /// `merchant.displayName`: the name the payment sheet shows.
    public static let displayName = ConfigurationKey<String>.string(
        "merchant", "displayName", default: "Orchard Demo Store",
        validate: { (1...128).contains($0.count) ? nil : "a display name has 1 to 128 characters" })
    /// `merchant.applicationIdentifier`: the demo app entitled to pay for this merchant.
    public static let applicationIdentifier = ConfigurationKey<String>.string(
        "merchant", "applicationIdentifier", default: "dev.orchard.demo-app",
        validate: { isReverseDNS($0, prefix: "") ? nil : "\"\($0)\" is not an app identifier (reverse DNS)" })

    /// `merchant.sitePort`: the demo merchant's website (`store.orchard.test`), a listener of its own.
    public static let sitePort = ConfigurationKey<Int>.port("merchant", "sitePort")

    /// The merchant's store options: orders acknowledge money.
    public static let storeOptions = StoreOptions(durability: .full, secureDelete: true)

    public init() {}

    public var name: ServiceName { .merchant }
    /// `merchant.reconcileIntervalSeconds`: how often the running server reverses the charges left without an
    /// outcome (by a stopped process, or a reversal the acquirer did not take); it also does once it listens.
    public static let reconcileIntervalSeconds = ConfigurationKey<Int>.integer(
        "merchant", "reconcileIntervalSeconds", default: 60, range: 1...86_400)

    public var configurationKeys: [AnyConfigurationKey] {
        [
            Self.merchantIdentifier.erased, Self.displayName.erased, Self.applicationIdentifier.erased,
            Self.reconcileIntervalSeconds.erased, StoreSettings.database(.merchant).erased,
            Self.sitePort.erased,
        ]
    }
    public var additionalPorts: [ConfigurationKey<Int>] { [Self.sitePort] }
    public var hostNames: [ServiceHostName] { [ServiceHostName(WebMerchantAPI.HostNames.store, port: Self.sitePort)] }

    public func initialize(_ context: InitializationContext) async throws {
        if context.party == .merchant {
            try await initializeAlone(context)
            return
        }
        let onboarding = try context.merchantOnboarding()
        let merchantID = context[Self.merchantIdentifier]
        let displayName = context[Self.displayName]
        let application = context[Self.applicationIdentifier]
        try await onboarding.registerMerchant(identifier: merchantID, displayName: displayName)

        let keys = try MerchantKeyRequests(merchantID: merchantID, displayName: displayName)
        let processing = try await onboarding.issuePaymentProcessingCertificate(
            for: keys.processing, merchantIdentifier: merchantID)
        try DeploymentPKI.writeSigningKey(keys.processingKey, named: Files.processing, to: context.directory)
        try DeploymentPKI.writeCertificates(processing, named: Files.processing, to: context.directory)
        context.trace("merchant: payment processing certificate pki/\(Files.processing).pem for \(merchantID)")

        let identity = try await onboarding.issueMerchantIdentityCertificate(
            for: keys.identity, merchantIdentifier: merchantID)
        try context.directory.writePrivateKey(
            SecureBytes(Array(try keys.identityKey.pemRepresentation.utf8)), named: Files.identity)
        try DeploymentPKI.writeCertificates(identity, named: Files.identity, to: context.directory)
        context.trace("merchant: identity (TLS client) certificate pki/\(Files.identity).pem (RSA-2048)")

        try await onboarding.entitle(application: application, merchantIdentifiers: [merchantID])
        context.trace("merchant: app \(application) entitled to pay for \(merchantID)")
        try await Self.onboardAtAcquirer(context, merchantID: merchantID, displayName: displayName)
        try MerchantPortal.issue(
            for: merchantID, role: ServiceRole(WebMerchantAPI.portalRole), by: context.rootCA, to: context.directory,
            clock: context.clock, random: context.random)
        context.trace(
            "merchant: portal certificate pki/\(MerchantPortal.fileName(for: merchantID)).pem (merchant-portal, "
                + "merchant:\(merchantID)) for its domains and association files")
        try await Self.validateSite(context, merchantID: merchantID)

        try await Self.finishInitialization(context, merchantID: merchantID, application: application)
        // Fail now, not at the first payment, if what was written cannot be used for decryption.
        _ = try Self.loadProcessingIdentity(from: context.directory)
    }

    /// `init --party merchant`: the merchant's keys and signing requests only. Its bundle asks the Pay side for its
    /// registration, processing and identity certificates and its app's entitlement, and the network for its
    /// account at the acquirer and its acquiring certificate; `orchard pki import` of their answers stores the
    /// certificates, the portal certificate among them (the site's domain is then registered and validated with
    /// `orchard merchant domain` from the merchant's directory).
    func initializeAlone(_ context: InitializationContext) async throws {
        let merchantID = context[Self.merchantIdentifier]
        let displayName = context[Self.displayName]
        let application = context[Self.applicationIdentifier]
        let keys = try MerchantKeyRequests(merchantID: merchantID, displayName: displayName)
        try DeploymentPKI.writeSigningKey(keys.processingKey, named: Files.processing, to: context.directory)
        try context.directory.writePrivateKey(
            SecureBytes(Array(try keys.identityKey.pemRepresentation.utf8)), named: Files.identity)
        // The portal login for its domains and association files (`orchard merchant domain`), from the Pay side.
        let portal = MerchantPortal.fileName(for: merchantID)
        let portalKey = try DeploymentPKI.newSigningKey()
        try DeploymentPKI.writeSigningKey(portalKey, named: portal, to: context.directory)
        context.request(
            PartyRequest(
                from: .merchant, to: .pay, kind: PartyRequest.Kind.merchant, merchantIdentifier: merchantID,
                displayName: displayName, applicationIdentifier: application,
                signingRequests: [
                    Files.processing: keys.processing.pemRepresentation,
                    Files.identity: keys.identity.pemRepresentation,
                    portal: try ServiceAccess.signingRequestPEM(for: portalKey, commonName: merchantID),
                ]))
        let acquiringKey = try DeploymentPKI.newSigningKey()
        try DeploymentPKI.writeSigningKey(acquiringKey, named: Self.acquiringClientFile, to: context.directory)
        var acquiringRequests = [
            Self.acquiringClientFile: try ServiceAccess.signingRequestPEM(for: acquiringKey, commonName: merchantID)
        ]
        // The store's terminals: their keys stay here; the acquirer certifies each in the merchant's name.
        for terminal in Self.demoTerminalIDs {
            let name = PartyRequest.Keys.terminalClient(terminal)
            let key = try DeploymentPKI.newSigningKey()
            try DeploymentPKI.writeSigningKey(key, named: name, to: context.directory)
            acquiringRequests[name] = try ServiceAccess.signingRequestPEM(for: key, commonName: terminal)
        }
        context.request(
            PartyRequest(
                from: .merchant, to: .network, kind: PartyRequest.Kind.acquiring, merchantIdentifier: merchantID,
                displayName: displayName, categoryCode: Self.demoCategoryCode, countryCode: Self.demoCountryCode,
                terminalIDs: Self.demoTerminalIDs, signingRequests: acquiringRequests))
        context.trace(
            "merchant: keys for pki/\(Files.processing), pki/\(Files.identity) (RSA-2048), "
                + "pki/\(Self.acquiringClientFile) and its terminals' client identities; their certificates come from "
                + "the Pay side's and the network's answers to the merchant's bundle")
        try await Self.finishInitialization(context, merchantID: merchantID, application: application)
    }

    /// Creates the merchant's store and records its settings and what `init` reports.
    private static func finishInitialization(
        _ context: InitializationContext, merchantID: String, application: String
    ) async throws {
        let store = try openStore(in: context.directory, configuration: context.currentConfiguration)
        await store.close()
        for key in [merchantIdentifier, displayName, applicationIdentifier] {
            try context.set(key, context[key])
        }
        context.report("merchantIdentifier", merchantID)
        context.report("demoApplication", application)
    }

    /// Hosts a new association file on the demo site, starts the site in this process, and has the Pay server
    /// register and validate `store.orchard.test` for the merchant (the identity certificate exists by now).
    static func validateSite(_ context: InitializationContext, merchantID: String) async throws {
        guard let web = context.webDomainOnboarding() else { return }
        try MerchantSite.writeAssociationFile(try await web.associationFile(for: merchantID), in: context.directory)
        let configuration = context.currentConfiguration
        let logger = try ServiceLogging.logger(
            for: .merchant, configuration: configuration, directory: context.directory)
        // On a port of its own for the check: the configured one may be shared, through SO_REUSEPORT, with
        // another deployment's site that picked the same free port (parallel inits), and answer in its name.
        var checkConfiguration = configuration
        try checkConfiguration.set(sitePort, 0)
        let site = try MerchantSite(configuration: checkConfiguration, directory: context.directory, logger: logger)
        try site.server.start()
        let domain = WebMerchantAPI.HostNames.store
        let failure: String?
        do {
            failure = try await web.registerAndValidate(
                domain: domain, merchantIdentifier: merchantID, port: site.server.port)
        } catch {
            await site.server.shutdown()
            throw error
        }
        await site.server.shutdown()
        if let failure {
            throw ServicesError(.internalFailure, "the demo site \(domain) did not validate: \(failure)")
        }
        context.trace(
            "merchant: site https://\(domain) (port \(configuration[sitePort])) hosts its association file; "
                + "the Pay server validated \(domain) for \(merchantID)")
        context.report("demoSite", "https://\(domain)")
    }

    public func build(
        configuration: Configuration, directory: DeploymentDirectory, environment: ServiceEnvironment
    ) async throws -> any ServiceInstance {
        try await MerchantServer.build(configuration: configuration, directory: directory, environment: environment)
    }

    /// Opens the merchant's store of the deployment in `directory` (its `config.json` says where), for commands and
    /// tools that work on it directly.
    public static func openStore(in directory: DeploymentDirectory) throws -> Store {
        try Store(
            location: try StoreSettings.location(for: .merchant, in: directory), options: storeOptions,
            migrations: MerchantOrderStore.migrations)
    }

    /// Opens (creating) `DIR/merchant.sqlite`, or the `merchant` schema of the PostgreSQL database `configuration`
    /// names (`merchant.database`).
    public static func openStore(
        in directory: DeploymentDirectory, configuration: Configuration
    ) throws(StoreError) -> Store {
        try Store(
            location: try StoreSettings.location(for: .merchant, configuration: configuration, directory: directory),
            options: storeOptions, migrations: MerchantOrderStore.migrations)
    }

    /// The merchant's decryption identity from `pki/merchant/merchant-processing`, as MerchantKit uses it.
    public static func loadProcessingIdentity(from directory: DeploymentDirectory) throws -> MerchantIdentity {
        let certificates = try DeploymentPKI.readCertificates(named: Files.processing, from: directory)
        guard let leaf = certificates.first else {
            throw ServicesError(.pkiFailure, "pki/\(Files.processing).pem holds no certificate")
        }
        let pem = try directory.readPrivateKey(named: Files.processing)
        return try pem.withUnsafeBytes { bytes throws(MerchantKitError) in
            try MerchantIdentity(certificate: leaf, privateKeyPEM: String(decoding: bytes, as: UTF8.self))
        }
    }

    static func isReverseDNS(_ text: String, prefix: String) -> Bool {
        let bytes = Array(text.utf8)
        guard text.hasPrefix(prefix), text.contains("."), (3...128).contains(bytes.count),
            bytes.first != UInt8(ascii: "."), bytes.last != UInt8(ascii: "."), !text.contains("..")
        else { return false }
        return bytes.allSatisfy { byte in
            (0x61...0x7A).contains(byte) || (0x41...0x5A).contains(byte) || (0x30...0x39).contains(byte)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-")
        }
    }
}

/// The merchant's two key pairs and their signing requests: payment processing (P-256) and identity (RSA-2048, as
/// Apple's: the Pay server refuses other identity keys).
private struct MerchantKeyRequests {
    let processingKey: P256.Signing.PrivateKey
    let processing: CertificateSigningRequest
    let identityKey: RSA.PrivateKey
    let identity: CertificateSigningRequest

    init(merchantID: String, displayName: String) throws {
        processingKey = try DeploymentPKI.newSigningKey()
        processing = try CertificateSigningRequest.create(
            subject: DistinguishedName([
                .userID(merchantID), .commonName("Orchard Pay Payment Processing:\(merchantID)"),
                .organization(displayName),
            ]),
            key: CertificatePrivateKey(processingKey))
        identityKey = try RSA.PrivateKey(keySize: 2048)
        identity = try CertificateSigningRequest.create(
            subject: DistinguishedName([
                .userID(merchantID), .commonName("Apple Pay Merchant Identity:\(merchantID)"),
                .organization(displayName),
            ]),
            key: CertificatePrivateKey(identityKey))
    }
}
