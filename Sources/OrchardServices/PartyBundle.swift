public import Foundation
public import OrchardCrypto
public import OrchardRuntime
import OrchardX509

/// A party's public material as one JSON file (`orchard pki export`), which another party imports
/// (`orchard pki import`): its root CA certificate, the certificates peers pin, where its services listen, what it
/// asks of other parties and, in an answer, the certificates it issued for them. Never a private key.
///
/// Format 1:
/// `{"format": "orchard-party-bundle", "version": 1, "party": "pay", "roots": [PEM], "certificates": {name: PEM},
/// "endpoints": {service: {"host", "port", "ports"}}, "hostNames": {name: port}, "requests": [PartyRequest],
/// "issued": [PartyIssued]}`.
public struct PartyBundle: Codable, Sendable, Hashable {
    /// The `format` value.
    public static let formatName = "orchard-party-bundle"
    /// The version this program writes and reads.
    public static let currentVersion = 1

    public var format: String
    public var version: Int
    /// The party that made the bundle.
    public var party: DeploymentParty
    /// The party's root CA certificate (one PEM).
    public var roots: [String]
    /// Public certificates peers pin (``DeploymentParty/publishedCertificates``), by PKI file name; each chains to
    /// the root.
    public var certificates: [String: String]
    /// Where the party's services listen, by service name.
    public var endpoints: [String: ServiceEndpoint]
    /// The host names the party's services answer for, with their ports.
    public var hostNames: [String: Int]
    /// What the party asks of others (each importer answers those addressed to it).
    public var requests: [PartyRequest]
    /// Certificates the party issued in answer to another's requests.
    public var issued: [PartyIssued]

    public init(
        party: DeploymentParty, roots: [String], certificates: [String: String], endpoints: [String: ServiceEndpoint],
        hostNames: [String: Int], requests: [PartyRequest], issued: [PartyIssued] = []
    ) {
        format = Self.formatName
        version = Self.currentVersion
        self.party = party
        self.roots = roots
        self.certificates = certificates
        self.endpoints = endpoints
        self.hostNames = hostNames
        self.requests = requests
        self.issued = issued
    }

    /// The JSON form (sorted keys).
    public func jsonData() throws(ServicesError) -> Data {
        do {
            return try PartyJSON.encode(self)
        } catch {
            throw ServicesError(.internalFailure, "cannot encode the bundle", underlying: error)
        }
    }

    /// Parses a bundle: ``ServicesError/Code/invalidBundle`` for anything but JSON of format 1.
    public static func parse(_ data: Data) throws(ServicesError) -> PartyBundle {
        struct Header: Decodable {
            let format: String?
            let version: Int?
        }
        let header: Header
        do {
            header = try JSONDecoder().decode(Header.self, from: data)
        } catch {
            throw ServicesError(
                .invalidBundle,
                "the file is not a party bundle (not a JSON object): use one made by `orchard pki export`")
        }
        guard header.format == formatName else {
            throw ServicesError(.invalidBundle, "the file is not a party bundle (format is not \"\(formatName)\")")
        }
        guard header.version == currentVersion else {
            throw ServicesError(
                .invalidBundle,
                "the bundle has version \(header.version.map(String.init) ?? "none"); this program reads "
                    + "\(currentVersion): export it again with this version of orchard")
        }
        do {
            return try JSONDecoder().decode(PartyBundle.self, from: data)
        } catch {
            throw ServicesError(.invalidBundle, "the party bundle is malformed: \(Self.describe(error))")
        }
    }

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): "\"\(key.stringValue)\" is missing"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context),
            DecodingError.dataCorrupted(let context):
            "bad value at \(context.codingPath.map(\.stringValue).joined(separator: "."))"
        default: "not the expected JSON"
        }
    }
}

/// What a service needs to answer another party's request at import: its directory and configuration, its
/// party's root CA (which issues the client certificates its routes accept), time and randomness.
public struct PartyRequestContext: Sendable {
    /// The answering party's directory.
    public let directory: DeploymentDirectory
    /// Its configuration (where its stores live).
    public let configuration: Configuration
    /// Its own root CA (`pki/root/root-ca`), which issues the client certificates its routes accept.
    public let rootCA: CertificateAuthority
    public let clock: any WallClock
    public let random: any RandomSource
    /// A readable line on what the answer did (no secrets).
    public let trace: @Sendable (String) -> Void
}

