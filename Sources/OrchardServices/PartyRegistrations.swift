public import Foundation
import OrchardCrypto
public import OrchardHTTP
public import OrchardRuntime
public import OrchardX509

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The SHA-256 fingerprints that name a party's root CA certificate: of its DER, and of its key (the DER
/// SubjectPublicKeyInfo), lowercase hex.
public struct RootFingerprint: Codable, Sendable, Hashable, CustomStringConvertible {
    /// SHA-256 of the certificate's DER.
    public let certificate: String
    /// SHA-256 of its SubjectPublicKeyInfo's DER.
    public let key: String

    public init(_ root: Certificate) {
        certificate = Hex.encode(SHA256.hash(root.derRepresentation), lowercase: true)
        key = Hex.encode(SHA256.hash(root.subjectPublicKeyInfo.derRepresentation), lowercase: true)
    }

    /// The certificate's fingerprint.
    public var description: String { certificate }

    /// `text` as a fingerprint to compare: 64 hex digits, any case, colons allowed, after an optional `sha256:` or
    /// `… Fingerprint=` (as `openssl x509 -noout -fingerprint -sha256` prints it: `sha256 Fingerprint=AB:CD:…`);
    /// nil for anything else.
    public static func normalized(_ text: String) -> String? {
        var hex = text.lowercased().trimmingCharacters(in: .whitespacesAndNewlines)
        if let equals = hex.lastIndex(of: "=") { hex = String(hex[hex.index(after: equals)...]) }
        if hex.hasPrefix("sha256:") { hex.removeFirst(7) }
        hex.removeAll { $0 == ":" }
        guard hex.utf8.count == 64, hex.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else { return nil }
        return hex
    }
}

/// `DIR/registrations.json` (0600), only in a party's own directory: who registered what here, bound to the root
/// that registered it. Each identity another party's bundle claims (its party name, a merchant ID, a terminal of a
/// merchant, a token requestor ID this party assigned) is bound, at its first import, to that bundle's root; a
/// bundle under another root naming any of them is refused. It also records every certificate this party issued
/// in an answer (so that a re-key revokes them: ``PartyRegistrations/revokedCertificates``) and each re-key.
///
/// A file beside `party.json` and `peers.json` rather than a table in a party's store: the binding is the
/// import's, which runs for every party (each keeps different stores, on SQLite or PostgreSQL), it is checked
/// before the import answers anything, and the listeners read the revocations in it without a store. It is
/// written atomically (a temporary file, fsync, rename), after every check of an import passed.
public struct PartyRegistrations: Codable, Sendable, Hashable {
    public static let fileName = "registrations.json"

    /// An identity's binding: the party that registered it, under which root, when.
    public struct Binding: Codable, Sendable, Hashable {
        public var party: String
        public var root: RootFingerprint
        public var registeredAt: Date
    }

    /// A certificate this party issued to another in an answer bundle.
    public struct IssuedCertificate: Codable, Sendable, Hashable {
        /// The party it was issued to.
        public var party: String
        /// The requester's file name for it (`merchant-acquiring`, …).
        public var name: String
        /// The identity it was issued for, when it names one.
        public var identity: String?
        /// SHA-256 of the certificate's DER, lowercase hex.
        public var fingerprint: String
        /// The root of the party it was issued to, then.
        public var root: String
        public var issuedAt: Date
        /// Set when that party re-keyed: the certificate is refused from then on.
        public var revokedAt: Date?
    }

    /// A re-key: a known party's root replaced (`orchard pki import --replace`).
    public struct Rekey: Codable, Sendable, Hashable {
        public var party: String
        public var at: Date
        public var oldRoot: String
        public var newRoot: String
        /// `old-root-signature` (the bundle carried the old root's signature of the new one) or `operator` (the
        /// operator gave the old root's fingerprint, `--old-root-fingerprint`).
        public var vouchedBy: String
    }

    public var version = 1
    /// Identities by key (``Identity``): `party:<name>`, `merchant:<ID>`, `terminal:<ID>@<merchant ID>`,
    /// `token-requestor:<ID>`.
    public var identities: [String: Binding] = [:]
    public var issued: [IssuedCertificate] = []
    public var history: [Rekey] = []

