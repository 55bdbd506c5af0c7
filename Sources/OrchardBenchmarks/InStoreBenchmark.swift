import CardBasics
import Device
import DeviceProcess
import Foundation
import Issuer
import NFCLink
import OrchardCrypto
import OrchardHTTP
public import OrchardRuntime
public import OrchardServices
import OrchardX509
import PayServer
import PaymentCredential
import SecureElement
public import Terminal
import TokenRequestorAPI
import TokenService
import Wallet

/// The in-store benchmark behind `orchard bench instore`: taps per second end to end on loopback, with every party
/// real: a deployment made by `init` in a temporary directory, the network service (acquirer, token service with
/// its HSM and the EMV ARQC check, issuer; SQLite files with `synchronous=FULL`) over HTTPS with mutual TLS, a
/// phone whose Secure Element was provisioned by that token service, its antenna on the NFC link's Unix socket,
/// and the terminal charging it. The device, the network and the terminal share this process (the APDUs still
/// cross the socket, the authorization still crosses TLS); the Pay server is not involved (provisioning goes to
/// the network directly with the Pay server's client certificate).
public enum InStoreBenchmark {
    static let deviceName = "bench-phone"
    /// Targets on loopback: device side p99 ≤ 5 ms per APDU exchange, tap → response p99 ≤ 50 ms.
    public static let exchangeTargetMilliseconds = 5.0
    public static let tapTargetMilliseconds = 50.0
    /// Target for `orchard device run`: from the process's start to its first tap answered, ≤ 200 ms.
    public static let deviceStartTargetMilliseconds = 200.0
    /// How many times the device process is started for that figure.
    static let deviceStarts = 5

    /// How the terminal reaches the deployment's acquirer, as `orchard terminal` connects it (its client
    /// certificate issued in the deployment, the deployment's root trusted): the CLI passes its own wiring, so the
    /// benchmark charges through exactly the gateway a terminal uses.
    public typealias TerminalGateway = (TerminalSettings, DeploymentDirectory, TerminalPolicy) throws ->
        any AuthorizationGateway

    /// Sets everything up, charges until `seconds` passed or `maxTaps` were made, and tears it down.
    /// - Parameter deviceExecutable: the `orchard` executable: when given, the phone is then started
    ///   ``deviceStarts`` times as `orchard device run` and each start is timed to its first tap answered.
    public static func run(
        seconds: Double, maxTaps: Int, registry: ServiceRegistry, terminalGateway: TerminalGateway,
        deviceExecutable: String? = nil, trace: @escaping @Sendable (String) -> Void
    ) async throws -> InStoreBenchmarkReport {
        try await withThrowawayDeployment(named: "instore", registry: registry, services: [.network]) {
            deployment, connections in
            try await charge(
                deployment: deployment, connections: connections, seconds: seconds, maxTaps: maxTaps,
                terminalGateway: terminalGateway, deviceExecutable: deviceExecutable, trace: trace)
        }
    }

