import CommandTestSupport
import Foundation
import Glibc
import OrchardLogging
import Testing

@testable import OrchardHTTP

/// Holds requests until the test opens it: in-flight work that surely outlasts the start of a drain, however
/// loaded the machine.
final class Gate: @unchecked Sendable {
    private let lock = NSLock()
    private var isOpen = false
    func open() { lock.withLock { isOpen = true } }
    func wait(atMost limit: Duration) async throws {
        let deadline = ContinuousClock.now + limit
        while !lock.withLock({ isOpen }), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}

@Suite("Graceful shutdown")
struct ShutdownTests {
    static func slowRoutes(gate: Gate = Gate()) -> Router {
        var router = Router()
        router.get("/health") { _ in .text("ok") }
        router.get("/gated") { request in
            request.logger.info("slow request started")
            try await gate.wait(atMost: .seconds(60))
            return .text("released")
        }
        router.get("/slow") { request in
            let milliseconds = Int(request.queryValue("ms") ?? "") ?? 1000
            request.logger.info("slow request started")
            try await Task.sleep(for: .milliseconds(milliseconds))
            return .text("slept \(milliseconds)")
        }
        return router
    }

    @Test func inFlightRequestsCompleteAndNewConnectionsAreRefused() async throws {
        let sink = InMemoryLogSink()
        let gate = Gate()
        let server = try HTTPServer(
            configuration: HTTPServerConfiguration(
                listeners: [.init(port: 0, tls: try PKI.serverTLS(policy: .optional))], threads: 2,
                shutdownDeadline: .seconds(90)),
            router: Self.slowRoutes(gate: gate), logger: Logger(label: "test", level: .info, sink: sink))
        try server.start()
        let base = url(server, "")
        let client = try PKI.client(configure: { $0.maxAttempts = 1 })
        // An idle kept-alive connection, to show idle connections are closed at once.
        #expect(try await client.get(base + "/health").status == .ok)
        // Held at the gate until the drain has started, however loaded the machine.
        let inFlight = (0..<4).map { _ in Task { try await client.get(base + "/gated") } }
        #expect(await eventually { sink.records.filter { $0.message == "slow request started" }.count == 4 })

        let shutdown = Task { await server.shutdown() }
        #expect(await eventually { sink.records.contains { $0.message.hasPrefix("shutting down") } })
        let fresh = try PKI.client(configure: { $0.maxAttempts = 1 })
        do {
            _ = try await fresh.get(base + "/health")
            Issue.record("a new connection was served during the drain")
        } catch {
            #expect(error.code == .connectionFailed)
        }
        gate.open()
        for task in inFlight {
            let response = try await task.value
            #expect(response.status == .ok)
            #expect(response.text == "released")
            #expect(response.headers["Connection"] == "close")
        }
        await shutdown.value
        #expect(server.connectionCount == 0)
        #expect(sink.records.last?.message == "stopped")
        #expect(!sink.records.contains { $0.message.contains("deadline reached") })
    }

    @Test func theDeadlineAbandonsRequestsThatTakeTooLong() async throws {
        let sink = InMemoryLogSink()
        let server = try HTTPServer(
            configuration: HTTPServerConfiguration(
                listeners: [.init(port: 0, tls: try PKI.serverTLS(policy: .none))], threads: 1,
                shutdownDeadline: .milliseconds(300)),
            router: Self.slowRoutes(), logger: Logger(label: "test", sink: sink))
        try server.start()
        let client = try PKI.client(configure: { $0.maxAttempts = 1 })
        let stuck = Task { try await client.get(url(server, "/slow?ms=30000")) }
        #expect(await eventually { sink.records.contains { $0.message == "slow request started" } })
        try await withTimeout(.seconds(60), "shutdown with a 300 ms deadline") { await server.shutdown() }
        await #expect(throws: HTTPError.self) { _ = try await stuck.value }
        #expect(sink.records.contains { $0.message.contains("deadline reached") })
    }

    @Test func shutdownBeforeStartAndTwiceIsHarmless() async throws {
        let server = try HTTPServer(
            configuration: HTTPServerConfiguration(listeners: [.init(port: 0, tls: try PKI.serverTLS(policy: .none))]),
            router: Router(), logger: .disabled)
        await server.shutdown()
        #expect(throws: HTTPError(.notRunning, "")) { try server.start() }
        let other = try HTTPServer(
            configuration: HTTPServerConfiguration(listeners: [.init(port: 0, tls: try PKI.serverTLS(policy: .none))]),
            router: Router(), logger: .disabled)
        try other.start()
        async let first: Void = other.shutdown()
        async let second: Void = other.shutdown()
        _ = await (first, second)
        await other.shutdown()
    }

