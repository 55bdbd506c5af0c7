import Foundation
public import OrchardRuntime
import OrchardX509

/// A party that `orchard init --party P` deploys on its own, in a directory of its own, with its own root CA.
///
/// Each groups the services it runs: `network` the card network (token service, issuer and acquirer in one
/// process), `pay` the Pay server (with the device CA: Apple makes the devices), `merchant` the merchant's
/// server with its website `store.orchard.test` (a listener of the merchant service). The store has no service
/// of its own, so `store` is refused with a message naming `merchant`.
public enum DeploymentParty: String, Sendable, Codable, CaseIterable, CustomStringConvertible {
    case network, pay, merchant

    /// The services the party runs.
    public var services: [ServiceName] {
        switch self {
        case .network: [.network]
        case .pay: [.pay]
        case .merchant: [.merchant]
        }
    }

    /// The party's root CA's subject common name.
    public var rootCommonName: String {
        switch self {
        case .network: "Orchard Network Root CA"
        case .pay: "Orchard Pay Root CA"
        case .merchant: "Orchard Merchant Root CA"
        }
    }

    /// The public certificates (beside its root) the party's bundle carries because other parties pin them: the
    /// Pay side's device CA (the network checks Secure Element keys against it) and token-signing root (merchants
    /// verify tokens with it); the network's provisioning and install-signing certificates (devices seal card data
    /// to the one and pin the other's key at manufacture).
    public var publishedCertificates: [String] {
        switch self {
        case .pay: [PKIFiles.deviceCA, "token-root"]
        case .network: ["token-service-provisioning", "token-service-personalisation"]
        case .merchant: []
        }
    }

    /// The published certificates that are roots of their own rather than issued under the party's root: the Pay
    /// side's token-signing root (the stand-in for Apple Root CA - G3), which must be a self-signed CA.
    public var publishedAnchors: [String] {
        switch self {
        case .pay: ["token-root"]
        case .network, .merchant: []
        }
    }

    public var description: String { rawValue }

    /// Parses `--party`: `pay`, `network` or `merchant`.
    public static func parse(_ text: String) throws(ServicesError) -> DeploymentParty {
        if let party = DeploymentParty(rawValue: text) { return party }
        if text == "store" {
            throw ServicesError(
                .invalidConfiguration,
                "the store (store.orchard.test) is the merchant's website, a listener of the merchant service: "
                    + "use --party merchant")
        }
        throw ServicesError(.invalidConfiguration, "there is no party \"\(text)\" (parties: pay, network, merchant)")
    }
}

/// What one party asks of another in its bundle: certificates issued from its signing requests (the keys stay
/// with the requester) and onboarding at the other party.
///
/// Kinds: ``Kind/tokenRequestor`` (pay → network: the client certificate of the token requestor),
/// ``Kind/acquiring`` (merchant → network: an account at the acquirer and the client certificate of its charges),
/// ``Kind/merchant`` (merchant → pay: registration, processing and identity certificates, the app's entitlement).
public struct PartyRequest: Codable, Sendable, Hashable {
    /// The request kinds.
    public enum Kind {
        public static let tokenRequestor = "token-requestor"
        public static let acquiring = "acquiring"
        public static let merchant = "merchant"
    }

    /// The PKI file names under which requesters keep the keys of their signing requests.
    public enum Keys {
        /// The Pay server's client certificate for the network (role token requestor).
        public static let payClient = "pay-client"
        /// The merchant's payment processing certificate (issued by the Pay side's merchant CA).
        public static let merchantProcessing = "merchant-processing"
        /// The merchant's identity certificate (RSA-2048, issued by the Pay side's merchant CA).
        public static let merchantIdentity = "merchant-identity"
        /// The merchant's client certificate for the acquirer (role acquiring, issued by the network's root).
        public static let merchantAcquiring = "merchant-acquiring"
        /// A terminal's client certificate for the acquirer (role acquiring, UID `terminal:<ID>@<merchant ID>`, issued
        /// by the network's root): `terminal-<id>-client`.
        public static func terminalClient(_ terminalID: String) -> String {
            "terminal-\(terminalID.lowercased())-client"
        }
    }