    public init() {}

    /// The keys of identities a bundle claims or is assigned.
    public enum Identity {
        public static func party(_ party: DeploymentParty) -> String { "party:\(party.rawValue)" }
        public static func merchant(_ merchantID: String) -> String { "merchant:\(merchantID)" }
        public static func terminal(_ terminalID: String, merchant merchantID: String) -> String {
            "terminal:\(terminalID)@\(merchantID)"
        }
        public static func tokenRequestor(_ requestorID: String) -> String { "token-requestor:\(requestorID)" }
        static let tokenRequestorPrefix = "token-requestor:"
    }

    static func path(in directory: DeploymentDirectory) -> String { "\(directory.path)/\(fileName)" }

    /// The registrations of `directory`: none when it has no `registrations.json`; a file that cannot be read is
    /// refused (an import must not pass for want of its bindings).
    public static func read(from directory: DeploymentDirectory) throws(ServicesError) -> PartyRegistrations {
        let path = path(in: directory)
        guard FileManager.default.fileExists(atPath: path) else { return PartyRegistrations() }
        do {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .iso8601
            let registrations = try decoder.decode(
                PartyRegistrations.self, from: Data(SecureFile.read(path, limit: 16 << 20)))
            guard registrations.version == 1 else {
                throw ServicesError(.invalidConfiguration, "\(path) has version \(registrations.version)")
            }
            return registrations
        } catch let error as ServicesError {
            throw error
        } catch {
            throw ServicesError(.invalidConfiguration, "cannot read \(path)", underlying: error)
        }
    }

    func write(to directory: DeploymentDirectory) throws(ServicesError) {
        let path = Self.path(in: directory)
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            encoder.dateEncodingStrategy = .iso8601
            try SecureFile.write(Array(try encoder.encode(self) + Data("\n".utf8)), to: path, mode: 0o600)
        } catch {
            throw ServicesError(.internalFailure, "cannot write \(path)", underlying: error)
        }
    }

    /// The root `party` registered with: its binding here, else (a directory that imported the party before
    /// bindings were recorded) the root imported as `pki/peers/peer-<party>-root.pem`.
    func root(of party: DeploymentParty, in directory: DeploymentDirectory) -> RootFingerprint? {
        if let binding = identities[Identity.party(party)] { return binding.root }
        let path = "\(directory.pkiFolderPath("peers"))/\(DeploymentDirectory.peerRootName(party.rawValue)).pem"
        // try?: an unreadable imported root binds nothing; the import then stores the bundle's root in its place.
        guard FileManager.default.fileExists(atPath: path),
            let pem = try? SecureFile.read(path, limit: 1 << 20),
            let certificate = try? Certificate(pemEncoded: String(decoding: pem, as: UTF8.self))
        else { return nil }
        return RootFingerprint(certificate)
    }

    /// The claims of `claims` bound to a root other than `root` (each with its binding).
    func conflicts(_ claims: [String], root: RootFingerprint) -> [(String, Binding)] {
        claims.compactMap { claim in
            identities[claim].flatMap { $0.root.certificate == root.certificate ? nil : (claim, $0) }
        }
    }

    /// Binds each of `claims` not yet bound to `party`'s `root`.
    mutating func bind(_ claims: [String], party: DeploymentParty, root: RootFingerprint, at now: Date) {
        for claim in claims where identities[claim] == nil {
            identities[claim] = Binding(party: party.rawValue, root: root, registeredAt: now)
        }
    }

    /// `party`'s re-key from `old` to `new`: every identity bound to `old` moves to `new`, every certificate this
    /// party issued under `old` is revoked, and the history records it.
    mutating func rekey(
        _ party: DeploymentParty, from old: RootFingerprint, to new: RootFingerprint, vouchedBy: String, at now: Date
    ) {
        for (key, binding) in identities where binding.root.certificate == old.certificate {
            identities[key] = Binding(party: binding.party, root: new, registeredAt: binding.registeredAt)
        }
        identities[Identity.party(party)] =
            identities[Identity.party(party)] ?? Binding(party: party.rawValue, root: new, registeredAt: now)
        for index in issued.indices
        where issued[index].party == party.rawValue && issued[index].root == old.certificate
            && issued[index].revokedAt == nil
        {
            issued[index].revokedAt = now
        }
        history.append(
            Rekey(
                party: party.rawValue, at: now, oldRoot: old.certificate, newRoot: new.certificate, vouchedBy: vouchedBy
            ))
    }

    /// The token requestor ID for a Pay side under `root`: the one already assigned to that root, else the first
    /// free one from 40010075001 (the ID a single-directory deployment's Pay server has), in order.
    public func tokenRequestorID(for root: RootFingerprint) -> String {
        let assigned = identities.filter { $0.key.hasPrefix(Identity.tokenRequestorPrefix) }
        if let mine = assigned.filter({ $0.value.root.certificate == root.certificate }).keys.min() {
            return String(mine.dropFirst(Identity.tokenRequestorPrefix.count))
        }
        var candidate: Int64 = 40_010_075_001
        while assigned[Identity.tokenRequestor(String(candidate))] != nil { candidate += 1 }
        return String(candidate)
    }

    /// The token requestor IDs this party (the network) assigned.
    public var tokenRequestorIDs: [String] {
        identities.keys.filter { $0.hasPrefix(Identity.tokenRequestorPrefix) }.map {
            String($0.dropFirst(Identity.tokenRequestorPrefix.count))
        }.sorted()
    }

    /// The fingerprints (SHA-256 of the DER, lowercase hex) of the certificates this party issued and revoked.
    public var revokedCertificates: Set<String> { Set(issued.filter { $0.revokedAt != nil }.map(\.fingerprint)) }
}

