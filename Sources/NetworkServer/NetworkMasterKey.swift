import Foundation
public import OrchardCrypto
public import OrchardRuntime
import OrchardServices

#if canImport(Glibc)
    import Glibc
#endif

/// The software HSM's local master key at rest, in one of two layouts (docs/deployment.md):
///
/// - development: `pki/network/network-hsm.key`, 32 raw bytes, mode 0600, as `orchard init` writes it;
/// - production: `pki/network/network-hsm.wrapped`, the same key sealed under a key-encryption key (KEK) kept
///   outside DIR (another disk, a mounted secret), named by `network.kekFile` or `ORCHARD_NETWORK_KEK_FILE`.
///   A copy of DIR alone, backups included, then holds no key that opens the vault.
///
/// The issuer's storage key (`network-issuer-vault`) is wrapped with it, so a copy of DIR opens neither the vault
/// nor the issuer's card records.
///
/// Wrapped format (version 1): `01 ‖ IV (12) ‖ AES-256-GCM(KEK, key) (32) ‖ tag (16)`, the AAD the version byte and
/// `orchard/<file name>/v1`. The KEK file holds 32 raw bytes, mode 0600, outside DIR.
public enum NetworkMasterKey {
    /// `pki/network/network-hsm.wrapped`.
    public static let wrappedFile = NetworkServerService.Files.localMasterKey + ".wrapped"
    /// `network.kekFile`: the absolute path of the key-encryption key file, outside DIR; empty (the default) for
    /// the development layout. `ORCHARD_NETWORK_KEK_FILE` overrides it.
    public static let kekFile = ConfigurationKey<String>.string("network", "kekFile", default: "") { value in
        value.isEmpty || value.hasPrefix("/") ? nil : "\"\(value)\" is not an absolute path"
    }

    static let version: UInt8 = 1

    /// The network's secrets the KEK wraps: the HSM master key and the issuer's storage key (each `NAME.key` in
    /// clear, `NAME.wrapped` under the KEK; the AAD names the file, so one cannot stand in for the other).
    static let wrappedSecrets = [NetworkServerService.Files.localMasterKey, IssuerStorageKey.fileName]

    /// The master key of `directory`: the plain file, or the wrapped one opened with the KEK at `kekPath`.
    /// Refuses a wrapped key without a KEK, a KEK inside DIR, a KEK that does not open it, and a KEK configured
    /// for a key that is not wrapped (the production layout expected, the development one found).
    public static func load(from directory: DeploymentDirectory, kekPath: String) throws -> SecureBytes {
        guard let key = try loadSecret(NetworkServerService.Files.localMasterKey, from: directory, kekPath: kekPath)
        else {
            throw ServicesError(
                .pkiFailure,
                "\(directory) has no HSM master key (pki/network/\(NetworkServerService.Files.localMasterKey).key or "
                    + ".wrapped)")
        }
        return key
    }

    /// The secret `name` (one of ``wrappedSecrets``): `pki/network/NAME.key`, or `NAME.wrapped` opened with the
    /// KEK at `kekPath`; nil when neither exists. Refuses as ``load(from:kekPath:)`` does.
    static func loadSecret(_ name: String, from directory: DeploymentDirectory, kekPath: String) throws -> SecureBytes?
    {
        let wrappedPath = try directory.pkiFilePath(named: name + ".wrapped")
        let plainPath = try directory.privateKeyPath(named: name)
        let isWrapped = FileManager.default.fileExists(atPath: wrappedPath)
        let isPlain = FileManager.default.fileExists(atPath: plainPath)
        if isWrapped && isPlain {
            throw ServicesError(
                .pkiFailure,
                "DIR holds \(name) both wrapped and in clear; remove \(plainPath) once the wrapped key works")
        }
        guard isWrapped else {
            guard isPlain else { return nil }
            guard kekPath.isEmpty else {
                throw ServicesError(
                    .pkiFailure,
                    "network.kekFile (ORCHARD_NETWORK_KEK_FILE) is set, but \(plainPath) is not wrapped: run "
                        + "`orchard network wrap-hsm-key --kek-file FILE` first")
            }
            let key = try directory.readPrivateKey(named: name)
            guard key.count == 32 else { throw ServicesError(.pkiFailure, "\(plainPath) is not 32 bytes") }
            return key
        }
        guard !kekPath.isEmpty else {
            throw ServicesError(
                .pkiFailure,
                "\(wrappedPath) is wrapped under a key-encryption key: set ORCHARD_NETWORK_KEK_FILE "
                    + "(or network.kekFile in config.json) to the KEK's file, kept outside DIR")
        }
        let kek = try readKEK(kekPath, outside: directory)
        let sealed = try SecureFile.read(wrappedPath, limit: 4096)
        guard sealed.count == 1 + 12 + 32 + 16, sealed[0] == version else {
            throw ServicesError(.pkiFailure, "\(wrappedPath) is not a version-1 wrapped key")
        }
        do {
            let plain = try AES.GCM.open(
                try AES.GCM.SealedBox(combined: sealed[13...]), using: kek, iv: sealed[1..<13],
                authenticating: associatedData(name))
            return SecureBytes(plain)
        } catch {
            throw ServicesError(.pkiFailure, "the key-encryption key \(kekPath) does not open \(wrappedPath)")
        }
    }