    /// The requesting party.
    public var from: DeploymentParty
    /// The party asked.
    public var to: DeploymentParty
    /// One of ``Kind``.
    public var kind: String
    /// The merchant ID (`merchant.…`) for the merchant's requests.
    public var merchantIdentifier: String?
    /// The merchant's display name.
    public var displayName: String?
    /// The app to entitle for the merchant.
    public var applicationIdentifier: String?
    /// The merchant's ISO 18245 category and ISO 3166-1 numeric country, and its terminals, for the acquirer.
    public var categoryCode: String?
    public var countryCode: String?
    public var terminalIDs: [String]?
    /// PEM certificate signing requests, by the PKI file name under which the requester keeps the key.
    public var signingRequests: [String: String]

    public init(
        from: DeploymentParty, to: DeploymentParty, kind: String, merchantIdentifier: String? = nil,
        displayName: String? = nil, applicationIdentifier: String? = nil, categoryCode: String? = nil,
        countryCode: String? = nil, terminalIDs: [String]? = nil, signingRequests: [String: String]
    ) {
        self.categoryCode = categoryCode
        self.countryCode = countryCode
        self.terminalIDs = terminalIDs
        self.from = from
        self.to = to
        self.kind = kind
        self.merchantIdentifier = merchantIdentifier
        self.displayName = displayName
        self.applicationIdentifier = applicationIdentifier
        self.signingRequests = signingRequests
    }
}

/// A certificate chain one party issued for another from its signing request.
public struct PartyIssued: Codable, Sendable, Hashable {
    /// The requesting party.
    public var to: DeploymentParty
    /// The PKI file name the requester keeps the key under; the chain is written as `pki/<name>.pem`.
    public var name: String
    /// PEM certificates, leaf first.
    public var certificates: [String]
    /// The identity the certificate was issued for, which the issuer registered to the requester's root
    /// (``PartyRegistrations/Identity``): `token-requestor:<ID>` names the token requestor ID the network assigned.
    public var identity: String?

    public init(to: DeploymentParty, name: String, certificates: [String], identity: String? = nil) {
        self.to = to
        self.name = name
        self.certificates = certificates
        self.identity = identity
    }
}

/// `DIR/party.json`: which party a directory holds and what it asks of the others (written by
/// `orchard init --party`, before `config.json`). A directory without it holds every party (plain `orchard init`).
public struct PartyManifest: Codable, Sendable, Hashable {
    public static let fileName = "party.json"
    public var version = 1
    public var party: DeploymentParty
    public var requests: [PartyRequest]

    public init(party: DeploymentParty, requests: [PartyRequest]) {
        self.party = party
        self.requests = requests
    }

    /// The manifest of `directory`, or nil when it holds a complete single-directory deployment.
    public static func read(from directory: DeploymentDirectory) throws(ServicesError) -> PartyManifest? {
        let path = "\(directory.path)/\(fileName)"
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        do {
            let manifest = try JSONDecoder().decode(
                PartyManifest.self, from: Data(SecureFile.read(path, limit: 1 << 20)))
            guard manifest.version == 1 else {
                throw ServicesError(
                    .invalidConfiguration, "\(path) has version \(manifest.version); this program reads 1")
            }
            return manifest
        } catch let error as ServicesError {
            throw error
        } catch {
            throw ServicesError(.invalidConfiguration, "cannot read \(path)", underlying: error)
        }
    }

    func write(to directory: DeploymentDirectory) throws(ServicesError) {
        try PartyJSON.write(self, to: "\(directory.path)/\(Self.fileName)")
    }
}

/// `DIR/peers.json`: where the other parties' services listen, from their imported bundles, and which root
/// serves each. Peers are found there when no run record in DIR names them (``ServicePeers``); a client of a peer
/// trusts that peer's root only (``trustedRootPEM(for:in:)``).
public struct PeerAddresses: Codable, Sendable, Hashable {
    public static let fileName = "peers.json"

    /// A peer party: the root its services answer with, and what it serves.
    public struct Peer: Codable, Sendable, Hashable {
        /// Its root CA certificate, relative to DIR (`pki/peers/peer-<party>-root.pem`).
        public var root: String
        /// SHA-256 of that certificate's DER, lowercase hex.
        public var rootFingerprint: String
        /// Its services (keys of ``PeerAddresses/services``).
        public var services: [String]
        /// Its host names (keys of ``PeerAddresses/hostNames``).
        public var hostNames: [String]

        public init(root: String, rootFingerprint: String, services: [String], hostNames: [String]) {
            self.root = root
            self.rootFingerprint = rootFingerprint
            self.services = services
            self.hostNames = hostNames
        }
    }

