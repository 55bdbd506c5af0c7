import CardBasics
import CommandTestSupport
import Device
import DeviceControlAPI
import DeviceProcess
import DeviceTestSupport
import EMV
import Foundation
import Issuer
import NFCLink
import NetworkAuthorizationAPI
import NetworkServer
import OrchardCrypto
import OrchardHTTP
import OrchardLogging
import OrchardRuntime
import OrchardX509
import PaymentCredential
import SecureElement
import Terminal
import Testing
import TokenService

#if canImport(Glibc)
    import Glibc
#endif

/// `orchard device run` as a child process: the device, its control socket and (phones and watches) its
/// NFC antenna. Stopped with SIGTERM when released or by ``stop()``.
final class DeviceProcessHandle: Sendable {
    let name: String
    let deployment: DeploymentDirectory
    private let process: ChildProcess

    init(
        _ deployment: DeploymentDirectory, name: String, autoAuth: String? = nil, expectAntenna: Bool = true,
        environment: [String: String] = [:], stdin: String? = nil, options: [String] = []
    ) async throws {
        self.name = name
        self.deployment = deployment
        process = try ChildProcess(
            try orchardExecutable(),
            ["device", "run", "--data-dir", deployment.path, "--name", name]
                + (autoAuth.map { ["--auto-auth", $0] } ?? []) + options, environment: environment,
            stdin: stdin.map { Array($0.utf8) }, stdout: .capture, stderr: .capture)
        for _ in 0..<2400 {
            if ControlSocketClient.isRunning(at: controlSocket),
                !expectAntenna || NFCAntenna.isListening(at: antenna)
            {
                return
            }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw TerminalError(.notConfigured, "device \(name) did not start")
    }

    deinit { stop() }

    var controlSocket: String { Device.controlSocketPath(of: name, in: deployment) }
    /// The process's id, to read its /proc entries.
    var pid: Int32 { process.pid }
    /// What the process wrote to stderr so far.
    var standardError: String { process.stderr }
    var antenna: String { NFCAntenna.path(forDevice: name, in: deployment) }

    /// SIGTERM, then wait; returns what the process printed (its events).
    @discardableResult
    func stop() -> String {
        process.terminate()
        process.waitUntilExit()
        return process.stdout
    }

    /// One control API call; returns the typed answer, or throws the device's refusal.
    @discardableResult
    func send<Request: DeviceControlRequest>(_ request: Request) async throws -> Request.Answer {
        try await ControlSocketClient.send(request, to: controlSocket).get()
    }

    /// Installs a card personalised under the test issuer master key, as the token service would; returns
    /// its identifier.
    func provision(dpan: String, network: String, suffix: String) async throws -> String {
        let identity = try Device.identity(of: name, in: deployment)
        let personalisation = try PersonalisationData(
            tokenReference: "tok_\(dpan.suffix(6))", dpan: dpan, panSequenceNumber: 0, expiry: "3106", network: network,
            proximityMasterKey: try TestIssuer.cardMasterKey(dpan),
            remoteMasterKey: SymmetricKey(data: [UInt8](repeating: 0x44, count: 16)))
        let envelope = try personalisation.encoded().withUnsafeBytes { bytes in
            try SealedEnvelope.seal(
                bytes, to: try identity.certificate.secureElementKey, purpose: PersonalisationData.envelopePurpose)
        }
        // Signed as the token service signs installs, with the key `createDevice` pinned.
        let install = try TestInstallAuthority.sign(envelope, for: identity.certificate.derRepresentation)
        return try await send(
            AddCard(envelope: Data(install), type: "credit", suffix: suffix, displayName: "Orchard Bank \(network)")
        ).id
    }
}

/// The acquirer (with network and issuer) as an HTTPS service in the test process: the wire format of
/// ``AcquirerHTTPSGateway`` in front of ``TestAcquirer``.
final class AcquirerService: Sendable {
    let acquirer: TestAcquirer
    let server: HTTPServer
    let rootsPath: String
    private let requestBodies = BodyLog()

