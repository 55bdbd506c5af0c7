import Foundation
import OrchardCrypto
import OrchardRuntime
import Testing

@Suite("Deployment directory: layout, modes 0700/0600, atomic files, run records")
struct DeploymentDirectoryTests {
    let root: String
    let directory: DeploymentDirectory

    init() throws {
        root = FileManager.default.temporaryDirectory.path + "/orchard-runtime-tests-\(UUID().uuidString)"
        directory = DeploymentDirectory(path: root + "/deployment")
    }

    func mode(_ path: String) -> UInt16? { SecureFile.mode(of: path) }

    func cleanUp() { try? FileManager.default.removeItem(atPath: root) }

    @Test func layoutPaths() throws {
        defer { cleanUp() }
        let dir = directory.path
        #expect(directory.configurationPath == "\(dir)/config.json")
        #expect(directory.databasePath(for: .pay) == "\(dir)/pay.sqlite")
        #expect(directory.databasePath(for: .network) == "\(dir)/network.sqlite")
        #expect(directory.databasePath(for: .terminal) == "\(dir)/terminal.sqlite")
        #expect(directory.databasePath(for: try .device("alice-phone")) == "\(dir)/device-alice-phone.sqlite")
        #expect(directory.logPath(for: .issuer) == "\(dir)/logs/issuer.log")
        #expect(directory.runRecordPath(for: .merchant) == "\(dir)/run/merchant.json")
        // Each party's files in its own folder.
        #expect(try directory.certificatePath(named: "root-ca") == "\(dir)/pki/root/root-ca.pem")
        #expect(try directory.privateKeyPath(named: "pay-tls") == "\(dir)/pki/pay/pay-tls.key")
        #expect(try directory.privateKeyPath(named: "network-hsm") == "\(dir)/pki/network/network-hsm.key")
        #expect(try directory.privateKeyPath(named: "merchant-ca") == "\(dir)/pki/pay/merchant-ca.key")
        #expect(try directory.privateKeyPath(named: "merchant-identity") == "\(dir)/pki/merchant/merchant-identity.key")
        #expect(
            try directory.privateKeyPath(named: "terminal-t1-client") == "\(dir)/pki/terminal/terminal-t1-client.key")
        #expect(try Party("device-watch").deviceName == "watch")
        #expect(try Party("acquirer") == .acquirer)
        #expect(ServiceName.all.map(\.rawValue).sorted() == ["acquirer", "issuer", "merchant", "network", "pay"])
    }

    @Test func namesThatCouldEscapeAreRejected() {
        for bad in ["", "Alice", "../x", "a/b", "-a", "a-", "caf\u{E9}", String(repeating: "a", count: 33)] {
            #expect(throws: RuntimeError.self, "\(bad)") { try Party.device(bad) }
        }
        for bad in ["bank", "device-", "device-../x", "Pay"] {
            #expect(throws: RuntimeError.self, "\(bad)") { try Party(bad) }
        }
        for bad in ["", "../root", ".hidden", "a/b", "Root", "a b"] {
            #expect(throws: RuntimeError.self, "\(bad)") { try directory.privateKeyPath(named: bad) }
            #expect(throws: RuntimeError.self, "\(bad)") { try directory.certificatePath(named: bad) }
        }
        #expect(throws: RuntimeError.self) { try ServiceName("Pay") }
    }

    @Test func resolvesTheDataDirectory() throws {
        let environment = ["ORCHARD_DATA_DIR": "/srv/orchard", "HOME": "/home/u"]
        #expect(DeploymentDirectory.resolve(dataDir: "/tmp/d", environment: environment).path == "/tmp/d")
        #expect(DeploymentDirectory.resolve(dataDir: nil, environment: environment).path == "/srv/orchard")
        #expect(
            DeploymentDirectory.resolve(dataDir: nil, environment: ["HOME": "/home/u"]).path == "/home/u/.orchard")
        #expect(DeploymentDirectory.resolve(dataDir: nil, environment: [:]).path == NSHomeDirectory() + "/.orchard")
        #expect(DeploymentDirectory.resolve(dataDir: "~/x", environment: [:]).path == NSHomeDirectory() + "/x")
        let relative = DeploymentDirectory.resolve(dataDir: "rel/dir", environment: [:])
        #expect(relative.path == FileManager.default.currentDirectoryPath + "/rel/dir")
    }

    @Test func createMakesOwnerOnlyDirectoriesAndTracksState() throws {
        defer { cleanUp() }
        #expect(try directory.state() == .missing)
        // A directory the user made beforehand with a looser mode is tightened.
        try FileManager.default.createDirectory(atPath: directory.path, withIntermediateDirectories: true)
        chmod(directory.path, 0o755)
        #expect(try directory.state() == .empty)
        #expect(throws: RuntimeError.self) { try directory.checkPermissions() }
        try directory.create()
        for path in [directory.path, directory.pkiPath, directory.logsPath, directory.runPath] {
            #expect(mode(path) == 0o700, "\(path)")
        }
        try directory.checkPermissions()
        #expect(try directory.state() == .occupied)
        try directory.writeConfiguration(Configuration())
        #expect(try directory.state() == .deployment)
        #expect(mode(directory.configurationPath) == 0o600)
        // A file in place of DIR is an error, not a deployment.
        let file = root + "/plain"
        #expect(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
        #expect(throws: RuntimeError.self) { try DeploymentDirectory(path: file).state() }
        #expect(throws: RuntimeError.self) { try DeploymentDirectory(path: file).create() }
    }

    @Test func privateKeysAreWrittenOwnerOnlyAndAtomically() throws {
        defer { cleanUp() }
        try directory.create()
        let first = SecureBytes(Array("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".utf8))
        try directory.writePrivateKey(first, named: "pay-tls")
        let path = try directory.privateKeyPath(named: "pay-tls")
        #expect(mode(path) == 0o600)
        #expect(try directory.readPrivateKey(named: "pay-tls") == first)
        // Replacing keeps the mode and leaves no temporary file behind.
        let second = SecureBytes(Array("-----BEGIN PRIVATE KEY-----\nBBBB\n-----END PRIVATE KEY-----\n".utf8))
        try directory.writePrivateKey(second, named: "pay-tls")
        #expect(try directory.readPrivateKey(named: "pay-tls") == second)
        #expect(mode(path) == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.pkiPath) == ["pay"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.pkiFolderPath("pay")) == ["pay-tls.key"])
        // Certificates are public.
        try directory.writeCertificate("-----BEGIN CERTIFICATE-----\n", named: "pay-tls")
        #expect(mode(try directory.certificatePath(named: "pay-tls")) == 0o644)
        #expect(try directory.readCertificate(named: "pay-tls") == "-----BEGIN CERTIFICATE-----\n")
        try directory.checkPermissions()
    }

    /// The root's certificate is copied into every party's folder, so a party's folder alone
    /// has what its server verifies with; a deployment with the flat `pki/` of before is still read.
    @Test("S3: Public certificates are copied into the folders that need them; the flat layout of before is read")
    func certificatesAreCopiedAndTheFlatLayoutRead() throws {
        defer { cleanUp() }
        try directory.create()
        try directory.writeCertificate("ROOT\n", named: "root-ca")
        for party in ["root", "network", "pay", "merchant", "terminal", "device-ca", "devices"] {
            #expect(FileManager.default.fileExists(atPath: directory.pkiFolderPath(party) + "/root-ca.pem"), "\(party)")
        }
        // Only the network's folder left: the root's certificate is read from it.
        for party in ["root", "pay", "merchant", "terminal", "device-ca", "devices"] {
            try FileManager.default.removeItem(atPath: directory.pkiFolderPath(party))
        }
        #expect(try directory.readCertificate(named: "root-ca") == "ROOT\n")
        #expect(try directory.certificatePath(named: "root-ca") == directory.pkiFolderPath("network") + "/root-ca.pem")
        // A key written before the folders existed.
        try SecureFile.writeSecret(SecureBytes(Array("old".utf8)), to: directory.pkiPath + "/pay-client.key")
        #expect(try directory.readPrivateKey(named: "pay-client") == SecureBytes(Array("old".utf8)))
        try directory.checkPermissions()
        // A key is read from its owner's folder only, never from another party's.
        try SecureFile.writeSecret(
            SecureBytes(Array("misplaced".utf8)), to: directory.pkiFolderPath("network") + "/pay-credential.key")
        #expect(throws: RuntimeError.self) { try directory.readPrivateKey(named: "pay-credential") }
        // A party folder that is a symbolic link is refused.
        try FileManager.default.createSymbolicLink(
            atPath: directory.pkiFolderPath("merchant"), withDestinationPath: directory.pkiFolderPath("network"))
        #expect(throws: RuntimeError.self) { try directory.checkPermissions() }
    }

    @Test func looseOrForeignKeysAreRefused() throws {
        defer { cleanUp() }
        try directory.create()
        try directory.writePrivateKey(SecureBytes(Array("secret".utf8)), named: "k")
        let path = try directory.privateKeyPath(named: "k")
        chmod(path, 0o640)
        do {
            _ = try directory.readPrivateKey(named: "k")
            Issue.record("a 0640 key was read")
        } catch {
            #expect(error.code == .insecurePermissions)
            #expect(error.message.contains("chmod 600"))
        }
        #expect(throws: RuntimeError.self) { try directory.checkPermissions() }
        chmod(path, 0o600)
        try directory.checkPermissions()
        // A symbolic link in place of a key is not followed.
        try FileManager.default.createSymbolicLink(atPath: directory.pkiPath + "/link.key", withDestinationPath: path)
        #expect(throws: RuntimeError.self) { try directory.readPrivateKey(named: "link") }
        do {
            _ = try directory.readPrivateKey(named: "absent")
            Issue.record("a missing key was read")
        } catch {
            #expect(error.code == .notFound)
        }
    }

    @Test func atomicWritesFailCleanly() throws {
        defer { cleanUp() }
        #expect(throws: RuntimeError.self) {
            try SecureFile.write(Array("x".utf8), to: root + "/no/such/dir/file", mode: 0o600)
        }
    }

    @Test func configurationRoundTripsThroughTheDirectory() throws {
        defer { cleanUp() }
        do {
            _ = try directory.loadConfiguration(environment: [:])
            Issue.record("a missing config.json was loaded")
        } catch {
            #expect(error.code == .notFound)
        }
        try directory.create()
        var configuration = Configuration()
        try configuration.set(ServiceSettings.port(.pay), 18441)
        try directory.writeConfiguration(configuration)
        let loaded = try directory.loadConfiguration(environment: ["ORCHARD_NETWORK_PORT": "18442"])
        #expect(loaded[ServiceSettings.port(.pay)] == 18441)
        #expect(loaded[ServiceSettings.port(.network)] == 18442)
        #expect(
            FileManager.default.createFile(
                atPath: directory.configurationPath, contents: Data("{\"pay\": {\"port\": 1e9}}".utf8)))
        do {
            _ = try directory.loadConfiguration(environment: [:])
            Issue.record("an invalid config.json was loaded")
        } catch {
            #expect(error.code == .invalidConfiguration)
        }
    }

    @Test func runRecordsPublishAndExpireWithTheirProcess() throws {
        defer { cleanUp() }
        try directory.create()
        let started = Date(timeIntervalSince1970: 1_750_000_000)
        let record = ServiceRecord(
            service: .pay, host: "127.0.0.1", port: 18441, ports: ["mtls": 18442], startedAt: started)
        try directory.publish(record)
        #expect(mode(directory.runRecordPath(for: .pay)) == 0o600)
        #expect(try directory.runningService(.pay) == record)
        #expect(try directory.runningService(.network) == nil)
        #expect(record.baseURL == "https://127.0.0.1:18441")
        // A record of a process that no longer exists is stale: it is removed, not returned.
        // (Linux pids never reach Int32.max.)
        try directory.publish(ServiceRecord(service: .network, host: "::1", port: 18443, pid: Int32.max))
        #expect(try directory.runningServices().map(\.service) == [.pay])
        #expect(!FileManager.default.fileExists(atPath: directory.runRecordPath(for: .network)))
        // withdraw removes only this process's record.
        try directory.publish(ServiceRecord(service: .merchant, host: "127.0.0.1", port: 18444, pid: 1))
        directory.withdraw(.merchant)
        #expect(FileManager.default.fileExists(atPath: directory.runRecordPath(for: .merchant)))
        directory.withdraw(.pay)
        #expect(try directory.runningService(.pay) == nil)
        // A damaged record is an error, not a crash.
        #expect(
            FileManager.default.createFile(
                atPath: directory.runRecordPath(for: .issuer), contents: Data("{\"pid\":".utf8)))
        #expect(throws: RuntimeError.self) { try directory.runningService(.issuer) }
        #expect(
            FileManager.default.createFile(
                atPath: directory.runRecordPath(for: .acquirer),
                contents: ServiceRecord(service: .pay, host: "127.0.0.1", port: 1).jsonData()
            ))
        #expect(throws: RuntimeError.self) { try directory.runningService(.acquirer) }
    }
}
