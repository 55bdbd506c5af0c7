public import Foundation
public import OrchardCrypto
public import OrchardRuntime
public import OrchardX509

/// A party's public material as one JSON file (`orchard pki export`), which another party imports
/// (`orchard pki import`): its root CA certificate, the certificates peers pin, where its services listen, what it
/// asks of other parties and, in an answer, the certificates it issued for them. Never a private key.
///
/// Format 1:
/// `{"format": "orchard-party-bundle", "version": 1, "party": "pay", "roots": [PEM], "certificates": {name: PEM},
/// "endpoints": {service: {"host", "port", "ports"}}, "hostNames": {name: port}, "requests": [PartyRequest],
/// "issued": [PartyIssued], "rekey": {"oldRoot": PEM, "signature": base64}}` (`rekey` only in a bundle made with
/// `orchard pki export --signed-by-old-root`).
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
    /// The party's previous root's signature of this bundle's root, when the party re-keyed
    /// (``PartyRekeySignature``).
    public var rekey: PartyRekeySignature?

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
        rekey = nil
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

/// A re-keyed party's proof that its new root is its own: its previous root CA's key signs
/// ``statement(party:oldRoot:newRoot:)``, which names the party and both roots' SHA-256 fingerprints (ECDSA P-256
/// with SHA-256, DER, as the root signs certificates). An importer that registered the party under the old root
/// accepts the new one with `orchard pki import --replace`.
public struct PartyRekeySignature: Codable, Sendable, Hashable {
    /// The previous root CA certificate (PEM).
    public var oldRoot: String
    /// The signature, base64.
    public var signature: String

    public init(oldRoot: String, signature: String) {
        self.oldRoot = oldRoot
        self.signature = signature
    }

    /// The signed bytes: `orchard-party-rekey/1 <party> <old root SHA-256> <new root SHA-256>` (lowercase hex).
    public static func statement(party: DeploymentParty, oldRoot: RootFingerprint, newRoot: RootFingerprint) -> [UInt8]
    {
        Array("orchard-party-rekey/1 \(party.rawValue) \(oldRoot.certificate) \(newRoot.certificate)".utf8)
    }

    /// `oldRoot`'s signature of the move of `party` to `newRoot`.
    public static func sign(
        party: DeploymentParty, oldRoot: CertificateAuthority, newRoot: Certificate
    ) throws(ServicesError) -> PartyRekeySignature {
        let bytes = statement(
            party: party, oldRoot: RootFingerprint(oldRoot.certificate), newRoot: RootFingerprint(newRoot))
        do {
            let signature = try oldRoot.privateKey.signature(for: bytes)
            return PartyRekeySignature(
                oldRoot: oldRoot.certificate.pemRepresentation, signature: Data(signature).base64EncodedString())
        } catch {
            throw ServicesError(.pkiFailure, "cannot sign with the old root", underlying: error)
        }
    }

    /// Whether this is `oldRoot`'s valid signature of the move of `party` to `newRoot`.
    func isValid(party: DeploymentParty, oldRoot: Certificate, newRoot: Certificate) -> Bool {
        // try?: a root whose key cannot be read signs nothing.
        guard let signature = Data(base64Encoded: signature), let key = try? oldRoot.publicKey else { return false }
        let bytes = Self.statement(party: party, oldRoot: RootFingerprint(oldRoot), newRoot: RootFingerprint(newRoot))
        return key.isValidSignature(signature, for: bytes, algorithm: key.signatureAlgorithm.algorithm)
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
    /// What the answering party registered so far (``PartyRegistrations``), to assign identifiers from.
    public let registrations: PartyRegistrations
    /// The fingerprints of the requester's root, which the identities of the answer are bound to.
    public let peerRoot: RootFingerprint
}

/// `orchard pki export` and `orchard pki import` for a party deployed on its own (`orchard init --party`).
public enum PartyBundles {
    /// What an import did, for the command's JSON output.
    public struct ImportSummary: Sendable, Encodable {
        /// The party whose bundle was imported.
        public let party: String
        /// The root now trusted, as `pki/peers/<file>`.
        public let trustedRoot: String
        /// Its SHA-256 fingerprint (of the DER, lowercase hex): the value `--old-root-fingerprint` takes when it
        /// is replaced.
        public let rootFingerprint: String
        /// Certificates stored, by PKI file name (the peer's published ones and those issued to this party).
        public let certificates: [String]
        /// Peer services now reachable.
        public let peers: [String]
        /// Requests of the peer this party answered (kinds).
        public let answered: [String]
        /// Where the answer bundle was written, if any.
        public let answer: String?
        /// The fingerprint of the root a `--replace` import replaced.
        public let replaced: String?
    }

