import CardBasics
import Device
import Foundation
import Issuer
import MerchantKit
import MerchantServer
import NetworkServer
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardStore
import OrchardX509
import PayServer
import PaymentToken
import SecureElement
import Testing
import TokenRequestorAPI
import TokenService

/// `orchard init` at library level: the directory contract, the PKI it writes, the demo merchant and app.
@Suite("orchard init")
struct InitTests {
    /// The services the executable registers, in its order.
    static func registry() throws -> ServiceRegistry {
        try ServiceRegistry([NetworkServerService(), PayService(), MerchantService()])
    }

    let temporary: TemporaryDirectory
    let directory: DeploymentDirectory
    init() throws {
        temporary = try TemporaryDirectory()
        directory = DeploymentDirectory(path: temporary.child("deployment"))
    }

    @discardableResult
    func initialize(force: Bool = false, basePort: Int? = nil) async throws -> DeploymentInitializer.Summary {
        try await DeploymentInitializer.initialize(
            directory, registry: try Self.registry(), options: .init(force: force, basePort: basePort))
    }

    @Test func createsTheLayoutWithPrivateModes() async throws {
        let summary = try await initialize()
        #expect(try directory.state() == .deployment)
        #expect(SecureFile.mode(of: directory.path) == 0o700)
        for folder in [directory.pkiPath, directory.logsPath, directory.runPath] {
            #expect(SecureFile.mode(of: folder) == 0o700)
        }
        #expect(SecureFile.mode(of: directory.configurationPath) == 0o600)
        // pki/<party>/<file>: every folder 0700, keys 0600, certificates 0644.
        var names: [String] = []
        for folder in try FileManager.default.contentsOfDirectory(atPath: directory.pkiPath).sorted() {
            let folderPath = directory.pkiFolderPath(folder)
            #expect(SecureFile.mode(of: folderPath) == 0o700, "\(folder)")
            for name in try FileManager.default.contentsOfDirectory(atPath: folderPath) {
                names.append(name)
                let mode = SecureFile.mode(of: "\(folderPath)/\(name)")
                #expect(mode == (name.hasSuffix(".pem") ? 0o644 : 0o600), "\(folder)/\(name)")
            }
        }
        let keys = names.filter { $0.hasSuffix(".key") }
        #expect(keys.count >= 9)
        #expect(Set(keys).count == keys.count, "a key in two folders")
        // Every key has its certificate, except the HSM's master key (a raw symmetric key) and the issuer's
        // storage key; the provisioning and install-signing certificates' keys live wrapped in the HSM's key file.
        let keyNames: Set<Substring> = Set(keys.map { $0.dropLast(4) })
            .subtracting([
                Substring(NetworkServerService.Files.localMasterKey), Substring(IssuerStorageKey.fileName),
            ])
        let certificateNames: Set<Substring> = Set(names.filter { $0.hasSuffix(".pem") }.map { $0.dropLast(4) })
            .subtracting([
                Substring(NetworkServerService.Files.provisioningCertificate),
                Substring(NetworkServerService.Files.personalisationCertificate),
            ])
        #expect(keyNames == certificateNames)
        for party in [Party.network, .issuer, .acquirer, .pay, .merchant] {
            #expect(SecureFile.mode(of: directory.databasePath(for: party)) == 0o600)
        }
        try directory.checkPermissions()
        #expect(summary.facts["merchantIdentifier"] == "merchant.dev.orchard.demo")
        #expect(summary.facts["demoApplication"] == "dev.orchard.demo-app")
        #expect(summary.facts["demoAccount"] == "demo")
    }

