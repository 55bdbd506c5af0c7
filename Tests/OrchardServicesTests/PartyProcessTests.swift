import CommandTestSupport
import Foundation
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardX509
import Testing
import TokenRequestorAPI
import WebDriverClient

#if canImport(Glibc)
    import Glibc
#endif

/// The separate-directories deployment (docs/deployment.md, "Each party on its own") through the built `orchard`
/// binary: each party initialised alone, bundles exchanged as files, each party's services started from its own
/// directory, and the demo's payments run through them: in an app, on the web (without a browser, and in Chromium
/// when it is installed, as CI requires), the phone's and the watch's taps at the merchant's terminal, and the
/// web-handoff rows.
@Suite("Each party on its own, as processes", .serialized)
struct PartyProcessTests {
    static let parties = ["network", "pay", "merchant"]
    static let merchant = "merchant.dev.orchard.demo"

    /// Runs `orchard arguments`, failing with its stderr unless it exits 0; returns stdout.
    @discardableResult
    static func succeed(_ arguments: [String], environment: [String: String] = [:]) async throws -> String {
        let result = try await runOrchard(arguments, environment: environment)
        guard result.status == 0 else {
            throw TestFailure(
                "orchard \(arguments.prefix(3).joined(separator: " ")) failed: \(result.stderr.suffix(1500))")
        }
        return result.stdout
    }

