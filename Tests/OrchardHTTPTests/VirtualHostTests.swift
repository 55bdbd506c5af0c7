import AccessPolicy
import Foundation
import OrchardLogging
import Synchronization
import Testing

@testable import OrchardHTTP

@Suite("Virtual hosts: routes served under one Host only")
struct VirtualHostTests {
    static let gateway = DeclaredRoute("POST", "/sessions", .anyone)
    static let other = DeclaredRoute("GET", "/health", .anyone)

    func router(virtualHost: Bool = true) -> Router {
        var router = Router()
        router.add(Self.gateway) { _ in .text("session") }
        router.add(Self.other) { _ in .text("ok") }
        if virtualHost { router.serve([Self.gateway], onlyAt: "Gateway.Example.TEST") }
        return router
    }

    func check(_ router: Router, _ method: HTTPMethod, _ path: String, host: String?) throws(HTTPError) {
        guard case .found(let route, _) = router.match(method, path: path) else {
            Issue.record("no route for \(path)")
            return
        }
        let request = HTTPRequest(
            method: method, path: path, query: nil, headers: host.map { ["Host": $0] } ?? [:], body: Data(),
            requestID: UUID(), clientCertificate: nil, remoteAddress: "127.0.0.1", logger: .disabled)
        try router.checkHost(route, request)
    }

    @Test("A Host header's name: lower-case, without port or trailing dot; brackets kept for IPv6")
    func hostNames() {
        #expect(Router.hostName("Gateway.Example.TEST:443") == "gateway.example.test")
        #expect(Router.hostName("gateway.example.test.") == "gateway.example.test")
        #expect(Router.hostName("[::1]:8443") == "[::1]")
        #expect(Router.hostName("127.0.0.1:80") == "127.0.0.1")
        #expect(Router.hostName("") == nil)
        #expect(Router.hostName(nil) == nil)
    }

    @Test("A virtual host's routes only under its Host (421 elsewhere, or without one); nothing else under it")
    func routesStayOnTheirHost() throws {
        let router = router()
        #expect(throws: Never.self) { try check(router, .post, "/sessions", host: "gateway.example.test") }
        #expect(throws: Never.self) { try check(router, .post, "/sessions", host: "GATEWAY.example.test:8443") }
        for host in ["pay.example.test", "localhost:8443", "gateway.example.test.evil.test", nil] {
            #expect(throws: HTTPError(.misdirectedRequest, "")) { try check(router, .post, "/sessions", host: host) }
        }
        #expect(throws: HTTPError(.misdirectedRequest, "")) {
            try check(router, .get, "/health", host: "gateway.example.test:443")
        }
        for host in ["pay.example.test", "localhost:8443", nil] {
            #expect(throws: Never.self) { try check(router, .get, "/health", host: host) }
        }
        #expect(HTTPError(.misdirectedRequest, "").httpStatus.code == 421)
        // A router without virtual hosts serves every route under any host.
        #expect(throws: Never.self) { try check(self.router(virtualHost: false), .post, "/sessions", host: "x.test") }
    }

    @Test("Over HTTPS a misdirected request is answered 421 before its handler runs")
    func misdirectedOverHTTPS() async throws {
        let ran = Atomic<Int>(0)
        var router = Router()
        router.add(Self.gateway) { _ in
            ran.wrappingAdd(1, ordering: .relaxed)
            return .text("session")
        }
        router.serve([Self.gateway], onlyAt: "gateway.example.test")
        try await withServer(router: router) { server in
            let client = try PKI.client()
            let refused = try await client.send(
                HTTPClientRequest(method: .post, url: url(server, "/sessions"), body: Data("{}".utf8)))
            #expect(refused.status == .misdirectedRequest)
            #expect(try JSONDecoder().decode(ErrorBody.self, from: refused.body).error.code == "misdirected_request")
            let served = try await client.send(
                HTTPClientRequest(
                    method: .post, url: url(server, "/sessions"), headers: ["Host": "gateway.example.test"],
                    body: Data("{}".utf8)))
            #expect(served.status == .ok)
            #expect(ran.load(ordering: .relaxed) == 1, "the misdirected request never reached its handler")
        }
    }
}