    @Test func configurationHasFreeDistinctPortsAndTheDemoMerchant() async throws {
        try await initialize()
        let configuration = try Self.registry().loadConfiguration(from: directory, environment: [:])
        let ports = [ServiceName.network, .pay, .merchant].map { configuration[ServiceSettings.port($0)] }
        #expect(ports.allSatisfy { (1024...65535).contains($0) })
        #expect(Set(ports).count == 3)
        #expect(configuration[MerchantService.merchantIdentifier] == "merchant.dev.orchard.demo")
        #expect(configuration[MerchantService.applicationIdentifier] == "dev.orchard.demo-app")
        #expect(configuration[PayService.demoAccount] == "demo")
        #expect(configuration[ServiceSettings.host(.pay)] == "127.0.0.1")
    }

    @Test func basePortFixesThePorts() async throws {
        try await initialize(basePort: 47100)
        let configuration = try Self.registry().loadConfiguration(from: directory, environment: [:])
        #expect(configuration[ServiceSettings.port(.network)] == 47100)
        #expect(configuration[ServiceSettings.port(.pay)] == 47101)
        #expect(configuration[ServiceSettings.port(.merchant)] == 47102)
    }

    @Test func basePortWithoutRoomIsRefusedBeforeAnythingIsWritten() async throws {
        await #expect(throws: ServicesError(.invalidConfiguration, "")) { try await initialize(basePort: 65535) }
        #expect(try directory.state() != .deployment)
    }

    @Test func secondInitWithoutForceRefusesAndKeepsTheKeys() async throws {
        try await initialize()
        let root = try directory.readCertificate(named: PKIFiles.rootCA)
        await #expect(throws: ServicesError(.alreadyInitialized, "")) { try await initialize() }
        #expect(try directory.readCertificate(named: PKIFiles.rootCA) == root)
        try await initialize(force: true)
        #expect(try directory.readCertificate(named: PKIFiles.rootCA) != root)
        #expect(try directory.state() == .deployment)
    }

    @Test func occupiedDirectoryNeedsForceAndKeepsForeignFiles() async throws {
        try SecureFile.createDirectory(directory.path)
        try SecureFile.write(Array("mine".utf8), to: directory.path + "/notes.txt", mode: 0o644)
        await #expect(throws: ServicesError(.directoryNotEmpty, "")) { try await initialize() }
        #expect(!FileManager.default.fileExists(atPath: directory.configurationPath))
        try await initialize(force: true)
        #expect(try SecureFile.read(directory.path + "/notes.txt") == Array("mine".utf8))
    }

    @Test func forceRefusesWhileAServiceRuns() async throws {
        try await initialize()
        // This test process stands in for a running service: its record names a live pid.
        try directory.publish(ServiceRecord(service: .pay, host: "127.0.0.1", port: 1))
        await #expect(throws: ServicesError(.servicesRunning, "")) { try await initialize(force: true) }
        directory.withdraw(.pay)
        try await initialize(force: true)
    }

