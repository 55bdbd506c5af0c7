import Foundation
import MerchantServer
import NetworkServer
import OrchardRuntime
import OrchardServices
import OrchardX509
import PayServer
import Testing

/// Three parties, each initialised alone in a directory of its own (`init --party`), in this process.
final class PartyDirectories: @unchecked Sendable {
    let temporary: TemporaryDirectory
    let network: DeploymentDirectory
    let pay: DeploymentDirectory
    let merchant: DeploymentDirectory

    static func registry(_ party: DeploymentParty) throws -> ServiceRegistry {
        switch party {
        case .network: try ServiceRegistry([NetworkServerService()])
        case .pay: try ServiceRegistry([PayService()])
        case .merchant: try ServiceRegistry([MerchantService()])
        }
    }

    init() async throws {
        temporary = try TemporaryDirectory()
        network = DeploymentDirectory(path: temporary.child("network"))
        pay = DeploymentDirectory(path: temporary.child("pay"))
        merchant = DeploymentDirectory(path: temporary.child("merchant"))
        for (party, directory) in [(DeploymentParty.network, network), (.pay, pay), (.merchant, merchant)] {
            _ = try await DeploymentInitializer.initialize(
                directory, registry: try Self.registry(party), options: .init(party: party))
        }
    }

    func directory(_ party: DeploymentParty) -> DeploymentDirectory {
        switch party {
        case .network: network
        case .pay: pay
        case .merchant: merchant
        }
    }

    func export(_ party: DeploymentParty) throws -> Data {
        try PartyBundles.export(directory(party), registry: try Self.registry(party)).jsonData()
    }

    /// Every service a party may run, as `orchard pki import` knows them (the host names each owns).
    static func everyService() throws -> ServiceRegistry {
        try ServiceRegistry([NetworkServerService(), PayService(), MerchantService()])
    }

    @discardableResult
    func importBundle(
        _ data: Data, into party: DeploymentParty, answer: String? = nil, replace: PartyBundles.Replacement? = nil
    ) async throws -> PartyBundles.ImportSummary {
        try await PartyBundles.importBundle(
            data, into: directory(party), registry: try Self.registry(party), answerPath: answer, replace: replace,
            services: try Self.everyService())
    }
}

/// Every file under `path`, by relative path, with its bytes.
func snapshot(_ path: String) -> [String: [UInt8]] {
    var files: [String: [UInt8]] = [:]
    let enumerator = FileManager.default.enumerator(atPath: path)
    while let relative = enumerator?.nextObject() as? String {
        var isDirectory: ObjCBool = false
        let full = path + "/" + relative
        guard FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), !isDirectory.boolValue,
            let data = FileManager.default.contents(atPath: full)
        else { continue }
        files[relative] = Array(data)
    }
    return files
}

/// For every private key file under `path`, bytes found only in that key: 32 base64 characters of the key material
/// of a PEM key (past the PKCS#8 header every P-256 key shares), or the raw bytes of another key file (a symmetric
/// key), to look for in other files.
func privateKeyMarkers(under path: String) -> [String: [UInt8]] {
    var markers: [String: [UInt8]] = [:]
    for (relative, bytes) in snapshot(path) where relative.hasSuffix(".key") {
        let text = String(decoding: bytes, as: UTF8.self)
        if text.contains("PRIVATE KEY") {
            let body = text.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
            markers[relative] = Array(body.dropFirst(52).prefix(32).utf8)
        } else {
            markers[relative] = Array(bytes.prefix(64))
        }
    }
    return markers
}

extension Array where Element == UInt8 {
    func contains(bytes needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return false }
        return (0...(count - needle.count)).contains { Array(self[$0..<($0 + needle.count)]) == needle }
    }
}

