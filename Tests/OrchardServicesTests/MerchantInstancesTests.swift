import CommandTestSupport
import Foundation
import OrchardRuntime
import OrchardServices
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The app's side of several merchant server instances (issue 33 item 1): `orchard app buy` fails over from an
/// instance it cannot reach to the next running one, for the order and for the payment.
@Suite(
    "orchard app buy with several merchant instances", .serialized,
    .enabled(if: TestPostgreSQL.enabled, Comment(rawValue: TestPostgreSQL.installHint)))
struct MerchantInstancesTests {
    @Test("app buy passes over a merchant instance that cannot be reached and pays at the next one")
    func buyFailsOverToTheNextMerchantInstance() async throws {
        let url = try await TestPostgreSQL.shared().freshDatabase()
        let temporary = try TemporaryDirectory()
        let path = temporary.child("deployment")
        #expect(try await orchard(["init", "--data-dir", path, "--database", url]).status == 0)
        let directory = DeploymentDirectory(path: path)
        var children: [OrchardChild] = []
        defer {
            directory.withdraw(.merchant)
            for child in children { child.send(SIGKILL) }
        }
        for arguments in [["serve", "network"], ["serve", "pay"], ["serve", "merchant", "--instance", "2"]] {
            let child = try OrchardChild(arguments + ["--data-dir", path])
            children.append(child)
            _ = try await child.firstLine()
        }
        // Instance 1 is listed as running (this process) on a port nobody listens on.
        let unreachable = try DeploymentInitializer.freePorts(1)[0]
        try directory.publish(ServiceRecord(service: .merchant, host: "127.0.0.1", port: unreachable))

        let bought = try await orchard([
            "app", "buy", "--data-dir", path, "--item", "Coffee", "--amount", "9.99",
        ])
        #expect(bought.status == 0, "\(bought.stderr.suffix(2000))")
        let result = try bought.json()
        #expect(result["outcome"] as? String == "approved" && result["responseCode"] as? String == "00")
        for child in children { child.send(SIGINT) }
        for child in children { #expect(try await child.exitStatus() == 0) }
        children = []
    }
}
