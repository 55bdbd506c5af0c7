import Foundation
import NetworkServer
import OrchardCrypto
import OrchardRuntime
import OrchardServices
import OrchardStore
import OrchardX509
import PayServer
import WebMerchantAPI

/// `orchard merchant ...`: merchant onboarding at the Pay server of a deployment (`--data-dir DIR`): CSRs,
/// registration with certificates and app entitlements, listing and revoking certificates. The commands work
/// on `DIR/pay.sqlite` and `DIR/pki/merchant-ca` directly (as `orchard device` works on device files), so
/// they work whether or not the Pay server runs.
enum MerchantCommands {
    static let command = Command(
        name: "merchant",
        summary: "Merchant onboarding: CSRs, registration, certificates and app entitlements at the Pay server.",
        subcommands: [
            csr, register, certs, WebMerchantCommands.processingCertificate, WebMerchantCommands.associationFile,
            WebMerchantCommands.domain,
            MerchantSessionCommands.session,
        ]
    )

    static let csr = Command(
        name: "csr",
        summary: "Make a merchant key and its certificate signing request (subject UID = the merchant ID).",
        discussion: """
            Writes OUT/<merchant>-<kind>.key (the private key, PEM, mode 0600) and OUT/<merchant>-<kind>.csr.
            A processing key is P-256 (EC_v1 tokens) or, with --key-type rsa, RSA-2048 (RSA_v1 tokens); an
            identity key (the TLS client certificate for merchant sessions) is always RSA-2048, as Apple's.
            """,
        options: [csrMerchantOption, kindOption, keyTypeOption, outOption]
    ) { arguments, context in
        try runCSR(arguments, context)
    }

    /// What a merchant certificate is for.
    enum CertificateKind: String, CaseIterable, Sendable {
        case processing, identity
    }

    /// The key a CSR is made for.
    enum KeyType: String, CaseIterable, Sendable {
        case p256, rsa
    }

    static let csrMerchantOption = Option.required(
        "merchant", "ID", help: "The merchant ID, e.g. merchant.dev.orchard.shop.")
    static let kindOption = Option<CertificateKind>.choice(
        "kind", default: .processing, help: "What the certificate is for.")
    static let keyTypeOption: Option<KeyType?> = .choice(
        "key-type", help: "The processing key: p256 (default) or rsa. Identity keys are RSA-2048.")
    static let outOption = Option.optional(
        "out", "DIR", help: "Where to write the key and CSR (default: the current directory).")

    static let register = Command(
        name: "register",
        summary: "Register a merchant ID, issue its certificates from CSRs, and entitle apps to pay for it.",
        discussion: """
            Idempotent for the registration and entitlements; each CSR given gets a new certificate, written as
            OUT/<merchant>-processing.pem or -identity.pem (the certificate, then the merchant CA). The merchant's
            portal certificate for `orchard merchant domain` is written to DIR/pki/ once. With
            --acquiring-account the network's acquirer lets that account charge payments made for the merchant ID
            (one account per merchant ID; `init` does it for the demo merchant); without it the acquirer refuses
            the merchant ID's payments.
            """,
        options: [
            registerMerchantOption, displayNameOption, processingCSROption, identityCSROption, appOption,
            acquiringAccountOption, issuedOutOption,
        ]
    ) { arguments, context in
        let request = registration(arguments)
        let deployment = try initializedDeployment(context)
        if let account = request.acquiringAccount {
            // First, so that a refused merchant ID leaves the Pay server unchanged too.
            try await NetworkServerService.allowAppleMerchantID(
                request.merchant, forAcquiringAccount: account, in: deployment)
            context.trace("acquirer: account \(account) charges for \(request.merchant)")
        }
        let store = try openPayStore(deployment)
        do {
            let registry = MerchantRegistry(
                store: store, authority: try merchantCA(deployment), clock: SystemClock(), random: SystemRandom())
            try await registry.registerMerchant(identifier: request.merchant, displayName: request.displayName)
            var written: [String] = []
            if let csr = request.processing {
                let chain = try await registry.issuePaymentProcessingCertificate(
                    for: csr, merchantIdentifier: request.merchant)
                written.append(try write(chain, as: "\(request.merchant)-processing.pem", to: request.out))
            }
            if let csr = request.identity {
                let chain = try await registry.issueMerchantIdentityCertificate(
                    for: csr, merchantIdentifier: request.merchant)
                written.append(try write(chain, as: "\(request.merchant)-identity.pem", to: request.out))
            }
            for app in request.apps {
                try await registry.entitle(application: app, merchantIdentifiers: [request.merchant])
            }
            written.append(try issuePortalCertificate(for: request.merchant, in: deployment))
            for path in written { context.trace("wrote \(path)") }
            try context.outputJSON(
                RegistrationSummary(
                    merchantIdentifier: request.merchant, displayName: request.displayName, certificates: written,
                    entitledApps: request.apps, acquiringAccount: request.acquiringAccount))
        } catch {
            await store.close()
            throw error
        }
        await store.close()
    }

