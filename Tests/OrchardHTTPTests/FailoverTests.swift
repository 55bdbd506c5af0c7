import Foundation
import Testing

@testable import OrchardHTTP

/// ``HTTPClient/send(_:failover:)``: several instances of one party, tried in order.
@Suite("HTTP client: failover between instances")
struct FailoverTests {
    /// A server that answers every `POST /v1/charge` with `status` and the request's Idempotency-Key.
    static func instance(answering status: HTTPStatus) -> Router {
        var router = Router()
        router.post("/v1/charge") { request in
            HTTPResponse(status: status, body: Data((request.headers["Idempotency-Key"] ?? "none").utf8))
        }
        return router
    }

    @Test("A closed port and a 503 are passed over; the next instance gets the same request and Idempotency-Key")
    func passesOverAClosedPortAndA503() async throws {
        let closed = try ResettingServer(resets: 0)
        let closedPort = closed.port
        closed.stop()
        let client = try PKI.client { $0.retryBackoff = .milliseconds(5) }
        try await withServer(router: Self.instance(answering: .serviceUnavailable)) { busy in
            try await withServer(router: Self.instance(answering: .ok)) { healthy in
                let endpoints = try FailoverEndpoints([
                    "https://localhost:\(closedPort)", "https://localhost:\(busy.port)/",
                    "https://localhost:\(healthy.port)",
                ])
                let request = try HTTPClientRequest.json(
                    .post, "/v1/charge", ["amount": 1], headers: ["Idempotency-Key": "charge-7"])
                let response = try await client.send(request, failover: endpoints)
                #expect(response.status == .ok && response.text == "charge-7")
                // Only overloaded instances: their last 503 is the answer.
                let onlyBusy = try FailoverEndpoints(["https://localhost:\(busy.port)"])
                #expect(try await client.send(request, failover: onlyBusy).status == .serviceUnavailable)
                // A refusal other than 503 is the answer: the next instance is not asked.
                let first = try FailoverEndpoints([
                    "https://localhost:\(healthy.port)", "https://localhost:\(busy.port)",
                ])
                var unknown = request
                unknown.url = "/v1/other"
                #expect(try await client.send(unknown, failover: first).status == .notFound)
            }
        }
    }

    @Test("A POST without an Idempotency-Key cut off mid-exchange is not sent to another instance")
    func aPOSTThatMayHaveActedIsNotResent() async throws {
        let resetting = try ResettingServer(resets: 1)
        defer { resetting.stop() }
        let other = try ResettingServer(resets: 0)
        defer { other.stop() }
        let client = try HTTPClient(
            configuration: HTTPClientConfiguration(maxAttempts: 1, retryBackoff: .milliseconds(5)))
        let endpoints = try FailoverEndpoints([
            "http://127.0.0.1:\(resetting.port)", "http://127.0.0.1:\(other.port)",
        ])
        do {
            _ = try await client.send(try .json(.post, "/v1/charge", ["amount": 1]), failover: endpoints)
            Issue.record("a POST without a key was resent to another instance")
        } catch {
            #expect(error.code == .transportFailure)
        }
        #expect(other.requests.isEmpty)
        // With a key, the same failure moves on to the next instance.
        let keyed = try HTTPClientRequest.json(
            .post, "/v1/charge", ["amount": 1], headers: ["Idempotency-Key": "charge-8"])
        let resettingAgain = try ResettingServer(resets: 1)
        defer { resettingAgain.stop() }
        let again = try FailoverEndpoints([
            "http://127.0.0.1:\(resettingAgain.port)", "http://127.0.0.1:\(other.port)",
        ])
        #expect(try await client.send(keyed, failover: again).status == .ok)
        #expect(other.requests == ["POST /v1/charge HTTP/1.1"])
    }

    @Test("Bad endpoint lists and a request that names no path are refused")
    func refusals() async throws {
        #expect(throws: HTTPError.self) { try FailoverEndpoints([]) }
        #expect(throws: HTTPError.self) { try FailoverEndpoints(["ftp://localhost:1"]) }
        let client = try HTTPClient()
        let endpoints = try FailoverEndpoints(["http://127.0.0.1:1"])
        await #expect(throws: HTTPError.self) {
            _ = try await client.send(HTTPClientRequest(url: "http://127.0.0.1:1/x"), failover: endpoints)
        }
    }
}