    @Test func aFailingStepLeavesNoDeployment() async throws {
        let registry = try ServiceRegistry([PayService(), FailingService(), MerchantService()])
        await #expect(throws: ServicesError.self) {
            try await DeploymentInitializer.initialize(directory, registry: registry)
        }
        #expect(try directory.state() == .occupied)
        #expect(throws: ServicesError(.notInitialized, "")) {
            try registry.loadConfiguration(from: directory, environment: [:])
        }
    }

    @Test func merchantBeforePayIsRefused() async throws {
        let registry = try ServiceRegistry([MerchantService(), PayService()])
        await #expect(throws: ServicesError.self) {
            try await DeploymentInitializer.initialize(directory, registry: registry)
        }
    }

    @Test func aKeyOpenToOthersIsRefused() async throws {
        try await initialize()
        chmod(try directory.privateKeyPath(named: PKIFiles.rootCA), 0o644)
        #expect(throws: ServicesError(.invalidConfiguration, "")) {
            try Self.registry().loadConfiguration(from: directory, environment: [:])
        }
        #expect(throws: ServicesError(.pkiFailure, "")) {
            try CertificateAuthority.load(named: PKIFiles.rootCA, from: directory)
        }
    }

    @Test func tlsCertificatesChainToTheRootForLoopback() async throws {
        try await initialize()
        let root = try DeploymentPKI.readCertificate(named: PKIFiles.rootCA, from: directory)
        let verifier = try CertificateChainVerifier(trustRoots: [root])
        let tokenRoot = try DeploymentPKI.readCertificate(named: PayService.Files.tokenRoot, from: directory)
        let otherVerifier = try CertificateChainVerifier(trustRoots: [tokenRoot])
        for service in [ServiceName.network, .pay, .merchant] {
            let leaf = try DeploymentPKI.readCertificate(named: PKIFiles.tlsServer(service), from: directory)
            #expect(verifier.verify(leaf: leaf, intermediates: [], at: Date()).isValid)
            #expect(!otherVerifier.verify(leaf: leaf, intermediates: [], at: Date()).isValid)
            let names = try #require(try leaf.subjectAlternativeNames)
            // localhost, then the host names the service answers for (config.json names).
            let hostNames = try Self.registry().services.first { $0.name == service }?.hostNames.map(\.name) ?? []
            #expect(names.dnsNames == ["localhost"] + hostNames)
            #expect(names.ipAddresses.contains([127, 0, 0, 1]))
            #expect(try leaf.extendedKeyUsage == [.serverAuth])
            // The identity the server loads is the pair init wrote.
            let identity = try TLSIdentity.load(named: PKIFiles.tlsServer(service), from: directory)
            let key = try identity.privateKeyPEM.withUnsafeBytes {
                try P256.Signing.PrivateKey(pemRepresentation: String(decoding: $0, as: UTF8.self))
            }
            #expect(
                CertificatePublicKey(key.publicKey).derRepresentation == leaf.subjectPublicKeyInfo.derRepresentation)
        }
        let deviceCA = try DeploymentPKI.readCertificate(named: PKIFiles.deviceCA, from: directory)
        #expect(verifier.verify(leaf: deviceCA, intermediates: [], at: Date()).isValid)
        #expect(try deviceCA.basicConstraints == BasicConstraints(isCA: true, pathLength: 0))
    }

    @Test func tokenSigningChainHasApplesMarkersAndSignsTokensTheMerchantDecrypts() async throws {
        try await initialize()
        let pki = try PayService.loadTokenSigningPKI(from: directory)
        #expect(ApplePayCertificates.tokenSigningChainViolation([pki.leaf, pki.intermediate]) == nil)
        #expect(pki.intermediate.hasExtension(.appleApplicationIntegrationCA))
        #expect(pki.leaf.hasExtension(.appleTokenSigningLeaf))
        // One leaf per kind beside it, each the kind's alone.
        #expect(try SigningLeavesTests.checkLeaves(in: directory).legacyAssociationFileSigner == nil)
        // The Orchard TLS root is not the token root.
        #expect(try DeploymentPKI.readCertificate(named: PKIFiles.rootCA, from: directory) != pki.root)

        let identity = try MerchantService.loadProcessingIdentity(from: directory)
        let processing = try DeploymentPKI.readCertificate(named: MerchantService.Files.processing, from: directory)
        #expect(processing.subject.userID == "merchant.dev.orchard.demo")
        #expect(try processing.appleMerchantIdentifierHash == SHA256.hash(Array("merchant.dev.orchard.demo".utf8)))
        let payment = try StrictJSONParser.parse(
            Array(
                """
                {"applicationPrimaryAccountNumber":"4895370012345671","applicationExpirationDate":"291231",\
                "currencyCode":"840","transactionAmount":1999,"deviceManufacturerIdentifier":"040010030273",\
                "paymentDataType":"3DSecure","paymentData":{"onlinePaymentCryptogram":"AgAAAAAABk4DWZ4C28yUQAAAAAA=",\
                "eciIndicator":"7"}}
                """.utf8), limits: .paymentToken)
        let paymentData = try PaymentTokenEncoder(signer: try pki.signer()).makePaymentData(
            payment: payment, recipient: try MerchantProcessingPublicKey(processingCertificate: processing))
        let token = try PaymentToken(jsonBytes: Array(paymentData.json.serialized.utf8))
        let decryptor = try PaymentTokenDecryptor(identities: [identity], trustRoots: [pki.root])
        #expect(try decryptor.decrypt(token).payment.transactionAmount == 1999)
        // A merchant trusting the deployment's TLS root instead refuses the token.
        let wrongRoot = try PaymentTokenDecryptor(
            identities: [identity],
            trustRoots: [try DeploymentPKI.readCertificate(named: PKIFiles.rootCA, from: directory)])
        #expect(throws: MerchantKitError.self) { try wrongRoot.decrypt(token) }
    }

    @Test func merchantIdentityIsATLSClientCertificateFromThePayServersCA() async throws {
        try await initialize()
        let chain = try DeploymentPKI.readCertificates(named: MerchantService.Files.identity, from: directory)
        #expect(chain.count == 2)
        let root = try DeploymentPKI.readCertificate(named: PKIFiles.rootCA, from: directory)
        let verifier = try CertificateChainVerifier(trustRoots: [root])
        #expect(verifier.verify(leaf: chain[0], intermediates: Array(chain.dropFirst()), at: Date()).isValid)
        #expect(!verifier.verify(leaf: chain[0], intermediates: [], at: Date()).isValid)
        #expect(try chain[0].extendedKeyUsage == [.clientAuth])
        #expect(chain[0].subject.userID == "merchant.dev.orchard.demo")
        #expect(try chain[0].publicKey.rsa?.keySizeInBits == 2048)
        #expect(chain[0].hasExtension(.appleMerchantIdentityMarker))
        #expect(chain[1] == (try DeploymentPKI.readCertificate(named: PayService.Files.merchantCA, from: directory)))
        // The identity key is not the processing key (MerchantKit refuses the pair).
        let processing = try DeploymentPKI.readCertificate(named: MerchantService.Files.processing, from: directory)
        let identityKey = try directory.readPrivateKey(named: MerchantService.Files.identity)
        #expect(throws: MerchantKitError.self) {
            _ = try identityKey.withUnsafeBytes {
                try MerchantIdentity(certificate: processing, privateKeyPEM: String(decoding: $0, as: UTF8.self))
            }
        }
    }

    @Test func theDemoAppIsEntitledInThePayServersStore() async throws {
        try await initialize()
        let store = try PayStore.open(in: directory)
        let registry = MerchantRegistry(
            store: store, authority: try CertificateAuthority.load(named: PayService.Files.merchantCA, from: directory),
            clock: SystemClock(), random: SystemRandom())
        #expect(try await registry.entitlements(of: "dev.orchard.demo-app") == ["merchant.dev.orchard.demo"])
        #expect(try await registry.entitlements(of: "dev.orchard.other-app") == [])
        #expect(try await registry.merchant("merchant.dev.orchard.demo") == "Orchard Demo Store")
        let accounts = try await store.read { db in try db.query("SELECT name FROM accounts") { try $0.string(0) } }
        #expect(accounts == ["demo"])
        await store.close()
    }

    @Test func merchantCertificatesOnlyForTheCSRsOwnMerchantID() async throws {
        try await initialize()
        let store = try PayStore.open(in: directory)
        let registry = MerchantRegistry(
            store: store, authority: try CertificateAuthority.load(named: PayService.Files.merchantCA, from: directory),
            clock: SystemClock(), random: SystemRandom())
        let key = CertificatePrivateKey(try P256.Signing.PrivateKey())
        let foreign = try CertificateSigningRequest.create(
            subject: DistinguishedName([.userID("merchant.dev.other"), .commonName("x")]), key: key)
        await #expect(throws: ServicesError(.pkiFailure, "")) {
            try await registry.issuePaymentProcessingCertificate(
                for: foreign, merchantIdentifier: "merchant.dev.orchard.demo")
        }
        await #expect(throws: ServicesError(.invalidConfiguration, "")) {
            try await registry.issuePaymentProcessingCertificate(for: foreign, merchantIdentifier: "merchant.dev.other")
        }
        await #expect(throws: ServicesError(.invalidConfiguration, "")) {
            try await registry.entitle(application: "dev.orchard.demo-app", merchantIdentifiers: ["merchant.dev.other"])
        }
        await #expect(throws: ServicesError(.invalidConfiguration, "")) {
            try await registry.registerMerchant(identifier: "not a merchant id", displayName: "x")
        }
        let own = try CertificateSigningRequest.create(
            subject: DistinguishedName([.userID("merchant.dev.orchard.demo"), .commonName("y")]), key: key)
        let chain = try await registry.issuePaymentProcessingCertificate(
            for: own, merchantIdentifier: "merchant.dev.orchard.demo")
        #expect(try chain[0].appleMerchantIdentifierHash == SHA256.hash(Array("merchant.dev.orchard.demo".utf8)))
        await store.close()
    }
}

