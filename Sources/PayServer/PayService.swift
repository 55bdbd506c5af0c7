import AccessPolicy
import Foundation
import OrchardCrypto
public import OrchardRuntime
public import OrchardServices
import OrchardStore
public import OrchardX509
public import PaymentToken
import WebMerchantAPI

/// The Orchard Pay server as a deployment service (`orchard serve pay`): its configuration, its init step and
/// its build function.
public struct PayService: OrchardService {
    /// The files of the Pay server in `DIR/pki/`.
    public enum Files {
        /// The token-signing root merchants trust (the stand-in for Apple Root CA - G3).
        public static let tokenRoot = "token-root"
        /// The integration CA (marker 1.2.840.113635.100.6.2.14).
        public static let tokenIntegrationCA = "token-integration-ca"
        /// The signing leaf (marker 1.2.840.113635.100.6.29) the Pay server signs tokens with; the leaves of the
        /// other kinds it signs sit beside it (``SigningLeaves/fileName(_:)``).
        public static let tokenSigning = "token-signing"
        /// The CA that issues merchant processing and identity certificates, under the Orchard root.
        public static let merchantCA = "merchant-ca"
        /// The Pay server's TLS client certificate (role token requestor) for its calls to the network.
        public static let client = "pay-client"
    }

    /// `pay.demoAccount`: the user account `init` creates, to which demo devices belong.
    public static let demoAccount = ConfigurationKey<String>.string(
        "pay", "demoAccount", default: "demo",
        validate: {
            isAccountName($0) ? nil : "\"\($0)\" is not an account name (1-64 lowercase letters, digits, . _ - @)"
        }
    )

    /// `pay.noncesPerMinute`: the nonces one device may ask for in a minute (and at once, after a quiet minute),
    /// on the monotonic clock; beyond it the nonce route answers 429 with `Retry-After`.
    public static let noncesPerMinute = ConfigurationKey<Int>.integer(
        "pay", "noncesPerMinute", default: 60, range: 1...1_000_000)

    public init() {}

    public var name: ServiceName { .pay }
    public var configurationKeys: [AnyConfigurationKey] {
        [Self.demoAccount.erased, Self.noncesPerMinute.erased, StoreSettings.database(.pay).erased]
    }
    /// The mutual-TLS web gateway and the public side, both on the main listener for now.
    public var hostNames: [ServiceHostName] {
        [
            ServiceHostName(WebMerchantAPI.HostNames.gateway, port: ServiceSettings.port(.pay)),
            ServiceHostName(WebMerchantAPI.HostNames.pay, port: ServiceSettings.port(.pay)),
        ]
    }

    public func initialize(_ context: InitializationContext) async throws {
        let directory = context.directory
        let now = context.clock.now()
        let pki = try TokenSigningPKI.generate(
            notValidBefore: now.addingTimeInterval(-300),
            notValidAfter: now.addingTimeInterval(DeploymentPKI.caLifetime),
            random: context.random)
        try Self.write(pki, to: directory)
        context.trace(
            "pay: token-signing chain pki/\(Files.tokenRoot).pem → \(Files.tokenIntegrationCA) "
                + "(1.2.840.113635.100.6.2.14) → \(Files.tokenSigning) (1.2.840.113635.100.6.29)")
        try SigningLeaves.issueMissing(
            SigningLeaves.orchardKinds, under: pki, notValidBefore: now.addingTimeInterval(-300), to: directory,
            random: context.random)
        let (leaves, _) = try SigningLeaves.load(from: directory, clock: context.clock, random: context.random)
        context.trace(
            "pay: one signing leaf per kind under \(Files.tokenIntegrationCA): "
                + SigningLeaves.orchardKinds.map { "\(SigningLeaves.fileName($0)) (\($0), \($0.marker))" }
                .joined(separator: ", "))
        try InAppPKI.initialize(context, tokenSigning: pki)

        let merchantCA = try CertificateAuthority.create(
            subject: DistinguishedName([.organization("Orchard"), .commonName("Orchard Merchant CA")]),
            issuer: context.rootCA, lifetime: DeploymentPKI.caLifetime, clock: context.clock, random: context.random)
        try merchantCA.write(named: Files.merchantCA, to: directory)
        context.trace("pay: merchant CA pki/\(Files.merchantCA).pem (issued by the root)")

        if context.party == .pay {
            // Deployed on its own: the network issues the token requestor's certificate from this request.
            let key = try DeploymentPKI.newSigningKey()
            try DeploymentPKI.writeSigningKey(key, named: Files.client, to: directory)
            context.request(
                PartyRequest(
                    from: .pay, to: .network, kind: PartyRequest.Kind.tokenRequestor,
                    signingRequests: [
                        // The network assigns the requestor ID; the request's subject names none.
                        Files.client: try ServiceAccess.signingRequestPEM(for: key, commonName: "token-requestor")
                    ]))
            context.trace(
                "pay: key pki/\(Files.client).key; its certificate, with the token requestor ID the network assigns, "
                    + "comes from the network's answer to pay's bundle")
        } else {
            try ServiceAccess.issueClientIdentity(
                named: Files.client, role: .tokenRequestor, commonName: PayServer.tokenRequestorID,
                by: context.rootCA, to: directory, clock: context.clock, random: context.random)
            context.trace("pay: client certificate pki/\(Files.client).pem (token requestor) for calls to the network")
        }

        let store = try PayStore.open(in: directory, configuration: context.currentConfiguration)
        context.atEnd { await store.close() }
        let account = context[Self.demoAccount]
        try await store.write { db in
            try db.execute(
                "INSERT OR IGNORE INTO accounts (name, created_at) VALUES (?, ?)", [.text(account), .milliseconds(now)])
        }
        try context.set(Self.demoAccount, account)
        context.report("demoAccount", account)
        context.trace("pay: demo account \"\(account)\" in pay.sqlite")
        context.provide(
            MerchantRegistry(store: store, authority: merchantCA, clock: context.clock, random: context.random))
        let files = try AssociationFiles(tokenSigning: leaves.domainAssociationFile, clock: context.clock)
        let validator = DomainValidator(
            hostNames: context.currentConfiguration.hostNames,
            trustedRootsPEM: context.rootCA.certificate.pemRepresentation, files: files)
        context.provideWebDomains(WebDomains(store: store, validator: validator, files: files, clock: context.clock))
    }

