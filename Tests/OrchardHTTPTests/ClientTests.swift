import Foundation
import Glibc
import OrchardCrypto
import Testing

@testable import OrchardHTTP

/// A plain-TCP HTTP server that resets the first `resets` connections after reading their request,
/// then answers `200 ok`. It counts the requests it read, so tests can see whether a client retried.
final class ResettingServer: @unchecked Sendable {
    let port: Int
    private let fd: Int32
    private let lock = NSLock()
    private var remainingResets: Int
    private var seen: [String] = []

    init(resets: Int) throws {
        remainingResets = resets
        (fd, port) = try plainListener()
        let thread = Thread { [self] in serve() }
        thread.start()
    }

    /// The request lines read so far, one per attempt.
    var requests: [String] { lock.withLock { seen } }

    /// Wakes the accepting thread, which then closes the socket itself: closing it here would free its number
    /// while that thread may still call `accept` on it, and a server made next (another test) that got the same
    /// number would have its connections taken by this one.
    func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
    }

    private func serve() {
        defer { close(fd) }
        while true {
            let client = accept(fd, nil, nil)
            guard client >= 0 else { return }
            var data: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            // Read the head and, if announced, the body.
            while true {
                let n = read(client, &buffer, buffer.count)
                if n <= 0 { break }
                data += buffer[0..<n]
                let text = String(decoding: data, as: UTF8.self)
                if let end = text.range(of: "\r\n\r\n") {
                    let length =
                        text.split(separator: "\r\n").compactMap { line -> Int? in
                            line.lowercased().hasPrefix("content-length:")
                                ? Int(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) : nil
                        }.first ?? 0
                    if text.utf8.count - text.utf8.distance(from: text.utf8.startIndex, to: end.upperBound) >= length {
                        break
                    }
                }
            }
            let line = String(decoding: data, as: UTF8.self).split(separator: "\r\n").first.map(String.init) ?? ""
            let reset = lock.withLock { () -> Bool in
                seen.append(line)
                if remainingResets > 0 {
                    remainingResets -= 1
                    return true
                }
                return false
            }
            if reset {
                var hard = linger(l_onoff: 1, l_linger: 0)  // close() now sends RST
                setsockopt(client, SOL_SOCKET, SO_LINGER, &hard, socklen_t(MemoryLayout<linger>.size))
            } else {
                let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".utf8)
                _ = answer.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
            }
            close(client)
        }
    }
}

@Suite("HTTP client")
struct ClientTests {
    func client(attempts: Int = 3) throws -> HTTPClient {
        try HTTPClient(configuration: HTTPClientConfiguration(maxAttempts: attempts, retryBackoff: .milliseconds(5)))
    }

    @Test func retriesAnIdempotentGETAfterAReset() async throws {
        let server = try ResettingServer(resets: 1)
        defer { server.stop() }
        let response = try await client().get("http://127.0.0.1:\(server.port)/status")
        #expect(response.status == .ok)
        #expect(response.text == "ok")
        #expect(server.requests == ["GET /status HTTP/1.1", "GET /status HTTP/1.1"])
    }

    @Test func neverRetriesAPOSTWithoutAnIdempotencyKey() async throws {
        let server = try ResettingServer(resets: 1)
        defer { server.stop() }
        do {
            _ = try await client().post("http://127.0.0.1:\(server.port)/charges", json: ["amount": 1])
            Issue.record("the POST succeeded although its only attempt was reset")
        } catch let error as HTTPError {
            #expect(error.code == .transportFailure)
        }
        #expect(server.requests == ["POST /charges HTTP/1.1"])
    }

    @Test func retriesAPOSTThatCarriesAnIdempotencyKey() async throws {
        let server = try ResettingServer(resets: 1)
        defer { server.stop() }
        let response = try await client().post(
            "http://127.0.0.1:\(server.port)/charges", json: ["amount": 1],
            headers: ["Idempotency-Key": UUID().uuidString])
        #expect(response.status == .ok)
        #expect(server.requests == ["POST /charges HTTP/1.1", "POST /charges HTTP/1.1"])
    }