    /// SIGTERM during requests, in the real executable started as a child process.
    @Test func sigtermLetsInFlightRequestsFinishRefusesNewOnesAndExitsZero() async throws {
        let binary = try Self.orchardBinary()
        let process = try ChildProcess(
            binary.path,
            [
                "http", "echo-server", "--port", "0", "--threads", "2", "--cert", try PKI.file("server.pem"), "--key",
                try PKI.file("server.key"), "--shutdown-deadline", "20",
            ], stdout: .capture, stderr: .capture)
        defer { process.kill() }
        func count(_ needle: String) -> Int { process.stderr.components(separatedBy: needle).count - 1 }

        #expect(
            await eventually { process.stdout.contains(#""event":"listening""#) }, "the server never announced its port"
        )
        let line = try #require(process.stdout.split(separator: "\n").first { $0.contains("listening") })
        let port = try #require(Int(line.split(separator: ":").last?.dropLast() ?? ""))
        let base = "https://localhost:\(port)"
        let client = try PKI.client(configure: { $0.maxAttempts = 1 })
        #expect(try await client.get(base + "/health").status == .ok)

        let inFlight = (0..<3).map { _ in Task { try await client.get(base + "/slow?ms=1500") } }
        #expect(await eventually { count("slow request started") == 3 }, "the requests never reached the server")
        process.terminate()
        #expect(
            await eventually { process.stderr.contains("no longer accepting") },
            "no sign of the shutdown: \(process.stderr)")

        let fresh = try PKI.client(configure: { $0.maxAttempts = 1 })
        do {
            _ = try await fresh.get(base + "/health")
            Issue.record("a new connection was accepted after SIGTERM")
        } catch {
            #expect(error.code == .connectionFailed)
        }
        for task in inFlight {
            let response = try await task.value
            #expect(response.status == .ok)
            #expect(response.text == #"{"slept_ms":1500}"#)
        }
        #expect(await eventually { !process.isRunning }, "the server did not exit")
        #expect(process.ended == .exited(0))
        #expect(process.stdout.contains(#"{"event":"stopped"}"#))
        #expect(process.stderr.contains("received SIGTERM"))
    }

    /// The `orchard` executable built next to this test bundle (`swift build` / `swift test` build it).
    static func orchardBinary() throws -> URL { URL(fileURLWithPath: try orchardExecutable()) }
}

@Suite("Services calling each other")
struct LoadTests {
    /// A base URL filled in once the other server is listening.
    final class Peer: @unchecked Sendable {
        private let lock = NSLock()
        private var value = ""
        var url: String {
            get { lock.withLock { value } }
            set { lock.withLock { value = newValue } }
        }
    }

    struct Hop: Codable, Sendable { let path: String }

    static func routes(name: String, peer: Peer, client: HTTPClient) -> Router {
        var router = Router()
        router.get("/hop/:n", requirement: .required) { request in
            guard let n = Int(try request.parameter("n")), (0...20).contains(n) else {
                throw HTTPError(.invalidRequest, "n must be 0 to 20")
            }
            if n == 0 { return try .json(Hop(path: name)) }
            let answer = try await client.get("\(peer.url)/hop/\(n - 1)")
            guard answer.status == .ok else { throw HTTPError(.transportFailure, "the peer answered \(answer.status)") }
            return try .json(Hop(path: name + ">" + (try answer.decodeJSON(Hop.self)).path))
        }
        return router
    }

    /// Two services calling each other under load never deadlock. Each has one event
    /// loop; every request to A bounces A→B→A→B→A→B, so both loops hold many handlers waiting on each
    /// other at once.
    @Test func twoServicesCallingEachOtherUnderLoadNeverDeadlock() async throws {
        let peerOfA = Peer()
        let peerOfB = Peer()
        let clientOfA = try PKI.client(identity: "client")
        let clientOfB = try PKI.client(identity: "client")
        let logger = Logger(label: "load", level: .warning, sink: NullLogSink())
        func server(_ name: String, _ peer: Peer, _ client: HTTPClient) throws -> HTTPServer {
            try HTTPServer(
                configuration: HTTPServerConfiguration(
                    listeners: [.init(port: 0, tls: try PKI.serverTLS(policy: .required))], threads: 1),
                router: Self.routes(name: name, peer: peer, client: client), logger: logger)
        }
        let a = try server("A", peerOfA, clientOfA)
        let b = try server("B", peerOfB, clientOfB)
        try a.start()
        try b.start()
        peerOfA.url = "https://localhost:\(b.port)"
        peerOfB.url = "https://localhost:\(a.port)"
        let caller = try PKI.client(identity: "client")
        let start = "https://localhost:\(a.port)/hop/5"
        do {
            let paths = try await withTimeout(.seconds(120), "A and B calling each other") {
                try await withThrowingTaskGroup(of: String.self) { group in
                    var paths: [String] = []
                    var next = 0
                    func add() {
                        group.addTask { try await caller.get(start).decodeJSON(Hop.self).path }
                        next += 1
                    }
                    for _ in 0..<48 { add() }
                    while let path = try await group.next() {
                        paths.append(path)
                        if next < 300 { add() }
                    }
                    return paths
                }
            }
            #expect(paths.count == 300)
            #expect(Set(paths) == ["A>B>A>B>A>B"])
        } catch {
            Issue.record("\(error)")
        }
        await a.shutdown()
        await b.shutdown()
    }
}
