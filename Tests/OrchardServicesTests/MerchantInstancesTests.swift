import CommandTestSupport
import Foundation
import MerchantAPI
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import Testing
import WebMerchantAPI

#if canImport(Glibc)
    import Glibc
#endif

/// The callers of several merchant and Pay server instances: `orchard app buy` fails over from a
/// merchant instance it cannot reach to the next running one, for the order and for the payment, and the merchant
/// asks the next Pay server instance's gateway for a page's merchant session.
@Suite(
    "Callers of several merchant and Pay server instances", .serialized,
    .enabled(if: TestPostgreSQL.enabled, Comment(rawValue: TestPostgreSQL.installHint)))
struct MerchantInstancesTests {
    @Test("app buy and a page's merchant session pass over instances that cannot be reached")
    func callersFailOverToTheNextInstance() async throws {
        let url = try await TestPostgreSQL.shared().freshDatabase()
        let temporary = try TemporaryDirectory()
        let path = temporary.child("deployment")
        #expect(try await orchard(["init", "--data-dir", path, "--database", url]).status == 0)
        let directory = DeploymentDirectory(path: path)
        var children: [OrchardChild] = []
        defer {
            directory.withdraw(.merchant)
            directory.withdraw(.pay)
            for child in children { child.send(SIGKILL) }
        }
        // Instance 1 of the Pay server and of the merchant are listed as running (this process) on ports nobody
        // listens on; instance 2 of each runs.
        let unreachable = try DeploymentInitializer.freePorts(2)
        try directory.publish(ServiceRecord(service: .pay, host: "127.0.0.1", port: unreachable[0]))
        try directory.publish(ServiceRecord(service: .merchant, host: "127.0.0.1", port: unreachable[1]))
        for arguments in [
            ["serve", "network"], ["serve", "pay", "--instance", "2"], ["serve", "merchant", "--instance", "2"],
        ] {
            let child = try OrchardChild(arguments + ["--data-dir", path])
            children.append(child)
            _ = try await child.firstLine()
        }

        let bought = try await orchard(["app", "buy", "--data-dir", path, "--item", "Coffee", "--amount", "9.99"])
        #expect(bought.status == 0, "\(bought.stderr.suffix(2000))")
        let result = try bought.json()
        #expect(result["outcome"] as? String == "approved" && result["responseCode"] as? String == "00")

        // The store's page asks its merchant for a session; the merchant asks the gateway at the Pay server.
        let site = try #require(try directory.runningService(.merchant, instance: 2)?.ports["site"])
        let page = try HTTPClient(
            configuration: HTTPClientConfiguration(
                trustedRootsPEM: try directory.readCertificate(named: PKIFiles.rootCA), maxAttempts: 1,
                connectTo: [WebMerchantAPI.HostNames.store: site]))
        defer { page.shutdown() }
        let session = try await page.send(
            try HTTPClientRequest.json(
                .post, "https://" + WebMerchantAPI.HostNames.store + MerchantAPI.Web.merchantSession,
                MerchantAPI.MerchantSessionRequest(
                    validationURL: "https://" + WebMerchantAPI.HostNames.gateway
                        + WebMerchantAPI.Gateway.paymentSession)))
        #expect(session.status == .ok, "\(String(decoding: session.body, as: UTF8.self))")
        #expect(String(decoding: session.body, as: UTF8.self).contains("\"merchantSessionIdentifier\""))

        for child in children { child.send(SIGINT) }
        for child in children { #expect(try await child.exitStatus() == 0) }
        children = []
    }
}