@Suite("Each party on its own: init --party, pki export and import")
struct PartyBundleTests {
    @Test("init --party writes one party's services, its own root and party.json; store is refused with a hint")
    func partyInit() async throws {
        let parties = try await PartyDirectories()
        let payConfig = try String(contentsOfFile: parties.pay.configurationPath, encoding: .utf8)
        #expect(payConfig.contains("\"pay\""))
        #expect(!payConfig.contains("\"network\"") && !payConfig.contains("\"merchant\""))
        let roots = try [DeploymentParty.network, .pay, .merchant].map { party in
            try DeploymentPKI.readCertificate(named: PKIFiles.rootCA, from: parties.directory(party))
        }
        #expect(Set(roots.map(\.subject.description)).count == 3)
        #expect(roots[1].subject.commonName == "Orchard Pay Root CA")
        // Only the Pay side makes devices.
        #expect(FileManager.default.fileExists(atPath: try parties.pay.privateKeyPath(named: PKIFiles.deviceCA)))
        #expect(!FileManager.default.fileExists(atPath: try parties.network.privateKeyPath(named: PKIFiles.deviceCA)))
        let merchant = try #require(try PartyManifest.read(from: parties.merchant))
        #expect(merchant.party == .merchant)
        #expect(Set(merchant.requests.map(\.kind)) == [PartyRequest.Kind.merchant, PartyRequest.Kind.acquiring])
        #expect(try PartyManifest.read(from: parties.pay)?.requests.map(\.kind) == [PartyRequest.Kind.tokenRequestor])
        #expect(try PartyManifest.read(from: parties.network)?.requests == [])

        #expect(throws: ServicesError(.invalidConfiguration, "")) { try DeploymentParty.parse("store") }
        do {
            _ = try DeploymentParty.parse("store")
        } catch {
            #expect(error.message.contains("--party merchant"))
        }
        // A registry that is not the party's is refused before anything is written.
        let other = DeploymentDirectory(path: parties.temporary.child("mixed"))
        await #expect(throws: ServicesError(.invalidConfiguration, "")) {
            _ = try await DeploymentInitializer.initialize(
                other, registry: try PartyDirectories.registry(.network), options: .init(party: .pay))
        }
        #expect(!FileManager.default.fileExists(atPath: other.path))
    }

    @Test("A bundle carries public material only: no PEM private key, no byte of any key file")
    func bundlesHoldNoKeys() async throws {
        let parties = try await PartyDirectories()
        for party in DeploymentParty.allCases {
            let bundle = Array(try parties.export(party))
            let text = String(decoding: bundle, as: UTF8.self)
            #expect(!text.contains("PRIVATE KEY"), "\(party)")
            for (file, marker) in privateKeyMarkers(under: parties.directory(party).path) {
                #expect(!bundle.contains(bytes: marker), "\(party)'s bundle holds bytes of \(file)")
            }
            let parsed = try PartyBundle.parse(Data(bundle))
            #expect(parsed.party == party)
            #expect(parsed.roots.count == 1)
            #expect(Set(parsed.certificates.keys) == Set(party.publishedCertificates))
            #expect(Set(parsed.endpoints.keys) == Set(party.services.map(\.rawValue)))
            if party == .merchant {
                // Its site's port, named as its run record names it.
                #expect(parsed.endpoints["merchant"]?.ports.keys.sorted() == ["site"])
            }
        }
    }

    @Test("import refuses malformed JSON, another format or version, its own party's bundle, and changes nothing")
    func importRefusals() async throws {
        let parties = try await PartyDirectories()
        let network = try parties.export(.network)
        let before = snapshot(parties.pay.path)
        let object = try #require(try JSONSerialization.jsonObject(with: network) as? [String: Any])
        func variant(_ change: (inout [String: Any]) -> Void) throws -> Data {
            var copy = object
            change(&copy)
            return try JSONSerialization.data(withJSONObject: copy)
        }
        let cases: [(String, Data)] = [
            ("not JSON", Data("{\"format\": ".utf8)),
            ("a JSON array", Data("[1, 2]".utf8)),
            ("another format", try variant { $0["format"] = "something-else" }),
            ("version 2", try variant { $0["version"] = 2 }),
            ("no version", try variant { $0["version"] = nil }),
            ("no roots", try variant { $0["roots"] = nil }),
            ("an unknown party", try variant { $0["party"] = "store" }),
        ]
        for (what, data) in cases {
            await #expect(throws: ServicesError(.invalidBundle, ""), "\(what)") {
                try await parties.importBundle(data, into: .pay)
            }
        }
        // The Pay side's own bundle, imported into itself.
        await #expect(throws: ServicesError(.invalidBundle, "")) {
            try await parties.importBundle(try parties.export(.pay), into: .pay)
        }
        #expect(snapshot(parties.pay.path) == before)
    }

    @Test("import refuses certificates that do not check: a bad root, a foreign chain, an unpublished name")
    func importRefusesBadCertificates() async throws {
        let parties = try await PartyDirectories()
        let stranger = try await PartyDirectories()
        let network = try PartyBundle.parse(try parties.export(.network))
        let strangerNetwork = try PartyBundle.parse(try stranger.export(.network))
        let before = snapshot(parties.pay.path)

        var badRoot = network
        badRoot.roots = ["-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"]
        var leafAsRoot = network
        leafAsRoot.roots = [try #require(network.certificates["token-service-provisioning"])]
        var foreign = network
        foreign.certificates["token-service-provisioning"] = strangerNetwork.certificates["token-service-provisioning"]
        var unpublished = network
        unpublished.certificates["device-ca"] = network.roots[0]
        var missing = network
        missing.certificates["token-service-personalisation"] = nil
        var badEndpoint = network
        badEndpoint.endpoints["network"]?.port = 70_000
        var otherService = network
        otherService.endpoints["pay"] = ServiceEndpoint(host: "127.0.0.1", port: 443)
        for (what, bundle) in [
            ("a root that is no certificate", badRoot), ("a root that is not self-signed", leafAsRoot),
            ("a certificate of another network", foreign), ("a name the network does not publish", unpublished),
            ("a published certificate missing", missing), ("a port out of range", badEndpoint),
            ("another party's service", otherService),
        ] {
            await #expect(throws: ServicesError(.invalidBundle, ""), "\(what)") {
                try await parties.importBundle(try bundle.jsonData(), into: .pay)
            }
        }
        #expect(snapshot(parties.pay.path) == before)
    }

    @Test("requests are answered once --out is given; an answer for a key the party does not hold is refused")
    func requestsAndAnswers() async throws {
        let parties = try await PartyDirectories()
        let pay = try parties.export(.pay)
        let networkBefore = snapshot(parties.network.path)
        // The Pay side asks the network for its token requestor certificate: no --out, no change.
        await #expect(throws: ServicesError(.invalidConfiguration, "")) {
            try await parties.importBundle(pay, into: .network)
        }
        #expect(snapshot(parties.network.path) == networkBefore)

        let answerPath = parties.temporary.child("network-for-pay.json")
        let summary = try await parties.importBundle(pay, into: .network, answer: answerPath)
        #expect(summary.answered == [PartyRequest.Kind.tokenRequestor])
        #expect(summary.trustedRoot == "pki/peers/peer-pay-root.pem")
        // The network now checks devices against the Pay side's device CA (a certificate: no key).
        #expect(FileManager.default.fileExists(atPath: try parties.network.certificatePath(named: PKIFiles.deviceCA)))
        #expect(!FileManager.default.fileExists(atPath: try parties.network.privateKeyPath(named: PKIFiles.deviceCA)))
        let answer = try PartyBundle.parse(Data(contentsOf: URL(fileURLWithPath: answerPath)))
        let issued = try #require(answer.issued.first)
        #expect(issued.to == .pay && issued.name == PartyRequest.Keys.payClient)
        let certificate = try Certificate(pemEncoded: issued.certificates[0])
        #expect(certificate.subject.organizationalUnit == ServiceRole.tokenRequestor.rawValue)
        #expect(certificate.subject.commonName == "40010075001")
        #expect(
            certificate.issuer
                == (try DeploymentPKI.readCertificate(named: PKIFiles.rootCA, from: parties.network)).subject)

        // A certificate issued for a key the Pay side does not hold: refused, nothing written.
        var forged = answer
        let stranger = try await PartyDirectories()
        let strangerAnswer = stranger.temporary.child("answer.json")
        try await stranger.importBundle(try stranger.export(.pay), into: .network, answer: strangerAnswer)
        let strangerIssued = try PartyBundle.parse(Data(contentsOf: URL(fileURLWithPath: strangerAnswer))).issued
        forged.issued = strangerIssued
        let payBefore = snapshot(parties.pay.path)
        await #expect(throws: ServicesError(.invalidBundle, "")) {
            try await parties.importBundle(try forged.jsonData(), into: .pay)
        }
        #expect(snapshot(parties.pay.path) == payBefore)

        // The true answer: the certificate is stored for the key pay made at init.
        let stored = try await parties.importBundle(Data(contentsOf: URL(fileURLWithPath: answerPath)), into: .pay)
        #expect(stored.certificates.contains(PartyRequest.Keys.payClient))
        let client = try TLSIdentity.load(named: PartyRequest.Keys.payClient, from: parties.pay)
        #expect(client.certificateChainPEM == issued.certificates.joined())
        let peers = PeerAddresses.read(from: parties.pay)
        #expect(peers.endpoint(of: .network)?.port == answer.endpoints["network"]?.port)
    }

    @Test("peers: a run record in DIR first, else the imported address; another party's service is never started here")
    func peerResolution() async throws {
        let parties = try await PartyDirectories()
        let answer = parties.temporary.child("network-for-pay.json")
        try await parties.importBundle(try parties.export(.pay), into: .network, answer: answer)
        let peers = ServicePeers()
        // Before the network's bundle: the Pay side knows no network, and will not start one itself.
        #expect(peers.endpoint(of: .network, in: parties.pay) == nil)
        await #expect(throws: ServicesError(.notReady, "")) {
            _ = try await ServiceConnections.connect(
                [.network], directory: parties.pay,
                registry: try ServiceRegistry([NetworkServerService(), PayService()]))
        }

        try await parties.importBundle(Data(contentsOf: URL(fileURLWithPath: answer)), into: .pay)
        let imported = try #require(PeerAddresses.read(from: parties.pay).endpoint(of: .network))
        #expect(peers.endpoint(of: .network, in: parties.pay) == imported)
        #expect(peers.baseURLs(of: .network, in: parties.pay) == [imported.baseURL])
        let connections = try await ServiceConnections.connect(
            [.network], directory: parties.pay, registry: try ServiceRegistry([NetworkServerService(), PayService()]))
        #expect(connections.startedInProcess.isEmpty)
        #expect(try connections.baseURL(of: .network) == imported.baseURL)
        // The client trusts the Pay side's root, then the network's.
        let roots = try Certificate.certificates(fromPEM: connections.rootCertificatePEM)
        #expect(roots.map(\.subject.commonName) == ["Orchard Pay Root CA", "Orchard Network Root CA"])
        await connections.close()

        // A run record in DIR (a single directory's way) wins over the imported address.
        try parties.pay.publish(ServiceRecord(service: .network, host: "127.0.0.1", port: 1))
        #expect(peers.endpoint(of: .network, in: parties.pay)?.port == 1)
        parties.pay.withdraw(.network)
        #expect(peers.endpoint(of: .network, in: parties.pay) == imported)
    }
}
