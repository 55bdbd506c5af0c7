import CommandTestSupport
import Device
import Foundation
import MerchantServer
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardStore
import PayAPI
import PayClient
import PayServer
import SecureElement
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Several instances of the Pay server on one PostgreSQL database (the test run's server), each a real HTTPS
/// server on loopback: instance 1 and 2 in this process (`ServiceHost.start(instance:)`), or instance 2 as
/// `orchard serve pay --instance 2` when it is killed.
@Suite(
    "Several Pay server instances on one PostgreSQL database", .serialized,
    .enabled(if: TestPostgreSQL.enabled, Comment(rawValue: TestPostgreSQL.installHint)))
struct MultiInstanceTests {
    /// The in-app fixture on PostgreSQL with a second Pay server instance in this process.
    static func twoInstances() async throws -> (InAppFixture, ServiceHost, String) {
        let f = try await InAppFixture(database: try await TestPostgreSQL.shared().freshDatabase())
        let second = try await ServiceHost.start(
            [.pay], directory: f.directory, registry: try ServiceRegistry([PayService(), MerchantService()]),
            environment: ServiceEnvironment(wallClock: f.clock, monotonicClock: f.clock), publish: false, instance: 2)
        let base = try #require(second.endpoint(of: .pay)).baseURL
        #expect(base != f.base)
        return (f, second, base)
    }

    static func post(
        _ client: HTTPClient, _ url: String, _ sealed: [UInt8], key: String? = nil
    ) async throws -> HTTPResponse {
        try await client.send(
            try HTTPClientRequest.json(
                .post, url + "/v1/payments/credential", ["credential": Data(sealed).base64EncodedString()],
                headers: key.map { ["Idempotency-Key": $0] } ?? [:]))
    }

    @Test("A3: two Pay server instances redeem one nonce at once: one token; a nonce of one is good at the other")
    func oneNonceTwoInstances() async throws {
        let (f, second, base2) = try await Self.twoInstances()
        let phone = try await f.device("phone-a")
        // Issued by instance 1, redeemed at instance 2.
        let first = try f.credential(try await f.nonce(for: phone), signer: phone)
        #expect(try await Self.post(phone.client, base2, first).status == .ok)
        // One nonce, 32 redemptions spread over both instances at once.
        let sealed = try f.credential(try await f.nonce(for: phone), signer: phone)
        let statuses = try await withThrowingTaskGroup(of: (Int, String?).self) { group in
            for index in 0..<32 {
                group.addTask {
                    let response = try await Self.post(phone.client, index % 2 == 0 ? f.base : base2, sealed)
                    return (response.status.code, InAppFixture.errorCode(response))
                }
            }
            var all: [(Int, String?)] = []
            for try await status in group { all.append(status) }
            return all
        }
        #expect(statuses.filter { $0.0 == 200 }.count == 1)
        #expect(statuses.filter { $0.1 == "nonceUsed" }.count == 31)
        let store = try f.payStore()
        let records = try await store.read { db in
            try db.queryFirst("SELECT sum(purchases) FROM in_app_purchase_tallies", [], { try $0.int(0) })
        }
        #expect(records == 2)
        await store.close()
        await second.stop()
        await f.close()
    }

    /// A resume challenge for `device` (a fresh random challenge per request, so equal bytes mean a replay).
    static func challengeRequest(_ device: String, key: String?) -> HTTPClientRequest {
        HTTPClientRequest(
            method: .post, url: PayAPI.Route.resumeChallenge(device: device),
            headers: key.map { ["Idempotency-Key": $0, "Content-Type": "application/json"] }
                ?? ["Content-Type": "application/json"],
            body: Data("{}".utf8))
    }

    @Test("R2: a retry sent to the other instance, with the same Idempotency-Key, gets the first answer")
    func retryAtTheOtherInstance() async throws {
        let (f, second, base2) = try await Self.twoInstances()
        let phone = try await f.device("phone-a")
        let one = try FailoverEndpoints([f.base])
        let two = try FailoverEndpoints([base2])
        let answer = try await phone.client.send(Self.challengeRequest("phone-a", key: "pay-retry-1"), failover: one)
        try #require(answer.status == .ok, "\(String(decoding: answer.body, as: UTF8.self))")
        let retry = try await phone.client.send(Self.challengeRequest("phone-a", key: "pay-retry-1"), failover: two)
        #expect(retry.status == .ok && retry.body == answer.body)
        // Without the key the repeat is a new request: a new challenge.
        let fresh = try await phone.client.send(Self.challengeRequest("phone-a", key: nil), failover: two)
        #expect(fresh.status == .ok && fresh.body != answer.body)
        await second.stop()
        await f.close()
    }

    @Test(
        "orchard serve pay --instance 2: its own port, listed in config.json; killed, the client fails over, nothing lost"
    )
    func killedInstanceFailsOver() async throws {
        let f = try await InAppFixture(database: try await TestPostgreSQL.shared().freshDatabase())
        let child = try OrchardChild(["serve", "pay", "--instance", "2", "--data-dir", f.directory.path])
        let line = try await child.firstLine()
        let record = try ServiceRecord(json: Data(line.utf8))
        let base2 = ServiceEndpoint(host: record.host, port: record.port).baseURL
        #expect(try f.directory.runningService(.pay, instance: 2)?.port == record.port)
        let listed = try f.directory.loadConfiguration(
            schema: try ServiceRegistry([PayService(), MerchantService()]).schema, environment: [:])
        #expect(listed[ServiceSettings.instancePorts(.pay)] == [String(record.port)])
        let both = try FailoverEndpoints([base2, f.base])
        let phone = try await f.device("phone-a")

        // Instance 2 answers while it runs: a nonce, and an acknowledged request.
        let nonceResponse = try await phone.client.send(
            HTTPClientRequest(method: .post, url: "/v1/payments/nonce", body: Data("{}".utf8)), failover: both)
        try #require(nonceResponse.status == .ok)
        let body = try JSONSerialization.jsonObject(with: nonceResponse.body) as? [String: Any]
        let text = try #require(body?["nonce"] as? String)
        let pending = try #require(Data(base64Encoded: text).map { Array($0) })
        let acknowledged = try await phone.client.send(
            Self.challengeRequest("phone-a", key: "pay-kill-1"), failover: both)
        try #require(acknowledged.status == .ok)

        child.send(SIGKILL)
        _ = try await child.exitStatus()
        // The retry of the acknowledged request fails over to instance 1 and gets the same answer...
        let retry = try await phone.client.send(Self.challengeRequest("phone-a", key: "pay-kill-1"), failover: both)
        #expect(retry.status == .ok && retry.body == acknowledged.body)
        // ...and the nonce the killed instance issued is redeemed at instance 1.
        let payment = try HTTPClientRequest.json(
            .post, "/v1/payments/credential",
            ["credential": Data(try f.credential(pending, signer: phone)).base64EncodedString()])
        #expect(try await phone.client.send(payment, failover: both).status == .ok)
        #expect(try f.directory.runningService(.pay, instance: 2) == nil)
        // A device's PayServerClient given both instances registers through the one still running.
        let created = try Device.create(
            in: f.directory, name: "phone-b",
            profile: try DeviceProfile(kind: .phone, biometry: .face, account: "demo"))
        let payClient = try PayServerClient(
            baseURLs: [base2, f.base], trustedRootPEM: try f.directory.readCertificate(named: PKIFiles.rootCA),
            identity: try Device.clientIdentity(of: "phone-b", in: f.directory))
        #expect(payClient.endpoints == [base2, f.base])
        _ = try await payClient.register(
            secureElementCertificate: created.certificate, enclavePublicKey: P256.Signing.PrivateKey().publicKey)
        await f.close()
    }

    @Test("R2: one instance killed under load: every answer acknowledged before is given again, nothing is lost")
    func killedUnderLoad() async throws {
        let f = try await InAppFixture(database: try await TestPostgreSQL.shared().freshDatabase())
        let child = try OrchardChild(["serve", "pay", "--instance", "2", "--data-dir", f.directory.path])
        let record = try ServiceRecord(json: Data(try await child.firstLine().utf8))
        let both = try FailoverEndpoints([ServiceEndpoint(host: record.host, port: record.port).baseURL, f.base])
        let phone = try await f.device("phone-a")
        // 24 requests, each with its own key, through the failover client; instance 2 (tried first) is killed while
        // the first half is in flight.
        let answers = try await withThrowingTaskGroup(of: (String, HTTPResponse?).self) { group in
            for index in 0..<24 {
                if index == 12 { child.send(SIGKILL) }
                let key = "pay-load-\(index)"
                group.addTask {
                    let response = try? await phone.client.send(
                        Self.challengeRequest("phone-a", key: key), failover: both)
                    return (key, response)
                }
            }
            var all: [(String, HTTPResponse?)] = []
            for try await answer in group { all.append(answer) }
            return all
        }
        _ = try await child.exitStatus()
        // Every request was answered by an instance (the one killed or the other): none failed outright.
        #expect(answers.allSatisfy { $0.1 != nil })
        let acknowledged = answers.compactMap { key, response in response?.status == .ok ? (key, response!.body) : nil }
        #expect(acknowledged.count >= 12)
        for (key, body) in acknowledged {
            let again = try await phone.client.send(Self.challengeRequest("phone-a", key: key), failover: both)
            #expect(again.status == .ok && again.body == body, "\(key) was acknowledged, then answered otherwise")
        }
        await f.close()
    }

    @Test("serve --instance 2 is refused on SQLite files: instances share one database")
    func instancesNeedPostgreSQL() async throws {
        let temporary = try TemporaryDirectory()
        let directory = DeploymentDirectory(path: temporary.child("deployment"))
        let registry = try ServiceRegistry([PayService(), MerchantService()])
        _ = try await DeploymentInitializer.initialize(directory, registry: registry, options: .init())
        do {
            _ = try await ServiceHost.start(
                [.pay], directory: directory, registry: registry, publish: false, instance: 2)
            Issue.record("instance 2 on SQLite should be refused")
        } catch {
            #expect(error.code == .invalidConfiguration && error.message.contains("--database"))
        }
    }
}
