import Foundation
import MerchantServer
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardX509
import PayServer
import WebMerchantAPI

/// What `orchard bench sessions` measured.
public struct SessionBenchmarkResult: Sendable, Encodable {
    public let requests: Int
    public let connections: Int
    public let cores: Int
    public let build: String
    public let sessionsPerSecond: Double
    public let p50Milliseconds: Double
    public let p99Milliseconds: Double
    /// Where the server ran: its own process on its own core, or this process (``ServerPlacement``).
    public let server: String
    /// The cores the server had: the ceiling's multiple.
    public let serverCores: Int
    /// The crypto ceiling: one core's signed sessions per CPU second times the server's cores.
    public let ceilingPerSecond: Double
    public let ceilingCPUMicrosecondsPerSession: Double
    public let fractionOfCeiling: Double
    /// CPU time of the server per session in the timed phase: its own process's when it had one, else this whole
    /// process's (server and load generator).
    public let serverCPUMicrosecondsPerSession: Double
    /// The ceiling's CPU per session ÷ the server's: the share of the server's CPU the crypto ceiling accounts for
    /// (what ``fractionOfCeiling`` would be with the server's cores to itself and never idle).
    public let cpuFractionOfCeiling: Double
    /// The fraction of the ceiling the issue asks for.
    public let target: Double
    public let loadAverage: Double
}

/// Merchant sessions per second through the gateway: a throw-away deployment (its demo domain validated by
/// init), its Pay server placed as ``ServerPlacement`` says (`orchard bench sessions`: its own process on its own
/// core), CONNECTIONS keep-alive mutual-TLS clients with the demo merchant's
/// identity certificate at `apple-pay-gateway.orchard.test`; every answer must be a session. The ceiling is the
/// same cryptography per session (random identifier and nonce, the CMS signature, the TLS records of the request
/// and the answer) without the answer's JSON, HTTP, the certificate lookup or SQLite, in thread CPU time on one core
/// times the server's cores (``ceiling(directory:seconds:recordBytes:)``).
public enum SessionBenchmark {
    public static func run(
        requests: Int, connections: Int, ceilingSeconds: Double, placement: ServerPlacement = .inProcess,
        trace: @escaping @Sendable (String) -> Void
    ) async throws -> SessionBenchmarkResult {
        let registry = try ServiceRegistry([PayService(), MerchantService()])
        return try await withThrowawayDeployment(named: "sessions", registry: registry, services: []) { directory, _ in
            try await withPayServer(placement, directory: directory, registry: registry) { services, server in
                try await measure(
                    directory: directory, services: services, server: server, requests: requests,
                    connections: connections, ceilingSeconds: ceilingSeconds, trace: trace)
            }
        }
    }

    static func measure(
        directory: DeploymentDirectory, services: ServiceConnections, server: PinnedServer?, requests: Int,
        connections: Int, ceilingSeconds: Double, trace: @escaping @Sendable (String) -> Void
    ) async throws -> SessionBenchmarkResult {
        guard let port = services.endpoints[.pay]?.port else {
            throw BenchmarkError(.operationFailed, "the Pay server is not running")
        }
        let identity = try TLSIdentity.load(named: MerchantService.Files.identity, from: directory)
        // A client (a libcurl thread) per connection: one client's thread for all of them was the bottleneck.
        let clients = try (0..<connections).map { _ in
            try HTTPClient(
                configuration: HTTPClientConfiguration(
                    trustedRootsPEM: services.rootCertificatePEM,
                    clientCertificateChainPEM: identity.certificateChainPEM,
                    clientPrivateKeyPEM: identity.privateKeyPEM, maxAttempts: 1,
                    connectTo: [WebMerchantAPI.HostNames.gateway: port]))
        }
        defer { for client in clients { client.shutdown() } }
        let url = "https://" + WebMerchantAPI.HostNames.gateway + WebMerchantAPI.Gateway.paymentSession
        let body = try HTTPClientRequest.json(
            .post, url,
            PaymentSessionRequest(
                merchantIdentifier: "merchant.dev.orchard.demo", displayName: "Orchard Demo",
                initiativeContext: WebMerchantAPI.HostNames.store))
        // One session per connection first: every handshake is done before the timed phase.
        for client in clients { _ = try await session(client, body) }

        trace("asking for \(requests) merchant sessions over \(connections) keep-alive mutual-TLS connections…")
        let clock = SystemClock()
        let start = clock.nanoseconds()
        let cpuStart = try server?.cpuSeconds() ?? InAppCeiling.processCPUSeconds()
        let latencies = try await withThrowingTaskGroup(of: [UInt64].self) { group in
            for (index, client) in clients.enumerated() {
                let count = requests / connections + (index < requests % connections ? 1 : 0)
                group.addTask {
                    var out: [UInt64] = []
                    for _ in 0..<count {
                        let begin = clock.nanoseconds()
                        _ = try await session(client, body)
                        out.append(clock.nanoseconds() - begin)
                    }
                    return out
                }
            }
            var all: [UInt64] = []
            for try await part in group { all += part }
            return all
        }
        let elapsed = Double(clock.nanoseconds() - start) / 1e9
        let cpuEnd = try server?.cpuSeconds() ?? InAppCeiling.processCPUSeconds()
        let cpuPerSession = (cpuEnd - cpuStart) / Double(max(latencies.count, 1))
        let sorted = latencies.sorted()
        func percentile(_ p: Double) -> Double {
            let index = min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)
            return (Double(sorted[max(0, index)]) / 1e6 * 100).rounded() / 100
        }

