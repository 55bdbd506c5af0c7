import CardBasics
import CommandTestSupport
import Device
import EMV
import Foundation
import Issuer
import MerchantServer
import NetworkAuthorizationAPI
import NetworkServer
import OrchardCrypto
import OrchardRuntime
import OrchardServices
import OrchardStore
import PayServer
import SecureElement
import Terminal
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Exactly-once authorizations across real processes: the network service (`orchard-network-crasher`, which is
/// `orchard serve network` with a probe) is killed with SIGKILL at each durable step of an authorization
/// (``AuthorizationStep``), started again, and sent the same request again by the terminal's HTTPS gateway with
/// the same STAN and Idempotency-Key. Each time: the retry is approved, every later retry gets that same answer,
/// the issuer holds the money once, and its approval code is the one the issuer recorded first.
@Suite("R2: an authorization killed at each step and retried: one hold, the first answer", .serialized)
struct ExactlyOnceTests {
    /// The test-only network process.
    final class Network: Sendable {
        let process: ChildProcess
        let deployment: DeploymentDirectory

        init(_ deployment: DeploymentDirectory, killAt step: AuthorizationStep?) throws {
            self.deployment = deployment
            let executable = URL(fileURLWithPath: try orchardExecutable()).deletingLastPathComponent()
                .appendingPathComponent("orchard-network-crasher").path
            process = try ChildProcess(
                executable, [deployment.path] + (step.map { [$0.rawValue] } ?? []), stdout: .capture, stderr: .capture)
        }

        deinit { process.kill() }

        /// Waits (without blocking a thread) for "LISTENING <port>" and returns the base URL.
        func baseURL() async throws -> String {
            for _ in 0..<2400 {
                let line = process.stdout.split(separator: "\n").first { $0.hasPrefix("LISTENING ") }
                if let line { return "https://127.0.0.1:" + line.dropFirst("LISTENING ".count) }
                guard process.isRunning else {
                    throw CommandTestFailure("the network crasher ended: \(process.stderr)")
                }
                try await Task.sleep(for: .milliseconds(25))
            }
            throw CommandTestFailure("the network crasher did not start: \(process.stderr)")
        }
    }

    /// The issuer's ledger: the test card's balance and, by network transaction ID, its authorizations.
    func ledger(_ deployment: DeploymentDirectory) async throws -> (balance: Int64, entries: [IssuerAuthorizationEntry])
    {
        let store = try await SQLiteIssuerStore.open(in: deployment)
        let balance = try await store.account(id: "acct-1")?.balance ?? -1
        let ids = try await store.store.read { database in
            try database.query("SELECT network_transaction_id FROM authorizations", []) { row in try row.string(0) }
        }
        var entries: [IssuerAuthorizationEntry] = []
        for id in ids {
            if let entry = try await store.authorization(networkTransactionID: id) { entries.append(entry) }
        }
        await store.store.close()
        return (balance, entries)
    }

    /// A tap of the phone (opened in this process, Face ID) at terminal T0001: the request the terminal sends.
    func tap(
        _ phone: Device, amount: Int64, stan: String, merchantID: String
    ) async throws
        -> Terminal.AuthorizationRequest
    {
        guard case .authorized = try await phone.authenticate(.faceID(matched: true)) else {
            throw CommandTestFailure("Face ID did not authorize")
        }
        try await phone.fieldOn()
        let kernel = TerminalKernel(configuration: TerminalConfiguration(countryCode: 840, currencyCode: 840))
        let outcome = try await kernel.run(
            TransactionParameters(amount: UInt64(amount), date: try TransactionDate(yymmdd: "261201")),
            card: SecureElementFieldLink(phone.secureElement))
        try await phone.fieldOff()
        let card = try #require(outcome.card)
        return Terminal.AuthorizationRequest(
            terminalID: "T0001", systemTraceAuditNumber: stan, merchantID: merchantID,
            pan: try PrimaryAccountNumber(card.pan), expiry: card.expiry,
            panSequenceNumber: card.panSequenceNumber ?? 0,
            amount: try Money(minorUnits: amount, currency: Currency("840")), scheme: card.scheme,
            cryptogram: card.cryptogram, applicationTransactionCounter: card.atc, chipData: card.field55Bytes,
            transmittedAt: Date())
    }

    func gateway(_ deployment: DeploymentDirectory, _ baseURL: String) throws -> AcquirerHTTPSGateway {
        try AcquirerHTTPSGateway(
            baseURL: baseURL, trustedRootsPEM: try deployment.readCertificate(named: "root-ca"),
            clientCertificateChainPEM: try deployment.readCertificate(named: "terminal-t0001-client"),
            clientPrivateKeyPEM: try deployment.readPrivateKey(named: "terminal-t0001-client"),
            requestTimeout: .seconds(10))
    }

    @Test(
        "R2, R3: killed after the ATC, the issuer's hold, the network's record, before the reply; nothing to reconcile")
    func killedAtEachStepThenRetried() async throws {
        let directory = try TemporaryDirectory()
        let deployment = directory.deployment
        let cardFile = try writeCardFile(number: "4111111111111111", cvv: "266")
        defer { try? FileManager.default.removeItem(atPath: cardFile) }
        for command in [
            ["init"],
            ["device", "create", "--name", "phone", "--kind", "phone", "--biometry", "face", "--passcode-file", "-"],
            [
                "device", "add-card", "--name", "phone", "--card-file", cardFile,
                "--expiry", "12/34", "--cardholder", "Alice Doe",
            ],
            ["terminal", "setup"],
        ] {
            let output = try await orchard(command + ["--data-dir", directory.path], stdin: "8642\n")
            try #require(output.status == 0, "\(command.prefix(2)): \(output.stderr)")
        }
        let settings = try #require(try await TerminalDatabase(deployment: deployment).terminal("T0001"))
        let phone = try await Device.open(in: deployment, name: "phone")
        var (balance, entries) = try await ledger(deployment)

        for (index, step) in AuthorizationStep.allCases.enumerated() {
            let amount = Int64(100 * (index + 1))
            let request = try await tap(
                phone, amount: amount, stan: String(format: "%06d", index + 1), merchantID: settings.merchantID)

            // The first attempt: the network dies at `step`, the terminal gets no answer.
            let crashing = try Network(deployment, killAt: step)
            let first = try gateway(deployment, try await crashing.baseURL())
            await #expect(throws: TerminalError.self) { try await first.authorize(request) }
            let termination = await crashing.process.exit()
            #expect(termination == .signalled(SIGKILL), "\(step): \(termination)")
            #expect(crashing.process.stdout.contains("KILLED \(step)"), "\(step)")
            let afterCrash = try await ledger(deployment)
            // Before the issuer was asked nothing is held; from the issuer's answer on, the hold is there.
            #expect(afterCrash.entries.count == entries.count + (step == .counterRecorded ? 0 : 1), "\(step)")

            // Restarted and retried with the same STAN: approved, and the same answer every time after.
            let restarted = try Network(deployment, killAt: nil)
            let retry = try gateway(deployment, try await restarted.baseURL())
            let answer = try await retry.authorize(request)
            #expect(answer.isApproved, "\(step): \(answer)")
            #expect(try await retry.authorize(request) == answer, "\(step)")
            restarted.process.terminate()
            #expect(await restarted.process.exit() == .exited(0))

            let now = try await ledger(deployment)
            #expect(now.balance == balance + amount, "\(step): held once")
            let new = now.entries.filter { entry in
                !entries.contains { $0.response.networkTransactionID == entry.response.networkTransactionID }
            }
            #expect(new.count == 1 && new.first?.response.responseCode.isApproved == true, "\(step)")
            // The first answer: the approval code the issuer recorded before the crash.
            #expect(new.first?.response.approvalCode == answer.approvalCode, "\(step)")
            if step != .counterRecorded {
                #expect(afterCrash.entries.contains { $0.response.approvalCode == answer.approvalCode }, "\(step)")
            }
            (balance, entries) = (now.balance, now.entries)
        }
        #expect(entries.filter { $0.response.responseCode.isApproved && $0.reversedAt == nil }.count == 4)

        // A day later, reconciliation finds nothing to reverse: every hold has its final answer at the network and
        // every authorization its result at the acquirer.
        let registry = try ServiceRegistry([NetworkServerService(), PayService(), MerchantService()])
        let report = try await NetworkServer.reconcileOnce(
            configuration: try registry.loadConfiguration(from: deployment, environment: [:]), directory: deployment,
            environment: ServiceEnvironment(wallClock: ManualClock(now: Date().addingTimeInterval(86_400))))
        #expect(report.count == 0 && report.holds.isEmpty && report.acquirer.isEmpty, "\(report)")
        #expect(try await ledger(deployment).balance == balance)
    }
}
