import Foundation
import MerchantServer
import OrchardCrypto
import OrchardHTTP
import OrchardLogging
import OrchardRuntime
import OrchardServices
import OrchardStore
import OrchardX509
import PayServer
import Testing

/// What a bundle can and cannot claim at import (docs/security.md, "Onboarding: what a bundle can and cannot
/// claim"): identities bound to the root that registered them, re-keys vouched for by the old root or the operator,
/// token requestor IDs the network assigns, host names the bundle proves, and clients pinned to their peer's root.
extension PartyBundleTests {
    static let merchantID = "merchant.dev.orchard.demo"

    static func bundle(
        of directory: DeploymentDirectory, _ party: DeploymentParty, signedByOldRoot: DeploymentDirectory? = nil
    ) throws -> Data {
        try PartyBundles.export(
            directory, registry: try PartyDirectories.registry(party), signedByOldRoot: signedByOldRoot
        ).jsonData()
    }

    static func initialize(_ party: DeploymentParty, at path: String) async throws -> DeploymentDirectory {
        let directory = DeploymentDirectory(path: path)
        _ = try await DeploymentInitializer.initialize(
            directory, registry: try PartyDirectories.registry(party), options: .init(party: party))
        return directory
    }

    /// Imports `data` into `party`, expecting `invalidBundle` with `message` in its text, and that nothing under the
    /// party's directory changed and no answer bundle was written.
    static func expectRefused(
        _ data: Data, into party: DeploymentParty, of parties: PartyDirectories,
        replace: PartyBundles.Replacement? = nil, saying message: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        let before = snapshot(parties.directory(party).path)
        let answer = parties.temporary.child("refused-answer.json")
        do {
            try await parties.importBundle(data, into: party, answer: answer, replace: replace)
            Issue.record("imported, expected a refusal saying \"\(message)\"", sourceLocation: sourceLocation)
        } catch let error as ServicesError {
            #expect(error.code == .invalidBundle, "\(error)", sourceLocation: sourceLocation)
            #expect(error.message.contains(message), "\(error.message)", sourceLocation: sourceLocation)
        } catch {
            Issue.record("unexpected \(error)", sourceLocation: sourceLocation)
        }
        let after = snapshot(parties.directory(party).path)
        let changed = Set(before.keys).union(after.keys).filter { before[$0] != after[$0] }.sorted()
        #expect(changed.isEmpty, "written: \(changed)", sourceLocation: sourceLocation)
        #expect(!FileManager.default.fileExists(atPath: answer), sourceLocation: sourceLocation)
    }

    static func leafFingerprints(_ answer: String, named prefix: String) throws -> [String] {
        let bundle = try PartyBundle.parse(Data(contentsOf: URL(fileURLWithPath: answer)))
        return try bundle.issued.filter { $0.name.hasPrefix(prefix) }.map {
            Hex.encode(SHA256.hash(try Certificate(pemEncoded: $0.certificates[0]).derRepresentation), lowercase: true)
        }
    }