/// `orchard pki export` and `orchard pki import` for a party deployed on its own (`orchard init --party`).
public enum PartyBundles {
    /// What an import did, for the command's JSON output.
    public struct ImportSummary: Sendable, Encodable {
        /// The party whose bundle was imported.
        public let party: String
        /// The root now trusted, as `pki/peers/<file>`.
        public let trustedRoot: String
        /// Certificates stored, by PKI file name (the peer's published ones and those issued to this party).
        public let certificates: [String]
        /// Peer services now reachable.
        public let peers: [String]
        /// Requests of the peer this party answered (kinds).
        public let answered: [String]
        /// Where the answer bundle was written, if any.
        public let answer: String?
    }

    /// The bundle of the party in `directory`.
    public static func export(
        _ directory: DeploymentDirectory, registry: ServiceRegistry, environment: [String: String] = [:]
    ) throws(ServicesError) -> PartyBundle {
        let manifest = try requireManifest(directory)
        let configuration = try registry.loadConfiguration(from: directory, environment: environment)
        return try bundle(of: manifest, directory: directory, registry: registry, configuration: configuration)
    }

    static func requireManifest(_ directory: DeploymentDirectory) throws(ServicesError) -> PartyManifest {
        guard let manifest = try PartyManifest.read(from: directory) else {
            throw ServicesError(
                .invalidConfiguration,
                "\(directory) holds every party in one directory: bundles are for a party deployed on its own "
                    + "(`orchard init --party pay|network|merchant --data-dir DIR`)")
        }
        return manifest
    }

    static func bundle(
        of manifest: PartyManifest, directory: DeploymentDirectory, registry: ServiceRegistry,
        configuration: Configuration, issued: [PartyIssued] = []
    ) throws(ServicesError) -> PartyBundle {
        var certificates: [String: String] = [:]
        let root: String
        do {
            root = try directory.readCertificate(named: PKIFiles.rootCA)
            for name in manifest.party.publishedCertificates {
                certificates[name] = try directory.readCertificate(named: name)
            }
        } catch {
            throw ServicesError(.pkiFailure, "cannot read the certificates of \(manifest.party)", underlying: error)
        }
        var endpoints: [String: ServiceEndpoint] = [:]
        for name in manifest.party.services {
            let service = try registry.service(named: name.rawValue)
            var ports: [String: Int] = [:]
            // Named as the run record names them (`merchant.sitePort` → `site`), which is what peers read.
            for key in service.additionalPorts {
                let name = key.name.hasSuffix("Port") ? String(key.name.dropLast(4)) : key.name
                ports[name] = configuration[key]
            }
            endpoints[name.rawValue] = ServiceEndpoint(
                host: configuration[ServiceSettings.host(name)], port: configuration[ServiceSettings.port(name)],
                ports: ports)
        }
        return PartyBundle(
            party: manifest.party, roots: [root], certificates: certificates, endpoints: endpoints,
            hostNames: configuration.hostNames, requests: manifest.requests, issued: issued)
    }