    var url: String { "https://127.0.0.1:\(server.port)" }
    /// Every authorization body received, as bytes (to check what crossed the wire).
    var bodies: [Data] { requestBodies.all }

    init(_ acquirer: TestAcquirer, directory: String) throws {
        self.acquirer = acquirer
        let identity = try EphemeralCertificate()
        rootsPath = directory + "/acquirer-root.pem"
        try Data(identity.certificatePEM.utf8).write(to: URL(fileURLWithPath: rootsPath))
        var router = Router()
        let log = requestBodies
        router.add(.post, "/v1/acquirer/authorizations") { request in
            log.append(request.body)
            // The network service's own body type: the terminal's JSON must be what the real route takes.
            let body = try request.decodeJSON(AuthorizationBody.self)
            do {
                let answer = try await acquirer.authorize(
                    try Self.request(body, idempotencyKey: request.headers["Idempotency-Key"]))
                return try HTTPResponse.json(answer)
            } catch let error as TerminalError where error.code == .gatewayRefused {
                return try HTTPResponse.json(
                    ErrorBody(error: .init(code: "unknown_terminal", message: error.message)), status: .badRequest)
            }
        }
        router.add(.post, "/v1/acquirer/reversals") { request in
            // The network service's own body type here too.
            let body = try request.decodeJSON(ReversalBody.self)
            guard let terminal = body.terminalID, let stan = body.stan, body.idempotencyKey == nil else {
                throw TerminalError(.gatewayRefused, "malformed reversal")
            }
            let reversal = ReversalRequest(
                terminalID: terminal, systemTraceAuditNumber: stan, merchantID: body.merchantID,
                amountMinorUnits: body.amount.minorUnits, currency: body.amount.currency.numericString,
                reason: body.reason)
            return try HTTPResponse.json(try await acquirer.reverse(reversal))
        }
        server = try HTTPServer(
            configuration: HTTPServerConfiguration(
                listeners: [
                    .init(
                        port: 0,
                        tls: TLSServerConfiguration(
                            certificateChainPEM: identity.certificatePEM, privateKeyPEM: identity.privateKeyPEM))
                ], threads: 1, shutdownDeadline: .seconds(5)),
            router: router, logger: .disabled)
        try server.start()
    }

    func shutdown() async { await server.shutdown() }

    /// The network's body as the terminal tests' acquirer takes it.
    static func request(
        _ body: AuthorizationBody, idempotencyKey: String?
    ) throws -> Terminal.AuthorizationRequest {
        guard body.channel == .contactless, let terminal = body.terminalID, let stan = body.stan,
            body.idempotencyKey == nil, idempotencyKey == "terminal-\(terminal)-\(stan)",
            let submission = body.cryptogram, submission.kind == .proximityARQC, let expiry = body.expiry
        else { throw TerminalError(.gatewayRefused, "malformed authorization") }
        return Terminal.AuthorizationRequest(
            terminalID: terminal, systemTraceAuditNumber: stan, merchantID: body.merchantID,
            pan: try PrimaryAccountNumber(body.pan.digits), expiry: expiry.yymm, panSequenceNumber: 0,
            amount: try Money(minorUnits: body.amount.minorUnits, currency: body.amount.currency),
            scheme: body.pan.digits.hasPrefix("4") ? .visa : .mastercard, cryptogram: submission.cryptogram,
            applicationTransactionCounter: submission.applicationTransactionCounter,
            chipData: submission.transactionData, transmittedAt: Date())
    }
}

struct ErrorBody: Encodable, Sendable {
    struct Inner: Encodable, Sendable {
        let code: String
        let message: String
    }
    let error: Inner
}

final class BodyLog: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [Data] = []
    func append(_ body: Data) { lock.withLock { stored.append(body) } }
    var all: [Data] { lock.withLock { stored } }
}

