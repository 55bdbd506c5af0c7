import CardBasics
import CommandTestSupport
import Device
import DeviceControlAPI
import Foundation
import Issuer
import NetworkServer
import OrchardCrypto
import OrchardHTTP
import OrchardLogging
import OrchardRuntime
import OrchardStore
import OrchardX509
import PaymentCredential
import Terminal
import Testing
import TokenRequestorAPI
import TokenService

/// A failing hop across real processes: a deployment (`orchard init`), `orchard serve network` and
/// `orchard serve pay`, the phone as `orchard device run` provisioned by the deployed token service (the
/// Pay server's client certificate on the provisioning routes), and `orchard terminal charge`. A relay in
/// this process stands between the terminal and the acquirer, so a test can stop a hop at a chosen point:
/// the terminal killed after the network decided, the network killed before or after it decided. Each ends
/// with the issuer holding at most one authorization and, after `orchard terminal recover`, nothing held.
@Suite("In store: each hop killed in the middle of a transaction", .serialized)
struct HopFailureTests {
    /// `orchard serve <service>` with its pid, for signals.
    final class ServiceChild: Sendable {
        let process: ChildProcess
        let deployment: DeploymentDirectory
        let service: ServiceName

        init(_ deployment: DeploymentDirectory, _ service: ServiceName) throws {
            self.deployment = deployment
            self.service = service
            process = try ChildProcess(
                try orchardExecutable(), ["serve", service.rawValue, "--data-dir", deployment.path])
        }

        deinit { kill() }

        func baseURL() async throws -> String {
            for _ in 0..<2400 {
                if let record = try? deployment.runningService(service), record.pid == process.pid {
                    return record.baseURL
                }
                try await Task.sleep(for: .milliseconds(25))
            }
            throw TerminalError(.notConfigured, "\(service) did not start")
        }

        /// SIGKILL: no drain, no cleanup (its run record stays until a reader finds the process gone).
        func kill() {
            process.kill()
        }

        func stop() {
            process.terminate()
            process.waitUntilExit()
        }
    }

    /// Where the relay stops a transaction.
    enum Fault: Sendable {
        /// Forward everything.
        case none
        /// Forward the authorization, then call `decided` and never answer the terminal.
        case holdAnswer
        /// Call `arrived` and never forward the authorization (nor answer).
        case holdRequest
    }

    /// The terminal's acquirer, as seen by the terminal: forwards `/v1/acquirer/*` to the deployment's
    /// running network (found through its run record on every request) with the terminal's client certificate.
    final class Relay: @unchecked Sendable {
        let server: HTTPServer
        let rootsPath: String
        private let lock = NSLock()
        private var fault = Fault.none
        private var events: [String] = []

        var url: String { "https://127.0.0.1:\(server.port)" }

        func set(_ fault: Fault) { lock.withLock { self.fault = fault } }
        var seen: [String] { lock.withLock { events } }

        init(deployment: DeploymentDirectory, terminalIdentity name: String) throws {
            let certificate = try EphemeralCertificate()
            rootsPath = deployment.path + "/relay-root.pem"
            try Data(certificate.certificatePEM.utf8).write(to: URL(fileURLWithPath: rootsPath))
            let root = try deployment.readCertificate(named: "root-ca")
            let chain = try deployment.readCertificate(named: name)
            let key = try deployment.readPrivateKey(named: name)
            let client = try HTTPClient(
                configuration: HTTPClientConfiguration(
                    trustedRootsPEM: root, clientCertificateChainPEM: chain, clientPrivateKeyPEM: key,
                    connectTimeout: .seconds(2), requestTimeout: .seconds(10), maxAttempts: 1))
            var router = Router()
            var relay: Relay?
            let holder = WeakBox()
            for path in ["/v1/acquirer/authorizations", "/v1/acquirer/reversals"] {
                router.add(.post, path) { request in
                    guard let relay = holder.relay else { throw HTTPError(.notFound, "no relay") }
                    return try await relay.forward(path, request, client: client, deployment: deployment)
                }
            }
            server = try HTTPServer(
                configuration: HTTPServerConfiguration(
                    listeners: [
                        .init(
                            port: 0,
                            tls: TLSServerConfiguration(
                                certificateChainPEM: certificate.certificatePEM,
                                privateKeyPEM: certificate.privateKeyPEM))
                    ], threads: 1, shutdownDeadline: .seconds(1)),
                router: router, logger: .disabled)
            relay = self
            holder.relay = relay
            try server.start()
        }