    public func build(
        configuration: Configuration, directory: DeploymentDirectory, environment: ServiceEnvironment
    ) async throws -> any ServiceInstance {
        try await PayServer.build(configuration: configuration, directory: directory, environment: environment)
    }

    /// Answers the merchant party's request (`orchard pki import` of its bundle): registers the merchant, issues
    /// its payment processing and identity certificates from its signing requests with the merchant CA (the same
    /// checks as in one directory: the subject UID must be the merchant ID, the identity key RSA-2048), and
    /// entitles its app.
    public func answer(_ request: PartyRequest, context: PartyRequestContext) async throws -> [PartyIssued]? {
        guard request.to == .pay, request.kind == PartyRequest.Kind.merchant else { return nil }
        guard request.from == .merchant, let merchantID = request.merchantIdentifier,
            let displayName = request.displayName
        else {
            throw ServicesError(.invalidBundle, "a merchant request names the merchant ID and its display name")
        }
        let processingRequest = try ServiceAccess.signingRequest(
            named: PartyRequest.Keys.merchantProcessing, in: request)
        let identityRequest = try ServiceAccess.signingRequest(named: PartyRequest.Keys.merchantIdentity, in: request)
        let merchantCA = try CertificateAuthority.load(named: Files.merchantCA, from: context.directory)
        let store = try PayStore.open(in: context.directory, configuration: context.configuration)
        do {
            let registry = MerchantRegistry(
                store: store, authority: merchantCA, clock: context.clock, random: context.random)
            try await registry.registerMerchant(identifier: merchantID, displayName: displayName)
            let processing = try await registry.issuePaymentProcessingCertificate(
                for: processingRequest, merchantIdentifier: merchantID)
            let identity = try await registry.issueMerchantIdentityCertificate(
                for: identityRequest, merchantIdentifier: merchantID)
            if let application = request.applicationIdentifier {
                try await registry.entitle(application: application, merchantIdentifiers: [merchantID])
            }
            await store.close()
            let merchant = PartyRegistrations.Identity.merchant(merchantID)
            var issued = [
                PartyIssued(
                    to: .merchant, name: PartyRequest.Keys.merchantProcessing,
                    certificates: processing.map(\.pemRepresentation), identity: merchant),
                PartyIssued(
                    to: .merchant, name: PartyRequest.Keys.merchantIdentity,
                    certificates: identity.map(\.pemRepresentation), identity: merchant),
            ]
            // Its portal login (role merchant-portal, UID merchant:<ID>), from this side's root, which the web
            // merchant routes check.
            let portal = MerchantPortal.fileName(for: merchantID)
            if request.signingRequests[portal] != nil {
                let portalRequest = try ServiceAccess.signingRequest(named: portal, in: request)
                let certificate = try ServiceAccess.issueClientCertificate(
                    for: portalRequest.publicKey, role: ServiceRole(WebMerchantAPI.portalRole), commonName: merchantID,
                    identity: CallerIdentity(kind: CallerIdentity.merchant, identifier: merchantID),
                    by: context.rootCA, clock: context.clock, random: context.random)
                issued.append(
                    PartyIssued(
                        to: .merchant, name: portal, certificates: [certificate.pemRepresentation], identity: merchant))
            }
            context.trace("pay: registered \(merchantID); processing, identity and portal certificates issued")
            return issued
        } catch {
            await store.close()
            throw error
        }
    }

