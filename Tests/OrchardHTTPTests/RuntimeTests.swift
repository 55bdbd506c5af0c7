import Foundation
import OrchardLogging
import Testing

@testable import OrchardHTTP

@Suite("Runtime pieces")
struct RuntimeTests {
    struct Refused: Error, Equatable {}

    @Test func blockingPoolRunsOffTheCallersThreadAndPropagatesErrors() async throws {
        let pool = BlockingThreadPool(threads: 1, name: "test-blocking")
        defer { pool.shutdown() }
        let caller = UInt(pthread_self())
        let first = await pool.run { UInt(pthread_self()) }
        let second = await pool.run { UInt(pthread_self()) }
        #expect(first == second)  // the pool's one thread
        #expect(first != caller)
        let sum = await pool.run { (1...100).reduce(0, +) }
        #expect(sum == 5050)
        await #expect(throws: Refused.self) { try await pool.run { () throws(Refused) -> Int in throw Refused() } }
    }

    @Test func blockingPoolRunsJobsConcurrently() async throws {
        let pool = BlockingThreadPool(threads: 2, name: "test-concurrent")
        defer { pool.shutdown() }
        // Two jobs that each wait for the other: they finish only if they run at the same time.
        let first = DispatchSemaphore(value: 0)
        let second = DispatchSemaphore(value: 0)
        async let a: Bool = pool.run {
            first.signal()
            return second.wait(timeout: .now() + 10) == .success
        }
        async let b: Bool = pool.run {
            second.signal()
            return first.wait(timeout: .now() + 10) == .success
        }
        let (x, y) = await (a, b)
        #expect(x && y)
    }

    @Test func ephemeralCertificateServesTLSToAClientTrustingIt() async throws {
        let identity = try EphemeralCertificate()
        var router = Router()
        router.get("/") { _ in .text("hello") }
        let sink = InMemoryLogSink()
        let server = try HTTPServer(
            configuration: HTTPServerConfiguration(
                listeners: [
                    .init(
                        port: 0,
                        tls: TLSServerConfiguration(
                            certificateChainPEM: identity.certificatePEM, privateKeyPEM: identity.privateKeyPEM))
                ], threads: 1),
            router: router, logger: Logger(label: "t", level: .debug, sink: sink))
        try server.start()
        let client = try HTTPClient(configuration: HTTPClientConfiguration(trustedRootsPEM: identity.certificatePEM))
        let response = try await client.get("https://127.0.0.1:\(server.port)/")
        #expect(response.text == "hello")
        let stranger = try HTTPClient(
            configuration: HTTPClientConfiguration(trustedRootsPEM: try PKI.pem("root-ca.pem"), maxAttempts: 1))
        await #expect(throws: HTTPError.self) { _ = try await stranger.get("https://127.0.0.1:\(server.port)/") }
        await server.shutdown()
        #expect(sink.lines.contains { $0.contains(#""status":200"#) })
    }

    @Test func severalListenersWithTheirOwnPolicies() async throws {
        var router = Router()
        router.get("/who") { request in .text(request.clientCertificate?.commonName ?? "anonymous") }
        let server = try HTTPServer(
            configuration: HTTPServerConfiguration(
                listeners: [
                    .init(port: 0, tls: try PKI.serverTLS(policy: .none)),
                    .init(port: 0, tls: try PKI.serverTLS(policy: .required)),
                ], threads: 2),
            router: router, logger: .disabled)
        try server.start()
        let ports = server.ports
        #expect(ports.count == 2 && ports[0] != ports[1])
        let anonymous = try PKI.client(configure: { $0.maxAttempts = 1 })
        let merchant = try PKI.client(identity: "client")
        #expect(try await anonymous.get("https://localhost:\(ports[0])/who").text == "anonymous")
        #expect(try await merchant.get("https://localhost:\(ports[1])/who").text == "merchant.test")
        await #expect(throws: HTTPError.self) { _ = try await anonymous.get("https://localhost:\(ports[1])/who") }
        await server.shutdown()
    }
}
