import Foundation
import Glibc
import Testing

@testable import OrchardHTTP

/// A plain-TCP HTTP server that dies the way a killed process does: it answers its first `answers` requests
/// (connections kept alive), reads one more, then stops listening and drops every connection without an answer.
/// After it, a new connection to its port is refused. Each connection has a thread of its own, so a client that
/// opens a new connection instead of reusing one (libcurl may, on a loaded machine) still meets the death.
final class VanishingServer: @unchecked Sendable {
    let port: Int
    private let fd: Int32
    private let answers: Int
    private let lock = NSLock()
    private var seen: [String] = []
    private var clients: [Int32] = []
    private var dead = false

    init(answers: Int) throws {
        self.answers = answers
        (fd, port) = try plainListener()
        Thread { [self] in acceptLoop() }.start()
    }

    /// The request lines read, one per request that reached the server.
    var requests: [String] { lock.withLock { seen } }

    private func acceptLoop() {
        while true {
            let client = accept(fd, nil, nil)
            guard client >= 0 else { return }  // the listener was closed: the server died
            let admitted = lock.withLock { () -> Bool in
                guard !dead else { return false }
                clients.append(client)
                return true
            }
            guard admitted else {
                close(client)
                return
            }
            Thread { [self] in serve(client) }.start()
        }
    }

    /// Serves one connection, which it closes when done (a reset if the server died on its request).
    private func serve(_ client: Int32) {
        defer { close(client) }
        var pending: [UInt8] = []
        while let line = readRequest(client, &pending) {
            let answer = lock.withLock { () -> Bool in
                seen.append(line)
                return seen.count <= answers
            }
            guard answer else {
                die(except: client)
                var hard = linger(l_onoff: 1, l_linger: 0)
                setsockopt(client, SOL_SOCKET, SO_LINGER, &hard, socklen_t(MemoryLayout<linger>.size))
                return
            }
            let bytes = Array("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8)
            _ = bytes.withUnsafeBytes { write(client, $0.baseAddress, $0.count) }
        }
    }

    /// Stops listening, so the client's next connection is refused, and ends the other connections (their threads
    /// close them). The port stays bound (not listening) while the server object lives, so no other test's server
    /// takes it.
    private func die(except dying: Int32) {
        let others = lock.withLock { () -> [Int32]? in
            guard !dead else { return nil }
            dead = true
            return clients
        }
        guard let others else { return }
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
        holdPort()
        for other in others where other != dying { shutdown(other, Int32(SHUT_RDWR)) }
    }

    private var placeholder: Int32 = -1

    private func holdPort() {
        let held = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var reuse: Int32 = 1
        setsockopt(held, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(held, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        // Best effort: another process may have taken the port in the moment it was free.
        guard bound else {
            close(held)
            return
        }
        lock.withLock { placeholder = held }
    }

    deinit {
        if placeholder >= 0 { close(placeholder) }
    }

    /// Reads one request (head and `Content-Length` body) and returns its request line.
    private func readRequest(_ client: Int32, _ pending: inout [UInt8]) -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let text = String(decoding: pending, as: UTF8.self)
            if let end = text.range(of: "\r\n\r\n") {
                let head = text[..<end.lowerBound]
                let length =
                    head.split(separator: "\r\n").compactMap { line -> Int? in
                        line.lowercased().hasPrefix("content-length:")
                            ? Int(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) : nil
                    }.first ?? 0
                let headBytes = text.utf8.distance(from: text.utf8.startIndex, to: end.upperBound)
                if pending.count >= headBytes + length {
                    pending.removeFirst(headBytes + length)
                    return head.split(separator: "\r\n").first.map(String.init)
                }
            }
            let n = read(client, &buffer, buffer.count)
            if n <= 0 { return nil }
            pending += buffer[0..<n]
        }
    }
}

/// The client tells "nothing was sent" from "sent, then the server went away": a merchant forgets a charge only in
/// the first case, so reading the second as the first loses a payment the issuer holds (found by `orchard chaos`).
@Suite("HTTP client: a server that dies after reading the request")
struct VanishingServerTests {
    @Test(
        "A request on a kept-alive connection that dies unanswered, then libcurl's resend refused: not 'could not connect'"
    )
    func aReusedConnectionThatDiesIsNotConnectionFailed() async throws {
        let server = try VanishingServer(answers: 1)
        let client = try HTTPClient(
            configuration: HTTPClientConfiguration(maxAttempts: 1, retryBackoff: .milliseconds(5)))
        #expect(try await client.post("http://127.0.0.1:\(server.port)/v1/charge", json: ["amount": 1]).status == .ok)
        do {
            _ = try await client.post("http://127.0.0.1:\(server.port)/v1/charge", json: ["amount": 2])
            Issue.record("the second charge was answered by a server that dropped it")
        } catch {
            // The guarantee: never "could not connect" once the request may have arrived. Usually the resend is
            // refused (transport_failure); in a full test run another test's server may take the freed port and
            // leave the resend unanswered (timed_out), which keeps the guarantee too.
            #expect(error.code != .connectionFailed && error.requestMayHaveArrived, "\(error)")
        }
        #expect(server.requests == ["POST /v1/charge HTTP/1.1", "POST /v1/charge HTTP/1.1"])
    }