/// A service whose init step fails, to check a failed init leaves no deployment behind.
struct FailingService: OrchardService {
    var name: ServiceName { .issuer }
    func initialize(_ context: InitializationContext) async throws {
        throw ServicesError(.internalFailure, "this step always fails")
    }
    func build(
        configuration: Configuration, directory: DeploymentDirectory, environment: ServiceEnvironment
    ) async throws -> any ServiceInstance {
        throw ServicesError(.internalFailure, "never built")
    }
}

/// What other parties read from a deployment `init` made.
@Suite("orchard init: what other parties read")
struct InitConsumersTests {
    @Test func theDeviceModuleUsesTheDeviceCAInitMade() async throws {
        let temporary = try TemporaryDirectory()
        let directory = DeploymentDirectory(path: temporary.child("deployment"))
        _ = try await DeploymentInitializer.initialize(
            directory, registry: try InitTests.registry())
        let deviceCA = try #require(try DeviceCertificateAuthority.load(from: directory))
        #expect(deviceCA.certificate == (try DeploymentPKI.readCertificate(named: PKIFiles.deviceCA, from: directory)))
        let element = try P256.KeyAgreement.PrivateKey()
        let account = PayService.demoAccount.defaultValue
        let certificate = try deviceCA.issueDeviceCertificate(
            name: "demo-phone", profile: try DeviceProfile(kind: .phone, biometry: .face, account: account),
            elementKey: element.publicKey)
        let root = try DeploymentPKI.readCertificate(named: PKIFiles.rootCA, from: directory)
        let verifier = try CertificateChainVerifier(trustRoots: [root])
        #expect(verifier.verify(leaf: certificate, intermediates: [deviceCA.certificate], at: Date()).isValid)
        #expect(!verifier.verify(leaf: certificate, intermediates: [], at: Date()).isValid)
        // A second device CA is refused: init made the one.
        #expect(throws: (any Error).self) { try DeviceCertificateAuthority.create(in: directory) }
    }
}

