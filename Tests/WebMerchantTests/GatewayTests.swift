import AccessPolicy
import Foundation
import MerchantServer
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardStore
import OrchardX509
import PayServer
import Testing
import WebMerchantAPI

/// The web gateway over mutual TLS at `apple-pay-gateway.orchard.test`, against a deployment `init` made and a
/// running Pay server: Apple's documented curl test as written (with libcurl), Apple's error format, and the
/// handshake refusing a foreign CA.
@Suite("Web merchants: the gateway over mutual TLS", .serialized)
struct GatewayTests {
    static let demo = WebCommandTests.demo
    static let url = "https://apple-pay-gateway.orchard.test/paymentservices/paymentSession"

    /// `curl --cert identity.pem --key identity.key --cacert root-ca.pem --connect-to
    /// apple-pay-gateway.orchard.test:443:127.0.0.1:PORT --data '{…}' URL`.
    static func curl(
        _ directory: DeploymentDirectory, port: Int, identity: TLSIdentity?, method: HTTPMethod = .post, body: String
    ) async throws -> HTTPResponse {
        let client = try HTTPClient(
            configuration: HTTPClientConfiguration(
                trustedRootsPEM: try directory.readCertificate(named: PKIFiles.rootCA),
                clientCertificateChainPEM: identity?.certificateChainPEM, clientPrivateKeyPEM: identity?.privateKeyPEM,
                maxAttempts: 1, connectTo: [WebMerchantAPI.HostNames.gateway: port]))
        defer { client.shutdown() }
        // curl --data sends its default form type.
        return try await client.send(
            HTTPClientRequest(
                method: method, url: url, headers: ["Content-Type": "application/x-www-form-urlencoded"],
                body: Data(body.utf8)))
    }

    @Test("W3: Apple's curl test works as written: a merchant session from the identity certificate over mutual TLS")
    func curlAsWritten() async throws {
        let deployment = try await WebCommandTests.Deployment()
        let directory = deployment.directory
        let host = try await ServiceHost.start(
            [.pay], directory: directory, registry: try ServiceRegistry([PayService(), MerchantService()]),
            publish: false, anyPort: true)
        let port = try #require(host.endpoint(of: .pay)?.port)
        let identity = try TLSIdentity.load(named: "merchant-identity", from: directory)
        let body =
            #"{"merchantIdentifier": "merchant.dev.orchard.demo", "displayName": "Orchard Demo", "#
            + #""initiative": "web", "initiativeContext": "store.orchard.test"}"#
        let answer = try await Self.curl(directory, port: port, identity: identity, body: body)
        #expect(answer.status == .ok, "\(String(decoding: answer.body, as: UTF8.self))")
        // The reader's type parses what the writer sent, and the signature verifies to pki/token-root.pem.
        let session = try MerchantSession(json: Array(answer.body))
        #expect(session.domainName == "store.orchard.test" && session.displayName == "Orchard Demo")
        #expect(session.merchantIdentifier == AssociationFiles.merchantHash(Self.demo))
        let root = try Certificate(pemEncoded: try directory.readCertificate(named: "token-root"))
        let verifier = try MerchantSessions.verifier(root: root, clock: SystemClock())
        #expect(MerchantSessions.problem(with: session, verifier: verifier, now: Date()) == nil)

        // Apple's error format: GET, another domain, no certificate.
        let get = try await Self.curl(directory, port: port, identity: identity, method: .get, body: "")
        let getError = try JSONDecoder().decode(GatewayError.self, from: get.body)
        #expect(get.status == .badRequest && getError.statusCode == "400")
        #expect(getError.statusMessage.hasPrefix("Payment Services Exception reason=\"GET is not supported"))
        let wrong = try await Self.curl(
            directory, port: port, identity: identity,
            body: body.replacingOccurrences(of: "store.orchard.test", with: "elsewhere.orchard.test"))
        #expect(wrong.status == .badRequest)
        #expect(
            try JSONDecoder().decode(GatewayError.self, from: wrong.body).statusMessage.contains(
                "elsewhere.orchard.test is not a validated domain"))
        let anonymous = try await Self.curl(directory, port: port, identity: nil, body: body)
        #expect(anonymous.status == .badRequest)
        #expect(String(decoding: anonymous.body, as: UTF8.self).contains("no client certificate"))