    @Test(
        "separate directories: bundles as files, no directory holds another party's keys, in app, on the web, in store")
    func separateDirectories() async throws {
        let temporary = try TemporaryDirectory()
        var directory: [String: String] = [:]
        for party in Self.parties {
            directory[party] = temporary.child(party)
            try await Self.succeed(["init", "--party", party, "--data-dir", temporary.child(party)])
        }
        let refused = try await runOrchard(["init", "--party", "store", "--data-dir", temporary.child("store")])
        #expect(refused.status != 0 && refused.stderr.contains("--party merchant"))

        let wrongParty = try await runOrchard(["serve", "network", "--data-dir", temporary.child("pay")])
        #expect(wrongParty.status != 0 && wrongParty.stderr.hasPrefix("error: "))

        // Bundles travel as files: each party exports, the others import and answer.
        func bundle(_ name: String) -> String { temporary.child("\(name).bundle.json") }
        for party in Self.parties {
            try await Self.succeed(["pki", "export", "--data-dir", directory[party]!, "--out", bundle(party)])
        }
        // A file that is no bundle: one error line, nothing imported.
        let junk = temporary.child("junk.json")
        try Data("{\"format\": \"orchard-party-bundle\", \"version\": 7}".utf8).write(to: URL(fileURLWithPath: junk))
        let refusedImport = try await runOrchard(["pki", "import", "--data-dir", temporary.child("pay"), junk])
        #expect(refusedImport.status == 1 && refusedImport.stderr.hasPrefix("error: ") && refusedImport.stdout.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: temporary.child("pay") + "/" + PeerAddresses.fileName))
        let steps: [(into: String, file: String, answer: String?)] = [
            ("network", bundle("pay"), bundle("network-for-pay")),
            ("network", bundle("merchant"), bundle("network-for-merchant")),
            ("pay", bundle("network-for-pay"), nil),
            ("pay", bundle("merchant"), bundle("pay-for-merchant")),
            ("merchant", bundle("pay-for-merchant"), nil),
            ("merchant", bundle("network-for-merchant"), nil),
        ]
        for step in steps {
            try await Self.succeed(
                ["pki", "import", "--data-dir", directory[step.into]!, step.file]
                    + (step.answer.map { ["--out", $0] } ?? []))
        }

        // Permissions, and no directory (nor any bundle) holds a byte of another party's private keys.
        var markers: [String: [String: [UInt8]]] = [:]
        for party in Self.parties {
            let path = directory[party]!
            #expect(try Self.mode(of: path) == 0o700, "\(party)")
            markers[party] = privateKeyMarkers(under: path)
            #expect(!(markers[party] ?? [:]).isEmpty)
            for (relative, _) in snapshot(path) where relative.hasSuffix(".key") {
                #expect(try Self.mode(of: path + "/" + relative) == 0o600, "\(party)/\(relative)")
            }
        }
        for party in Self.parties {
            for (file, bytes) in snapshot(directory[party]!) {
                for (owner, keys) in markers where owner != party {
                    for (keyFile, marker) in keys {
                        #expect(!bytes.contains(bytes: marker), "\(party)/\(file) holds bytes of \(owner)/\(keyFile)")
                    }
                }
            }
        }
        for name in ["network", "pay", "merchant", "network-for-pay", "network-for-merchant", "pay-for-merchant"] {
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: bundle(name))))
            #expect(!String(decoding: bytes, as: UTF8.self).contains("PRIVATE KEY"), "\(name)")
            for (owner, keys) in markers {
                for (keyFile, marker) in keys {
                    #expect(!bytes.contains(bytes: marker), "bundle \(name) holds bytes of \(owner)/\(keyFile)")
                }
            }
        }

        // Each party's services from its own directory; peers found at the addresses the bundles gave. The merchant
        // first takes its site's association file from the Pay side with the portal certificate the Pay side issued
        // it, so that its site serves it once started; then registers and validates store.orchard.test there.
        var servers: [OrchardChild] = []
        defer { for server in servers { server.send(SIGKILL) } }
        for party in Self.parties {
            if party == "merchant" {
                let site = directory[party]! + "/merchant-site"
                try FileManager.default.createDirectory(atPath: site, withIntermediateDirectories: true)
                try await Self.succeed(
                    [
                        "merchant", "association-file", "--merchant", Self.merchant, "--out",
                        site + "/apple-developer-merchantid-domain-association", "--data-dir", directory[party]!,
                    ])
            }
            let child = try OrchardChild(["serve", party, "--data-dir", directory[party]!])
            servers.append(child)
            _ = try await child.firstLine()
        }
        for step in ["add", "verify"] {
            try await Self.succeed(
                [
                    "merchant", "domain", step, "--merchant", Self.merchant, "--domain", "store.orchard.test",
                    "--data-dir", directory["merchant"]!,
                ])
        }

        try await Self.expectIssuedIdentitiesOnly(payDirectory: directory["pay"]!)

        // The devices are the Pay side's (its device CA certifies them): they live in its directory and trust its
        // root and the network's, imported.
        let pay = directory["pay"]!
        try await Self.succeed(
            ["device", "create", "--name", "demo-phone", "--kind", "phone", "--biometry", "face", "--data-dir", pay])
        try await Self.succeed(
            ["device", "passcode", "--name", "demo-phone", "--data-dir", pay],
            environment: ["ORCHARD_NEW_PASSCODE": "123456"])
        let card = try writeCardFile(number: "4111111111111111", cvv: "266")
        defer { try? FileManager.default.removeItem(atPath: card) }
        try await Self.succeed(
            [
                "device", "add-card", "--name", "demo-phone", "--card-file", card, "--expiry", "12/34", "--cardholder",
                "Alice Appleseed", "--data-dir", pay,
            ])
        let bought = try await Self.succeed(
            [
                "app", "buy", "--item", "Secret Roast Blend", "--amount", "9.99", "--device", "demo-phone",
                "--data-dir", pay,
            ])
        let purchase = try #require(try JSONSerialization.jsonObject(with: Data(bought.utf8)) as? [String: Any])
        #expect(purchase["outcome"] as? String == "approved")
        #expect(purchase["responseCode"] as? String == "00")
        #expect(purchase["merchantIdentifier"] as? String == Self.merchant)

        // On the web, as the demo's row without a browser: the store's merchant session from the Pay side's gateway
        // (the merchant's identity certificate, its validated domain), the phone's sheet, the charge.
        let web = try await Self.succeed(["browser", "buy", "--device", "demo-phone", "--data-dir", pay])
        let webRow = try #require(try JSONSerialization.jsonObject(with: Data(web.utf8)) as? [String: Any])
        #expect(webRow["result"] as? String == "approved" && webRow["responseCode"] as? String == "00", "\(web)")
        // And as the demo's row in Chromium: the Mac's page at the merchant's store (under the merchant's root,
        // imported), orchard-pay.js and the gateway at the Pay side, the card at the network.
        if Chromium.locate(searchPath: nil) != nil || ProcessInfo.processInfo.environment["CI"] == "true" {
            let inChromium = try await Self.succeed(["browser", "buy", "--chromium", "--data-dir", pay])
            let row = try #require(try JSONSerialization.jsonObject(with: Data(inChromium.utf8)) as? [String: Any])
            #expect(row["result"] as? String == "approved" && row["responseCode"] as? String == "00", "\(inChromium)")
            #expect(row["device"] as? String == "demo-mac" && row["channel"] as? String == "web")
        }

        // In store, as the demo: the phone (Face ID) and the watch (on the wrist, unlocked, double-click) run in the
        // Pay side's directory with their antennas open; the merchant's terminal T0001, certified by the network from
        // the merchant's bundle, charges each from the merchant's directory.
        try await Self.succeed(
            ["device", "create", "--name", "demo-watch", "--kind", "watch", "--biometry", "none", "--data-dir", pay])
        try await Self.succeed(
            ["device", "passcode", "--name", "demo-watch", "--data-dir", pay],
            environment: ["ORCHARD_NEW_PASSCODE": "123456"])
        try await Self.succeed(
            [
                "device", "add-card", "--name", "demo-watch", "--card-file", card, "--expiry", "12/34", "--cardholder",
                "Alice Appleseed", "--data-dir", pay,
            ])
        for (name, auth, amount) in [("demo-phone", "face-id", "12.34"), ("demo-watch", "double-click", "4.50")] {
            let device = try OrchardChild(["device", "run", "--name", name, "--auto-auth", auth, "--data-dir", pay])
            defer { device.send(SIGKILL) }
            while !device.standardOutput.contains("\"antenna\"") {
                if device.process.ended != nil { throw TestFailure("\(name) stopped: \(device.standardError)") }
                try await Task.sleep(for: .milliseconds(50))
            }
            if name == "demo-watch" {
                try await Self.succeed(["device", "wrist", "--name", name, "--on", "yes", "--data-dir", pay])
                try await Self.succeed(
                    ["device", "unlock", "--name", name, "--method", "passcode", "--data-dir", pay],
                    environment: ["ORCHARD_PASSCODE": "123456"])
            }
            let charged = try await Self.succeed(
                [
                    "terminal", "charge", "--amount", amount, "--antenna", pay + "/devices/\(name)/nfc.sock", "--json",
                    "--data-dir", directory["merchant"]!,
                ])
            let tap = try #require(try JSONSerialization.jsonObject(with: Data(charged.utf8)) as? [String: Any])
            #expect(tap["outcome"] as? String == "approved" && tap["responseCode"] as? String == "00", "\(charged)")
            device.send(SIGTERM)
            #expect(try await device.exitStatus() == 0)
        }

        // And as the demo's web-handoff rows: a Mac without Touch ID in Chromium, the phone then the watch
        // authorizing over the Pay side's relay.
        if Chromium.locate(searchPath: nil) != nil || ProcessInfo.processInfo.environment["CI"] == "true" {
            let handoff = try await Self.succeed(["browser", "buy", "--handoff", "--data-dir", pay])
            let rows = try #require(try JSONSerialization.jsonObject(with: Data(handoff.utf8)) as? [[String: Any]])
            #expect(rows.map { $0["device"] as? String } == ["demo-phone", "demo-watch"], "\(handoff)")
            #expect(
                rows.allSatisfy { $0["channel"] as? String == "web-handoff" && $0["result"] as? String == "approved" })
        }

        try await Self.expectBindingsThroughCommands(temporary: temporary, directory: directory, bundle: bundle)

        for server in servers { server.send(SIGTERM) }
        for server in servers { #expect(try await server.exitStatus() == 0) }
    }

    /// O1/O2 through the commands, the servers running: another `init --party merchant` (the same default merchant
    /// ID) is refused with one error line and no answer; the merchant made again under a new root and exported with
    /// `--signed-by-old-root` goes in with `pki import --replace`, and the running Pay server refuses the old root's
    /// portal certificate from then on.
    static func expectBindingsThroughCommands(
        temporary: TemporaryDirectory, directory: [String: String], bundle: (String) -> String
    ) async throws {
        let pay = directory["pay"]!
        let impostor = temporary.child("impostor")
        try await succeed(["init", "--party", "merchant", "--data-dir", impostor])
        try await succeed(["pki", "export", "--data-dir", impostor, "--out", bundle("impostor")])
        let refused = try await runOrchard(
            ["pki", "import", "--data-dir", pay, bundle("impostor"), "--out", bundle("pay-for-impostor")])
        #expect(refused.status == 1 && refused.stdout.isEmpty, "\(refused.stderr)")
        #expect(refused.stderr.hasPrefix("error: ") && refused.stderr.contains("already registered to another party"))
        #expect(!FileManager.default.fileExists(atPath: bundle("pay-for-impostor")))

        let renewed = temporary.child("merchant-new")
        try await succeed(["init", "--party", "merchant", "--data-dir", renewed])
        try await succeed(
            [
                "pki", "export", "--data-dir", renewed, "--signed-by-old-root", directory["merchant"]!, "--out",
                bundle("renewed"),
            ])
        let unsigned = try await runOrchard(
            ["pki", "import", "--data-dir", pay, "--replace", bundle("impostor"), "--out", bundle("pay-for-impostor")])
        #expect(unsigned.status == 1 && unsigned.stderr.contains("not signed"), "\(unsigned.stderr)")
        let replaced = try await succeed(
            ["pki", "import", "--data-dir", pay, "--replace", bundle("renewed"), "--out", bundle("pay-for-renewed")])
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(replaced.utf8)) as? [String: Any])
        #expect((summary["replaced"] as? String)?.count == 64)
        let old = try await runOrchard(
            ["merchant", "domain", "list", "--merchant", merchant, "--data-dir", directory["merchant"]!])
        #expect(old.status != 0 && old.stderr.contains("revoked"), "\(old.stderr)")
    }

    /// The network serves its token-requestor routes to the certificate it issued the Pay side (from pay's
    /// signing request), and refuses one the Pay side mints itself with the same role and requestor ID from its own
    /// root: a party acts only as the certificate its peer issued proves.
    static func expectIssuedIdentitiesOnly(payDirectory path: String) async throws {
        let pay = DeploymentDirectory(path: path)
        let network = try #require(PeerAddresses.read(from: pay).endpoint(of: .network))
        let url = network.baseURL + TokenRequestorAPI.Route.notifications
        func status(_ identity: TLSIdentity) async throws -> Int? {
            let client = try HTTPClient(
                configuration: HTTPClientConfiguration(
                    trustedRootsPEM: try pay.trustedRootsPEM(), clientCertificateChainPEM: identity.certificateChainPEM,
                    clientPrivateKeyPEM: identity.privateKeyPEM, connectTimeout: .seconds(5),
                    requestTimeout: .seconds(10), maxAttempts: 1))
            defer { client.shutdown() }
            do {
                return try await client.get(url).status.code
            } catch {
                return nil  // refused in the handshake
            }
        }
        let issued = try TLSIdentity.load(named: PartyRequest.Keys.payClient, from: pay)
        #expect(try await status(issued) == 200)

        let payRoot = try CertificateAuthority.load(named: PKIFiles.rootCA, from: pay)
        let key = try P256.Signing.PrivateKey()
        let minted = try ServiceAccess.issueClientCertificate(
            for: CertificatePublicKey(key.publicKey), role: .tokenRequestor, commonName: "40010075001", by: payRoot,
            clock: SystemClock(), random: SystemRandom())
        let forged = TLSIdentity(
            certificateChainPEM: minted.pemRepresentation,
            privateKeyPEM: SecureBytes(Array(try key.pemRepresentation.utf8)))
        let refused = try await status(forged)
        #expect(refused == nil || refused == 401 || refused == 403, "\(String(describing: refused))")
    }

    static func mode(of path: String) throws -> mode_t {
        var info = stat()
        guard lstat(path, &info) == 0 else { throw TestFailure("cannot stat \(path)") }
        return info.st_mode & 0o777
    }
}