@Suite("Deployment PKI values")
struct DeploymentPKIValueTests {
    @Test func aCertificateAuthorityNeverPrintsItsKey() throws {
        let authority = try CertificateAuthority.create(
            subject: DistinguishedName([.commonName("Printing CA")]), issuer: nil, lifetime: 3600,
            clock: SystemClock(), random: SystemRandom())
        let scalar = authority.privateKey.description
        var dumped = ""
        dump(authority, to: &dumped)
        for text in ["\(authority)", String(reflecting: authority), dumped, scalar] {
            #expect(text.contains("Printing CA") || text.contains("redacted"))
            #expect(!text.contains("PRIVATE KEY"))
        }
        #expect(!dumped.contains("signingKey"))
        let identity = TLSIdentity(certificateChainPEM: "", privateKeyPEM: SecureBytes(Array("SECRET-PEM".utf8)))
        var identityDump = ""
        dump(identity, to: &identityDump)
        for text in ["\(identity)", String(reflecting: identity), identityDump] { #expect(!text.contains("SECRET")) }
    }
}

/// The network's step of `init` and what the network service then reads.
@Suite("orchard init: the network")
struct NetworkInitTests {
    @Test func keysAreWrappedUnderA0600MasterKeyAndTheIssuerHasItsTestCards() async throws {
        let temporary = try TemporaryDirectory()
        let directory = DeploymentDirectory(path: temporary.child("deployment"))
        let summary = try await DeploymentInitializer.initialize(directory, registry: try InitTests.registry())
        #expect(summary.facts["testCards"]?.contains("411111…1111") == true)
        let masterKeyPath = try directory.privateKeyPath(named: NetworkServerService.Files.localMasterKey)
        #expect(SecureFile.mode(of: masterKeyPath) == 0o600)
        let masterKey = try directory.readPrivateKey(named: NetworkServerService.Files.localMasterKey)
        #expect(masterKey.count == 32)
        let keysPath = try directory.pkiFilePath(named: NetworkServerService.Files.wrappedKeys)
        #expect(SecureFile.mode(of: keysPath) == 0o600)
        // The handles hold wrapped keys only: the HSM with this master key opens them, another does not.
        let file = try JSONDecoder().decode(NetworkKeyFileView.self, from: Data(try SecureFile.read(keysPath)))
        let hsm = try SoftwareHSM(localMasterKey: SymmetricKey(masterKey), verifiers: [])
        let provisioning = try hsm.publicKey(of: file.keys.provisioningKey)
        let stranger = try SoftwareHSM(localMasterKey: SymmetricKey(bitCount: 256), verifiers: [])
        #expect(throws: TokenServiceError.self) { try stranger.publicKey(of: file.keys.provisioningKey) }
        #expect(
            file.ranges.map(\.prefix) == [
                NetworkServerService.visaTokenPrefix, NetworkServerService.mastercardTokenPrefix,
            ])
        // No test card BIN falls in a token range.
        for card in TestCards.cards {
            #expect(!file.ranges.contains { card.pan.hasPrefix($0.prefix) })
        }