    /// The bundle of the party in `directory`. With `signedByOldRoot` (the party's previous directory, holding the
    /// root it re-keys from: `pki/root/root-ca.pem` and `.key`) the bundle carries that root's signature of the new
    /// one (``PartyRekeySignature``), which peers that registered the party under the old root check at
    /// `orchard pki import --replace`.
    public static func export(
        _ directory: DeploymentDirectory, registry: ServiceRegistry, environment: [String: String] = [:],
        signedByOldRoot: DeploymentDirectory? = nil
    ) throws(ServicesError) -> PartyBundle {
        let manifest = try requireManifest(directory)
        let configuration = try registry.loadConfiguration(from: directory, environment: environment)
        var bundle = try bundle(of: manifest, directory: directory, registry: registry, configuration: configuration)
        if let old = signedByOldRoot {
            guard try PartyManifest.read(from: old)?.party == manifest.party else {
                throw ServicesError(
                    .invalidConfiguration,
                    "\(old) is not a directory of \(manifest.party) (its party.json): --signed-by-old-root names the "
                        + "party's previous directory, which holds the root it re-keys from")
            }
            let oldRoot: CertificateAuthority
            let newRoot: Certificate
            do {
                try old.checkPermissions()
                oldRoot = try CertificateAuthority.load(named: PKIFiles.rootCA, from: old)
                newRoot = try Certificate(pemEncoded: bundle.roots[0])
            } catch {
                throw ServicesError(.pkiFailure, "cannot read the old root CA in \(old)", underlying: error)
            }
            guard RootFingerprint(oldRoot.certificate) != RootFingerprint(newRoot) else {
                throw ServicesError(
                    .invalidConfiguration, "\(old) holds the same root as \(directory): there is nothing to re-key")
            }
            bundle.rekey = try PartyRekeySignature.sign(party: manifest.party, oldRoot: oldRoot, newRoot: newRoot)
        }
        return bundle
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

    /// How `orchard pki import --replace` vouches for a known party's new root.
    public enum Replacement: Sendable, Hashable {
        /// The bundle carries the old root's signature of the new one (`orchard pki export --signed-by-old-root`).
        case signedByOldRoot
        /// The operator gives the old root's SHA-256 fingerprint, checked out of band with its party, when the old
        /// root cannot sign (`--old-root-fingerprint`).
        case oldRootFingerprint(String)
    }

    /// Imports `data` into the party in `directory`: checks everything first (``ServicesError/Code/invalidBundle``
    /// and nothing changed on a bad bundle), answers the requests addressed to this party (the answer bundle is
    /// written to `answerPath`, required when there are any), then records the bindings in `registrations.json`,
    /// stores the peer's root in `pki/peers/`, its published certificates, the certificates it issued for this
    /// party, and its endpoints and root in `peers.json`.
    ///
    /// Bindings (``PartyRegistrations``): the bundle's party name and every identity its requests name (a merchant
    /// ID, a merchant's terminals) are bound, at their first import, to the bundle's root; a bundle under another
    /// root naming any of them is refused, unless `replace` vouches for the party's new root (the old root's
    /// signature, or the operator's fingerprint of it): then the bindings move to the new root, the certificates
    /// this party issued under the old one are revoked (``OrchardService/revokeIssued(to:identities:except:context:)``
    /// and ``RegisteredCertificateRevocations``), and the re-key is recorded. The same bundle again is accepted.
    ///
    /// Host names: a bundle names only those of its party's own services (as `services`, every service a party may
    /// run, declares them), or those a service of this party proved for it
    /// (``OrchardService/provenHostNames(of:context:)``: the Pay side's domains validated for the merchant), each at
    /// a port of the bundle's endpoints.
    public static func importBundle(
        _ data: Data, into directory: DeploymentDirectory, registry: ServiceRegistry, answerPath: String?,
        replace: Replacement? = nil, services: ServiceRegistry? = nil, environment: [String: String] = [:],
        clock: any WallClock = SystemClock(), random: any RandomSource = SystemRandom(),
        trace: @escaping @Sendable (String) -> Void = { _ in }
    ) async throws(ServicesError) -> ImportSummary {
        let manifest = try requireManifest(directory)
        let configuration = try registry.loadConfiguration(from: directory, environment: environment)
        let bundle = try PartyBundle.parse(data)
        let now = clock.now()
        let checked = try check(bundle, for: manifest, at: now)
        let toAnswer = bundle.requests.filter { $0.to == manifest.party && $0.from == bundle.party }
        if !toAnswer.isEmpty && answerPath == nil {
            throw ServicesError(
                .invalidConfiguration,
                "the \(bundle.party) bundle asks \(manifest.party) for \(toAnswer.map(\.kind).joined(separator: ", ")): "
                    + "pass --out FILE for the answer bundle")
        }
        var registrations = try PartyRegistrations.read(from: directory)
        let rekey = try checkBindings(
            bundle, root: checked.root, claims: claims(of: bundle, answered: toAnswer), in: directory,
            registrations: registrations, replace: replace)
        try await checkHostNames(
            bundle, manifest: manifest, directory: directory, registry: registry, services: services ?? registry,
            configuration: configuration)
        // A re-key moves the old root's bindings to the new root (in memory until every step passed), so that the
        // answers find the party's identities (its token requestor ID) under its new root.
        let root = RootFingerprint(checked.root)
        if let rekey {
            registrations.rekey(bundle.party, from: rekey.old, to: root, vouchedBy: rekey.vouchedBy, at: now)
        }

        // Answer first: an answer that fails leaves the files as they were.
        var issued: [PartyIssued] = []
        var context: PartyRequestContext?
        if !toAnswer.isEmpty || rekey != nil {
            context = PartyRequestContext(
                directory: directory, configuration: configuration,
                rootCA: try CertificateAuthority.load(named: PKIFiles.rootCA, from: directory), clock: clock,
                random: random, trace: trace, registrations: registrations, peerRoot: root)
        }
        for request in toAnswer {
            guard let context else { break }
            var answer: [PartyIssued]?
            for service in registry.services where manifest.party.services.contains(service.name) {
                do {
                    answer = try await service.answer(request, context: context)
                } catch {
                    throw ServicesError(
                        .invalidBundle, "\(service.name) cannot answer the \(request.kind) request", underlying: error)
                }
                if answer != nil { break }
            }
            guard let answer else {
                throw ServicesError(
                    .invalidBundle, "\(manifest.party) answers no \"\(request.kind)\" request (from \(bundle.party))")
            }
            issued += answer
        }
        let answerBundle = try self.bundle(
            of: manifest, directory: directory, registry: registry, configuration: configuration, issued: issued)

        // The bindings, then the files: a re-key revokes what this party issued under the old root; this bundle's
        // claims and the identities its answer assigned are bound to its root.
        if let rekey, let context {
            var fresh: [Certificate] = []
            for item in issued { fresh += try certificates(of: item) }
            for service in registry.services where manifest.party.services.contains(service.name) {
                do {
                    try await service.revokeIssued(
                        to: bundle.party, identities: claims(of: bundle, answered: toAnswer), except: fresh,
                        context: context)
                } catch {
                    throw ServicesError(
                        .storeFailure, "\(service.name) cannot revoke what it issued to \(bundle.party)",
                        underlying: error)
                }
            }
            trace(
                "\(manifest.party): \(bundle.party) re-keyed from root \(rekey.old) to \(root); revoked what was issued under the old root"
            )
        }
        registrations.bind(
            claims(of: bundle, answered: toAnswer) + issued.compactMap(\.identity), party: bundle.party, root: root,
            at: now)
        for item in issued {
            guard let leaf = try certificates(of: item).first else { continue }
            registrations.issued.append(
                PartyRegistrations.IssuedCertificate(
                    party: bundle.party.rawValue, name: item.name, identity: item.identity,
                    fingerprint: Hex.encode(SHA256.hash(leaf.derRepresentation), lowercase: true),
                    root: root.certificate, issuedAt: now))
        }
        try registrations.write(to: directory)

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
        for name in peers.parties[bundle.party.rawValue]?.hostNames ?? [] { peers.hostNames[name] = nil }
        for (name, endpoint) in bundle.endpoints { peers.services[name] = endpoint }
        for (name, port) in bundle.hostNames { peers.hostNames[name] = port }
        peers.parties[bundle.party.rawValue] = PeerAddresses.Peer(
            root: "pki/peers/\(rootName).pem", rootFingerprint: root.certificate,
            services: bundle.endpoints.keys.sorted(), hostNames: bundle.hostNames.keys.sorted())
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
            rootFingerprint: root.certificate,
            certificates: (checked.published.keys.sorted() + checked.issuedToMe.keys.sorted()),
            peers: bundle.endpoints.keys.sorted(), answered: toAnswer.map(\.kind),
            answer: toAnswer.isEmpty ? nil : answerPath, replaced: rekey?.old.certificate)
    }