    @Test func givesUpAfterMaxAttempts() async throws {
        let server = try ResettingServer(resets: 10)
        defer { server.stop() }
        await #expect(throws: HTTPError.self) {
            _ = try await client(attempts: 3).get("http://127.0.0.1:\(server.port)/")
        }
        #expect(server.requests.count == 3)
    }

    @Test func aRefusedConnectionIsConnectionFailed() async throws {
        let server = try ResettingServer(resets: 0)
        let port = server.port
        server.stop()
        do {
            _ = try await client(attempts: 2).get("http://127.0.0.1:\(port)/")
            Issue.record("connected to a closed port")
        } catch let error as HTTPError {
            #expect(error.code == .connectionFailed)
        }
    }

    @Test func timesOutASlowServer() async throws {
        var router = Router()
        router.get("/slow") { _ in
            try await Task.sleep(for: .seconds(3))
            return .text("late")
        }
        try await withServer(router: router) { server in
            let client = try PKI.client(configure: {
                $0.requestTimeout = .milliseconds(300)
                $0.maxAttempts = 1
            })
            do {
                _ = try await client.get(url(server, "/slow"))
                Issue.record("a 3 s answer arrived within a 300 ms timeout")
            } catch let error as HTTPError {
                #expect(error.code == .timedOut)
            }
        }
    }

    @Test func refusesAResponseOverItsLimit() async throws {
        var router = Router()
        router.get("/big") { _ in HTTPResponse(body: Data(count: 100_000)) }
        try await withServer(router: router) { server in
            let client = try PKI.client(configure: { $0.maxResponseBytes = 10_000 })
            do {
                _ = try await client.get(url(server, "/big"))
                Issue.record("accepted 100 kB with a 10 kB limit")
            } catch let error as HTTPError {
                #expect(error.code == .responseTooLarge)
            }
            let roomy = try PKI.client()
            #expect(try await roomy.get(url(server, "/big")).body.count == 100_000)
        }
    }

    @Test func reusesItsConnection() async throws {
        var router = Router()
        router.get("/peer") { request in .text(request.remoteAddress) }
        try await withServer(router: router) { server in
            let client = try PKI.client()
            for _ in 0..<20 { #expect(try await client.get(url(server, "/peer")).status == .ok) }
            #expect(server.connectionCount == 1)
        }
    }

    @Test func methodsAndBodiesReachTheServer() async throws {
        var router = Router()
        for method in [HTTPMethod.put, .patch, .delete, .post] {
            router.add(method, "/echo") { request in
                let body = String(decoding: request.body, as: UTF8.self)
                return .text("\(request.method) \(body) \(request.headers["X-Test"] ?? "")")
            }
        }
        router.get("/echo") { request in .text("GET \(request.query ?? "")") }
        try await withServer(router: router) { server in
            let client = try PKI.client()
            for method in [HTTPMethod.put, .patch, .delete, .post] {
                let response = try await client.send(
                    HTTPClientRequest(
                        method: method, url: url(server, "/echo"), headers: ["X-Test": "1"], body: Data("b".utf8)))
                #expect(response.text == "\(method) b 1")
            }
            #expect(try await client.get(url(server, "/echo?x=1")).text == "GET x=1")
            let head = try await client.send(HTTPClientRequest(method: .head, url: url(server, "/echo")))
            #expect(head.status == .ok)
            #expect(head.body.isEmpty)
        }
    }

    @Test func cancellingTheCallerCancelsTheRequest() async throws {
        var router = Router()
        router.get("/slow") { _ in
            try await Task.sleep(for: .seconds(5))
            return .text("late")
        }
        try await withServer(router: router) { server in
            let client = try PKI.client()
            let task = Task { try await client.get(url(server, "/slow")) }
            try await Task.sleep(for: .milliseconds(200))
            task.cancel()
            switch await task.result {
            case .success: Issue.record("a cancelled request returned")
            case .failure(let error): #expect((error as? HTTPError)?.code == .cancelled)
            }
        }
    }

    @Test func rejectsBadConfigurations() {
        #expect(throws: HTTPError(.invalidConfiguration, "")) {
            _ = try HTTPClient(configuration: HTTPClientConfiguration(trustedRootsPEM: "no certificate here"))
        }
        #expect(throws: HTTPError(.invalidConfiguration, "")) {
            _ = try HTTPClient(
                configuration: HTTPClientConfiguration(clientCertificateChainPEM: try PKI.pem("client.pem")))
        }
        #expect(throws: HTTPError(.invalidConfiguration, "")) {
            _ = try HTTPClient(
                configuration: HTTPClientConfiguration(
                    clientCertificateChainPEM: try PKI.pem("client.pem"), clientPrivateKeyPEM: SecureBytes([1, 2, 3])))
        }
    }

    @Test func aNonHTTPURLIsRefusedBeforeAnyIO() async throws {
        do {
            _ = try await client().get("file:///etc/passwd")
            Issue.record("fetched a file URL")
        } catch let error as HTTPError {
            #expect(error.code == .invalidURL)
        }
    }

    @Test("A new connection resumes the client's TLS session, and the server still sees its verified certificate")
    func newConnectionsResumeTheSession() async throws {
        var router = Router()
        router.get("/who") { request in .text(request.clientCertificate?.commonName ?? "nobody") }
        try await withServer(policy: .optional, router: router) { server in
            let client = try PKI.client(identity: "client")
            let anonymous = try PKI.client()
            for round in 0..<3 {
                // Connection: close makes every request open a new connection.
                let (response, tls) = try await client.sendInspectingTLS(
                    HTTPClientRequest(url: url(server, "/who"), headers: ["Connection": "close"]))
                #expect(response.text == "merchant.test", "round \(round)")
                #expect(tls?.resumed == (round > 0), "round \(round): a full handshake first, then resumptions")
            }
            // Another client (without a certificate) has sessions of its own: it never resumes the first one's.
            let (other, tls) = try await anonymous.sendInspectingTLS(
                HTTPClientRequest(url: url(server, "/who"), headers: ["Connection": "close"]))
            #expect(other.text == "nobody" && tls?.resumed == false)
            let (again, _) = try await anonymous.sendInspectingTLS(
                HTTPClientRequest(url: url(server, "/who"), headers: ["Connection": "close"]))
            #expect(again.text == "nobody", "a resumed anonymous session stays anonymous")
        }
    }
}