    /// Imports `data` into the party in `directory`: checks everything first (``ServicesError/Code/invalidBundle``
    /// and nothing changed on a bad bundle), answers the requests addressed to this party (the answer bundle is
    /// written to `answerPath`, required when there are any), then stores the peer's root in `pki/peers/`, its
    /// published certificates, the certificates it issued for this party, and its endpoints in `peers.json`.
    public static func importBundle(
        _ data: Data, into directory: DeploymentDirectory, registry: ServiceRegistry, answerPath: String?,
        environment: [String: String] = [:], clock: any WallClock = SystemClock(),
        random: any RandomSource = SystemRandom(), trace: @escaping @Sendable (String) -> Void = { _ in }
    ) async throws(ServicesError) -> ImportSummary {
        let manifest = try requireManifest(directory)
        let configuration = try registry.loadConfiguration(from: directory, environment: environment)
        let bundle = try PartyBundle.parse(data)
        let checked = try check(bundle, for: manifest, at: clock.now())
        let toAnswer = bundle.requests.filter { $0.to == manifest.party && $0.from == bundle.party }
        if !toAnswer.isEmpty && answerPath == nil {
            throw ServicesError(
                .invalidConfiguration,
                "the \(bundle.party) bundle asks \(manifest.party) for \(toAnswer.map(\.kind).joined(separator: ", ")): "
                    + "pass --out FILE for the answer bundle")
        }

        // Answer first: an answer that fails leaves the files as they were.
        var issued: [PartyIssued] = []
        if !toAnswer.isEmpty {
            let rootCA = try CertificateAuthority.load(named: PKIFiles.rootCA, from: directory)
            let context = PartyRequestContext(
                directory: directory, configuration: configuration, rootCA: rootCA, clock: clock, random: random,
                trace: trace)
            for request in toAnswer {
                var answer: [PartyIssued]?
                for service in registry.services where manifest.party.services.contains(service.name) {
                    do {
                        answer = try await service.answer(request, context: context)
                    } catch {
                        throw ServicesError(
                            .invalidBundle, "\(service.name) cannot answer the \(request.kind) request",
                            underlying: error)
                    }
                    if answer != nil { break }
                }
                guard let answer else {
                    throw ServicesError(
                        .invalidBundle,
                        "\(manifest.party) answers no \"\(request.kind)\" request (from \(bundle.party))")
                }
                issued += answer
            }
        }
        let answerBundle = try self.bundle(
            of: manifest, directory: directory, registry: registry, configuration: configuration, issued: issued)

        let rootName = DeploymentDirectory.peerRootName(bundle.party.rawValue)
        do {
            try directory.writeCertificate(checked.root.pemRepresentation, named: rootName)
            for (name, chain) in checked.published.sorted(by: { $0.key < $1.key }) {
                try DeploymentPKI.writeCertificates(chain, named: name, to: directory)
            }
            for (name, chain) in checked.issuedToMe.sorted(by: { $0.key < $1.key }) {
                try DeploymentPKI.writeCertificates(chain, named: name, to: directory)
            }
        } catch {
            throw ServicesError(.pkiFailure, "cannot store the certificates of \(bundle.party)", underlying: error)
        }
        var peers = PeerAddresses.read(from: directory)
        for service in bundle.party.services { peers.services[service.rawValue] = nil }
        for (name, endpoint) in bundle.endpoints { peers.services[name] = endpoint }
        for (name, port) in bundle.hostNames { peers.hostNames[name] = port }
        try peers.write(to: directory)
        if let answerPath, !toAnswer.isEmpty {
            do {
                try SecureFile.write(Array(try answerBundle.jsonData()), to: answerPath, mode: 0o600)
            } catch {
                throw ServicesError(
                    .internalFailure, "cannot write the answer bundle to \(answerPath)", underlying: error)
            }
        }
        return ImportSummary(
            party: bundle.party.rawValue, trustedRoot: "pki/peers/\(rootName).pem",
            certificates: (checked.published.keys.sorted() + checked.issuedToMe.keys.sorted()),
            peers: bundle.endpoints.keys.sorted(), answered: toAnswer.map(\.kind),
            answer: toAnswer.isEmpty ? nil : answerPath)
    }

    struct Checked {
        let root: Certificate
        let published: [String: [Certificate]]
        let issuedToMe: [String: [Certificate]]
    }