    @Test(
        "O1/O2/O3: a second merchant under another root is refused at the Pay side and the network, nothing written; the same bundle again is accepted; a re-key needs the old root's signature or its fingerprint, is recorded and revokes the old certificates"
    )
    func bindingAndRekey() async throws {
        let parties = try await PartyDirectories()
        let temporary = parties.temporary
        let merchant = try parties.export(.merchant)
        let oldRoot = RootFingerprint(try DeploymentPKI.readCertificate(named: PKIFiles.rootCA, from: parties.merchant))
        let payAnswer = temporary.child("pay-for-merchant.json")
        let networkAnswer = temporary.child("net-for-merchant.json")
        try await parties.importBundle(merchant, into: .pay, answer: payAnswer)
        try await parties.importBundle(merchant, into: .network, answer: networkAnswer)
        let registered = try PartyRegistrations.read(from: parties.pay)
        #expect(registered.identities["party:merchant"]?.root == oldRoot)
        #expect(registered.identities["merchant:\(Self.merchantID)"]?.root == oldRoot)
        let network = try PartyRegistrations.read(from: parties.network)
        #expect(network.identities["terminal:T0001@\(Self.merchantID)"]?.root == oldRoot)
        let registry = parties.pay.path + "/" + PartyRegistrations.fileName
        #expect(try PartyProcessTests.mode(of: registry) == 0o600)

        // O1: another `init --party merchant`, with the same default merchant ID: refused at both, nothing written.
        let impostorDirectory = try await Self.initialize(.merchant, at: temporary.child("impostor"))
        let impostor = try Self.bundle(of: impostorDirectory, .merchant)
        for party in [DeploymentParty.pay, .network] {
            await Self.expectRefused(impostor, into: party, of: parties, saying: "already registered to another party")
        }
        // The real merchant's bundle again: accepted, its bindings unchanged.
        try await parties.importBundle(merchant, into: .pay, answer: payAnswer)
        #expect(try PartyRegistrations.read(from: parties.pay).identities == registered.identities)

        // O2/O3: the merchant made again in a new directory, under a new root.
        let renewed = try await Self.initialize(.merchant, at: temporary.child("merchant-new"))
        let newRoot = RootFingerprint(try DeploymentPKI.readCertificate(named: PKIFiles.rootCA, from: renewed))
        let unsigned = try Self.bundle(of: renewed, .merchant)
        await Self.expectRefused(unsigned, into: .pay, of: parties, saying: "already registered to another party")
        await Self.expectRefused(
            unsigned, into: .pay, of: parties, replace: .signedByOldRoot, saying: "not signed by merchant's old root")
        let signedByAnother = try Self.bundle(of: renewed, .merchant, signedByOldRoot: impostorDirectory)
        await Self.expectRefused(
            signedByAnother, into: .pay, of: parties, replace: .signedByOldRoot, saying: "not the valid signature")
        let impostorRoot = RootFingerprint(
            try DeploymentPKI.readCertificate(named: PKIFiles.rootCA, from: impostorDirectory))
        await Self.expectRefused(
            unsigned, into: .network, of: parties, replace: .oldRootFingerprint(impostorRoot.certificate),
            saying: "is not the root merchant registered here")
        await Self.expectRefused(
            impostor, into: .pay, of: parties, replace: .oldRootFingerprint("not-a-fingerprint"),
            saying: "64 hex digits")

        // Signed by the old root: accepted at the Pay side, recorded, the old certificates revoked.
        let oldPortal = try Self.leafFingerprints(payAnswer, named: "merchant-portal-")
        let store = try PayStore.open(in: parties.pay)
        let before = try await MerchantCertificates(store: store, clock: SystemClock()).list()
        await store.close()
        #expect(before.count >= 2 && before.allSatisfy { $0.revokedAt == nil })
        let signed = try Self.bundle(of: renewed, .merchant, signedByOldRoot: parties.merchant)
        let summary = try await parties.importBundle(
            signed, into: .pay, answer: temporary.child("pay-for-new.json"), replace: .signedByOldRoot)
        #expect(summary.replaced == oldRoot.certificate && summary.rootFingerprint == newRoot.certificate)
        let pay = try PartyRegistrations.read(from: parties.pay)
        #expect(pay.identities["merchant:\(Self.merchantID)"]?.root == newRoot)
        #expect(pay.history.map(\.vouchedBy) == ["old-root-signature"])
        #expect(pay.history.first?.oldRoot == oldRoot.certificate && pay.history.first?.newRoot == newRoot.certificate)
        #expect(!oldPortal.isEmpty && pay.revokedCertificates.isSuperset(of: oldPortal))
        let newPortal = try Self.leafFingerprints(temporary.child("pay-for-new.json"), named: "merchant-portal-")
        #expect(pay.revokedCertificates.isDisjoint(with: newPortal))
        let reopened = try PayStore.open(in: parties.pay)
        let after = try await MerchantCertificates(store: reopened, clock: SystemClock()).list()
        await reopened.close()
        let oldSerials = Set(before.map(\.serial))
        #expect(after.filter { oldSerials.contains($0.serial) }.allSatisfy { $0.revokedAt != nil })
        #expect(after.filter { !oldSerials.contains($0.serial) }.count == 2)
        #expect(after.filter { !oldSerials.contains($0.serial) }.allSatisfy { $0.revokedAt == nil })
        // Now the old root is the stranger: its bundle is refused.
        await Self.expectRefused(merchant, into: .pay, of: parties, saying: "already registered to another party")

        // At the network, the operator vouches with the old root's fingerprint (as openssl prints it).
        let colons = stride(from: 0, to: 64, by: 2).map { index in
            let start = oldRoot.certificate.index(oldRoot.certificate.startIndex, offsetBy: index)
            return oldRoot.certificate[start..<oldRoot.certificate.index(start, offsetBy: 2)].uppercased()
        }.joined(separator: ":")
        let oldAcquiring = try Self.leafFingerprints(networkAnswer, named: "")
        try await parties.importBundle(
            unsigned, into: .network, answer: temporary.child("net-for-new.json"), replace: .oldRootFingerprint(colons))
        let networkAfter = try PartyRegistrations.read(from: parties.network)
        #expect(networkAfter.history.map(\.vouchedBy) == ["operator"])
        #expect(networkAfter.identities["terminal:T0001@\(Self.merchantID)"]?.root == newRoot)
        #expect(oldAcquiring.count == 2 && networkAfter.revokedCertificates == Set(oldAcquiring))
    }