        func forward(
            _ path: String, _ request: HTTPRequest, client: HTTPClient, deployment: DeploymentDirectory
        ) async throws -> HTTPResponse {
            let isAuthorization = path.hasSuffix("authorizations")
            let fault = lock.withLock { () -> Fault in
                events.append(isAuthorization ? "authorization" : "reversal")
                let current = self.fault
                if isAuthorization, current != .none { self.fault = .none }  // once
                return current
            }
            if isAuthorization, fault == .holdRequest {
                lock.withLock { events.append("held-request") }
                try await Task.sleep(for: .seconds(30))
                throw HTTPError(.notFound, "held")
            }
            guard let network = try? deployment.runningService(.network) else {
                return HTTPResponse(status: .badGateway)
            }
            let answer: HTTPResponse
            do {
                answer = try await client.send(
                    HTTPClientRequest(
                        method: .post, url: network.baseURL + path, headers: ["Content-Type": "application/json"],
                        body: request.body))
            } catch {
                return HTTPResponse(status: .badGateway)
            }
            if isAuthorization, fault == .holdAnswer {
                lock.withLock { events.append("held-answer") }
                try await Task.sleep(for: .seconds(30))
                throw HTTPError(.notFound, "held")
            }
            return answer
        }

        final class WeakBox: @unchecked Sendable {
            weak var relay: Relay?
        }
    }

    /// A deployment with the network and Pay server running, the phone provisioned with the Visa test card by
    /// the deployed token service, and the terminal set up behind the relay.
    struct Setup {
        let directory: TemporaryDirectory
        let deployment: DeploymentDirectory
        let network: ServiceChild
        let pay: ServiceChild
        let phone: DeviceProcessHandle
        let relay: Relay
        let dpan: String
    }

    static let fpan = "4111111111111111"

