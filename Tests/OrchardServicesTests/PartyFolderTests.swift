import CommandTestSupport
import Foundation
import Issuer
import NetworkServer
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardStore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Each party's keys in its own folder, a server that needs only its folder, and the HSM
/// master key wrapped under a key-encryption key kept outside DIR.
@Suite("Keys apart at rest: pki/<party>/, serve from one folder, the wrapped HSM master key", .serialized)
struct PartyFolderTests {
    /// Each server party's databases (besides its pki folder and config.json).
    static let ownFiles = [
        "network": ["network.sqlite", "issuer.sqlite", "acquirer.sqlite"], "pay": ["pay.sqlite"],
        "merchant": ["merchant.sqlite"],
    ]

    let temporary: TemporaryDirectory
    let directory: DeploymentDirectory
    init() throws {
        temporary = try TemporaryDirectory()
        directory = DeploymentDirectory(path: temporary.child("deployment"))
    }

    /// Copies `from` to `to` keeping the mode.
    func copy(_ from: String, _ to: String) throws {
        try FileManager.default.copyItem(atPath: from, toPath: to)
    }

    @Test("S3: init gives each party its own key folder: no key in two folders, none in another party's")
    func initGivesEachPartyItsOwnFolder() async throws {
        let initialised = try await runOrchard(["init", "--data-dir", directory.path])
        try #require(initialised.status == 0, "\(initialised.stderr)")
        let folders = try FileManager.default.contentsOfDirectory(atPath: directory.pkiPath).sorted()
        #expect(Set(["root", "device-ca", "network", "pay", "merchant"]).isSubset(of: Set(folders)), "\(folders)")
        var owners: [String: String] = [:]
        for folder in folders {
            for name in try FileManager.default.contentsOfDirectory(atPath: directory.pkiFolderPath(folder))
            where !name.hasSuffix(".pem") {
                #expect(owners[name] == nil, "\(name) in \(folder) and \(owners[name] ?? "")")
                owners[name] = folder
                #expect(DeploymentDirectory.pkiFolder(ofFile: String(name.split(separator: ".")[0])) == folder)
            }
        }
        #expect(owners["root-ca.key"] == "root" && owners["device-ca.key"] == "device-ca")
        #expect(owners["network-hsm.key"] == "network" && owners["network-issuer-vault.key"] == "network")
        #expect(owners["merchant-ca.key"] == "pay" && owners["token-signing.key"] == "pay")
        #expect(owners["merchant-identity.key"] == "merchant" && owners["merchant-processing.key"] == "merchant")
        // The network's folder holds the root's certificate, not the root's key nor another server's key.
        let network = try FileManager.default.contentsOfDirectory(atPath: directory.pkiFolderPath("network"))
        #expect(network.contains("root-ca.pem") && network.contains("device-ca.pem"))
        #expect(!network.contains { $0.hasPrefix("pay-") || $0.hasPrefix("merchant-") || $0.hasPrefix("root-ca.k") })
    }

    @Test("S3: serve <party> works from a fresh data directory holding only config.json, its folder and its files")
    func eachServerPartyServesFromItsOwnFolderAlone() async throws {
        let initialised = try await runOrchard(["init", "--data-dir", directory.path])
        try #require(initialised.status == 0, "\(initialised.stderr)")
        let root = try directory.readCertificate(named: "root-ca")
        for (party, files) in Self.ownFiles.sorted(by: { $0.key < $1.key }) {
            let alone = DeploymentDirectory(path: temporary.child("alone-\(party)"))
            try SecureFile.createDirectory(alone.path, mode: 0o700)
            try SecureFile.createDirectory(alone.pkiPath, mode: 0o700)
            try copy(directory.configurationPath, alone.configurationPath)
            try copy(directory.pkiFolderPath(party), alone.pkiFolderPath(party))
            for file in files { try copy(directory.path + "/" + file, alone.path + "/" + file) }
            #expect(try FileManager.default.contentsOfDirectory(atPath: alone.pkiPath) == [party])

            let served = try OrchardChild(["serve", party, "--data-dir", alone.path])
            let line: String
            do {
                line = try await served.firstLine()
            } catch {
                Issue.record("serve \(party) from its folder alone: \(error)")
                continue
            }
            let record = try ServiceRecord(json: Data(line.utf8))
            let http = try client(trusting: root)
            #expect(try await http.get("https://127.0.0.1:\(record.port)/health").status == .ok, "\(party)")
            http.shutdown()
            served.send(SIGTERM)
            #expect(try await served.exitStatus() == 0, "\(party): \(served.standardError)")
        }
    }

