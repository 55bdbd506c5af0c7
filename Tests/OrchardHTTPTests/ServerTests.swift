import Foundation
import OrchardCrypto
import OrchardLogging
import Testing

@testable import OrchardHTTP

/// The server over real sockets on loopback (port 0), with the checked-in test PKI.
@Suite("HTTPS server")
struct ServerTests {
    struct WhoAmI: Codable, Sendable {
        let subject: String
        let commonName: String?
        let organization: String?
        let fingerprintBytes: Int
    }

    static func routes() -> Router {
        var router = Router()
        router.get("/health") { _ in try .json(["status": "ok"]) }
        router.get("/whoami", requirement: .required) { request in
            let certificate = try #require(request.clientCertificate)
            return try .json(
                WhoAmI(
                    subject: certificate.subject, commonName: certificate.commonName,
                    organization: certificate.organization, fingerprintBytes: certificate.sha256Fingerprint.count))
        }
        router.get("/anyone") { request in try .json(["client": request.clientCertificate?.commonName ?? "none"]) }
        router.get("/merchant-only", requirement: .required { $0.organization == "Orchard Test Merchant" }) { _ in
            .text("ok")
        }
        router.get("/acquirer-only", requirement: .required { $0.organization == "Acquirer" }) { _ in .text("ok") }
        struct Payment: Codable, Sendable {
            let amount: Int
            let currency: String
        }
        router.post("/pay", json: { (payment: Payment, _: HTTPRequest) in payment })
        router.post("/upload") { request in try .json(["bytes": request.body.count]) }
        router.get("/slow") { request in
            try await Task.sleep(for: .milliseconds(Int(request.queryValue("ms") ?? "500") ?? 500))
            return .text("slow")
        }
        router.get("/id") { request in .text(request.requestID.uuidString.lowercased()) }
        return router
    }

    // MARK: Mutual TLS

