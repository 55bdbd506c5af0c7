public import Foundation
public import OrchardCrypto

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The directory DIR that holds one deployment. Later features add files to it but never change this layout:
///
/// ```
/// DIR/                      0700
///   config.json             one section per service (see Configuration)
///   pki/                    0700: one 0700 folder per party (see ``pkiFolder(ofFile:)``), each with the
///     <party>/              certificates NAME.pem (0644) and private keys NAME.key (0600) that party uses: its
///                           own keys, and copies of the public certificates it needs (root-ca.pem…)
///   <party>.sqlite          one database per party: pay, network, issuer, acquirer, merchant,
///                           terminal, device-<name>
///   logs/<party>.log        0700 directory
///   run/<service>.json      0700 directory: the bound address of each running service
/// ```
///
/// The value only computes paths; ``create()`` makes the directories and the `write…`/`read…` methods
/// enforce the modes.
public struct DeploymentDirectory: Sendable, Hashable, CustomStringConvertible {
    /// The absolute path of DIR.
    public let path: String

    /// DIR at `path`, made absolute against the current directory (`~` is expanded).
    public init(path: String) {
        let expanded = (path as NSString).expandingTildeInPath
        let absolute =
            expanded.hasPrefix("/") ? expanded : FileManager.default.currentDirectoryPath + "/" + expanded
        self.path = (absolute as NSString).standardizingPath
    }