    static func charge(
        deployment: DeploymentDirectory, connections: ServiceConnections, seconds: Double, maxTaps: Int,
        terminalGateway: TerminalGateway, deviceExecutable: String?, trace: @escaping @Sendable (String) -> Void
    ) async throws -> InStoreBenchmarkReport {
        let base = try connections.baseURL(of: .network)
        let identity = try Device.create(
            in: deployment, name: deviceName, profile: try DeviceProfile(kind: .phone, biometry: .face, account: "demo")
        )
        let device = try await Device.open(in: deployment, name: deviceName)
        try await device.secureEnclave.setPasscode(SecureBytes(Array("8642".utf8)), current: nil)
        let envelope = try await provision(connections, base: base, deployment: deployment, identity: identity)
        _ = try await device.installCard(
            envelope: envelope, display: CardDisplayInput(type: .credit, suffix: "1111", displayName: "Orchard Visa"))
        guard
            let antenna = try NFCFieldSession.startAntenna(
                device: device, deployment: deployment, autoAuthentication: try AutoAuthentication(parsing: "face-id"),
                analytics: DiscardedPurchases())
        else { throw BenchmarkError(.operationFailed, "the benchmark phone has no antenna") }
        defer { antenna.stop() }

        var settings = try TerminalSettings(terminalID: "T0001")
        settings.acquirerURL = base
        let store = try TerminalDatabase(deployment: deployment)
        try await store.saveTerminal(settings)
        let policy = TerminalPolicy(
            readyTimeout: .seconds(5), authorizationAttempts: 1, attemptTimeout: .seconds(10), reversalAttempts: 1)
        let terminal = PaymentTerminal(
            settings: settings, store: store,
            gateway: try terminalGateway(settings, deployment, policy),
            policy: policy)
        let probe = try FsyncProbe(directory: Device.directory(of: deviceName, in: deployment))
        let amount = try Money(minorUnits: 100, currency: try Currency("USD"))
        let antennaPath = NFCAntenna.path(forDevice: deviceName, in: deployment)

        // Warm-up (connections, caches); then the measured taps.
        for _ in 0..<3 {
            let result = try await terminal.charge(amount, antenna: antennaPath)
            guard result.outcome == .approved else {
                throw BenchmarkError(
                    .operationFailed, "the warm-up charge was declined: \(result.responseCode) \(result.reason)")
            }
        }
        trace("in store: deployment, network, phone and terminal ready; charging for \(seconds) s")
        var tapNanoseconds: [UInt64] = []
        var exchangeNanoseconds: [UInt64] = []
        var fsyncNanoseconds: [UInt64] = []
        var approved = 0
        let clock = ContinuousClock()
        let start = clock.now
        let deadline = start + .milliseconds(Int64(seconds * 1000))
        while tapNanoseconds.count < maxTaps, clock.now < deadline {
            let tapStart = clock.now
            let result = try await terminal.charge(amount, antenna: antennaPath)
            tapNanoseconds.append(nanoseconds(clock.now - tapStart))
            if result.outcome == .approved { approved += 1 }
            exchangeNanoseconds += result.timings.exchangeMicroseconds.map { UInt64(max(0, $0)) * 1000 }
            fsyncNanoseconds.append(try probe.measure())
        }
        let elapsed = clock.now - start
        var figures = [
            try LatencyFigure(
                name: "device-side APDU exchange", nanoseconds: exchangeNanoseconds,
                targetP99Milliseconds: exchangeTargetMilliseconds),
            try LatencyFigure(
                name: "tap → authorization response", nanoseconds: tapNanoseconds,
                targetP99Milliseconds: tapTargetMilliseconds),
            try LatencyFigure(
                name: "device store fsync (4 KiB)", nanoseconds: fsyncNanoseconds, targetP99Milliseconds: nil),
        ]
        if let deviceExecutable {
            // The phone as its own process from now on: this process's antenna goes first.
            antenna.stop()
            var starts: [UInt64] = []
            for _ in 0..<deviceStarts {
                starts.append(
                    try await timeDeviceStart(
                        executable: deviceExecutable, deployment: deployment, terminal: terminal, amount: amount,
                        antennaPath: antennaPath))
            }
            trace("in store: `orchard device run` started \(deviceStarts) times, each until its first tap answered")
            figures.append(
                try LatencyFigure(
                    name: "device run → first tap answered", nanoseconds: starts,
                    targetP99Milliseconds: deviceStartTargetMilliseconds))
        }
        return InStoreBenchmarkReport(
            taps: tapNanoseconds.count, approved: approved, seconds: Double(nanoseconds(elapsed)) / 1e9,
            figures: figures)
    }

