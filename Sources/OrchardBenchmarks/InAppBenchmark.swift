import Foundation
import MerchantServer
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardX509
import PayAPI
import PayServer
import PaymentCredential
import PaymentToken

/// What `orchard bench inapp` measured.
public struct InAppBenchmarkResult: Sendable, Encodable {
    public let requests: Int
    public let connections: Int
    public let cores: Int
    public let build: String
    public let tokensPerSecond: Double
    public let p50Milliseconds: Double
    public let p99Milliseconds: Double
    /// Where the Pay server ran: its own process on its own core, or this process (``ServerPlacement``).
    public let server: String
    /// The cores the server had: the ceiling's multiple.
    public let serverCores: Int
    /// CPU time of the Pay server per token: its own process's when it had one, else this whole process's (server
    /// and load generator).
    public let serverCPUMicrosecondsPerToken: Double
    /// The crypto ceiling: one core's exchanges per CPU second times the server's cores.
    public let ceilingPerSecond: Double
    public let ceilingCPUMicrosecondsPerToken: Double
    /// CPU microseconds of each step of the ceiling.
    public let ceilingBreakdownMicroseconds: [String: Double]
    /// CPU microseconds per exchange of each slice of the ceiling, in order: before the first round of the exchange,
    /// between each two, after the last (their spread is the machine's drift during the run).
    public let ceilingSliceMicroseconds: [Double]
    public let fractionOfCeiling: Double
    /// The ceiling's CPU per token ÷ the server's: what ``fractionOfCeiling`` would be with the server's cores to
    /// itself and never idle; other work on the machine does not move it.
    public let cpuFractionOfCeiling: Double
    /// The server's CPU time over the exchange's wall time, per core (nil when the server ran in this process): near
    /// 1 when the load kept it saturated. Below that the tokens per second measure the load, not the server: too few
    /// exchanges in flight to cover the store's group commits, whose `fdatasync` can take milliseconds.
    public let serverBusyFraction: Double?
    public let target: Double
    /// The 1-minute load average at the end: other work on the machine lowers the wall-clock figures.
    public let loadAverage: Double
    /// With `--database … --instances N`: the same exchange through N Pay server instances on PostgreSQL, measured
    /// after this run's one-instance SQLite figure (``tokensPerSecond``).
    public var scaleOut: InAppScaleOutResult?
}

/// The in-app exchange through several Pay server instances on one PostgreSQL database, beside the one-instance
/// SQLite figure of the same run.
public struct InAppScaleOutResult: Sendable, Encodable {
    public let backend: String
    public let instances: Int
    public let requests: Int
    public let connections: Int
    public let tokensPerSecond: Double
    public let p50Milliseconds: Double
    public let p99Milliseconds: Double
    /// The one-instance SQLite figure of the same run.
    public let sqliteOneInstanceTokensPerSecond: Double
    /// ``tokensPerSecond`` over ``sqliteOneInstanceTokensPerSecond``.
    public let ratio: Double
    /// Exchanges answered 503 (a write the instances' transactions kept failing, or overload) and sent again after
    /// the Retry-After: their latency includes the wait.
    public let retried: Int
    public let loadAverage: Double
}

/// The in-app benchmark behind `orchard bench inapp`: sealed credentials → signed tokens per second through the Pay
/// server over keep-alive HTTPS with mutual TLS, next to the crypto ceiling of the same work measured in the same run.
///
/// Initialises a throw-away deployment, starts its Pay server as ``ServerPlacement`` says (`orchard bench inapp`:
/// its own process on its own core, the load generator on the others), registers a device and prepares one
/// nonce and one sealed credential per request before the timed phase. Then each client (one keep-alive HTTPS
/// connection with the device's client certificate) sends its share of the credentials; every answer must be a
/// token. The ceiling is the same cryptography per credential (open, verify, re-encrypt, sign) without HTTP or
/// SQLite, in thread CPU time on one core times the server's cores. It is measured in ``ceilingSlices`` slices,
/// before, between and after the rounds the credentials are sent in, on the server's core while the server waits,
/// so that the ratio compares the two at the same moments of the machine.
public enum InAppBenchmark {
    /// How many slices the ceiling is measured in: the exchange runs in one round fewer, between them.
    public static let ceilingSlices = 5