    private static func certificates(of item: PartyIssued) throws(ServicesError) -> [Certificate] {
        do {
            return try Certificate.certificates(fromPEM: item.certificates.joined())
        } catch {
            throw ServicesError(.internalFailure, "an issued certificate does not parse", underlying: error)
        }
    }

    /// The identities a bundle claims at this party: its party name, and what the requests it addresses here name
    /// (the merchant ID, the merchant's terminals).
    static func claims(of bundle: PartyBundle, answered: [PartyRequest]) -> [String] {
        var claims = [PartyRegistrations.Identity.party(bundle.party)]
        for request in answered {
            guard let merchant = request.merchantIdentifier else { continue }
            claims.append(PartyRegistrations.Identity.merchant(merchant))
            for terminal in request.terminalIDs ?? [] {
                claims.append(PartyRegistrations.Identity.terminal(terminal, merchant: merchant))
            }
        }
        return claims
    }

    /// Refuses a bundle whose claims are bound to another root, unless `replace` vouches for the new root of the
    /// party bound to them; returns that re-key.
    static func checkBindings(
        _ bundle: PartyBundle, root: Certificate, claims: [String], in directory: DeploymentDirectory,
        registrations: PartyRegistrations, replace: Replacement?
    ) throws(ServicesError) -> (old: RootFingerprint, vouchedBy: String)? {
        let new = RootFingerprint(root)
        let known = registrations.root(of: bundle.party, in: directory)
        let howToReplace =
            "if it is the same party with a new root, import its bundle with `orchard pki import --replace FILE` "
            + "(made with `orchard pki export --signed-by-old-root OLD-DIR`), or add `--old-root-fingerprint "
            + "SHA256` when the old root cannot sign; otherwise give it another merchant or terminal ID"
        guard let replace else {
            if let known, known != new {
                throw ServicesError(
                    .invalidBundle,
                    "\(bundle.party) is already registered to another party (root SHA-256 \(known)); this bundle's root "
                        + "is \(new): nothing imported; \(howToReplace)")
            }
            if let (claim, binding) = registrations.conflicts(claims, root: new).first {
                throw ServicesError(
                    .invalidBundle,
                    "\(claim) is already registered to another party (\(binding.party), root SHA-256 \(binding.root)); "
                        + "nothing imported; \(howToReplace)")
            }
            return nil
        }
        guard let known else {
            throw ServicesError(
                .invalidBundle,
                "--replace: \(bundle.party) is not registered here, so there is no root to replace: import its bundle "
                    + "without --replace")
        }
        guard known != new else {
            throw ServicesError(
                .invalidBundle,
                "--replace: the bundle's root is the one \(bundle.party) registered (\(new)): import it without --replace"
            )
        }
        let vouchedBy: String
        switch replace {
        case .oldRootFingerprint(let text):
            guard let fingerprint = RootFingerprint.normalized(text) else {
                throw ServicesError(
                    .invalidBundle,
                    "--old-root-fingerprint takes the old root's SHA-256: 64 hex digits (colons allowed)")
            }
            guard fingerprint == known.certificate else {
                throw ServicesError(
                    .invalidBundle,
                    "--old-root-fingerprint \(fingerprint) is not the root \(bundle.party) registered here: nothing "
                        + "imported; check the fingerprint with the party")
            }
            vouchedBy = "operator"
        case .signedByOldRoot:
            guard let rekey = bundle.rekey else {
                throw ServicesError(
                    .invalidBundle,
                    "--replace: the bundle is not signed by \(bundle.party)'s old root: export it with `orchard pki "
                        + "export --signed-by-old-root OLD-DIR`, or add `--old-root-fingerprint SHA256`")
            }
            // try?: an old root that does not parse is no registered root (refused below).
            guard let oldRoot = try? Certificate(pemEncoded: rekey.oldRoot), RootFingerprint(oldRoot) == known,
                rekey.isValid(party: bundle.party, oldRoot: oldRoot, newRoot: root)
            else {
                throw ServicesError(
                    .invalidBundle,
                    "--replace: the bundle's re-key signature is not the valid signature of the root \(bundle.party) "
                        + "registered here (\(known)): nothing imported")
            }
            vouchedBy = "old-root-signature"
        }
        // Claims bound to a third root stay refused.
        if let (claim, binding) = registrations.conflicts(claims, root: new).first(where: { $0.1.root != known }) {
            throw ServicesError(
                .invalidBundle,
                "\(claim) is already registered to another party (\(binding.party), root SHA-256 \(binding.root)): "
                    + "nothing imported")
        }
        return (known, vouchedBy)
    }