    func setUp() async throws -> Setup {
        let directory = try TemporaryDirectory()
        let deployment = directory.deployment
        let initialised = try await orchard(["init", "--data-dir", directory.path])
        #expect(initialised.status == 0, "\(initialised.stderr)")
        try await createDevice(directory, "phone", kind: "phone", biometry: "face")
        let network = try ServiceChild(deployment, .network)
        let pay = try ServiceChild(deployment, .pay)
        let base = try await network.baseURL()
        _ = try await pay.baseURL()
        let phone = try await DeviceProcessHandle(
            deployment, name: "phone", autoAuth: "face-id", environment: ["ORCHARD_ANALYTICS_MAX_DELAY": "0"])

        // Provisioning as the Pay server would relay it: its client certificate on the token-requestor routes.
        let root = try deployment.readCertificate(named: "root-ca")
        let client = try HTTPClient(
            configuration: HTTPClientConfiguration(
                trustedRootsPEM: root, clientCertificateChainPEM: try deployment.readCertificate(named: "pay-client"),
                clientPrivateKeyPEM: try deployment.readPrivateKey(named: "pay-client")))
        defer { client.shutdown() }
        let key = try await client.get(base + TokenRequestorAPI.Route.provisioningKey)
            .decodeJSON(TokenRequestorAPI.ProvisioningKey.self)
        let tokenServiceKey = try P256.KeyAgreement.PublicKey(
            derRepresentation: try #require(Data(base64Encoded: key.publicKey)))
        let pan = try PrimaryAccountNumber("4111111111111111")
        let expiry = try CardExpiry(year: 2034, month: 12)
        let payload = try CardDataPayload(
            pan: pan, expiry: expiry,
            cardVerificationValue: try CardVerificationValue(
                try TestCards.insecureDemoCardVerificationKey.cardVerificationValue(pan: pan, expiry: expiry)),
            cardholderName: "Alice")
        let label = try EncryptedEnvelope.Label(
            purpose: CardDataPayload.purpose, sender: "wallet/phone", recipient: "token-service")
        let sealed = try EncryptedEnvelope.seal(try payload.encoded(), to: tokenServiceKey, label: label)
        let check = try await client.post(
            base + TokenRequestorAPI.Route.checkCard,
            json: TokenRequestorAPI.CheckCardRequest(
                idempotencyKey: "add-card-1", tokenRequestorID: TokenRequestor.orchardPay.id, deviceID: "phone",
                deviceKind: "phone", encryptedCardData: Data(sealed.serialized).base64EncodedString())
        ).decodeJSON(TokenRequestorAPI.CheckCardAnswer.self)
        let identity = try Device.identity(of: "phone", in: deployment)
        let link = try await client.post(
            base + TokenRequestorAPI.Route.link,
            json: TokenRequestorAPI.LinkRequest(
                idempotencyKey: "link-1", sessionID: try #require(check.sessionID), deviceID: "phone",
                secureElementCertificateChain: [Data(identity.certificate.derRepresentation).base64EncodedString()],
                termsAccepted: true)
        ).decodeJSON(TokenRequestorAPI.LinkAnswer.self)
        guard case .provisioned(let token) = link else { throw TerminalError(.notConfigured, "not provisioned") }
        let installed = try await phone.send(
            AddCard(
                envelope: try #require(Data(base64Encoded: token.personalisation)), type: "credit", suffix: "1111",
                displayName: "Orchard Visa"))
        #expect(installed.state == "active")
        let vault = try SQLiteTokenVaultStore(path: deployment.databasePath(for: .network))
        let record = try await vault.token(reference: token.tokenReference)
        guard let dpan = record?.dpan.digits else { throw TerminalError(.notConfigured, "no token in the vault") }
        await vault.store.close()

        // The terminal: its client certificate from `setup`, its acquirer the relay.
        let setup = try await orchard(["terminal", "setup", "--data-dir", directory.path])
        #expect(setup.status == 0, "\(setup.stderr)")
        let relay = try Relay(deployment: deployment, terminalIdentity: "terminal-t0001-client")
        let pointed = try await orchard([
            "terminal", "setup", "--data-dir", directory.path, "--acquirer-url", relay.url, "--acquirer-roots",
            relay.rootsPath,
        ])
        #expect(pointed.status == 0, "\(pointed.stderr)")
        return Setup(
            directory: directory, deployment: deployment, network: network, pay: pay, phone: phone, relay: relay,
            dpan: dpan)
    }

    /// The issuer's view: the balance of the test card's account and its authorizations (approved ones
    /// still holding money, and all).
    func ledger(_ deployment: DeploymentDirectory) async throws -> (balance: Int64, held: Int, entries: Int) {
        let store = try await SQLiteIssuerStore.open(in: deployment)
        let balance = try await store.account(id: "acct-1")?.balance ?? -1
        let ids = try await store.store.read { database in
            try database.query("SELECT network_transaction_id FROM authorizations", []) { row in try row.string(0) }
        }
        var held = 0
        for id in ids {
            if let entry = try await store.authorization(networkTransactionID: id),
                entry.response.responseCode.isApproved,
                entry.reversedAt == nil
            {
                held += 1
            }
        }
        await store.store.close()
        return (balance, held, ids.count)
    }

    /// `orchard terminal charge` as a child this test can kill.
    func startCharge(_ setup: Setup, _ amount: String, extra: [String] = []) throws -> ChildProcess {
        try ChildProcess(
            try orchardExecutable(),
            [
                "terminal", "charge", "--data-dir", setup.directory.path, "--amount", amount, "--device", "phone",
                "--wait", "5", "--json",
            ] + extra)
    }

    /// Waits for a child without blocking a thread of the cooperative pool.
    func exited(_ process: ChildProcess) async throws {
        try await waitFor("the terminal to exit") { !process.isRunning }
    }

    func waitFor(_ what: String, _ condition: () async throws -> Bool) async throws {
        for _ in 0..<800 {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw TerminalError(.notConfigured, "timed out waiting for \(what)")
    }

    @Test("R1: approved through the deployed network; the terminal killed after the network decided → reversed once")
    func terminalKilled() async throws {
        let s = try await setUp()
        defer {
            s.phone.stop()
            s.network.stop()
            s.pay.stop()
        }
        let (_, approved) = try await charge(s.directory, "4.50", device: "phone")
        #expect(
            approved["outcome"] as? String == "approved" && approved["responseCode"] as? String == "00", "\(approved)")
        #expect(try await ledger(s.deployment).balance == 450)

        // The network decides; the answer is held; the terminal is killed while it waits.
        s.relay.set(.holdAnswer)
        let terminal = try startCharge(s, "1.00", extra: ["--timeout", "20"])
        try await waitFor("the network's decision") { s.relay.seen.contains("held-answer") }
        terminal.send(SIGKILL)
        try await exited(terminal)
        let before = try await ledger(s.deployment)
        #expect(before.balance == 550 && before.held == 2)

        let recovered = try await orchard(["terminal", "recover", "--data-dir", s.directory.path])
        #expect(recovered.status == 0, "\(recovered.stderr)")
        #expect(recovered.stdout.contains("\"reversed\""), "\(recovered.stdout)")
        let after = try await ledger(s.deployment)
        #expect(after.balance == 450 && after.held == 1 && after.entries == 2)
        // A second recovery has nothing left to do; the issuer is unchanged.
        _ = try await orchard(["terminal", "recover", "--data-dir", s.directory.path])
        #expect(try await ledger(s.deployment).balance == 450)

        // The anonymous purchase data arrived (two taps released a cryptogram, a third tap may be in flight)
        // and holds nothing but its three fields.
        try await waitFor("the anonymous records") {
            let output = try await orchard(["analytics", "--data-dir", s.directory.path])
            let json = try? JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any]
            return (json?["purchases"] as? Int ?? 0) >= 2
        }
        let analytics = try await orchard(["analytics", "--data-dir", s.directory.path])
        let summary = try #require(
            try JSONSerialization.jsonObject(with: Data(analytics.stdout.utf8)) as? [String: Any])
        // Two purchases: under the five a cell needs to be shown, so counted and withheld.
        #expect((summary["purchases"] as? Int) == 2 && (summary["withheld"] as? Int) == 2)
        #expect((summary["byAmountBucket"] as? [String: Int])?.isEmpty == true)