/// A device between the terminal and a real device's antenna (an attacker's relay), recording every
/// exchange and optionally rewriting commands on their way to the device.
actor RelayTarget: NFCTarget {
    private let upstream: String
    private let rewrite: @Sendable ([UInt8]) -> [UInt8]
    private var session: NFCReaderSession?
    private(set) var exchanges: [(command: [UInt8], response: [UInt8])] = []

    init(upstream: String, rewrite: @escaping @Sendable ([UInt8]) -> [UInt8] = { $0 }) {
        self.upstream = upstream
        self.rewrite = rewrite
    }

    func fieldOn(_ polling: NFCPolling) async -> NFCFieldAnswer {
        do {
            let session = try await NFCReaderSession.open(antenna: upstream, polling: polling)
            self.session = session
            return .join(ready: session.isReady)
        } catch {
            return .refuse(NFCRefusal(code: error.peerCode ?? error.code.description, message: error.message))
        }
    }

    func isAuthorized() async -> Bool {
        guard let session else { return false }
        return (try? await session.waitUntilReady(timeout: .milliseconds(1))) ?? false
    }

    func transceive(_ command: [UInt8]) async throws(NFCRefusal) -> [UInt8] {
        guard let session else { throw NFCRefusal(code: "fieldNotActive", message: "no upstream") }
        do {
            let response = try await session.transceive(rewrite(command))
            exchanges.append((command, response))
            return response
        } catch {
            throw NFCRefusal(code: error.code.description, message: error.message)
        }
    }

    func fieldOff() async {
        await session?.close()
        session = nil
    }
}

/// A device that answers with a recorded tap, response by response (a replay attack).
actor ReplayTarget: NFCTarget {
    private let responses: [[UInt8]]
    private var next = 0

    init(responses: [[UInt8]]) { self.responses = responses }

    func fieldOn(_ polling: NFCPolling) async -> NFCFieldAnswer { .join(ready: true) }
    func isAuthorized() async -> Bool { true }

    func transceive(_ command: [UInt8]) async throws(NFCRefusal) -> [UInt8] {
        guard next < responses.count else { return [0x69, 0x85] }
        defer { next += 1 }
        return responses[next]
    }

    func fieldOff() async { next = 0 }
}

/// A deployment with a terminal set up against `acquirer`.
func setUpTerminal(_ directory: TemporaryDirectory, acquirer: AcquirerService, extra: [String] = []) async throws {
    let setup = try await orchard(
        [
            "terminal", "setup", "--data-dir", directory.path, "--terminal", "T-E2E", "--merchant-name",
            "Orchard Coffee",
            "--acquirer-url", acquirer.url, "--acquirer-roots", acquirer.rootsPath,
        ] + extra)
    #expect(setup.status == 0, "\(setup.stderr)")
}

/// `orchard terminal charge ... --json`.
func charge(
    _ directory: TemporaryDirectory, _ amount: String, device: String, currency: String = "USD",
    extra: [String] = []
) async throws -> (CommandOutput, [String: Any]) {
    let output = try await orchard(
        [
            "terminal", "charge", "--data-dir", directory.path, "--amount", amount, "--currency", currency, "--device",
            device, "--json",
        ] + (extra.contains("--wait") ? [] : ["--wait", "5"]) + extra)
    #expect(output.status == 0, "\(output.stderr)")
    return (output, (try? output.json()) ?? [:])
}

/// `orchard device create`. In a directory without a token service (no `orchard init`), the device pins the
/// test install key first (``TestInstallAuthority``), so the tests' signed installs are accepted.
func createDevice(_ directory: TemporaryDirectory, _ name: String, kind: String, biometry: String) async throws {
    let pinned = try directory.deployment.certificatePath(named: "token-service-personalisation")
    if !FileManager.default.fileExists(atPath: pinned) { try TestInstallAuthority.pin(in: directory.deployment) }
    let created = try await orchard(
        [
            "device", "create", "--data-dir", directory.path, "--name", name, "--kind", kind, "--biometry", biometry,
            "--passcode-file", "-",
        ], stdin: "8642\n")
    #expect(created.status == 0, "\(created.stderr)")
}