    @Test("A retry refused after an attempt that reached the server reports that it may have arrived")
    func aRefusedRetryAfterADeliveredAttemptIsNotConnectionFailed() async throws {
        let server = try VanishingServer(answers: 0)
        let client = try HTTPClient(
            configuration: HTTPClientConfiguration(maxAttempts: 3, retryBackoff: .milliseconds(5)))
        do {
            _ = try await client.post(
                "http://127.0.0.1:\(server.port)/v1/charge", json: ["amount": 1],
                headers: ["Idempotency-Key": "charge-1"])
            Issue.record("a server that dropped the request answered it")
        } catch {
            #expect(error.code == .transportFailure, "\(error)")
        }
        #expect(server.requests == ["POST /v1/charge HTTP/1.1"])
    }

    @Test("Failover: an instance that took the request and died, then refused instances, is not 'could not connect'")
    func failoverAfterADeliveredAttemptIsNotConnectionFailed() async throws {
        let dying = try VanishingServer(answers: 0)
        let closed = try VanishingServer(answers: 0)
        let closedPort = closed.port
        // Nothing connects to `closed`: close its listener by connecting once and dropping.
        let client = try HTTPClient(
            configuration: HTTPClientConfiguration(maxAttempts: 1, retryBackoff: .milliseconds(5)))
        _ = try? await client.get("http://127.0.0.1:\(closedPort)/")
        let endpoints = try FailoverEndpoints(["http://127.0.0.1:\(dying.port)", "http://127.0.0.1:\(closedPort)"])
        let request = try HTTPClientRequest.json(
            .post, "/v1/charge", ["amount": 1], headers: ["Idempotency-Key": "charge-2"])
        do {
            _ = try await client.send(request, failover: endpoints)
            Issue.record("answered by instances that are gone")
        } catch {
            #expect(error.code == .transportFailure, "\(error)")
        }
        #expect(dying.requests == ["POST /v1/charge HTTP/1.1"])
    }

    @Test("A port nobody listens on is still 'could not connect', on every attempt")
    func aClosedPortIsConnectionFailed() async throws {
        let server = try VanishingServer(answers: 0)
        let port = server.port
        let client = try HTTPClient(
            configuration: HTTPClientConfiguration(maxAttempts: 1, retryBackoff: .milliseconds(5)))
        _ = try? await client.get("http://127.0.0.1:\(port)/")  // the server reads it and goes away
        let retrying = try HTTPClient(
            configuration: HTTPClientConfiguration(maxAttempts: 3, retryBackoff: .milliseconds(5)))
        do {
            _ = try await retrying.post(
                "http://127.0.0.1:\(port)/v1/charge", json: ["amount": 1], headers: ["Idempotency-Key": "charge-3"])
            Issue.record("connected to a closed port")
        } catch {
            #expect(error.code == .connectionFailed, "\(error)")
        }
    }
}
