import AccessPolicy
import Foundation
import OrchardCrypto
import OrchardLogging
import Synchronization
import Testing

@testable import OrchardHTTP

/// Holds handlers until opened: the test decides when work in flight ends, so nothing depends on timing.
final class AdmissionGate: Sendable {
    private let open = Atomic<Bool>(false)
    /// Handlers that ran.
    let ran = Atomic<Int>(0)

    func pass() async {
        ran.wrappingAdd(1, ordering: .relaxed)
        while !open.load(ordering: .relaxed) { try? await Task.sleep(for: .milliseconds(5)) }
    }

    func release() { open.store(true, ordering: .relaxed) }
}

@Suite("Admission control: load shed by route class, rate limits on open routes")
struct AdmissionTests {
    @Test("R5: Each class is admitted up to its share of the bound: analytics shed first, payments last")
    func classesShedInPriorityOrder() throws {
        var limits = AdmissionLimits()
        limits.maxInFlight = 8
        let admission = AdmissionControl(limits: limits)
        #expect(admission.bound(for: .analytics) == 2)
        #expect(admission.bound(for: .orderCreation) == 4)
        #expect(admission.bound(for: .standard) == 6)
        #expect(admission.bound(for: .payment) == 8)
        // Fill the server with payments one at a time and see which classes still get in at each level.
        var shedOrder: [RouteClass] = []
        let classes: [RouteClass] = [.analytics, .orderCreation, .standard, .payment]
        for level in 0..<8 {
            #expect(admission.inFlight == level)
            for routeClass in classes where !shedOrder.contains(routeClass) {
                do {
                    try admission.admit(routeClass)
                    admission.release()
                } catch {
                    #expect(error.httpStatus == .serviceUnavailable && error.retryAfterSeconds == 1)
                    shedOrder.append(routeClass)
                }
            }
            try admission.admit(.payment)
        }
        #expect(throws: OverloadError.self) { try admission.admit(.payment) }
        shedOrder.append(.payment)
        #expect(shedOrder == classes)
        for _ in 0..<8 { admission.release() }
        #expect(admission.inFlight == 0)
        #expect(throws: Never.self) { try admission.admit(.analytics) }
    }