    @Test("S4: The network serves with its HSM master key wrapped under a KEK outside DIR, and refuses without it")
    func theNetworkServesWithTheWrappedKeyAndRefusesWithoutTheKEK() async throws {
        let initialised = try await runOrchard(["init", "--data-dir", directory.path])
        try #require(initialised.status == 0, "\(initialised.stderr)")
        let kek = temporary.child("network.kek")
        try SecureFile.writeSecret(SecureBytes(randomCount: 32, using: SystemRandom()), to: kek)
        // A KEK inside DIR is refused: a copy of DIR would hold everything.
        let inside = directory.path + "/network.kek"
        try SecureFile.writeSecret(SecureBytes(randomCount: 32, using: SystemRandom()), to: inside)
        let refusedInside = try await runOrchard(
            ["network", "wrap-hsm-key", "--data-dir", directory.path, "--kek-file", inside])
        #expect(refusedInside.status == 1 && refusedInside.stderr.contains("outside"), "\(refusedInside.stderr)")
        unlink(inside)

        let wrapped = try await runOrchard(["network", "wrap-hsm-key", "--data-dir", directory.path, "--kek-file", kek])
        #expect(wrapped.status == 0, "\(wrapped.stderr)")
        let folder = try FileManager.default.contentsOfDirectory(atPath: directory.pkiFolderPath("network"))
        // The HSM master key and the issuer's storage key: wrapped, neither left in clear.
        for name in ["network-hsm", "network-issuer-vault"] {
            #expect(folder.contains(name + ".wrapped") && !folder.contains(name + ".key"), "\(folder)")
            #expect(SecureFile.mode(of: directory.pkiFolderPath("network") + "/\(name).wrapped") == 0o600)
        }

        // Without the KEK: one clear error line, nothing served.
        let without = try await runOrchard(["serve", "network", "--data-dir", directory.path])
        #expect(without.status == 1 && without.stderr.contains("ORCHARD_NETWORK_KEK_FILE"), "\(without.stderr)")
        #expect(try directory.runningService(.network) == nil)
        // Another KEK: refused too.
        let other = temporary.child("other.kek")
        try SecureFile.writeSecret(SecureBytes(randomCount: 32, using: SystemRandom()), to: other)
        let wrong = try await runOrchard(
            ["serve", "network", "--data-dir", directory.path], environment: ["ORCHARD_NETWORK_KEK_FILE": other])
        #expect(wrong.status == 1 && wrong.stderr.contains("does not open"), "\(wrong.stderr)")

        // With it: the network serves.
        let network = try OrchardChild(
            ["serve", "network", "--data-dir", directory.path], environment: ["ORCHARD_NETWORK_KEK_FILE": kek])
        let record = try ServiceRecord(json: Data(try await network.firstLine().utf8))
        let http = try client(trusting: try directory.readCertificate(named: "root-ca"))
        #expect(try await http.get("https://127.0.0.1:\(record.port)/health").status == .ok)
        http.shutdown()
        network.send(SIGTERM)
        #expect(try await network.exitStatus() == 0)
        // The issuer's cards open with the KEK, and not without it.
        let issuer = try await SQLiteIssuerStore.open(in: directory, kekPath: kek)
        #expect(try await issuer.allCards().count == TestCards.cards.count)
        await issuer.store.close()
        await #expect(throws: ServicesError.self) { try await SQLiteIssuerStore.open(in: directory) }
    }
}