        // A certificate from a foreign CA never reaches the route: the handshake refuses it.
        let foreignCA = try CertificateAuthority.create(
            subject: DistinguishedName([.commonName("Foreign CA")]), issuer: nil, lifetime: 86_400,
            clock: SystemClock(), random: SystemRandom())
        let key = try P256.Signing.PrivateKey()
        let foreign = try Certificate.issue(
            subject: DistinguishedName([.userID(Self.demo)]), publicKey: CertificatePublicKey(key.publicKey),
            issuer: foreignCA.issuer, notValidBefore: Date().addingTimeInterval(-60),
            notValidAfter: Date().addingTimeInterval(3600),
            extensions: [.basicConstraints(isCA: false), .extendedKeyUsage([.clientAuth])])
        let foreignIdentity = TLSIdentity(
            certificateChainPEM: foreign.pemRepresentation,
            privateKeyPEM: SecureBytes(Array(try key.pemRepresentation.utf8)))
        await #expect(throws: HTTPError.self) {
            _ = try await Self.curl(directory, port: port, identity: foreignIdentity, body: body)
        }
        await host.stop()
    }

    @Test("W3: orchard merchant session prints a session; session verify checks its signature, fields and age")
    func commands() async throws {
        let deployment = try await WebCommandTests.Deployment()
        let (rc, output) = await deployment.rc(["merchant", "session", "--domain", "store.orchard.test"])
        #expect(rc == 0, "\(output.stderr)")
        let session = try MerchantSession(json: Array(output.stdout.utf8.dropLast()))
        #expect(session.domainName == "store.orchard.test")
        let file = deployment.temporary.child("session.json")
        try Data(output.stdout.utf8).write(to: URL(fileURLWithPath: file))
        let (verified, summary) = await deployment.rc(["merchant", "session", "verify", file])
        #expect(verified == 0, "\(summary.stderr)")
        #expect(summary.stdout.contains("\"valid\" : true") || summary.stdout.contains("\"valid\":true"))

        // Altered: another domain in the same session.
        let altered = deployment.temporary.child("altered.json")
        try Data(output.stdout.replacingOccurrences(of: "store.orchard.test", with: "evil.orchard.test").utf8).write(
            to: URL(fileURLWithPath: altered))
        let (refused, refusal) = await deployment.rc(["merchant", "session", "verify", altered])
        #expect(refused == 1)
        #expect(refusal.stderr.hasPrefix("error: \(altered): the signature does not verify"))
        // Not a session at all.
        let (garbage, garbageOutput) = await deployment.rc([
            "merchant", "session", "verify", deployment.path + "/config.json",
        ])
        #expect(garbage == 1 && garbageOutput.stderr.contains("is not a merchant session"))
        // A domain the merchant has not validated: Apple's message, one error line.
        let (unvalidated, message) = await deployment.rc(["merchant", "session", "--domain", "other.orchard.test"])
        #expect(unvalidated == 1)
        #expect(message.stderr.hasPrefix("error: Payment Services Exception merchantId="))
        #expect(message.stdout.isEmpty)
    }

    @Test(
        "W3, W7: a capability statement at pay.orchard.test, without any client certificate, after 400 junk questions")
    func capabilityOverHTTPS() async throws {
        let deployment = try await WebCommandTests.Deployment()
        let directory = deployment.directory
        // The budgets refill on the monotonic clock: fixed here, so what the junk may take does not depend on how
        // long it takes.
        let host = try await ServiceHost.start(
            [.pay], directory: directory, registry: try ServiceRegistry([PayService(), MerchantService()]),
            environment: ServiceEnvironment(monotonicClock: ManualClock(now: Date())), publish: false, anyPort: true)
        let port = try #require(host.endpoint(of: .pay)?.port)
        let configuration = HTTPClientConfiguration(
            trustedRootsPEM: try directory.readCertificate(named: PKIFiles.rootCA), maxAttempts: 1,
            maxCachedConnections: 1, connectTo: [WebMerchantAPI.HostNames.pay: port])
        let url = "https://" + WebMerchantAPI.HostNames.pay + WebMerchantAPI.Capability.path
        // 400 questions about pairs nobody validated, over 8 connections (8 source ports) at once: a client's small
        // budget answers a few, the rest are refused 429; none draws on the budget validated pairs are signed from.
        let statuses = try await withThrowingTaskGroup(of: [Int].self) { group in
            for connection in 0..<8 {
                group.addTask {
                    let junk = try HTTPClient(configuration: configuration)
                    defer { junk.shutdown() }
                    var statuses: [Int] = []
                    for index in 0..<50 {
                        let question = CapabilityRequest(
                            merchantIdentifier: "merchant.junk.\(connection).\(index)", domain: "junk\(index).test")
                        statuses.append(
                            try await junk.send(try HTTPClientRequest.json(.post, url, question)).status.code)
                    }
                    return statuses
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(statuses.count == 400 && Set(statuses).isSubset(of: [200, 429]))
        #expect(statuses.filter { $0 == 200 }.count == CapabilityStatements.Budgets().clientBurst)
        let client = try HTTPClient(configuration: configuration)
        defer { client.shutdown() }
        let answer = try await client.send(
            try HTTPClientRequest.json(
                .post, "https://" + WebMerchantAPI.HostNames.pay + WebMerchantAPI.Capability.path,
                CapabilityRequest(merchantIdentifier: Self.demo, domain: "store.orchard.test")))
        #expect(answer.status == .ok, "\(String(decoding: answer.body, as: UTF8.self))")
        let statement = try CapabilityStatement(json: Array(answer.body))
        #expect(statement.validated && statement.domain == "store.orchard.test")
        let root = try Certificate(pemEncoded: try directory.readCertificate(named: "token-root"))
        #expect(
            CapabilityStatements.problem(
                with: statement, verifier: try CapabilityStatements.verifier(root: root, clock: SystemClock()),
                now: Date())
                == nil)
        await host.stop()
    }

    @Test("The gateway's routes are pinned in the contract and served by the Pay server")
    func contract() {
        #expect(WebMerchantAPI.Gateway.paymentSession == "/paymentservices/paymentSession")
        #expect(WebMerchantAPI.Gateway.startSession == "/paymentservices/startSession")
        #expect(WebMerchantAPI.Gateway.Declared.all.allSatisfy { $0.policy == .anyone })
        #expect(WebMerchantAPI.Capability.declared.description == "POST /v1/web/capability: anyone")
        #expect(
            WebMerchantAPI.Gateway.Declared.all.map(\.description) == [
                "POST /paymentservices/paymentSession: anyone", "POST /paymentservices/startSession: anyone",
                "GET /paymentservices/paymentSession: anyone", "GET /paymentservices/startSession: anyone",
            ])
    }
}