    @Test("A port another server listens on is refused, though SO_REUSEPORT would let this server share it")
    func aPortInUseIsRefused() async throws {
        var router = Router()
        router.get("/who") { _ in .text("first") }
        try await withServer(threads: 2, router: router) { first in
            let second = try HTTPServer(
                configuration: HTTPServerConfiguration(
                    listeners: [.init(port: first.port, tls: try PKI.serverTLS(policy: .optional))], threads: 2),
                router: Router(), logger: Logger(label: "test", level: .warning, sink: NullLogSink()))
            do {
                try second.start()
                Issue.record("a second server started on port \(first.port)")
                await second.shutdown()
            } catch let error as HTTPError {
                #expect(error.code == .bindFailed && error.message.contains("another server listens there"), "\(error)")
            }
            // The first server still answers every connection (none went to the second).
            let client = try PKI.client()
            for _ in 0..<8 { #expect(try await client.get(url(first, "/who")).text == "first") }
        }
    }

    @Test func requiredPolicyRefusesAClientWithoutCertificate() async throws {
        try await withServer(policy: .required, router: Self.routes()) { server in
            let client = try PKI.client(configure: { $0.maxAttempts = 1 })
            await #expect(throws: HTTPError.self) { _ = try await client.get(url(server, "/health")) }
        }
    }

    @Test func requiredPolicyRefusesACertificateFromAnotherCA() async throws {
        try await withServer(policy: .required, router: Self.routes()) { server in
            let client = try PKI.client(identity: "other-client", configure: { $0.maxAttempts = 1 })
            await #expect(throws: HTTPError.self) { _ = try await client.get(url(server, "/health")) }
        }
    }

    @Test func requiredPolicyLetsAGoodCertificateInAndTheHandlerSeesItsSubject() async throws {
        try await withServer(policy: .required, router: Self.routes()) { server in
            let client = try PKI.client(identity: "client")
            let response = try await client.get(url(server, "/whoami"))
            #expect(response.status == .ok)
            let who = try response.decodeJSON(WhoAmI.self)
            #expect(who.subject == "CN=merchant.test,OU=Payments,O=Orchard Test Merchant")
            #expect(who.commonName == "merchant.test")
            #expect(who.organization == "Orchard Test Merchant")
            #expect(who.fingerprintBytes == 32)
        }
    }

    @Test func optionalPolicyAcceptsAnonymousClientsButTheRouteDemandsACertificate() async throws {
        try await withServer(policy: .optional, router: Self.routes()) { server in
            let anonymous = try PKI.client()
            let open = try await anonymous.get(url(server, "/anyone"))
            #expect(open.status == .ok)
            #expect(open.text == #"{"client":"none"}"#)
            let refused = try await anonymous.get(url(server, "/whoami"))
            #expect(refused.status == .unauthorized)
            #expect(try refused.decodeJSON(ErrorBody.self).error.code == "client_certificate_required")

            let merchant = try PKI.client(identity: "client")
            #expect(try await merchant.get(url(server, "/anyone")).text == #"{"client":"merchant.test"}"#)
            #expect(try await merchant.get(url(server, "/whoami")).status == .ok)
            #expect(try await merchant.get(url(server, "/merchant-only")).status == .ok)
            let forbidden = try await merchant.get(url(server, "/acquirer-only"))
            #expect(forbidden.status == .forbidden)
            #expect(try forbidden.decodeJSON(ErrorBody.self).error.code == "client_certificate_not_allowed")
        }
    }

    @Test func optionalPolicyStillRefusesAnUnverifiableCertificate() async throws {
        try await withServer(policy: .optional, router: Self.routes()) { server in
            let client = try PKI.client(identity: "other-client", configure: { $0.maxAttempts = 1 })
            await #expect(throws: HTTPError.self) { _ = try await client.get(url(server, "/anyone")) }
        }
    }

    @Test func noPolicyNeverAsksForACertificate() async throws {
        try await withServer(policy: .none, router: Self.routes()) { server in
            let client = try PKI.client(identity: "client")
            #expect(try await client.get(url(server, "/anyone")).text == #"{"client":"none"}"#)
        }
    }

    @Test func aClientTrustingAnotherRootRefusesTheServer() async throws {
        try await withServer(policy: .none, router: Self.routes()) { server in
            let client = try PKI.client(trusting: "other-ca.pem", configure: { $0.maxAttempts = 1 })
            do {
                _ = try await client.get(url(server, "/health"))
                Issue.record("connected to a server it should not trust")
            } catch let error as HTTPError {
                #expect(error.code == .connectionFailed)
            }
        }
    }

    @Test func requiredPolicyRefusalIsVisibleOnARawTLS13Connection() async throws {
        try await withServer(policy: .required, router: Self.routes()) { server in
            let port = server.port
            // With TLS 1.3 the client's handshake completes; the refusal arrives on its first read.
            let outcome: String = try await blocking {
                do {
                    let connection = try PKI.raw(port: port)
                    try? connection.write(Array("GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8))
                    return (try? connection.read()).map { $0.isEmpty ? "closed" : "answered" } ?? "closed"
                } catch {
                    return "refused"
                }
            }
            #expect(outcome != "answered")
        }
    }

    // MARK: Limits

    @Test func aBodyOverTheLimitIs413() async throws {
        var limits = HTTPServerConfiguration.Limits()
        limits.maxBodyBytes = 1024
        try await withServer(limits: limits, router: Self.routes()) { server in
            let client = try PKI.client()
            let small = try await client.send(
                HTTPClientRequest(method: .post, url: url(server, "/upload"), body: Data(count: 1000)))
            #expect(small.text == #"{"bytes":1000}"#)
            let large = try await client.send(
                HTTPClientRequest(method: .post, url: url(server, "/upload"), body: Data(count: 1025)))
            #expect(large.status == .payloadTooLarge)
            let huge = try await client.send(
                HTTPClientRequest(method: .post, url: url(server, "/upload"), body: Data(count: 3 << 20)))
            #expect(huge.status == .payloadTooLarge)
            // The server is still fine.
            #expect(try await client.get(url(server, "/health")).status == .ok)
        }
    }

    @Test func malformedJSONIs400WithAClearMessage() async throws {
        try await withServer(router: Self.routes()) { server in
            let client = try PKI.client()
            func post(_ body: String) async throws -> ErrorBody {
                let response = try await client.send(
                    HTTPClientRequest(method: .post, url: url(server, "/pay"), body: Data(body.utf8)))
                #expect(response.status == .badRequest)
                #expect(response.headers["Content-Type"] == "application/json")
                return try response.decodeJSON(ErrorBody.self)
            }
            let broken = try await post(#"{"amount": 12"#)
            #expect(broken.error.code == "invalid_json")
            #expect(broken.error.message == "the request body is not valid JSON")
            let missing = try await post(#"{"amount": 12}"#)
            #expect(missing.error.message == "missing field 'currency'")
            let good = try await client.send(
                try .json(.post, url(server, "/pay"), ["amount": "12"], headers: [:]))
            #expect(good.status == .badRequest)
            let ok = try await client.send(
                HTTPClientRequest(
                    method: .post, url: url(server, "/pay"), body: Data(#"{"currency":"EUR","amount":5}"#.utf8)))
            #expect(ok.text == #"{"amount":5,"currency":"EUR"}"#)
        }
    }

    @Test func aClientStallingInItsHeadersIsCutAfterTheHeaderTimeout() async throws {
        var limits = HTTPServerConfiguration.Limits()
        limits.headerTimeout = .milliseconds(400)
        limits.idleTimeout = .seconds(60)
        try await withServer(limits: limits, router: Self.routes()) { server in
            let port = server.port
            let request = Array("GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8)
            let partial = Array("GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ".utf8)
            @Sendable func outcome(_ connection: RawTLSConnection) -> String {
                do {
                    return try connection.read().isEmpty ? "cut" : "answered"
                } catch {
                    return "still open after 15 s"
                }
            }
            let results: [String] = try await blocking {
                // 1. Stalls in the headers of its first request.
                let first = try PKI.raw(port: port)
                try first.write(partial)
                let stalledFirst = outcome(first)
                // 2. Completes a request, then stalls in the headers of the next one on the same connection.
                let second = try PKI.raw(port: port)
                try second.write(request)
                let answered = try second.readResponse().status
                try second.write(partial)
                let stalledNext = outcome(second)
                // 3. Completes a request and then idles for longer than the header timeout (but well
                //    within the idle timeout): it is not cut, and its next request is answered.
                let idle = try PKI.raw(port: port)
                try idle.write(request)
                _ = try idle.readResponse()
                Thread.sleep(forTimeInterval: 1.2)
                try idle.write(request)
                let afterIdle = try idle.readResponse().status
                return [stalledFirst, "\(answered)", stalledNext, "\(afterIdle)"]
            }
            #expect(results == ["cut", "200", "cut", "200"])
            #expect(await eventually { server.connectionCount == 0 })  // every connection was closed and forgotten
        }
    }

    @Test func headersOverTheLimitAreRefused() async throws {
        var limits = HTTPServerConfiguration.Limits()
        limits.maxHeaderBytes = 4096
        try await withServer(limits: limits, router: Self.routes()) { server in
            let client = try PKI.client(configure: { $0.maxAttempts = 1 })
            let small = try await client.get(
                url(server, "/health"), headers: ["X-Pad": String(repeating: "a", count: 1000)])
            #expect(small.status == .ok)
            do {
                let large = try await client.get(
                    url(server, "/health"), headers: ["X-Pad": String(repeating: "a", count: 8000)])
                #expect(large.status.code >= 400 && large.status.code < 500)
            } catch {
                // Closing the connection is an acceptable refusal too; answering 200 is not.
            }
            #expect(try await client.get(url(server, "/health")).status == .ok)
        }
    }

    @Test func anIdleConnectionIsClosedAfterTheIdleTimeout() async throws {
        var limits = HTTPServerConfiguration.Limits()
        limits.idleTimeout = .milliseconds(300)
        limits.headerTimeout = .milliseconds(200)
        try await withServer(limits: limits, router: Self.routes()) { server in
            let port = server.port
            let outcome: String = try await blocking {
                let connection = try PKI.raw(port: port)
                try connection.write(Array("GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8))
                _ = try connection.readResponse()
                do {
                    return try connection.read().isEmpty ? "closed" : "unexpected data"
                } catch {
                    return "still open after 15 s"
                }
            }
            #expect(outcome == "closed")
            #expect(await eventually { server.connectionCount == 0 })
        }
    }

    @Test func theConnectionBeyondTheLimitIsRefused() async throws {
        var limits = HTTPServerConfiguration.Limits()
        limits.maxConnections = 2
        try await withServer(limits: limits, router: Self.routes()) { server in
            let port = server.port
            let request = Array("GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8)
            let open: [RawTLSConnection] = try await blocking {
                try (0..<2).map { _ in
                    let connection = try PKI.raw(port: port)
                    try connection.write(request)
                    _ = try connection.readResponse()
                    return connection
                }
            }
            #expect(server.connectionCount == 2)
            let third: String = try await blocking {
                do {
                    let connection = try PKI.raw(port: port)
                    try connection.write(request)
                    return (try? connection.readResponse()) == nil ? "refused" : "served"
                } catch {
                    return "refused"
                }
            }
            #expect(third == "refused")
            // Closing one makes room again.
            try await blocking { open[0].close() }
            #expect(await eventually { server.connectionCount == 1 })
            let fourth: Int = try await blocking {
                let connection = try PKI.raw(port: port)
                try connection.write(request)
                return try connection.readResponse().status
            }
            #expect(fourth == 200)
            try await blocking { open[1].close() }
        }
    }

    // MARK: Request ids, logging, robustness

    @Test func everyAnswerCarriesARequestIDAndAValidIncomingOneIsKept() async throws {
        try await withServer(router: Self.routes()) { server in
            let client = try PKI.client()
            let fresh = try await client.get(url(server, "/id"))
            let id = try #require(fresh.headers["X-Request-Id"])
            #expect(UUID(uuidString: id) != nil)
            #expect(fresh.text == id)
            let given = "7d444840-9dc0-11d1-b245-5ffdce74fad2"
            let kept = try await client.get(url(server, "/id"), headers: ["X-Request-Id": given])
            #expect(kept.headers["X-Request-Id"] == given)
            let junk = try await client.get(url(server, "/id"), headers: ["X-Request-Id": "not-a-uuid\"}"])
            #expect(junk.headers["X-Request-Id"] != "not-a-uuid\"}")
            #expect(try await client.get(url(server, "/nothing")).status == .notFound)
        }
    }

    @Test func anUnexpectedErrorIsAnOpaque500AndItsRequestIDIsLogged() async throws {
        struct Boom: Error {}
        var router = Router()
        router.get("/boom") { _ in throw Boom() }
        let sink = InMemoryLogSink()
        try await withServer(logger: Logger(label: "test", sink: sink), router: router) { server in
            let response = try await PKI.client().get(url(server, "/boom"))
            #expect(response.status == .internalServerError)
            let id = try #require(response.headers["X-Request-Id"])
            #expect(try response.decodeJSON(ErrorBody.self).error.code == "internal_error")
            #expect(sink.lines.contains { $0.contains(id) && $0.contains("Boom") && $0.contains(#""level":"error""#) })
        }
    }

    @Test func aClientThatLeavesDuringASlowHandlerDoesNotDisturbTheServer() async throws {
        try await withServer(router: Self.routes()) { server in
            let port = server.port
            try await blocking {
                let leaving = try PKI.raw(port: port)
                try leaving.write(Array("GET /slow?ms=300 HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8))
                leaving.close()
            }
            try await Task.sleep(for: .milliseconds(600))  // the handler finishes for nobody
            #expect(try await PKI.client().get(url(server, "/health")).status == .ok)
            #expect(await eventually { server.connectionCount <= 1 })
        }
    }

    @Test func aHandlerSlowerThanTheIdleTimeoutStillAnswers() async throws {
        var limits = HTTPServerConfiguration.Limits()
        limits.idleTimeout = .milliseconds(300)
        try await withServer(limits: limits, router: Self.routes()) { server in
            let response = try await PKI.client().get(url(server, "/slow?ms=900"))
            #expect(response.status == .ok)
            #expect(response.text == "slow")
        }
    }

    @Test func manyConcurrentRequestsOverSeveralLoops() async throws {
        try await withServer(threads: 2, router: Self.routes()) { server in
            // Correctness under concurrency, not speed: a loaded machine may take long for 200 handshakes.
            let client = try PKI.client(identity: "client", configure: { $0.connectTimeout = .seconds(60) })
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<200 {
                    group.addTask {
                        let response = try await client.post(
                            url(server, "/pay"),
                            json: ["amount": .init(index), "currency": "EUR"] as [String: JSONScalar])
                        return response.status.code
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.count == 200)
            #expect(statuses.allSatisfy { $0 == 200 })
        }
    }

    /// The threading model: blocking work runs on the blocking pool, so the loop (here the only one)
    /// keeps serving while handlers wait there.
    @Test func handlersWaitingOnBlockingWorkDoNotStallTheLoop() async throws {
        let gate = DispatchSemaphore(value: 0)
        let pool = BlockingThreadPool(threads: 4, name: "test-gate")
        defer { pool.shutdown() }
        var router = Self.routes()
        router.get("/blocked") { _ in
            let opened = await pool.run { gate.wait(timeout: .now() + 30) == .success }
            return .text(opened ? "released" : "timed out")
        }
        try await withServer(threads: 1, router: router) { server in
            let client = try PKI.client()
            let blocked = (0..<4).map { _ in Task { try await client.get(url(server, "/blocked")) } }
            try await Task.sleep(for: .milliseconds(100))
            let health = try await withTimeout(.seconds(60), "/health while four handlers block") {
                try await client.get(url(server, "/health"))
            }
            #expect(health.status == .ok)
            for _ in 0..<4 { gate.signal() }
            for task in blocked { #expect(try await task.value.text == "released") }
        }
    }

    @Test func badConfigurationsFailAtInit() throws {
        let good = try PKI.serverTLS(policy: .none)
        func make(_ tls: TLSServerConfiguration) throws(HTTPError) {
            _ = try HTTPServer(
                configuration: HTTPServerConfiguration(listeners: [.init(port: 0, tls: tls)]), router: Router(),
                logger: .disabled)
        }
        var noRoots = good
        noRoots.clientCertificatePolicy = .required
        #expect(throws: HTTPError(.invalidConfiguration, "")) { try make(noRoots) }
        var badPEM = good
        badPEM.certificateChainPEM = "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n"
        #expect(throws: HTTPError(.invalidConfiguration, "")) { try make(badPEM) }
        var wrongKey = good
        wrongKey.privateKeyPEM = try PKI.key("client.key")
        #expect(throws: HTTPError(.tlsFailure, "")) { try make(wrongKey) }
        var noKey = good
        noKey.privateKeyPEM = SecureBytes(Array("nothing".utf8))
        #expect(throws: HTTPError(.invalidConfiguration, "")) { try make(noKey) }
        #expect(throws: HTTPError(.invalidConfiguration, "")) {
            _ = try HTTPServer(
                configuration: HTTPServerConfiguration(listeners: [.init(port: 0, tls: good)], threads: 0),
                router: Router(),
                logger: .disabled)
        }
    }
}

/// A JSON value small enough for test bodies.
enum JSONScalar: Encodable, Sendable, ExpressibleByStringLiteral {
    case int(Int)
    case string(String)
    init(_ value: Int) { self = .int(value) }
    init(stringLiteral value: String) { self = .string(value) }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .int(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        }
    }
}