    /// The directory a command uses: `--data-dir` when given, else `$ORCHARD_DATA_DIR`, else `~/.orchard`
    /// (`$HOME`, or the user's home directory from the password database when `HOME` is unset), the same
    /// rule as `CommandContext.dataDirectory`.
    public static func resolve(
        dataDir: String?, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> DeploymentDirectory {
        if let dataDir, !dataDir.isEmpty { return DeploymentDirectory(path: dataDir) }
        if let fromEnvironment = environment["ORCHARD_DATA_DIR"], !fromEnvironment.isEmpty {
            return DeploymentDirectory(path: fromEnvironment)
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return DeploymentDirectory(path: home + "/.orchard")
    }

    public var description: String { path }

    // MARK: Layout

    /// `DIR/config.json`.
    public var configurationPath: String { path + "/config.json" }
    /// `DIR/pki`.
    public var pkiPath: String { path + "/pki" }
    /// `DIR/logs`.
    public var logsPath: String { path + "/logs" }
    /// `DIR/run`.
    public var runPath: String { path + "/run" }

    /// `DIR/<party>.sqlite`.
    public func databasePath(for party: Party) -> String { "\(path)/\(party.rawValue).sqlite" }
    /// `DIR/logs/<party>.log`.
    public func logPath(for party: Party) -> String { "\(logsPath)/\(party.rawValue).log" }
    /// `DIR/run/<service>.json`.
    public func runRecordPath(for service: ServiceName) -> String { "\(runPath)/\(service.rawValue).json" }

    /// `DIR/pki/<party>`: one party's key folder.
    public func pkiFolderPath(_ party: String) -> String { "\(pkiPath)/\(party)" }

    /// The party whose folder holds the private key `name` (and the original of its certificate): `root` (the
    /// Orchard root CA, needed only by `init` and `terminal setup`), `device-ca` (the manufacturer's device CA),
    /// `network` (TLS, HSM master key, the token service's certificates), `pay` (TLS, client, merchant CA, token
    /// signing chain), `merchant` (TLS, identity, processing, acquiring), `terminal` (terminal identities),
    /// `devices`, `peers` (the roots of other parties a party deployed on its own imported, `peer-<party>-root`),
    /// else `shared`. A party's server reads nothing outside its folder, so a host can hold one
    /// party's folder alone.
    public static func pkiFolder(ofFile name: String) -> String {
        switch name {
        case "root-ca": return "root"
        case "device-ca": return "device-ca"
        default: break
        }
        let prefixes = [
            ("merchant-ca", "pay"), ("token-service-", "network"), ("token-", "pay"), ("network-", "network"),
            ("pay-", "pay"), ("merchant-", "merchant"), ("terminal-", "terminal"), ("device-", "devices"),
            ("peer-", "peers"),
        ]
        return prefixes.first { name.hasPrefix($0.0) }?.1 ?? "shared"
    }

    /// The other folders a public certificate is copied into when it is written: the parties that verify with it.
    static func pkiCopies(ofCertificate name: String) -> [String] {
        switch name {
        case "root-ca": ["network", "pay", "merchant", "terminal", "device-ca", "devices"]
        case "device-ca": ["network", "pay", "devices"]
        case "token-root": ["merchant"]
        // The device factory pins the token service's install-signing key in every Secure Element it makes.
        case "token-service-personalisation": ["device-ca", "devices"]
        default: []
        }
    }

    /// The path of `name` plus `suffix` to read: its owner's folder, else (a public certificate only,
    /// `copies`) any other party's folder holding a copy, else `DIR/pki/` itself (the flat layout of deployments
    /// made before the folders), else the owner's path. A key is never taken from another party's folder.
    func pkiReadPath(_ name: String, _ suffix: String, copies: Bool = false) throws(RuntimeError) -> String {
        let stem = try Self.fileStem(name)
        let owner = "\(pkiFolderPath(Self.pkiFolder(ofFile: stem)))/\(stem)\(suffix)"
        if FileManager.default.fileExists(atPath: owner) { return owner }
        let folders = copies ? ((try? FileManager.default.contentsOfDirectory(atPath: pkiPath)) ?? []).sorted() : []
        for folder in folders where !folder.hasPrefix(".") {
            let candidate = "\(pkiFolderPath(folder))/\(stem)\(suffix)"
            if FileManager.default.fileExists(atPath: candidate) { return candidate }
        }
        let flat = "\(pkiPath)/\(stem)\(suffix)"
        return FileManager.default.fileExists(atPath: flat) ? flat : owner
    }

    /// The path of the PKI file `name` (for example `network-hsm-keys.json`) in its owner's folder, or where an
    /// existing deployment keeps it (see ``certificatePath(named:)``).
    public func pkiFilePath(named name: String) throws(RuntimeError) -> String { try pkiReadPath(name, "") }

    /// `DIR/pki/<party>/<name>.pem` for the folder that holds it (its owner's, else a copy; see
    /// ``pkiFolder(ofFile:)``). Names are lowercase letters, digits, `.`, `_` and `-`, not starting with `.`.
    public func certificatePath(named name: String) throws(RuntimeError) -> String {
        try pkiReadPath(name, ".pem", copies: true)
    }

    /// `DIR/pki/<party>/<name>.key` in its owner's folder; names as for ``certificatePath(named:)``.
    public func privateKeyPath(named name: String) throws(RuntimeError) -> String { try pkiReadPath(name, ".key") }

    /// Where a write of `name` plus `suffix` goes: the owner's folder, created 0700.
    func pkiWritePath(_ name: String, _ suffix: String, folder: String? = nil) throws(RuntimeError) -> String {
        let stem = try Self.fileStem(name)
        let target = pkiFolderPath(folder ?? Self.pkiFolder(ofFile: stem))
        try SecureFile.createDirectory(pkiPath, mode: 0o700)
        try SecureFile.createDirectory(target, mode: 0o700)
        return "\(target)/\(stem)\(suffix)"
    }

    private static func fileStem(_ name: String) throws(RuntimeError) -> String {
        let bytes = Array(name.utf8)
        let allowed = bytes.allSatisfy {
            (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || [0x2E, 0x5F, 0x2D].contains($0)
        }
        guard allowed, (1...96).contains(bytes.count), bytes.first != 0x2E else {
            throw RuntimeError(
                .invalidName, "\"\(name)\" is not a PKI file name (lowercase letters, digits, '.', '_', '-')"
            )
        }
        return name
    }

    // MARK: State

    /// What DIR holds, for `orchard init` and the commands that need a deployment.
    public enum State: Sendable, Hashable {
        /// DIR does not exist.
        case missing
        /// DIR is an empty directory.
        case empty
        /// DIR holds a deployment (its `config.json` exists).
        case deployment
        /// DIR holds other files, but no `config.json`.
        case occupied
    }

    /// Inspects DIR without changing it.
    public func state() throws(RuntimeError) -> State {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            if errno == ENOENT { return .missing }
            throw SecureFile.ioError("cannot inspect \(path)")
        }
        guard (info.st_mode & S_IFMT) == S_IFDIR else { throw RuntimeError(.io, "\(path) is not a directory") }
        if FileManager.default.fileExists(atPath: configurationPath) { return .deployment }
        let entries: [String]
        do {
            entries = try FileManager.default.contentsOfDirectory(atPath: path)
        } catch {
            throw RuntimeError(.io, "cannot list \(path): \(error.localizedDescription)")
        }
        return entries.isEmpty ? .empty : .occupied
    }

    /// Creates DIR, `pki/`, `logs/` and `run/` with mode 0700 (and tightens them to 0700 if they exist).
    public func create() throws(RuntimeError) {
        for directory in [path, pkiPath, logsPath, runPath] {
            try SecureFile.createDirectory(directory, mode: 0o700)
        }
    }

    /// Throws ``RuntimeError/Code/insecurePermissions`` unless DIR, `pki/` (and each `pki/<party>/`), `logs/` and
    /// `run/` belong to this user with mode 0700 and every key has mode 0600. Commands check this before they read
    /// a key, so a deployment copied carelessly is refused instead of used. Missing `logs/` and `run/` (which hold
    /// no secret: a host given one party's folder alone) are created 0700.
    public func checkPermissions() throws(RuntimeError) {
        for scratch in [logsPath, runPath] where !FileManager.default.fileExists(atPath: scratch) {
            try SecureFile.createDirectory(scratch, mode: 0o700)
        }
        for directory in [path, pkiPath, logsPath, runPath] {
            var info = stat()
            guard lstat(directory, &info) == 0 else {
                if errno == ENOENT { throw RuntimeError(.notFound, "\(directory) does not exist") }
                throw SecureFile.ioError("cannot inspect \(directory)")
            }
            try SecureFile.requirePrivate(directory, info, allowed: 0o700)
        }
        let entries = ((try? FileManager.default.contentsOfDirectory(atPath: pkiPath)) ?? []).sorted()
        for entry in entries {
            let entryPath = "\(pkiPath)/\(entry)"
            var info = stat()
            guard lstat(entryPath, &info) == 0 else { continue }
            if (info.st_mode & S_IFMT) == S_IFDIR {
                try SecureFile.requirePrivate(entryPath, info, allowed: 0o700)
                let files = ((try? FileManager.default.contentsOfDirectory(atPath: entryPath)) ?? []).sorted()
                for name in files {
                    guard lstat("\(entryPath)/\(name)", &info) == 0 else { continue }
                    if (info.st_mode & S_IFMT) == S_IFLNK {
                        throw RuntimeError(.insecurePermissions, "\(entryPath)/\(name) is a symbolic link")
                    }
                    guard !name.hasSuffix(".pem") else { continue }
                    try SecureFile.requirePrivate("\(entryPath)/\(name)", info, allowed: 0o600)
                }
            } else if (info.st_mode & S_IFMT) == S_IFLNK {
                throw RuntimeError(.insecurePermissions, "\(entryPath) is a symbolic link")
            } else if entry.hasSuffix(".key") {
                try SecureFile.requirePrivate(entryPath, info, allowed: 0o600)
            }
        }
    }

    // MARK: PKI files

    /// Writes `pki/<party>/<name>.key` (its owner's folder) with mode 0600, atomically.
    public func writePrivateKey(_ pem: SecureBytes, named name: String) throws(RuntimeError) {
        try SecureFile.writeSecret(pem, to: try pkiWritePath(name, ".key"))
    }

    /// Reads `pki/<name>.key`, refusing it when its mode is wider than 0600.
    public func readPrivateKey(named name: String) throws(RuntimeError) -> SecureBytes {
        try SecureFile.readSecret(try privateKeyPath(named: name))
    }

    /// Writes `pki/<party>/<name>.pem` (a certificate: public) with mode 0644, atomically, in its owner's folder
    /// and in the folders of the parties that verify with it (the root's certificate in every party's folder).
    public func writeCertificate(_ pem: String, named name: String) throws(RuntimeError) {
        try SecureFile.write(Array(pem.utf8), to: try pkiWritePath(name, ".pem"), mode: 0o644)
        for folder in Self.pkiCopies(ofCertificate: name) {
            try SecureFile.write(Array(pem.utf8), to: try pkiWritePath(name, ".pem", folder: folder), mode: 0o644)
        }
    }

    /// Writes the secret PKI file `name` (for example `network-hsm-keys.json`) in its owner's folder, mode 0600.
    public func writePKIFile(_ bytes: SecureBytes, named name: String) throws(RuntimeError) {
        try SecureFile.writeSecret(bytes, to: try pkiWritePath(name, ""))
    }

    /// Reads `pki/<name>.pem`.
    public func readCertificate(named name: String) throws(RuntimeError) -> String {
        String(decoding: try SecureFile.read(try certificatePath(named: name)), as: UTF8.self)
    }

    /// `peer-<party>-root`: the name under which a party deployed on its own keeps another party's root CA
    /// certificate, imported from that party's bundle (`orchard pki import`), in `pki/peers/`.
    public static func peerRootName(_ party: String) -> String { "peer-\(party)-root" }

    /// The roots a client of this deployment trusts: `pki/root/root-ca.pem` first, then every other party's root
    /// imported into `pki/peers/` (none in a single-directory deployment), as one PEM text.
    public func trustedRootsPEM() throws(RuntimeError) -> String {
        var pem = try readCertificate(named: "root-ca")
        let folder = pkiFolderPath("peers")
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).sorted()
        for name in names where name.hasPrefix("peer-") && name.hasSuffix("-root.pem") {
            if !pem.hasSuffix("\n") { pem += "\n" }
            pem += String(decoding: try SecureFile.read("\(folder)/\(name)"), as: UTF8.self)
        }
        return pem
    }

    /// The root CA certificate of `party` as this deployment knows it: the imported `peer-<party>-root` when
    /// there is one (a party deployed on its own), else the deployment's own `root-ca` (one directory holds every
    /// party, under one root).
    public func rootCertificate(ofParty party: String) throws(RuntimeError) -> String {
        let peer = "\(pkiFolderPath("peers"))/\(Self.peerRootName(party)).pem"
        if FileManager.default.fileExists(atPath: peer) {
            return String(decoding: try SecureFile.read(peer), as: UTF8.self)
        }
        return try readCertificate(named: "root-ca")
    }

    // MARK: Configuration

    /// Loads `config.json` with `schema` and the `ORCHARD_<SERVICE>_<KEY>` overrides of `environment`.
    public func loadConfiguration(
        schema: ConfigurationSchema = .standard, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(RuntimeError) -> Configuration {
        try Configuration.load(from: configurationPath, schema: schema, environment: environment)
    }

    /// Writes `configuration` to `config.json` (mode 0600, atomically).
    public func writeConfiguration(_ configuration: Configuration) throws(RuntimeError) {
        try configuration.write(to: configurationPath)
    }

    // MARK: Run records

    /// Publishes `record` as `run/<service>.json` (atomically, so readers never see half a record).
    public func publish(_ record: ServiceRecord) throws(RuntimeError) {
        try SecureFile.write(record.jsonData(), to: runRecordPath(for: record.service), mode: 0o600)
    }

    /// Removes `run/<service>.json` if it belongs to `pid` (a newer process's record is left alone).
    public func withdraw(_ service: ServiceName, pid: Int32 = getpid()) {
        let path = runRecordPath(for: service)
        guard let record = try? ServiceRecord(json: Data(SecureFile.read(path))), record.pid == pid else { return }
        unlink(path)
    }

    /// The record of `service` when its process is alive; a record left by a dead process is removed.
    public func runningService(_ service: ServiceName) throws(RuntimeError) -> ServiceRecord? {
        let path = runRecordPath(for: service)
        let bytes: [UInt8]
        do throws(RuntimeError) {
            bytes = try SecureFile.read(path, limit: 64 << 10)
        } catch  where error.code == .notFound {
            return nil
        }
        let record = try ServiceRecord(json: Data(bytes))
        guard record.service == service else {
            throw RuntimeError(.io, "\(path) describes service \(record.service), not \(service)")
        }
        guard record.isAlive else {
            unlink(path)
            return nil
        }
        return record
    }

    /// The services with a live run record, by name.
    public func runningServices() throws(RuntimeError) -> [ServiceRecord] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: runPath)) ?? []
        var records: [ServiceRecord] = []
        for name in names.sorted() where name.hasSuffix(".json") && !name.hasPrefix(".") {
            guard let service = try? ServiceName(String(name.dropLast(".json".count))) else { continue }
            if let record = try runningService(service) { records.append(record) }
        }
        return records
    }
}