extension GatewayTests {
    @Test("A gateway body giving a key twice is refused in Apple's error form, whatever the order; no session recorded")
    func gatewayBodyWithAKeyTwice() async throws {
        let deployment = try await WebCommandTests.Deployment()
        let directory = deployment.directory
        let host = try await ServiceHost.start(
            [.pay], directory: directory, registry: try ServiceRegistry([PayService(), MerchantService()]),
            publish: false, anyPort: true)
        let port = try #require(host.endpoint(of: .pay)?.port)
        let identity = try TLSIdentity.load(named: "merchant-identity", from: directory)
        let members =
            #""merchantIdentifier": "merchant.dev.orchard.demo", "displayName": "Orchard Demo", "initiative": "web""#
        for (first, second) in [
            ("store.orchard.test", "elsewhere.orchard.test"), ("elsewhere.orchard.test", "store.orchard.test"),
        ] {
            let body =
                "{\(members), \"initiativeContext\": \"\(first)\", \"initiativeContext\": \"\(second)\"}"
            let answer = try await Self.curl(directory, port: port, identity: identity, body: body)
            let error = try JSONDecoder().decode(GatewayError.self, from: answer.body)
            #expect(answer.status == .badRequest && error.statusCode == "400")
            #expect(
                error.statusMessage.hasPrefix("Payment Services Exception merchantId=")
                    && error.statusMessage.contains("'initiativeContext' appears twice"),
                "\(error.statusMessage)")
        }
        let store = try PayStore.open(in: directory)
        let sessions = try await store.read { db in
            try db.queryFirst("SELECT count(*) FROM merchant_sessions", []) { try $0.int(0) }
        }
        #expect(sessions == 0)
        await store.close()
        await host.stop()
    }

    @Test("W3: The gateway is a virtual host: its paths only under its name (421 elsewhere), no Pay route under it")
    func gatewayIsAVirtualHost() async throws {
        let deployment = try await WebCommandTests.Deployment()
        let directory = deployment.directory
        let host = try await ServiceHost.start(
            [.pay], directory: directory, registry: try ServiceRegistry([PayService(), MerchantService()]),
            publish: false, anyPort: true)
        let port = try #require(host.endpoint(of: .pay)?.port)
        let identity = try TLSIdentity.load(named: "merchant-identity", from: directory)
        let client = try HTTPClient(
            configuration: HTTPClientConfiguration(
                trustedRootsPEM: try directory.readCertificate(named: PKIFiles.rootCA),
                clientCertificateChainPEM: identity.certificateChainPEM, clientPrivateKeyPEM: identity.privateKeyPEM,
                maxAttempts: 1,
                connectTo: [WebMerchantAPI.HostNames.gateway: port, WebMerchantAPI.HostNames.pay: port]))
        defer { client.shutdown() }
        let body = try JSONCoding.encode(
            PaymentSessionRequest(
                merchantIdentifier: Self.demo, displayName: "Orchard Demo", initiativeContext: "store.orchard.test"))
        func post(_ host: String, _ path: String, _ body: Data) async throws -> HTTPResponse {
            try await client.send(
                HTTPClientRequest(
                    method: .post, url: "https://" + host + path, headers: ["Content-Type": "application/json"],
                    body: body))
        }
        // The session under the gateway's name, with a port in the Host as well.
        let session = try await post(WebMerchantAPI.HostNames.gateway, WebMerchantAPI.Gateway.paymentSession, body)
        #expect(session.status == .ok, "\(String(decoding: session.body, as: UTF8.self))")
        let withPort = try await post(
            WebMerchantAPI.HostNames.gateway + ":443", WebMerchantAPI.Gateway.paymentSession, body)
        #expect(withPort.status == .ok)
        // The gateway's paths under the Pay server's own name: refused before the handler (nothing recorded).
        for path in [WebMerchantAPI.Gateway.paymentSession, WebMerchantAPI.Gateway.startSession] {
            let misdirected = try await post(WebMerchantAPI.HostNames.pay, path, body)
            #expect(misdirected.status.code == 421, "\(path)")
            #expect(String(decoding: misdirected.body, as: UTF8.self).contains("misdirected_request"))
        }
        // Pay routes under the gateway's name: refused; under the Pay server's name they answer.
        let capability = try JSONCoding.encode(
            CapabilityRequest(merchantIdentifier: Self.demo, domain: "store.orchard.test"))
        #expect(
            try await post(WebMerchantAPI.HostNames.gateway, WebMerchantAPI.Capability.path, capability).status.code
                == 421)
        #expect(try await post(WebMerchantAPI.HostNames.pay, WebMerchantAPI.Capability.path, capability).status == .ok)
        let health = try await client.send(
            HTTPClientRequest(url: "https://" + WebMerchantAPI.HostNames.gateway + "/health"))
        #expect(health.status.code == 421)
        #expect(
            try await client.send(HTTPClientRequest(url: "https://" + WebMerchantAPI.HostNames.pay + "/health")).status
                == .ok)
        await host.stop()
    }
}