    static func loadAverage() -> Double {
        var values = [Double](repeating: 0, count: 3)
        guard getloadavg(&values, 3) > 0 else { return -1 }
        return (values[0] * 100).rounded() / 100
    }

    /// A device of the deployment: its TLS client and its Secure Element key (a software stand-in).
    struct BenchDevice {
        let identity: TLSIdentity
        let secureElementKey: P256.Signing.PrivateKey
        let certificate: Certificate
    }

    /// Initialises a throw-away deployment in a temporary directory (removed at the end), runs the exchange
    /// and the ceiling, and stops its services.
    public static func run(
        requests: Int, connections: Int, ceilingSeconds: Double, placement: ServerPlacement = .inProcess,
        trace: @escaping @Sendable (String) -> Void
    ) async throws -> InAppBenchmarkResult {
        let registry = try ServiceRegistry([PayService(), MerchantService()])
        return try await withThrowawayDeployment(
            named: "inapp", registry: registry, services: [],
            // One bench device asks for every nonce: lift its quota (an ordinary device gets 60 a minute).
            configure: { try $0.set(PayService.noncesPerMinute, 1_000_000) }
        ) { directory, _ in
            try await withPayServer(placement, directory: directory, registry: registry) { services, server in
                try await measure(
                    directory: directory, services: services, server: server, requests: requests,
                    connections: connections, ceilingSeconds: ceilingSeconds, trace: trace)
            }
        }
    }

    /// The same exchange through `instances` Pay server instances (in this process, each its own HTTPS server)
    /// whose state is in the PostgreSQL database `database` (its `pay` and `pay_idempotency` schemas, replaced, as
    /// `orchard init --database --force` does); the clients are spread over the instances. `baseline` is the
    /// one-instance SQLite figure of the same run.
    public static func runScaledOut(
        database: String, passfile: String?, instances: Int, requests: Int, connections: Int, baseline: Double,
        trace: @escaping @Sendable (String) -> Void
    ) async throws -> InAppScaleOutResult {
        let registry = try ServiceRegistry([PayService(), MerchantService()])
        return try await withThrowawayDeployment(
            named: "inapp-pg", registry: registry, services: [.pay],
            options: DeploymentInitializer.Options(
                force: true, databases: [.pay: database, .merchant: database], passfile: passfile),
            configure: { try $0.set(PayService.noncesPerMinute, 1_000_000) }
        ) { directory, services in
            var further: [ServiceHost] = []
            do {
                var bases = [try services.baseURL(of: .pay)]
                for number in stride(from: 2, through: instances, by: 1) {
                    let host = try await ServiceHost.start(
                        [.pay], directory: directory, registry: registry, publish: false, instance: number)
                    further.append(host)
                    guard let endpoint = host.endpoint(of: .pay) else {
                        throw BenchmarkError(.operationFailed, "Pay server instance \(number) did not start")
                    }
                    bases.append(endpoint.baseURL)
                }
                trace("\(bases.count) Pay server instances on PostgreSQL: \(bases.joined(separator: ", "))")
                let device = try makeDevice(directory)
                let clients = try (0..<connections).map { _ in try services.client(identity: device.identity) }
                defer { for client in clients { client.shutdown() } }
                let figures = try await exchange(
                    directory: directory, bases: bases, clients: clients, device: device, requests: requests,
                    trace: trace)
                for host in further { await host.stop() }
                further = []
                return InAppScaleOutResult(
                    backend: "postgresql", instances: bases.count, requests: figures.latencies.count,
                    connections: connections, tokensPerSecond: figures.rate.rounded(),
                    p50Milliseconds: figures.percentile(0.5), p99Milliseconds: figures.percentile(0.99),
                    sqliteOneInstanceTokensPerSecond: baseline,
                    ratio: baseline > 0 ? (figures.rate / baseline * 100).rounded() / 100 : 0, retried: figures.retried,
                    loadAverage: loadAverage())
            } catch {
                for host in further { await host.stop() }
                throw error
            }
        }
    }