    @Test("R6: A rate limit refills on the monotonic clock; moving the wall clock an hour either way changes nothing")
    func rateLimitIgnoresTheWallClock() {
        let start = Date(timeIntervalSince1970: 1_800_000_000)
        let clock = ManualClock(now: start)
        let limiter = RateLimiter(RateLimit(perSecond: 1, burst: 3), clock: clock)
        for _ in 0..<3 { #expect(limiter.take("10.0.0.1") == nil) }
        #expect(limiter.take("10.0.0.1") == 1)
        #expect(limiter.take("10.0.0.2") == nil, "another key has its own bucket")
        clock.setWall(start.addingTimeInterval(3600))
        #expect(limiter.take("10.0.0.1") == 1, "an hour forward on the wall clock refills nothing")
        clock.setWall(start.addingTimeInterval(-3600))
        #expect(limiter.take("10.0.0.1") == 1, "an hour back neither")
        clock.advance(by: 1)
        #expect(limiter.take("10.0.0.1") == nil)
        #expect(limiter.take("10.0.0.1") == 1)
    }

    @Test("R5: A full rate limiter forgets idle keys first, and never grows past its bound")
    func rateLimiterIsBounded() {
        let clock = ManualClock(now: Date())
        let limiter = RateLimiter(RateLimit(perSecond: 1, burst: 1), clock: clock, maxKeys: 2)
        #expect(limiter.take("a") == nil)
        clock.advance(by: 0.25)
        #expect(limiter.take("b") == nil)
        clock.advance(by: 0.25)
        #expect(limiter.take("b") == 1)
        #expect(limiter.take("c") == nil)  // evicts the oldest, a
        #expect(limiter.keyCount == 2)
        #expect(limiter.take("b") == 1, "b was kept")
        #expect(limiter.take("a") == nil, "a starts over with a full bucket")
        #expect(limiter.keyCount == 2)
        // Idle keys (their buckets full again) go first.
        clock.advance(by: 5)
        #expect(limiter.take("d") == nil)
        #expect(limiter.keyCount == 1)
    }

    /// A server whose routes each wait on `gate`: a payment, a standard route, order creation and analytics.
    func gatedRouter(_ gate: AdmissionGate, admission: AdmissionControl) -> Router {
        var router = Router()
        router.admission = admission
        for (path, routeClass) in [
            ("/pay", RouteClass.payment), ("/standard", .standard), ("/orders", .orderCreation),
            ("/analytics", .analytics),
        ] {
            let route = DeclaredRoute("POST", path, .anyone)
            router.classify(route, as: routeClass)
            router.add(route) { _ in
                await gate.pass()
                return .text("done")
            }
        }
        return router
    }

    @Test("R5: Over the bound the server answers 503 with Retry-After, analytics first and payments last")
    func serverSheds503sInPriorityOrder() async throws {
        let gate = AdmissionGate()
        var limits = AdmissionLimits()
        limits.maxInFlight = 4  // analytics 1, order creation 2, standard 3, payments 4
        limits.retryAfterSeconds = 2
        limits.openRouteRate = nil
        let admission = AdmissionControl(limits: limits)
        try await withServer(router: gatedRouter(gate, admission: admission)) { server in
            // The held requests wait for the whole sequence below: on a loaded machine that can take longer than
            // the client's default 30 s.
            let client = try PKI.client { $0.requestTimeout = .seconds(300) }
            defer { gate.release() }
            var held: [Task<HTTPResponse, any Error>] = []
            func hold(_ path: String) async throws {
                let expected = admission.inFlight + 1
                held.append(Task { try await client.post(url(server, path), json: [String: String]()) })
                #expect(await eventually { admission.inFlight == expected }, "\(path) admitted")
            }
            func shed(_ path: String) async throws {
                let response = try await client.post(url(server, path), json: [String: String]())
                #expect(response.status == .serviceUnavailable, "\(path): \(response.text)")
                #expect(response.headers["Retry-After"] == "2")
                #expect(try JSONDecoder().decode(ErrorBody.self, from: response.body).error.code == "overloaded")
            }
            // One request in flight: analytics is shed; order creation still gets in.
            try await hold("/pay")
            try await shed("/analytics")
            try await hold("/orders")
            // Two: order creation is shed too; a standard route gets in.
            try await shed("/orders")
            try await shed("/analytics")
            try await hold("/standard")
            // Three: only payments get in.
            try await shed("/standard")
            try await hold("/pay")
            // Four: everything is shed.
            try await shed("/pay")
            try await shed("/analytics")
            #expect(gate.ran.load(ordering: .relaxed) == 4, "no shed request reached its handler")
            gate.release()
            for task in held { #expect(try await task.value.status == .ok) }
            #expect(await eventually { admission.inFlight == 0 })
            let after = try await client.post(url(server, "/analytics"), json: [String: String]())
            #expect(after.status == .ok, "once the load is gone analytics is served again")
        }
    }

    @Test("R5: A route open without a client certificate answers 429 with Retry-After past its per-address rate")
    func openRoutesAreRateLimited() async throws {
        let clock = ManualClock(now: Date())
        var limits = AdmissionLimits()
        limits.openRouteRate = RateLimit(perSecond: 1, burst: 2)
        let admission = AdmissionControl(limits: limits, clock: clock)
        var router = Router()
        router.admission = admission
        router.roles["client"] = .required
        router.add(DeclaredRoute("GET", "/open", .anyone)) { _ in .text("open") }
        router.add(DeclaredRoute("GET", "/mtls", .role("client"))) { _ in .text("mtls") }
        try await withServer(router: router) { server in
            let anonymous = try PKI.client()
            for _ in 0..<2 { #expect(try await anonymous.get(url(server, "/open")).status == .ok) }
            let limited = try await anonymous.get(url(server, "/open"))
            #expect(limited.status == .tooManyRequests)
            #expect(limited.headers["Retry-After"] == "1")
            #expect(try JSONDecoder().decode(ErrorBody.self, from: limited.body).error.code == "rate_limited")
            // A caller with a client certificate is not counted against the open routes' rate.
            let identified = try PKI.client(identity: "client")
            #expect(try await identified.get(url(server, "/mtls")).status == .ok)
            #expect(try await identified.get(url(server, "/open")).status == .ok)
            clock.advance(by: 1)
            #expect(try await anonymous.get(url(server, "/open")).status == .ok)
        }
    }

    @Test(
        "R5: A saturated server stops accepting connections (no TLS handshake) and accepts again once one is answered")
    func saturatedServerPausesAccepting() async throws {
        let gate = AdmissionGate()
        var limits = AdmissionLimits()
        limits.maxInFlight = 2
        limits.acceptBound = 2
        limits.openRouteRate = nil
        let admission = AdmissionControl(limits: limits)
        #expect(!admission.refusesNewConnections(openConnections: 5), "not saturated: connections are accepted")
        try await withServer(router: gatedRouter(gate, admission: admission)) { server in
            let client = try PKI.client()
            let late = try PKI.client()
            defer { gate.release() }
            var held: [Task<HTTPResponse, any Error>] = []
            for expected in 1...2 {
                held.append(Task { try await client.post(url(server, "/pay"), json: [String: String]()) })
                #expect(await eventually { admission.inFlight == expected })
            }
            #expect(admission.refusesNewConnections(openConnections: server.connectionCount))
            #expect(await eventually { server.listenersPaused == 1 })
            #expect(server.acceptPauseCount == 1)
            // A new connection now waits in the kernel's backlog: not accepted, no handshake, no handler.
            let waiting = Task { try await late.post(url(server, "/pay"), json: [String: String]()) }
            try await Task.sleep(for: .milliseconds(200))
            #expect(server.connectionCount == 2)
            #expect(gate.ran.load(ordering: .relaxed) == 2)
            gate.release()
            for task in held { #expect(try await task.value.status == .ok) }
            #expect(try await waiting.value.status == .ok, "accepted and served once the server had room")
            #expect(await eventually { server.listenersPaused == 0 })
        }
    }

    @Test("R5: A connection carrying payments is served at the event loop's urgent priority, other classes' are not")
    func paymentConnectionsAreUrgent() async throws {
        let gate = AdmissionGate()
        gate.release()
        var limits = AdmissionLimits()
        limits.openRouteRate = nil
        let admission = AdmissionControl(limits: limits)
        try await withServer(router: gatedRouter(gate, admission: admission)) { server in
            let client = try PKI.client { $0.maxCachedConnections = 1 }
            #expect(try await client.post(url(server, "/pay"), json: [String: String]()).status == .ok)
            #expect(server.urgentConnectionCount == 1)
            #expect(try await client.post(url(server, "/analytics"), json: [String: String]()).status == .ok)
            #expect(server.urgentConnectionCount == 0, "the same connection, now carrying analytics")
            #expect(try await client.post(url(server, "/pay"), json: [String: String]()).status == .ok)
            #expect(server.urgentConnectionCount == 1)
            client.shutdown()
            #expect(await eventually { server.urgentConnectionCount == 0 }, "closed")
        }
    }

    @Test("R5: Every shed request of a class gets the same ready-made 503, with Retry-After")
    func shedAnswersAreMadeOnce() throws {
        var limits = AdmissionLimits()
        limits.maxInFlight = 1
        limits.retryAfterSeconds = 3
        let admission = AdmissionControl(limits: limits)
        try admission.admit(.payment)
        defer { admission.release() }
        for _ in 0..<2 {
            #expect(throws: OverloadError.self) { try admission.admit(.analytics) }
        }
        let answer = admission.shed(.analytics).response
        #expect(answer.status == .serviceUnavailable && answer.headers["Retry-After"] == "3")
        let body = try JSONDecoder().decode(ErrorBody.self, from: answer.body)
        #expect(body.error.code == "overloaded" && body.error.message.contains("sheds analytics requests"))
        #expect(admission.shed(.analytics).response.body == answer.body)
        #expect(admission.shed(.orderCreation).response.body != answer.body)
    }

    @Test("R5: A connection carrying only a class over its bound is held back (not read) and served once it has room")
    func connectionsOfASaturatedClassAreHeldBack() async throws {
        let gate = AdmissionGate()
        var limits = AdmissionLimits()
        limits.maxInFlight = 4  // analytics 1
        limits.openRouteRate = nil
        limits.holdBackLimit = .seconds(120)  // the test, not a timer, decides when analytics has room
        let admission = AdmissionControl(limits: limits)
        var router = gatedRouter(gate, admission: admission)
        let quick = DeclaredRoute("POST", "/analytics-quick", .anyone)
        router.classify(quick, as: .analytics)
        router.add(quick) { _ in .text("quick") }
        try await withServer(router: router) { server in
            let holder = try PKI.client()
            let uploader = try PKI.client { $0.maxCachedConnections = 1 }
            defer { gate.release() }
            // Two analytics requests on one connection while analytics has room: answered, nothing held.
            for _ in 0..<2 {
                #expect(
                    try await uploader.post(url(server, "/analytics-quick"), json: [String: String]()).status == .ok)
            }
            #expect(server.heldBackCount == 0)
            // Analytics at its bound: the uploader's next request is shed, and its connection is then held back.
            let held = Task { try await holder.post(url(server, "/analytics"), json: [String: String]()) }
            #expect(await eventually { admission.inFlight == 1 })
            let shed = try await uploader.post(url(server, "/analytics-quick"), json: [String: String]())
            #expect(shed.status == .serviceUnavailable)
            #expect(await eventually { server.heldBackCount == 1 })
            // Its next request waits in the socket, unread (had it been read, analytics being full, it would be shed).
            let waiting = Task { try await uploader.post(url(server, "/analytics-quick"), json: [String: String]()) }
            try await Task.sleep(for: .milliseconds(200))
            #expect(server.heldBackCount == 1)
            gate.release()
            #expect(try await held.value.status == .ok)
            let answer = try await waiting.value
            #expect(answer.status == .ok, "read once analytics had room, and admitted: \(answer.text)")
            #expect(server.heldBackCount == 0)
            // Payments and other classes are never held back by analytics' bound.
            #expect(try await holder.post(url(server, "/pay"), json: [String: String]()).status == .ok)
        }
    }

    @Test("R5: A connection carrying only payments is never held back: a payment over the bound is shed at once")
    func paymentConnectionsAreNeverHeldBack() async throws {
        let gate = AdmissionGate()
        var limits = AdmissionLimits()
        limits.maxInFlight = 2
        limits.openRouteRate = nil
        limits.holdBackLimit = .seconds(120)
        let admission = AdmissionControl(limits: limits)
        var router = gatedRouter(gate, admission: admission)
        let quick = DeclaredRoute("POST", "/pay-quick", .anyone)
        router.classify(quick, as: .payment)
        router.add(quick) { _ in .text("quick") }
        try await withServer(router: router) { server in
            let holder = try PKI.client()
            let terminal = try PKI.client { $0.maxCachedConnections = 1 }
            defer { gate.release() }
            for _ in 0..<2 {
                #expect(try await terminal.post(url(server, "/pay-quick"), json: [String: String]()).status == .ok)
            }
            var held: [Task<HTTPResponse, any Error>] = []
            for expected in 1...2 {
                held.append(Task { try await holder.post(url(server, "/pay"), json: [String: String]()) })
                #expect(await eventually { admission.inFlight == expected })
            }
            // Payments at their bound: the terminal's payments are shed, one after the other, never held back.
            for _ in 0..<2 {
                let shed = try await terminal.post(url(server, "/pay-quick"), json: [String: String]())
                #expect(shed.status == .serviceUnavailable)
                #expect(server.heldBackCount == 0)
            }
            gate.release()
            for task in held { #expect(try await task.value.status == .ok) }
        }
    }
}