    static let registerMerchantOption = Option.required(
        "merchant", "ID", help: "The merchant ID (merchant.<reverse DNS>).")
    static let displayNameOption = Option.required(
        "display-name", "NAME", help: "The name shown on the payment sheet.")
    static let processingCSROption = csrOption(
        "processing-csr", help: "A CSR for a payment processing certificate (P-256 or RSA-2048).")
    static let identityCSROption = csrOption(
        "identity-csr", help: "A CSR for a merchant identity (TLS client) certificate.")
    static let issuedOutOption = Option.optional(
        "out", "DIR", help: "Where to write issued certificates (default: the current directory).")
    static let appOption = Option.repeatable(
        "app", "APP-ID", help: "An app allowed to pay for this merchant ID.")
    static let acquiringAccountOption = Option.optional(
        "acquiring-account", "ID", help: "The merchant account at the acquirer that charges for this merchant ID.")

    /// A PEM CSR read from the file the option names.
    static func csrOption(_ name: String, help: String) -> Option<CertificateSigningRequest?> {
        .optional(name, "FILE", help: help) { path throws(CLIError) in
            do {
                return try CertificateSigningRequest(pemEncoded: try String(contentsOfFile: path, encoding: .utf8))
            } catch {
                throw CLIError.usage("--\(name) \(path) is not a PEM certificate signing request")
            }
        }
    }

    static let certs = Command(
        name: "certs",
        summary: "List the merchant certificates the Pay server issued, or revoke one.",
        discussion: """
            Prints JSON: serial, merchant, kind, key type, expiry, revocation time and, for a processing certificate
            the merchant had issued to a processor (`merchant processing-certificate`), that processor. With --revoke
            SERIAL the
            certificate is revoked first: the Pay server never encrypts a token to a revoked processing
            certificate.
            """,
        options: [certsMerchantOption, revokeOption]
    ) { arguments, context in
        let deployment = try initializedDeployment(context)
        let store = try openPayStore(deployment)
        let certificates = MerchantCertificates(store: store, clock: SystemClock())
        do {
            if let serial = arguments[revokeOption] {
                try await certificates.revoke(serial: serial)
                context.trace("revoked \(serial.uppercased())")
            }
            let records = try await certificates.list(merchantIdentifier: arguments[certsMerchantOption])
            try context.outputJSON(records.map(CertificateLine.init))
        } catch {
            await store.close()
            throw error
        }
        await store.close()
    }

    static let certsMerchantOption = Option.optional("merchant", "ID", help: "Only this merchant's certificates.")
    static let revokeOption = Option.optional(
        "revoke", "SERIAL", help: "Revoke the certificate with this serial number (hex).")

    // MARK: Synchronous helpers (Swift 6.3 release builds crash on typed-throws calls in async closures)

    /// One certificate as `certs` prints it (times in ISO 8601).
    struct CertificateLine: Encodable {
        let serial: String
        let merchantIdentifier: String
        let kind: String
        let keyType: String
        let notAfter: String
        let revokedAt: String?
        /// The processor a processing certificate was delegated to through the merchant's portal.
        let processor: String?

        init(_ record: MerchantCertificateRecord) {
            let formatter = ISO8601DateFormatter()
            serial = record.serial
            merchantIdentifier = record.merchantIdentifier
            kind = record.kind
            keyType = record.keyType
            notAfter = formatter.string(from: record.notAfter)
            revokedAt = record.revokedAt.map { formatter.string(from: $0) }
            processor = record.processor
        }
    }

    struct RegistrationSummary: Encodable {
        let merchantIdentifier: String
        let displayName: String
        let certificates: [String]
        let entitledApps: [String]
        let acquiringAccount: String?
    }