    /// The timed phase's figures: every exchange's latency, the wall time and the server's CPU time (this process's
    /// when the server runs in it).
    struct ExchangeFigures {
        let latencies: [UInt64]
        let elapsed: Double
        let cpu: Double
        /// Exchanges answered 503 and sent again.
        let retried: Int

        var rate: Double { Double(latencies.count) / elapsed }

        func percentile(_ p: Double) -> Double {
            let sorted = latencies.sorted()
            let index = min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)
            return (Double(sorted[max(0, index)]) / 1e6 * 100).rounded() / 100
        }
    }

    /// Registers the device, prepares the nonces and credentials, then sends them: client `i` to `bases[i % n]`.
    ///
    /// With `rounds` above 1 the credentials are sent in that many rounds, one after the other, and `betweenRounds`
    /// runs before the first, between each two and after the last (no exchange is in flight then), given a prepared
    /// credential: `orchard bench inapp` measures its ceiling there, so that both figures see the machine at the
    /// same moments. The figures add up the rounds.
    static func exchange(
        directory: DeploymentDirectory, bases: [String], clients: [HTTPClient], device: BenchDevice, requests: Int,
        server: PinnedServer? = nil, rounds: Int = 1,
        betweenRounds: (_ sample: PaymentCredentialExchange) throws -> Void = { _ in },
        trace: @escaping @Sendable (String) -> Void
    ) async throws -> ExchangeFigures {
        let registration = try await post(
            clients[0], bases[0] + PayAPI.Route.register,
            DeviceRegistrationRequest(
                secureElementCertificate: Data(device.certificate.derRepresentation).base64EncodedString(),
                // The bench never leaves lost mode: any Secure Enclave key will do.
                enclavePublicKey: Data(try P256.Signing.PrivateKey().publicKey.x963Representation)
                    .base64EncodedString()))
        guard registration.status == .ok else {
            throw BenchmarkError(.operationFailed, "the bench device could not register")
        }
        let credentialKey = try credentialPublicKey(directory)

        trace("preparing \(requests) nonces and sealed credentials…")
        let bodies = try await prepare(
            requests: requests, clients: clients, bases: bases, device: device, credentialKey: credentialKey)

        trace(
            "exchanging \(requests) credentials over \(clients.count) keep-alive connections"
                + (rounds > 1 ? " in \(rounds) rounds…" : "…"))
        let clock = SystemClock()
        var latencies: [UInt64] = []
        var (elapsed, cpu, retried) = (0.0, 0.0, 0)
        for round in 0..<rounds {
            try betweenRounds(bodies[0])
            let part = Array(bodies[(bodies.count * round / rounds)..<(bodies.count * (round + 1) / rounds)])
            let cpuStart = try server?.cpuSeconds() ?? InAppCeiling.processCPUSeconds()
            let start = clock.nanoseconds()
            let results = try await send(part, clients: clients, bases: bases, clock: clock)
            elapsed += Double(clock.nanoseconds() - start) / 1e9
            cpu += try (server?.cpuSeconds() ?? InAppCeiling.processCPUSeconds()) - cpuStart
            latencies += results.0
            retried += results.1
        }
        try betweenRounds(bodies[0])
        return ExchangeFigures(latencies: latencies, elapsed: elapsed, cpu: cpu, retried: retried)
    }

    /// Sends `bodies` over `clients` (client `i` to `bases[i % n]`), each client its share one after the other; the
    /// latencies and how many were sent again after a 503.
    static func send(
        _ bodies: [PaymentCredentialExchange], clients: [HTTPClient], bases: [String], clock: SystemClock
    ) async throws -> ([UInt64], Int) {
        try await withThrowingTaskGroup(of: ([UInt64], Int).self) { group in
            for (index, client) in clients.enumerated() {
                let share = stride(from: index, to: bodies.count, by: clients.count).map { bodies[$0] }
                group.addTask {
                    var out: [UInt64] = []
                    var retried = 0
                    for body in share {
                        let begin = clock.nanoseconds()
                        // As a device does: a 503 (overloaded, or a write concurrent instances kept failing) is sent
                        // again after its Retry-After to the next instance; the latency includes the wait.
                        var response = try await post(
                            client, bases[index % bases.count] + PayAPI.Route.paymentCredential, body)
                        var attempt = 1
                        while response.status.code == 503, attempt < 10 {
                            retried += 1
                            let wait = Int(response.headers["Retry-After"] ?? "1") ?? 1
                            try await Task.sleep(for: .seconds(min(wait, 5)))
                            let base = bases[(index + attempt) % bases.count]
                            response = try await post(client, base + PayAPI.Route.paymentCredential, body)
                            attempt += 1
                        }
                        guard response.status == .ok else {
                            throw BenchmarkError(
                                .operationFailed,
                                "an exchange failed: \(String(decoding: response.body, as: UTF8.self))")
                        }
                        out.append(clock.nanoseconds() - begin)
                    }
                    return (out, retried)
                }
            }
            var all: [UInt64] = []
            var retried = 0
            for try await (part, retries) in group {
                all += part
                retried += retries
            }
            return (all, retried)
        }
    }

    static func measure(
        directory: DeploymentDirectory, services: ServiceConnections, server: PinnedServer?, requests: Int,
        connections: Int, ceilingSeconds: Double, trace: @escaping @Sendable (String) -> Void
    ) async throws -> InAppBenchmarkResult {
        let base = try services.baseURL(of: .pay)
        let device = try makeDevice(directory)
        let clients = try (0..<connections).map { _ in try services.client(identity: device.identity) }
        defer { for client in clients { client.shutdown() } }
        // The ceiling is measured in slices before, between and after the rounds of the exchange, on the server's
        // core while the server is idle: this VM's speed drifts from one minute to the next, and a ceiling measured
        // once, after the exchange, on another core, moved the ratio by a fifth either way (docs/performance.md).
        let rounds = ceilingSlices - 1
        var inputs: InAppCeiling.Inputs?
        var sliceRates: [Double] = []
        let ceilingCPUs = server.map { [$0.cpu] } ?? []
        trace(
            "the crypto ceiling: \(ceilingSlices) slices of \(ceilingSeconds / Double(ceilingSlices)) s"
                + (server.map { " on CPU \($0.cpu)" } ?? ""))
        let figures = try await exchange(
            directory: directory, bases: [base], clients: clients, device: device, requests: requests, server: server,
            rounds: rounds,
            betweenRounds: { sample in
                let prepared =
                    try inputs ?? ceilingInputs(directory: directory, device: device, sealed: sealedSample(sample))
                inputs = prepared
                sliceRates.append(
                    try ThreadAffinity.withThreads(on: ceilingCPUs) {
                        try InAppCeiling.measure(prepared, seconds: ceilingSeconds / Double(ceilingSlices))
                    })
            }, trace: trace)
        let latencies = figures.latencies
        let elapsed = figures.elapsed
        let cpu = figures.cpu
        func percentile(_ p: Double) -> Double { figures.percentile(p) }

        let cores = ProcessInfo.processInfo.activeProcessorCount
        guard let inputs, !sliceRates.isEmpty else {
            throw BenchmarkError(.operationFailed, "the crypto ceiling was not measured")
        }
        // Every slice runs for the same CPU time, so their mean rate is the ceiling over all of them.
        let perCore = sliceRates.reduce(0, +) / Double(sliceRates.count)
        let breakdown = try ThreadAffinity.withThreads(on: ceilingCPUs) {
            try InAppCeiling.breakdown(inputs, seconds: 0.5)
        }
        let serverCores = server == nil ? cores : 1
        let ceiling = perCore * Double(serverCores)
        let rate = Double(latencies.count) / elapsed
        return InAppBenchmarkResult(
            requests: latencies.count, connections: clients.count, cores: cores,
            build: BenchmarkReport.buildConfiguration, tokensPerSecond: rate.rounded(),
            p50Milliseconds: percentile(0.5), p99Milliseconds: percentile(0.99), server: server.placementDescription,
            serverCores: serverCores, serverCPUMicrosecondsPerToken: (cpu / Double(latencies.count) * 1e6).rounded(),
            ceilingPerSecond: ceiling.rounded(), ceilingCPUMicrosecondsPerToken: (1e6 / perCore).rounded(),
            ceilingBreakdownMicroseconds: breakdown,
            ceilingSliceMicroseconds: sliceRates.map { (1e7 / $0).rounded() / 10 },
            fractionOfCeiling: (rate / ceiling * 1000).rounded() / 1000,
            cpuFractionOfCeiling: (1 / perCore / (cpu / Double(latencies.count)) * 1000).rounded() / 1000,
            serverBusyFraction: server.map { _ in (cpu / elapsed / Double(serverCores) * 1000).rounded() / 1000 },
            target: 1500,
            loadAverage: loadAverage(), scaleOut: nil)
    }

    /// One nonce per request (asked over the clients in parallel), then the credentials sealed to the Pay server.
    static func prepare(
        requests: Int, clients: [HTTPClient], bases: [String], device: BenchDevice,
        credentialKey: P256.KeyAgreement.PublicKey
    ) async throws -> [PaymentCredentialExchange] {
        let nonces = try await withThrowingTaskGroup(of: [[UInt8]].self) { group in
            for (index, client) in clients.enumerated() {
                let count = requests / clients.count + (index < requests % clients.count ? 1 : 0)
                let base = bases[index % bases.count]
                group.addTask {
                    var out: [[UInt8]] = []
                    for _ in 0..<count {
                        let response = try await post(client, base + PayAPI.Route.paymentNonce, [String: String]())
                        out.append(try nonce(response))
                    }
                    return out
                }
            }
            var all: [[UInt8]] = []
            for try await part in group { all += part }
            return all
        }
        return try nonces.enumerated().map { index, nonce in
            try exchangeBody(
                nonce: nonce, atc: UInt16(truncatingIfNeeded: index + 1), device: device, to: credentialKey)
        }
    }

    // MARK: Synchronous helpers (Swift 6.3 release builds crash on typed-throws calls in async closures)

    /// `POST url` with `body` as JSON; a plain async function around the client's typed-throws call.
    static func post(
        _ client: HTTPClient, _ url: String, _ body: some Encodable & Sendable
    ) async throws
        -> HTTPResponse
    {
        try await client.post(url, json: body)
    }

    static let merchant = "merchant.dev.orchard.demo"
    static let app = "dev.orchard.demo-app"

    static func nonce(_ response: HTTPResponse) throws -> [UInt8] {
        guard response.status == .ok,
            let bytes = Data(base64Encoded: try response.decodeJSON(PaymentNonceResponse.self).nonce)
        else {
            throw BenchmarkError(
                .operationFailed,
                "the Pay server gave no nonce (\(response.status.code): "
                    + "\(String(decoding: response.body.prefix(200), as: UTF8.self)))")
        }
        return Array(bytes)
    }

    static func exchangeBody(
        nonce: [UInt8], atc: UInt16, device: BenchDevice, to key: P256.KeyAgreement.PublicKey
    ) throws -> PaymentCredentialExchange {
        let masterKey = SymmetricKey(data: [UInt8](repeating: 0x5A, count: 16))
        let credential = try PaymentCredential(
            nonce: nonce, merchantIdentifier: merchant, applicationIdentifier: app,
            dpan: SecureBytes(Array("4895370000000017".utf8)), expiry: "301231",
            cryptogram: try RemoteCryptogram.generate(
                masterKey: masterKey, atc: atc, amount: 1999, currency: 840, nonce: nonce, merchantIdentifier: merchant),
            eci: "05", amount: 1999, currency: 840, applicationDataHash: SHA256.hash(Array("bench order".utf8)),
            channel: .inApp)
        let sealed = try SealedPaymentCredential.seal(credential, signingKey: device.secureElementKey, to: key)
        return PaymentCredentialExchange(credential: Data(sealed).base64EncodedString(), paymentMethod: nil)
    }

    static func sealedSample(_ body: PaymentCredentialExchange) throws -> [UInt8] {
        guard let bytes = Data(base64Encoded: body.credential) else {
            throw BenchmarkError(.operationFailed, "bad sample")
        }
        return Array(bytes)
    }

    static func makeDevice(_ directory: DeploymentDirectory) throws -> BenchDevice {
        let deviceCA = try CertificateAuthority.load(named: PKIFiles.deviceCA, from: directory)
        let now = Date()
        let subject = DistinguishedName([
            .organization("Orchard device"), .organizationalUnit("phone"), .userID("demo"), .commonName("bench-phone"),
        ])
        let tlsKey = try P256.Signing.PrivateKey()
        let tlsCertificate = try Certificate.issue(
            subject: subject, publicKey: CertificatePublicKey(tlsKey.publicKey), issuer: deviceCA.issuer,
            notValidBefore: now.addingTimeInterval(-60), notValidAfter: now.addingTimeInterval(3600),
            extensions: [.basicConstraints(isCA: false), .extendedKeyUsage([.clientAuth])])
        let seKey = try P256.Signing.PrivateKey()
        let seCertificate = try Certificate.issue(
            subject: subject, publicKey: CertificatePublicKey(seKey.publicKey), issuer: deviceCA.issuer,
            notValidBefore: now.addingTimeInterval(-60), notValidAfter: now.addingTimeInterval(3600),
            extensions: [.basicConstraints(isCA: false), .keyUsage([.keyAgreement])])
        return BenchDevice(
            identity: TLSIdentity(
                certificateChainPEM: tlsCertificate.pemRepresentation + deviceCA.certificate.pemRepresentation,
                privateKeyPEM: SecureBytes(Array(try tlsKey.pemRepresentation.utf8))),
            secureElementKey: seKey, certificate: seCertificate)
    }

    static func credentialPrivateKey(_ directory: DeploymentDirectory) throws -> P256.KeyAgreement.PrivateKey {
        let pem = try directory.readPrivateKey(named: InAppPKI.Files.credential)
        return try pem.withUnsafeBytes { bytes in
            try P256.KeyAgreement.PrivateKey(pemRepresentation: String(decoding: bytes, as: UTF8.self))
        }
    }

    static func credentialPublicKey(_ directory: DeploymentDirectory) throws -> P256.KeyAgreement.PublicKey {
        try credentialPrivateKey(directory).publicKey
    }

    static func ceilingInputs(
        directory: DeploymentDirectory, device: BenchDevice, sealed: [UInt8]
    ) throws -> InAppCeiling.Inputs {
        let tokenSigning = try PayService.loadTokenSigningPKI(from: directory)
        let processing = try DeploymentPKI.readCertificate(named: MerchantService.Files.processing, from: directory)
        return InAppCeiling.Inputs(
            sealedCredential: sealed, credentialKey: try credentialPrivateKey(directory),
            secureElementKey: device.secureElementKey.publicKey,
            recipient: try MerchantProcessingPublicKey(processingCertificate: processing),
            encoder: PaymentTokenEncoder(signer: try tokenSigning.signer()))
    }
}