    /// Every check of an import, before anything is written.
    static func check(_ bundle: PartyBundle, for manifest: PartyManifest, at now: Date) throws(ServicesError) -> Checked
    {
        guard bundle.party != manifest.party else {
            throw ServicesError(
                .invalidBundle,
                "the bundle is \(bundle.party)'s own: import the bundles of the other parties into this directory")
        }
        guard bundle.roots.count == 1, let rootPEM = bundle.roots.first else {
            throw ServicesError(.invalidBundle, "the bundle must carry exactly one root certificate")
        }
        let root: Certificate
        do {
            root = try Certificate(pemEncoded: rootPEM)
        } catch {
            throw ServicesError(.invalidBundle, "the root certificate of the bundle is not a certificate: \(error)")
        }
        guard root.issuer == root.subject, (try? root.basicConstraints)??.isCA == true,
            let rootKey = try? root.publicKey, root.isSignature(validUnder: rootKey)
        else {
            throw ServicesError(
                .invalidBundle, "the root certificate of the bundle is not a self-signed CA certificate")
        }
        let verifier: CertificateChainVerifier
        do {
            verifier = try CertificateChainVerifier(trustRoots: [root], cacheCapacity: 0)
        } catch {
            throw ServicesError(.invalidBundle, "the root certificate of the bundle cannot be used: \(error)")
        }
        func chain(_ pem: String, _ what: String, anchor: Bool = false) throws(ServicesError) -> [Certificate] {
            let certificates: [Certificate]
            do {
                certificates = try Certificate.certificates(fromPEM: pem)
            } catch {
                throw ServicesError(.invalidBundle, "\(what) is not a certificate: \(error)")
            }
            guard let leaf = certificates.first else {
                throw ServicesError(.invalidBundle, "\(what) holds no certificate")
            }
            if anchor {
                guard certificates.count == 1, leaf.issuer == leaf.subject,
                    (try? leaf.basicConstraints)??.isCA == true, let key = try? leaf.publicKey,
                    leaf.isSignature(validUnder: key)
                else { throw ServicesError(.invalidBundle, "\(what) is not a self-signed CA certificate") }
                return certificates
            }
            guard verifier.verify(leaf: leaf, intermediates: Array(certificates.dropFirst()), at: now).isValid else {
                throw ServicesError(.invalidBundle, "\(what) does not chain to the root of \(bundle.party)")
            }
            return certificates
        }
        var published: [String: [Certificate]] = [:]
        for (name, pem) in bundle.certificates {
            guard bundle.party.publishedCertificates.contains(name) else {
                throw ServicesError(.invalidBundle, "\(bundle.party) publishes no certificate \"\(name)\"")
            }
            published[name] = try chain(
                pem, "the certificate \(name)", anchor: bundle.party.publishedAnchors.contains(name))
        }
        for name in bundle.party.publishedCertificates where published[name] == nil {
            throw ServicesError(.invalidBundle, "the bundle of \(bundle.party) lacks its certificate \(name)")
        }
        for (name, endpoint) in bundle.endpoints {
            guard bundle.party.services.contains(where: { $0.rawValue == name }) else {
                throw ServicesError(.invalidBundle, "\(bundle.party) runs no service \"\(name)\"")
            }
            let ports = [endpoint.port] + Array(endpoint.ports.values)
            guard !endpoint.host.isEmpty, ports.allSatisfy({ (1...65535).contains($0) }) else {
                throw ServicesError(.invalidBundle, "the endpoint of \(name) has no host or a port outside 1-65535")
            }
        }
        for (name, port) in bundle.hostNames {
            guard HostNames.isHostName(name), (1...65535).contains(port) else {
                throw ServicesError(.invalidBundle, "the host name \"\(name)\" or its port \(port) is not valid")
            }
        }
        var issuedToMe: [String: [Certificate]] = [:]
        let asked = manifest.requests.filter { $0.to == bundle.party }.flatMap(\.signingRequests)
        for item in bundle.issued where item.to == manifest.party {
            guard let requestPEM = asked.first(where: { $0.key == item.name })?.value,
                let request = try? CertificateSigningRequest(pemEncoded: requestPEM)
            else {
                throw ServicesError(
                    .invalidBundle, "\(manifest.party) asked \(bundle.party) for no certificate \"\(item.name)\"")
            }
            let certificates = try chain(item.certificates.joined(), "the issued certificate \(item.name)")
            guard certificates[0].subjectPublicKeyInfo.derRepresentation == request.publicKey.derRepresentation else {
                throw ServicesError(
                    .invalidBundle, "the issued certificate \(item.name) is not for the key \(manifest.party) holds")
            }
            issuedToMe[item.name] = certificates
        }
        return Checked(root: root, published: published, issuedToMe: issuedToMe)
    }
}