        trace("measuring the crypto ceiling for \(Int(ceilingSeconds)) s…")
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let serverCores = server == nil ? cores : 1
        let answer = try await clients[0].send(body)
        let perCore = try ceiling(
            directory: directory, seconds: ceilingSeconds,
            recordBytes: (request: body.body.count + headerAllowance, answer: answer.body.count + headerAllowance))
        let ceiling = perCore * Double(serverCores)
        let rate = Double(latencies.count) / elapsed
        return SessionBenchmarkResult(
            requests: latencies.count, connections: connections, cores: cores,
            build: BenchmarkReport.buildConfiguration, sessionsPerSecond: rate.rounded(),
            p50Milliseconds: percentile(0.5), p99Milliseconds: percentile(0.99), server: server.placementDescription,
            serverCores: serverCores, ceilingPerSecond: ceiling.rounded(),
            ceilingCPUMicrosecondsPerSession: (1e6 / perCore).rounded(),
            fractionOfCeiling: (rate / ceiling * 1000).rounded() / 1000,
            serverCPUMicrosecondsPerSession: (cpuPerSession * 1e6).rounded(),
            cpuFractionOfCeiling: (1 / perCore / cpuPerSession * 1000).rounded() / 1000, target: 0.6,
            loadAverage: InAppBenchmark.loadAverage())
    }

    static func session(_ client: HTTPClient, _ request: HTTPClientRequest) async throws -> MerchantSession {
        let response = try await client.send(request)
        guard response.status == .ok else {
            throw BenchmarkError(
                .operationFailed, "the gateway refused: \(String(decoding: response.body, as: UTF8.self))")
        }
        return try MerchantSession(json: Array(response.body))
    }

    /// What a request's and an answer's HTTP/1.1 head adds to its body in the TLS records the ceiling counts: more
    /// than either head is (request line, Host, Content-Type, Content-Length, Accept; status line, Content-Type,
    /// Content-Length, the request ID), so the ceiling errs on the side of more work, by well under 1 %.
    static let headerAllowance = 256

    /// Signed sessions per CPU second on this thread: the cryptography the gateway cannot avoid for one session over
    /// a kept-alive TLS 1.3 connection, nothing else. `MerchantSessions.sign`: the random identifier and nonce, the
    /// merchant ID's SHA-256, the signed content (its input) and the CMS signature (the content's SHA-256, the signed
    /// attributes' and the ECDSA signature); the request's TLS record opened and the answer's sealed with
    /// AES-256-GCM (TLS_AES_256_GCM_SHA384, OpenSSL's first choice, which the benchmark's connections negotiate), each
    /// the size `recordBytes` says. A fresh cipher context per record (TLS keeps one per connection) makes this a
    /// little slower than the records need, so the ceiling is not flattered.
    static func ceiling(
        directory: DeploymentDirectory, seconds: Double, recordBytes: (request: Int, answer: Int)
    ) throws -> Double {
        let random = SystemRandom()
        let tokenSigning = try SigningLeaves.load(from: directory, clock: SystemClock(), random: random).leaves
            .merchantSession
        let recordKey = SymmetricKey(bitCount: 256)
        let iv = random.bytes(12)
        let header: [UInt8] = [0x17, 0x03, 0x03, 0x00, 0x00]
        let request = try AES.GCM.seal(
            [UInt8](repeating: 0x7B, count: recordBytes.request), using: recordKey, iv: iv, authenticating: header
        ).combined
        // The answer's record carries the session's JSON; building that JSON is not cryptography, so the record
        // sealed here is a buffer of the answer's size.
        let answer = [UInt8](repeating: 0x20, count: recordBytes.answer)
        var opened: [UInt8] = []
        var sealed: [UInt8] = []
        let start = InAppCeiling.threadCPUSeconds()
        var count = 0
        var bytes = 0
        while InAppCeiling.threadCPUSeconds() - start < seconds {
            try AES.GCM.open(combined: request, using: recordKey, iv: iv, authenticating: header, into: &opened)
            let session = try MerchantSessions.sign(
                merchant: "merchant.dev.orchard.demo", domain: WebMerchantAPI.HostNames.store,
                displayName: "Orchard Demo", at: Date(), random: random, tokenSigning: tokenSigning)
            try AES.GCM.seal(answer, using: recordKey, iv: iv, authenticating: header, into: &sealed)
            bytes &+= sealed.count &+ opened.count &+ session.signature.count
            count += 1
        }
        precondition(bytes > 0)
        return Double(count) / (InAppCeiling.threadCPUSeconds() - start)
    }
}
