import Acquirer
import CommandTestSupport
import Foundation
import NetworkServer
import OrchardRuntime
import OrchardStore
import Terminal
import Testing

/// A deployment as `orchard init` makes it, with `orchard serve network` running: the phone takes only the
/// deployment's token service's installs; the terminal finds the network through its run record, trusts the
/// deployment's root CA, and presents the client certificate `orchard terminal setup` issued it (role
/// `acquiring`), which the acquiring route requires; the acquirer knows the merchant and terminal, and the
/// payment is approved.
@Suite("In store against a deployed network", .serialized)
struct DeployedNetworkTests {
    @Test("init, serve network, device run, terminal setup, charge: the network answers; without the certificate, 96")
    func deployed() async throws {
        let directory = try TemporaryDirectory()
        let deployment = directory.deployment
        let initialised = try await orchard(["init", "--data-dir", directory.path])
        #expect(initialised.status == 0, "\(initialised.stderr)")

        // `init` onboarded the demo merchant and its terminal at the acquirer, and gave the merchant its
        // acquiring client certificate.
        let acquirerStore = try SQLiteAcquirerStore(path: deployment.databasePath(for: .acquirer))
        let merchant = try await acquirerStore.merchant(id: "merchant.dev.orchard.demo")
        await acquirerStore.store.close()
        #expect(merchant?.terminalIDs == ["T0001"] && merchant?.status == .active)
        #expect(
            FileManager.default.fileExists(atPath: deployment.pkiFolderPath("merchant") + "/merchant-acquiring.pem"))
        #expect(
            FileManager.default.fileExists(atPath: deployment.pkiFolderPath("merchant") + "/merchant-acquiring.key"))

        try await createDevice(directory, "phone", kind: "phone", biometry: "face")
        let phone = try await DeviceProcessHandle(deployment, name: "phone", autoAuth: "face-id")
        let network = try ServiceProcess(deployment, service: "network")
        defer { network.stop() }
        _ = try await network.baseURL()  // it listens and published its run record

        // A card the network never issued (personalised here under a test key) is refused by the phone's Secure
        // Element: it installs only what this deployment's token service signed.
        await #expect(throws: (any Error).self) {
            try await phone.provision(dpan: TestIssuer.visaDPAN, network: "visa", suffix: "1111")
        }
        // Provisioned through the deployed network (the Pay server started for the command) instead.
        let added = try await orchard(
            [
                "device", "add-card", "--data-dir", directory.path, "--name", "phone", "--expiry", "12/34",
                "--cardholder", "Alice Doe",
            ], stdin: "4111111111111111\n266\n")
        #expect(added.status == 0, "\(added.stderr)")

        // The terminal: set up (its client certificate issued from the root), then a charge.
        let setup = try await orchard(["terminal", "setup", "--data-dir", directory.path])
        #expect(setup.status == 0 && setup.stderr.contains("pki/terminal-t0001-client.pem"), "\(setup.stderr)")
        let (_, approved) = try await charge(directory, "4.50", device: "phone")
        #expect(
            approved["outcome"] as? String == "approved" && approved["responseCode"] as? String == "00", "\(approved)")
        #expect(approved["attempts"] as? Int == 1 && (approved["maskedPan"] as? String ?? "").hasPrefix("489537"))

        // Without its certificate the acquiring route refuses the terminal.
        for suffix in [".pem", ".key"] {
            try FileManager.default.removeItem(
                atPath: deployment.pkiFolderPath("terminal") + "/terminal-t0001-client" + suffix)
        }
        let (_, refused) = try await charge(directory, "4.50", device: "phone")
        #expect(refused["outcome"] as? String == "declined" && refused["responseCode"] as? String == "96", "\(refused)")
        #expect((refused["reason"] as? String ?? "").contains("401"))
        phone.stop()
    }
}

/// `orchard serve <service>` as a child process, stopped with SIGTERM.
final class ServiceProcess: Sendable {
    let deployment: DeploymentDirectory
    let service: String
    private let process: ChildProcess

    init(_ deployment: DeploymentDirectory, service: String) throws {
        self.deployment = deployment
        self.service = service
        process = try ChildProcess(try orchardExecutable(), ["serve", service, "--data-dir", deployment.path])
    }

    deinit { stop() }

    /// The base URL from the run record, once the service published it.
    func baseURL() async throws -> String {
        for _ in 0..<2400 {
            if let record = try? deployment.runningService(try ServiceName(service)) { return record.baseURL }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw TerminalError(.notConfigured, "\(service) did not start")
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}