    /// Refuses a host name the bundle's party does not prove: neither a name one of its own services declares nor
    /// one this party's services proved for it, or one at a port none of its endpoints listens on.
    static func checkHostNames(
        _ bundle: PartyBundle, manifest: PartyManifest, directory: DeploymentDirectory, registry: ServiceRegistry,
        services: ServiceRegistry, configuration: Configuration
    ) async throws(ServicesError) {
        guard !bundle.hostNames.isEmpty else { return }
        var owned = Set(
            services.services.filter { bundle.party.services.contains($0.name) }.flatMap(\.hostNames).map(\.name))
        for service in registry.services where manifest.party.services.contains(service.name) {
            do {
                owned.formUnion(
                    try await service.provenHostNames(of: bundle, directory: directory, configuration: configuration))
            } catch {
                throw ServicesError(
                    .storeFailure, "\(service.name) cannot read the host names proved for \(bundle.party)",
                    underlying: error)
            }
        }
        let ownNames = Set(configuration.hostNames.keys)
        let ports = Set(bundle.endpoints.values.flatMap { [$0.port] + Array($0.ports.values) })
        for (name, port) in bundle.hostNames.sorted(by: { $0.key < $1.key }) {
            guard owned.contains(name), !ownNames.contains(name) else {
                throw ServicesError(
                    .invalidBundle,
                    "the \(bundle.party) bundle names the host name \(name), which it does not prove (neither one of "
                        + "its own services' names nor a domain validated for it here): nothing imported; "
                        + "validate the domain first (`orchard merchant domain add|verify`)")
            }
            guard ports.contains(port) else {
                throw ServicesError(
                    .invalidBundle,
                    "the \(bundle.party) bundle maps \(name) to port \(port), where none of its services listens: "
                        + "nothing imported")
            }
        }
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
            // An assigned token requestor ID is the one the certificate names.
            if let identity = item.identity, identity.hasPrefix(PartyRegistrations.Identity.tokenRequestor("")),
                certificates[0].subject.commonName
                    != String(identity.dropFirst(PartyRegistrations.Identity.tokenRequestor("").count))
            {
                throw ServicesError(
                    .invalidBundle,
                    "the issued certificate \(item.name) does not name the token requestor ID the answer assigns")
            }
            issuedToMe[item.name] = certificates
        }
        return Checked(root: root, published: published, issuedToMe: issuedToMe)
    }
}