    /// The version byte and `orchard/<name>/v1`.
    static func associatedData(_ name: String) -> [UInt8] { [version] + Array("orchard/\(name)/v1".utf8) }

    /// Wraps the development layout's network secrets (the HSM master key, the issuer's storage key) under the KEK
    /// at `kekPath` (outside DIR): writes each `NAME.wrapped` (0600), then removes each `NAME.key`. Returns the
    /// wrapped files' paths.
    @discardableResult
    public static func wrap(
        in directory: DeploymentDirectory, kekPath: String, random: any RandomSource
    ) throws -> [String] {
        let kek = try readKEK(kekPath, outside: directory)
        let masterPath = try directory.privateKeyPath(named: NetworkServerService.Files.localMasterKey)
        guard FileManager.default.fileExists(atPath: masterPath) else {
            throw ServicesError(.pkiFailure, "\(directory) has no HSM master key in clear to wrap (\(masterPath))")
        }
        var sealed: [(name: String, plainPath: String, bytes: SecureBytes)] = []
        for name in wrappedSecrets {
            let plainPath = try directory.privateKeyPath(named: name)
            guard FileManager.default.fileExists(atPath: plainPath) else { continue }
            let key = try directory.readPrivateKey(named: name)
            guard key.count == 32 else { throw ServicesError(.pkiFailure, "\(plainPath) is not 32 bytes") }
            let iv = random.bytes(12)
            let box = try key.withUnsafeBytes { bytes in
                try AES.GCM.seal(Array(bytes), using: kek, iv: iv, authenticating: associatedData(name))
            }
            sealed.append((name, plainPath, SecureBytes([version] + iv + box.combined)))
        }
        // Every wrapped file is written before any clear one is removed.
        for secret in sealed { try directory.writePKIFile(secret.bytes, named: secret.name + ".wrapped") }
        var paths: [String] = []
        for secret in sealed {
            guard unlink(secret.plainPath) == 0 else {
                throw ServicesError(
                    .pkiFailure, "wrote \(secret.name).wrapped but cannot remove \(secret.plainPath); remove it by hand"
                )
            }
            paths.append(try directory.pkiFilePath(named: secret.name + ".wrapped"))
        }
        return paths
    }

    /// The KEK at `path`: 32 raw bytes in a file owned by this user, mode 0600, outside DIR.
    static func readKEK(_ path: String, outside directory: DeploymentDirectory) throws -> SymmetricKey {
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        let base = URL(fileURLWithPath: directory.path).resolvingSymlinksInPath().path
        guard resolved != base, !resolved.hasPrefix(base + "/") else {
            throw ServicesError(
                .pkiFailure,
                "the key-encryption key \(path) lies inside DIR; keep it outside the data directory (another disk, a "
                    + "mounted secret), or a copy of DIR holds everything")
        }
        let bytes: SecureBytes
        do {
            bytes = try SecureFile.readSecret(resolved)
        } catch {
            throw ServicesError(.pkiFailure, "cannot read the key-encryption key \(path)", underlying: error)
        }
        guard bytes.count == 32 else {
            throw ServicesError(.pkiFailure, "the key-encryption key \(path) is not 32 bytes (head -c 32 /dev/urandom)")
        }
        return SymmetricKey(bytes)
    }
}