    struct Registration {
        let merchant: String
        let displayName: String
        let processing: CertificateSigningRequest?
        let identity: CertificateSigningRequest?
        let apps: [String]
        let acquiringAccount: String?
        let out: String
    }

    static func registration(_ arguments: ParsedArguments) -> Registration {
        Registration(
            merchant: arguments[registerMerchantOption], displayName: arguments[displayNameOption],
            processing: arguments[processingCSROption], identity: arguments[identityCSROption],
            apps: arguments[appOption], acquiringAccount: arguments[acquiringAccountOption],
            out: arguments[issuedOutOption] ?? FileManager.default.currentDirectoryPath)
    }

    static func initializedDeployment(_ context: CommandContext) throws -> DeploymentDirectory {
        let deployment = DeploymentDirectory(path: context.dataDirectory.path)
        // A merchant deployed on its own reaches the Pay side at its imported address.
        if try PartyManifest.read(from: deployment)?.party == .merchant { return deployment }
        guard PayStore.exists(in: deployment) else {
            throw CLIError.failure("\(deployment.path) has no Pay server yet: run `orchard init --data-dir DIR` first")
        }
        return deployment
    }

    static func openPayStore(_ deployment: DeploymentDirectory) throws -> Store {
        try PayStore.open(in: deployment)
    }

    static func merchantCA(_ deployment: DeploymentDirectory) throws -> CertificateAuthority {
        try CertificateAuthority.load(named: PayService.Files.merchantCA, from: deployment)
    }

    /// The merchant's portal certificate (`MerchantPortal`), for `orchard merchant domain` and `association-file`;
    /// one already there is kept.
    static func issuePortalCertificate(for merchant: String, in deployment: DeploymentDirectory) throws -> String {
        let name = MerchantPortal.fileName(for: merchant)
        if let existing = try? deployment.certificatePath(named: name), FileManager.default.fileExists(atPath: existing)
        {
            return existing
        }
        let root = try CertificateAuthority.load(named: PKIFiles.rootCA, from: deployment)
        try MerchantPortal.issue(
            for: merchant, role: ServiceRole(WebMerchantAPI.portalRole), by: root, to: deployment, clock: SystemClock(),
            random: SystemRandom())
        return try deployment.certificatePath(named: name)
    }

    static func write(_ chain: [Certificate], as name: String, to directory: String) throws -> String {
        let path = directory + "/" + name
        try Data(chain.map(\.pemRepresentation).joined().utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        return path
    }

    static func runCSR(_ arguments: ParsedArguments, _ context: CommandContext) throws {
        let merchant = arguments[csrMerchantOption]
        let kind = arguments[kindOption]
        // Identity certificates are RSA-2048 (the Pay server refuses other keys, as Apple's portal does).
        let keyType: KeyType
        switch (kind, arguments[keyTypeOption]) {
        case (.identity, .p256?):
            throw CLIError.usage("identity certificates are RSA-2048: leave out --key-type or pass --key-type rsa")
        case (.identity, _): keyType = .rsa
        case (.processing, let chosen): keyType = chosen ?? .p256
        }
        let key: CertificatePrivateKey
        let keyPEM: String
        if keyType == .rsa {
            let rsa = try RSA.PrivateKey(keySize: 2048)
            key = CertificatePrivateKey(rsa)
            keyPEM = try rsa.pemRepresentation
        } else {
            let p256 = try P256.Signing.PrivateKey()
            key = CertificatePrivateKey(p256)
            keyPEM = try p256.pemRepresentation
        }
        let request = try CertificateSigningRequest.create(
            subject: DistinguishedName([.userID(merchant), .commonName(merchant)]), key: key)
        let directory = arguments[outOption] ?? FileManager.default.currentDirectoryPath
        let base = directory + "/\(merchant)-\(kind)"
        guard
            FileManager.default.createFile(
                atPath: base + ".key", contents: Data(keyPEM.utf8),
                attributes: [.posixPermissions: 0o600])
        else { throw CLIError.failure("cannot write \(base).key") }
        try Data(request.pemRepresentation.utf8).write(to: URL(fileURLWithPath: base + ".csr"), options: .atomic)
        context.trace("wrote \(base).key (0600) and \(base).csr")
        try context.outputJSON([
            "key": base + ".key", "csr": base + ".csr", "keyType": keyType.rawValue, "kind": kind.rawValue,
        ])
    }
}