    /// The domains this Pay side validated for the merchant IDs the bundle's merchant requests name (verified now),
    /// which the merchant's bundle may then name as its host names.
    public func provenHostNames(
        of bundle: PartyBundle, directory: DeploymentDirectory, configuration: Configuration
    ) async throws -> Set<String> {
        let merchants = bundle.requests.filter { $0.to == .pay && $0.kind == PartyRequest.Kind.merchant }
            .compactMap(\.merchantIdentifier)
        guard bundle.party == .merchant, !merchants.isEmpty, PayStore.exists(in: directory) else { return [] }
        let store = try PayStore.open(in: directory, configuration: configuration)
        do {
            let files = try AssociationFiles(
                tokenSigning: try Self.loadTokenSigningPKI(from: directory), clock: SystemClock())
            let domains = WebDomains(
                store: store,
                validator: DomainValidator(hostNames: [:], trustedRootsPEM: "", files: files), files: files,
                clock: SystemClock())
            var proven: Set<String> = []
            for merchant in merchants {
                // Still validated while its site is retried.
                for record in try await domains.list(merchantIdentifier: merchant)
                where record.status == "verified" || record.status == "retrying" {
                    proven.insert(record.domain)
                }
            }
            await store.close()
            return proven
        } catch {
            await store.close()
            throw error
        }
    }

    /// At a merchant's re-key: revokes every processing and identity certificate this side issued for its merchant
    /// IDs, except those just issued to its new root (its portal certificate, from the Pay root, is revoked through
    /// `registrations.json`).
    public func revokeIssued(
        to party: DeploymentParty, identities: [String], except: [Certificate], context: PartyRequestContext
    ) async throws {
        let prefix = PartyRegistrations.Identity.merchant("")
        let merchants = identities.filter { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
        guard party == .merchant, !merchants.isEmpty else { return }
        let store = try PayStore.open(in: context.directory, configuration: context.configuration)
        do {
            let certificates = MerchantCertificates(store: store, clock: context.clock)
            for merchant in merchants {
                let revoked = try await certificates.revokeAll(
                    merchantIdentifier: merchant, except: Set(except.map(\.derRepresentation)))
                context.trace("pay: revoked \(revoked) certificate(s) of \(merchant) issued under the old root")
            }
            await store.close()
        } catch {
            await store.close()
            throw error
        }
    }

    /// The token requestor ID the Pay server of `directory` calls the network as: the common name of its client
    /// certificate `pki/pay-client.pem`, which the network issued (in a single directory, the shared root with
    /// 40010075001; deployed on its own, the network's answer bundle, with the ID the network assigned).
    public static func tokenRequestorID(in directory: DeploymentDirectory) throws -> String {
        try tokenRequestorID(ofChain: try directory.readCertificate(named: Files.client))
    }

    static func tokenRequestorID(ofChain chain: String) throws -> String {
        guard let leaf = try Certificate.certificates(fromPEM: chain).first, let name = leaf.subject.commonName,
            name.utf8.count == 11, name.utf8.allSatisfy({ (0x30...0x39).contains($0) })
        else {
            throw PayServerError(
                .invalidRequest,
                "pki/\(Files.client).pem names no 11-digit token requestor ID: import the network's answer bundle")
        }
        return name
    }

    /// Writes the three levels, keys 0600, as ``Files``.
    static func write(_ pki: TokenSigningPKI, to directory: DeploymentDirectory) throws {
        for (name, certificate, key) in [
            (Files.tokenRoot, pki.root, pki.rootKey), (Files.tokenIntegrationCA, pki.intermediate, pki.intermediateKey),
            (Files.tokenSigning, pki.leaf, pki.leafKey),
        ] {
            try directory.writePrivateKey(try key.pkcs8PEM, named: name)
            try DeploymentPKI.writeCertificates([certificate], named: name, to: directory)
        }
    }

    /// Reads the token-signing chain `init` wrote, checking each key belongs to its certificate and each level
    /// is issued by the one above.
    public static func loadTokenSigningPKI(
        from directory: DeploymentDirectory
    ) throws(ServicesError)
        -> TokenSigningPKI
    {
        var loaded: [(Certificate, CertificatePrivateKey)] = []
        for name in [Files.tokenRoot, Files.tokenIntegrationCA, Files.tokenSigning] {
            let authority = try CertificateAuthority.load(named: name, from: directory)
            loaded.append((authority.certificate, authority.privateKey))
        }
        let (root, intermediate, leaf) = (loaded[0].0, loaded[1].0, loaded[2].0)
        guard intermediate.issuer == root.subject, leaf.issuer == intermediate.subject else {
            throw ServicesError(.pkiFailure, "the token-signing files in pki/ do not form one chain")
        }
        return TokenSigningPKI(
            root: root, rootKey: loaded[0].1, intermediate: intermediate, intermediateKey: loaded[1].1, leaf: leaf,
            leafKey: loaded[2].1)
    }

    /// Account names as devices take them (`DeviceProfile`): 1 to 64 lowercase letters, digits, `.`, `_`,
    /// `-` or `@`.
    static func isAccountName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        return (1...64).contains(bytes.count)
            && bytes.allSatisfy { byte in
                (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte)
                    || [UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "@")].contains(byte)
            }
    }
}