    public var version = 1
    /// Each peer service's address.
    public var services: [String: ServiceEndpoint]
    /// The host names peer services answer for (`gateway.orchard.test` → the Pay server's port).
    public var hostNames: [String: Int]
    /// Each peer party, by name (`network`, `pay`, `merchant`). Missing in a file written before roots were
    /// recorded per peer: then a service's party is the one that runs it (``DeploymentParty/services``).
    public var parties: [String: Peer]

    public init(
        services: [String: ServiceEndpoint] = [:], hostNames: [String: Int] = [:], parties: [String: Peer] = [:]
    ) {
        self.services = services
        self.hostNames = hostNames
        self.parties = parties
    }

    enum CodingKeys: String, CodingKey { case version, services, hostNames, parties }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        version = try container.decode(Int.self, forKey: .version)
        services = try container.decode([String: ServiceEndpoint].self, forKey: .services)
        hostNames = try container.decode([String: Int].self, forKey: .hostNames)
        parties = try container.decodeIfPresent([String: Peer].self, forKey: .parties) ?? [:]
    }

    /// The root CA certificate (PEM) a client of `directory` trusts for `service`, and that one only: in a
    /// single-directory deployment, or for a service of the directory's own party, the deployment's own root;
    /// for another party's service, the root `peers.json` names for the party serving it (which must still be the
    /// file imported with that fingerprint). A server of that address answering with a certificate from any other
    /// root (another peer's, or this party's own) fails the handshake. ``ServicesError/Code/notReady`` when that
    /// party's bundle was not imported.
    public static func trustedRootPEM(
        for service: ServiceName, in directory: DeploymentDirectory
    ) throws(ServicesError) -> String {
        let own: String
        do {
            own = try directory.readCertificate(named: PKIFiles.rootCA)
        } catch {
            throw ServicesError(.pkiFailure, "cannot read the root CA of \(directory)", underlying: error)
        }
        guard let manifest = try PartyManifest.read(from: directory), !manifest.party.services.contains(service)
        else { return own }
        let peers = read(from: directory)
        let party =
            peers.parties.first { $0.value.services.contains(service.rawValue) }?.key
            ?? DeploymentParty.allCases.first { $0.services.contains(service) }?.rawValue
        guard let party else {
            throw ServicesError(.notReady, "no party serves \(service) for \(directory)")
        }
        let recorded = peers.parties[party]
        let relative = recorded?.root ?? "pki/peers/\(DeploymentDirectory.peerRootName(party)).pem"
        let path = "\(directory.path)/\(relative)"
        guard !relative.contains(".."), FileManager.default.fileExists(atPath: path) else {
            throw ServicesError(
                .notReady,
                "\(directory) trusts no root for \(party)'s \(service): import \(party)'s bundle (`orchard pki import`)"
            )
        }
        let pem: String
        let certificate: Certificate
        do {
            pem = String(decoding: try SecureFile.read(path, limit: 1 << 20), as: UTF8.self)
            certificate = try Certificate(pemEncoded: pem)
        } catch {
            throw ServicesError(.pkiFailure, "cannot read \(relative)", underlying: error)
        }
        if let recorded, RootFingerprint(certificate).certificate != recorded.rootFingerprint {
            throw ServicesError(
                .pkiFailure,
                "\(relative) is not the root peers.json names for \(party): import \(party)'s bundle again")
        }
        return pem
    }

    /// The peers of `directory` (none when it has no `peers.json`, or an unreadable one).
    public static func read(from directory: DeploymentDirectory) -> PeerAddresses {
        guard let bytes = try? SecureFile.read("\(directory.path)/\(fileName)", limit: 1 << 20),
            let peers = try? JSONDecoder().decode(PeerAddresses.self, from: Data(bytes)), peers.version == 1
        else { return PeerAddresses() }
        return peers
    }

    /// The endpoint of `service`, if a bundle named it.
    public func endpoint(of service: ServiceName) -> ServiceEndpoint? {
        services[service.rawValue]
    }

    func write(to directory: DeploymentDirectory) throws(ServicesError) {
        try PartyJSON.write(self, to: "\(directory.path)/\(Self.fileName)")
    }
}

enum PartyJSON {
    static func encode(_ value: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(value) + Data("\n".utf8)
    }

    /// Writes `value` to `path`, readable by its owner only.
    static func write(_ value: some Encodable, to path: String) throws(ServicesError) {
        do {
            try SecureFile.write(Array(try encode(value)), to: path, mode: 0o600)
        } catch {
            throw ServicesError(.internalFailure, "cannot write \(path)", underlying: error)
        }
    }
}
