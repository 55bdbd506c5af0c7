import CommandTestSupport
import Foundation
import NetworkServer
import OrchardStore
import Testing

@testable import OrchardCLI

@Suite("orchard merchant")
struct MerchantCommandTests {
    @Test("csr, register with an RSA processing CSR and an app, certs, revoke")
    func onboarding() async throws {
        let directory = NSTemporaryDirectory() + "orchard-merchant-cli-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let deployment = directory + "/deployment"
        let initialize = Capture()
        #expect(await initialize.run(["init", "--data-dir", deployment]) == 0, "\(initialize.stderr)")

        let csr = Capture()
        #expect(
            await csr.run([
                "merchant", "csr", "--merchant", "merchant.dev.shop", "--key-type", "rsa", "--out", directory,
            ]) == 0, "\(csr.stderr)")
        let key = directory + "/merchant.dev.shop-processing.key"
        let permissions = try FileManager.default.attributesOfItem(atPath: key)[.posixPermissions] as? Int
        #expect(permissions == 0o600)
        let identityCSR = Capture()
        #expect(
            await identityCSR.run([
                "merchant", "csr", "--merchant", "merchant.dev.shop", "--kind", "identity", "--out", directory,
            ]) == 0)

        let register = Capture()
        #expect(
            await register.run([
                "merchant", "register", "--data-dir", deployment, "--merchant", "merchant.dev.shop", "--display-name",
                "Shop", "--processing-csr", directory + "/merchant.dev.shop-processing.csr", "--identity-csr",
                directory + "/merchant.dev.shop-identity.csr", "--app", "dev.shop.app", "--out", directory,
            ]) == 0, "\(register.stderr)")
        #expect(FileManager.default.fileExists(atPath: directory + "/merchant.dev.shop-processing.pem"))
        #expect(FileManager.default.fileExists(atPath: directory + "/merchant.dev.shop-identity.pem"))

        let list = Capture()
        #expect(
            await list.run(["merchant", "certs", "--data-dir", deployment, "--merchant", "merchant.dev.shop"]) == 0)
        let records = try #require(
            try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
        #expect(records.count == 2)
        let identity = try #require(records.first { $0["kind"] as? String == "identity" })
        #expect(identity["keyType"] as? String == "RSA-2048")
        let processing = try #require(records.first { $0["kind"] as? String == "processing" })
        #expect(processing["keyType"] as? String == "RSA-2048" && processing["revokedAt"] == nil)
        let serial = try #require(processing["serial"] as? String)

        let revoke = Capture()
        #expect(
            await revoke.run(["merchant", "certs", "--data-dir", deployment, "--revoke", serial.lowercased()]) == 0)
        #expect(revoke.stdout.contains("\"revokedAt\""))
        let unknown = Capture()
        #expect(await unknown.run(["merchant", "certs", "--data-dir", deployment, "--revoke", "00"]) == 1)

        // A CSR naming another merchant, a P-256 identity key, and a deployment without a Pay server: refused.
        let wrong = Capture()
        #expect(
            await wrong.run([
                "merchant", "register", "--data-dir", deployment, "--merchant", "merchant.dev.other", "--display-name",
                "Other", "--processing-csr", directory + "/merchant.dev.shop-processing.csr", "--out", directory,
            ]) == 1)
        let p256Identity = Capture()
        #expect(
            await p256Identity.run([
                "merchant", "csr", "--merchant", "merchant.dev.shop", "--kind", "identity", "--key-type", "p256",
            ]) == 2)
        #expect(p256Identity.stderr.contains("identity certificates are RSA-2048"))
        let empty = Capture()
        #expect(await empty.run(["merchant", "certs", "--data-dir", directory + "/nothing"]) == 1)
    }

    @Test("init lets the demo account charge for its merchant ID; register --acquiring-account adds one, durably")
    func acquiringAccount() async throws {
        let directory = NSTemporaryDirectory() + "orchard-merchant-acquiring-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let deployment = directory + "/deployment"
        let initialize = Capture()
        #expect(await initialize.run(["init", "--data-dir", deployment]) == 0, "\(initialize.stderr)")
        func register(_ merchant: String, account: String) async -> Int32 {
            await Capture().run([
                "merchant", "register", "--data-dir", deployment, "--merchant", merchant, "--display-name", "Shop",
                "--acquiring-account", account,
            ])
        }
        #expect(await register("merchant.dev.shop", account: "merchant.dev.orchard.demo") == 0)
        #expect(await register("merchant.dev.shop", account: "merchant.dev.orchard.demo") == 0)
        // No such account, or a malformed merchant ID: refused.
        #expect(await register("merchant.dev.other", account: "m-nope") == 1)
        #expect(await register("shop.example", account: "merchant.dev.orchard.demo") != 0)

        let store = try SQLiteAcquirerStore(path: deployment + "/acquirer.sqlite")
        let demo = "merchant.dev.orchard.demo"
        #expect(try await store.merchantID(forAppleMerchantID: demo) == demo)
        #expect(try await store.merchantID(forAppleMerchantID: "merchant.dev.shop") == demo)
        #expect(try await store.merchantID(forAppleMerchantID: "merchant.dev.other") == nil)
        await store.store.close()
    }
}

@Suite("orchard bench inapp")
struct InAppBenchCommandTests {
    @Test("A short run exchanges every credential for a token and reports the ceiling beside it")
    func shortRun() async throws {
        let capture = Capture()
        let rc = await capture.run([
            "bench", "inapp", "--requests", "24", "--connections", "3", "--ceiling-seconds", "1",
        ])
        #expect(rc == 0, "\(capture.stderr)")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(capture.stdout.utf8)) as? [String: Any])
        #expect(report["requests"] as? Int == 24 && report["connections"] as? Int == 3)
        #expect((report["tokensPerSecond"] as? Double ?? 0) > 0 && (report["ceilingPerSecond"] as? Double ?? 0) > 0)
        let bad = Capture()
        #expect(await bad.run(["bench", "inapp", "--requests", "5"]) == 2)
    }
}

@Suite("orchard bench overload")
struct OverloadBenchCommandTests {
    @Test("R5: A short overload run sheds by class, loses no acknowledged row and reports every figure")
    func shortRun() async throws {
        // As a process of its own: inside the test process its server and load generator would share the
        // concurrency pool (two threads) with every suite running in parallel, and measure nothing.
        let run = try await orchard(["bench", "overload", "--seconds", "2", "--multiple", "2", "--max-in-flight", "4"])
        #expect(run.status == 0, "\(run.stderr)")
        let report = try run.json()
        #expect(report["lost"] as? Int == 0 && (report["acknowledged"] as? Int ?? 0) > 0)
        #expect(report["maxInFlight"] as? Int == 4 && (report["capacityPerSecond"] as? Double ?? 0) > 0)
        let shed = try #require(report["shedFractionByClass"] as? [String: Double])
        #expect(Set(shed.keys) == ["payment", "order_creation", "analytics"])
        let bad = Capture()
        #expect(await bad.run(["bench", "overload", "--multiple", "11"]) == 2)
    }
}