        let issuer = try await SQLiteIssuerStore.open(in: directory)
        let cards = try await issuer.allCards()
        #expect(Set(cards.map(\.pan.digits)) == Set(TestCards.cards.map(\.pan)))
        await issuer.store.close()
        let vault = try SQLiteTokenVaultStore(path: directory.databasePath(for: .network))
        #expect(try await vault.card(panLookup: "none") == nil)
        await vault.store.close()

        // The network serves the provisioning key only to the token requestor.
        let connections = try await ServiceConnections.connect(
            [.network], directory: directory, registry: try InitTests.registry())
        let url = try connections.baseURL(of: .network) + TokenRequestorAPI.Route.provisioningKey
        let anonymous = try connections.client()
        #expect(try await anonymous.get(url).status == .unauthorized)
        anonymous.shutdown()
        let merchant = try connections.client(
            identity: try TLSIdentity.load(named: MerchantService.Files.identity, from: directory))
        #expect(try await merchant.get(url).status == .forbidden)
        merchant.shutdown()
        let pay = try connections.client(
            identity: try TLSIdentity.load(named: PayService.Files.client, from: directory))
        let response = try await pay.get(url)
        #expect(response.status == .ok)
        let key = try response.decodeJSON(TokenRequestorAPI.ProvisioningKey.self)
        let der = try #require(Data(base64Encoded: key.publicKey))
        let served = try P256.KeyAgreement.PublicKey(derRepresentation: der)
        #expect(served == provisioning)
        pay.shutdown()
        await connections.close()
    }
}

/// The parts of `pki/network-hsm-keys.json` a test reads.
struct NetworkKeyFileView: Decodable {
    let keys: TokenServiceKeys
    let ranges: [TokenRange]
}