    /// Starts `orchard device run` for the benchmark phone and times it from the start to the first tap it answers
    /// (the terminal taps as soon as the antenna's socket exists, again until a charge is approved), then stops it.
    static func timeDeviceStart(
        executable: String, deployment: DeploymentDirectory, terminal: PaymentTerminal, amount: Money,
        antennaPath: String
    ) async throws -> UInt64 {
        let clock = ContinuousClock()
        let start = clock.now
        let process = try Subprocess(
            executable,
            ["device", "run", "--name", deviceName, "--auto-auth", "face-id", "--data-dir", deployment.path],
            stderrPath: deployment.path + "/device-run-bench.stderr")
        defer { process.send(SIGKILL) }
        let deadline = start + .seconds(30)
        while clock.now < deadline {
            guard process.isRunning else {
                throw BenchmarkError(
                    .operationFailed,
                    "`orchard device run` ended at start (see \(deployment.path)/device-run-bench.stderr)")
            }
            if FileManager.default.fileExists(atPath: antennaPath),
                try await terminal.charge(amount, antenna: antennaPath).outcome == .approved
            {
                let elapsed = nanoseconds(clock.now - start)
                process.send(SIGTERM)
                if await process.exit(within: 10) == nil { process.send(SIGKILL) }
                _ = await process.exit()
                return elapsed
            }
            try await Task.sleep(for: .milliseconds(1))
        }
        throw BenchmarkError(.operationFailed, "`orchard device run` answered no tap in 30 s")
    }

    /// Check Card and Link and Provision at the network, as the Pay server relays them; returns the SE
    /// personalisation envelope.
    static func provision(
        _ connections: ServiceConnections, base: String, deployment: DeploymentDirectory, identity: DeviceIdentity
    ) async throws -> [UInt8] {
        let client = try connections.client(
            identity: try TLSIdentity.load(named: PayService.Files.client, from: deployment))
        defer { client.shutdown() }
        let key = try await client.get(base + TokenRequestorAPI.Route.provisioningKey)
            .decodeJSON(TokenRequestorAPI.ProvisioningKey.self)
        guard let der = Data(base64Encoded: key.publicKey) else {
            throw BenchmarkError(.operationFailed, "the network's provisioning key is not base64")
        }
        let tokenServiceKey = try P256.KeyAgreement.PublicKey(derRepresentation: der)
        let pan = try PrimaryAccountNumber("4111111111111111")
        let expiry = try CardExpiry(year: 2034, month: 12)
        let payload = try CardDataPayload(
            pan: pan, expiry: expiry,
            cardVerificationValue: try CardVerificationValue(
                try TestCards.insecureDemoCardVerificationKey.cardVerificationValue(pan: pan, expiry: expiry)),
            cardholderName: "Bench Tester")
        let label = try EncryptedEnvelope.Label(
            purpose: CardDataPayload.purpose, sender: "wallet/" + deviceName, recipient: "token-service")
        let sealed = try EncryptedEnvelope.seal(try payload.encoded(), to: tokenServiceKey, label: label)
        let check = try await client.post(
            base + TokenRequestorAPI.Route.checkCard,
            json: TokenRequestorAPI.CheckCardRequest(
                idempotencyKey: "bench-add-card", tokenRequestorID: TokenRequestor.orchardPay.id, deviceID: deviceName,
                deviceKind: "phone", encryptedCardData: Data(sealed.serialized).base64EncodedString())
        ).decodeJSON(TokenRequestorAPI.CheckCardAnswer.self)
        guard let sessionID = check.sessionID else {
            throw BenchmarkError(.operationFailed, "the test card was not approved")
        }
        let link = try await client.post(
            base + TokenRequestorAPI.Route.link,
            json: TokenRequestorAPI.LinkRequest(
                idempotencyKey: "bench-link", sessionID: sessionID, deviceID: deviceName,
                secureElementCertificateChain: [Data(identity.certificate.derRepresentation).base64EncodedString()],
                termsAccepted: true)
        ).decodeJSON(TokenRequestorAPI.LinkAnswer.self)
        guard case .provisioned(let token) = link, let personalisation = Data(base64Encoded: token.personalisation)
        else {
            throw BenchmarkError(.operationFailed, "Link and Provision did not provision")
        }
        return Array(personalisation)
    }

    static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds / 1_000_000_000))
    }
}

/// The benchmark's purchases are not reported anywhere.
struct DiscardedPurchases: PurchaseAnalyticsSink {
    func purchase(amountMinorUnits: UInt64, currency: UInt16, country: UInt16) {}
}