/// The client certificates this party issued in its answers and revoked at a re-key (`registrations.json`), as a
/// listener's ``OrchardHTTP/ClientCertificateRevocations``: the file is read again whenever it changes, so an
/// import's revocations hold at once, while the service runs.
public final class RegisteredCertificateRevocations: ClientCertificateRevocations, @unchecked Sendable {
    private let directory: DeploymentDirectory
    // Guarded by `lock`: the file's identity when last read, and its revoked fingerprints.
    private let lock = NSLock()
    private var stamp: [Int] = []
    private var revoked: Set<String> = []

    public init(directory: DeploymentDirectory) { self.directory = directory }

    /// The revocations of `directory` when it holds a party deployed on its own (only such a party imports
    /// bundles and writes `registrations.json`), else nil: a deployment of every party in one directory has
    /// nothing to look up on each request.
    public static func ofParty(
        in directory: DeploymentDirectory
    ) throws(ServicesError)
        -> RegisteredCertificateRevocations?
    {
        try PartyManifest.read(from: directory) == nil ? nil : RegisteredCertificateRevocations(directory: directory)
    }

    public func isRevoked(_ certificate: ClientCertificate) async throws -> Bool {
        let revoked = try current()
        guard !revoked.isEmpty else { return false }
        return revoked.contains(Hex.encode(SHA256.hash(certificate.derRepresentation), lowercase: true))
    }

    private func current() throws(ServicesError) -> Set<String> {
        // One stat per request: the file is read again only when its inode, size or modification time changed (an
        // import replaces it by rename, so a new inode).
        var info = stat()
        let stamp =
            stat(PartyRegistrations.path(in: directory), &info) == 0
            ? [Int(info.st_ino), Int(info.st_size), Int(info.st_mtim.tv_sec), Int(info.st_mtim.tv_nsec)] : [-1]
        if let cached = lock.withLock({ self.stamp == stamp ? revoked : nil }) { return cached }
        let fresh = try PartyRegistrations.read(from: directory).revokedCertificates
        lock.withLock {
            self.stamp = stamp
            revoked = fresh
        }
        return fresh
    }
}

/// Revocations from several sources: a certificate is revoked when any of them says so.
public struct CombinedCertificateRevocations: ClientCertificateRevocations {
    let sources: [any ClientCertificateRevocations]

    public init(_ sources: [any ClientCertificateRevocations]) { self.sources = sources }

    public func isRevoked(_ certificate: ClientCertificate) async throws -> Bool {
        for source in sources where try await source.isRevoked(certificate) { return true }
        return false
    }
}