        // No FPAN at the terminal, the acquirer or the Pay server, in any form; the DPAN only masked there.
        s.network.stop()
        s.pay.stop()
        s.phone.stop()
        let deployment = s.deployment
        var paths: [String] = []
        for party in ["terminal", "acquirer", "pay"] {
            let file = deployment.path + "/\(party).sqlite"
            paths += [file, file + "-wal", file + "-shm"]
        }
        paths += ["terminal", "network", "pay"].map { deployment.path + "/logs/\($0).log" }
        var scanned = 0
        for path in paths where FileManager.default.fileExists(atPath: path) {
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
            scanned += 1
            for form in cardNumberForms(Self.fpan) { #expect(!bytes.containsSequence(form), "FPAN in \(path)") }
            if !path.hasSuffix("network.log") {
                for form in cardNumberForms(s.dpan) { #expect(!bytes.containsSequence(form), "DPAN in \(path)") }
            }
        }
        #expect(scanned >= 4)
    }

    @Test("R1: the network killed before it saw the authorization, and after it decided → at most one, then none held")
    func networkKilled() async throws {
        let s = try await setUp()
        defer {
            s.phone.stop()
            s.network.stop()
            s.pay.stop()
        }
        var network = s.network

        // Killed after deciding: the answer never leaves it.
        s.relay.set(.holdAnswer)
        let first = try startCharge(s, "2.00", extra: ["--timeout", "3", "--attempts", "1"])
        try await waitFor("the network's decision") { s.relay.seen.contains("held-answer") }
        network.kill()
        try await exited(first)
        let decided = try await ledger(s.deployment)
        #expect(decided.balance == 200 && decided.held == 1)

        // Restarted, the pending reversal goes out: released once.
        network = try ServiceChild(s.deployment, .network)
        _ = try await network.baseURL()
        let recovered = try await orchard(["terminal", "recover", "--data-dir", s.directory.path])
        #expect(recovered.status == 0, "\(recovered.stderr)")
        let released = try await ledger(s.deployment)
        #expect(released.balance == 0 && released.held == 0 && released.entries == 1)

        // Killed before the authorization reached it: the reversal comes first and blocks the transaction.
        s.relay.set(.holdRequest)
        let second = try startCharge(s, "3.00", extra: ["--timeout", "1", "--attempts", "1"])
        try await waitFor("the held request") { s.relay.seen.contains("held-request") }
        network.kill()
        try await exited(second)
        network = try ServiceChild(s.deployment, .network)
        _ = try await network.baseURL()
        let again = try await orchard(["terminal", "recover", "--data-dir", s.directory.path])
        #expect(again.status == 0, "\(again.stderr)")
        let blocked = try await ledger(s.deployment)
        #expect(blocked.balance == 0 && blocked.held == 0)
        network.stop()
    }
}