/// `run/<service>.json`: where a running service listens, so other commands can use it instead of starting
/// their own.
public struct ServiceRecord: Sendable, Hashable, Codable {
    /// The record's format version.
    public static let formatVersion = 1

    public var version: Int
    public var service: ServiceName
    /// The process serving it (`orchard serve` or `orchard up`).
    public var pid: Int32
    /// The address it bound (127.0.0.1 unless configured).
    public var host: String
    /// The main HTTPS port (routes without a client certificate, `/health`).
    public var port: Int
    /// Further named ports, such as one that requires a client certificate.
    public var ports: [String: Int]
    /// When the service started listening.
    public var startedAt: Date

    public init(
        service: ServiceName, host: String, port: Int, ports: [String: Int] = [:], pid: Int32 = getpid(),
        startedAt: Date = Date()
    ) {
        version = Self.formatVersion
        self.service = service
        self.pid = pid
        self.host = host
        self.port = port
        self.ports = ports
        self.startedAt = startedAt
    }

    /// `https://host:port` for the main port (IPv6 hosts in brackets).
    public var baseURL: String {
        host.contains(":") ? "https://[\(host)]:\(port)" : "https://\(host):\(port)"
    }

    /// Whether the process still exists (signal 0 probes without sending anything).
    public var isAlive: Bool { kill(pid, 0) == 0 || errno == EPERM }

    /// Parses a record, with typed errors for anything malformed.
    public init(json: Data) throws(RuntimeError) {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        do {
            self = try decoder.decode(ServiceRecord.self, from: json)
        } catch {
            throw RuntimeError(.io, "a run record is not valid: \(error)")
        }
        guard version == Self.formatVersion, pid > 0, (1...65535).contains(port) else {
            throw RuntimeError(.io, "a run record has an unknown version, a bad pid or a bad port")
        }
    }

    /// The record as JSON, keys sorted.
    public func jsonData() -> Data {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        // A struct of strings and numbers always encodes.
        return (try? encoder.encode(self)) ?? Data()
    }
}