    @Test(
        "O4/O5/O6: the network assigns the token requestor ID and the Pay side uses it; an answer naming another is refused; a host name the bundle does not prove is refused, nothing written; a client pinned to the network's root refuses a server answering with the merchant's certificate (TLS)"
    )
    func assignedIdentifiersHostNamesAndPinning() async throws {
        let parties = try await PartyDirectories()
        let temporary = parties.temporary
        // A network that already assigned 40010075001 (to a Pay side since gone) assigns the next one.
        let taken = """
            {"version": 1, "history": [], "issued": [], "identities": {"token-requestor:40010075001":
              {"party": "pay", "registeredAt": "2026-01-01T00:00:00Z", "root": {"certificate": "\(String(repeating: "a", count: 64))", "key": "\(String(repeating: "b", count: 64))"}}}}
            """
        try Data(taken.utf8).write(
            to: URL(fileURLWithPath: parties.network.path + "/" + PartyRegistrations.fileName))
        let answer = temporary.child("net-for-pay.json")
        try await parties.importBundle(try parties.export(.pay), into: .network, answer: answer)
        let answered = try PartyBundle.parse(Data(contentsOf: URL(fileURLWithPath: answer)))
        let client = try #require(answered.issued.first)
        #expect(client.identity == "token-requestor:40010075002")
        #expect(try Certificate(pemEncoded: client.certificates[0]).subject.commonName == "40010075002")
        #expect(try PartyRegistrations.read(from: parties.network).tokenRequestorIDs == ["40010075001", "40010075002"])

        // An answer whose assignment is not the certificate's: refused, nothing written.
        var forged = answered
        forged.issued[0].identity = "token-requestor:40010075001"
        await Self.expectRefused(
            try forged.jsonData(), into: .pay, of: parties, saying: "does not name the token requestor ID")
        try await parties.importBundle(Data(contentsOf: URL(fileURLWithPath: answer)), into: .pay)
        #expect(try PayService.tokenRequestorID(in: parties.pay) == "40010075002")

        // O5: host names. The merchant's own site name is its own; anything else it must have had validated here.
        var merchant = try PartyBundle.parse(try parties.export(.merchant))
        #expect(merchant.hostNames.keys.sorted() == ["store.orchard.test"])
        let site = try #require(merchant.hostNames["store.orchard.test"])
        for (name, port, message) in [
            ("apple-pay-gateway.orchard.test", site, "does not prove"), ("pay.orchard.test", site, "does not prove"),
            ("shop.example", site, "does not prove"), ("store.orchard.test", 1, "where none of its services listens"),
        ] {
            var claim = merchant
            claim.hostNames[name] = port
            await Self.expectRefused(try claim.jsonData(), into: .pay, of: parties, saying: message)
        }
        var payClaim = try PartyBundle.parse(try parties.export(.pay))
        payClaim.hostNames["store.orchard.test"] = payClaim.endpoints["pay"]?.port
        await Self.expectRefused(try payClaim.jsonData(), into: .network, of: parties, saying: "does not prove")
        // A domain the Pay side validated for the merchant: accepted.
        let store = try PayStore.open(in: parties.pay)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        try await store.write { db in
            try db.execute(
                "INSERT OR IGNORE INTO merchants (identifier, display_name, created_at) VALUES (?, ?, ?)",
                [.text(Self.merchantID), .text("Orchard Demo Store"), .integer(now)])
            try db.execute(
                """
                INSERT INTO merchant_domains
                    (merchant_identifier, domain, registered_at, verified_at, expires_at, checked_at, state)
                VALUES (?, 'shop.example', ?, ?, ?, ?, 'verified')
                """, [.text(Self.merchantID), .integer(now), .integer(now), .integer(now + 86_400_000), .integer(now)])
        }
        await store.close()
        merchant.hostNames["shop.example"] = site
        try await parties.importBundle(
            try merchant.jsonData(), into: .pay, answer: temporary.child("pay-for-shop.json"))
        #expect(PeerAddresses.read(from: parties.pay).hostNames["shop.example"] == site)

        // O6: the Pay side now knows the network and the merchant; each client trusts its peer's root only.
        let peers = PeerAddresses.read(from: parties.pay)
        #expect(peers.parties["network"]?.services == ["network"])
        #expect(peers.parties["merchant"]?.root == "pki/peers/peer-merchant-root.pem")

        // The network's address, answered by a server with the merchant's certificate (from the merchant's root).
        let identity = try TLSIdentity.load(named: PKIFiles.tlsServer(.merchant), from: parties.merchant)
        var router = Router()
        router.add(.get, "/health") { _ in try HTTPResponse.json(["status": "ok"]) }
        let server = try HTTPServer(
            configuration: HTTPServerConfiguration(
                listeners: [
                    .init(
                        port: 0,
                        tls: TLSServerConfiguration(
                            certificateChainPEM: identity.certificateChainPEM, privateKeyPEM: identity.privateKeyPEM))
                ], threads: 1),
            router: router, logger: .disabled)
        try server.start()
        defer { Task { await server.shutdown() } }
        func status(trusting roots: String) async -> Int? {
            guard
                let client = try? HTTPClient(
                    configuration: HTTPClientConfiguration(
                        trustedRootsPEM: roots, connectTimeout: .seconds(5), requestTimeout: .seconds(10),
                        maxAttempts: 1))
            else { return nil }
            defer { client.shutdown() }
            return try? await client.get("https://127.0.0.1:\(server.port)/health").status.code
        }
        let network = try PeerAddresses.trustedRootPEM(for: .network, in: parties.pay)
        #expect(try Certificate(pemEncoded: network).subject.commonName == "Orchard Network Root CA")
        #expect(await status(trusting: network) == nil)
        // The controls: the merchant's root accepts it, and so did the union of every root a client trusted before.
        #expect(await status(trusting: try PeerAddresses.trustedRootPEM(for: .merchant, in: parties.pay)) == 200)
        #expect(await status(trusting: try parties.pay.trustedRootsPEM()) == 200)
        // The Pay side's own service: its own root; a single directory: its one root.
        #expect(
            try PeerAddresses.trustedRootPEM(for: .pay, in: parties.pay)
                == (try parties.pay.readCertificate(named: PKIFiles.rootCA)))
    }
}
