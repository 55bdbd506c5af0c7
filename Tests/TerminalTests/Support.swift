import CardBasics
import CommandTestSupport
import EMV
import Foundation
import NFCLink
import OrchardCrypto
import OrchardLogging
import OrchardRuntime
import Terminal
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A fresh short directory (a Unix socket path holds at most 107 bytes), removed when released; the parties'
/// logs in it are scanned first (V2).
final class TemporaryDirectory: @unchecked Sendable {
    let path: String
    init() throws {
        path = "/tmp/otm-" + String(UUID().uuidString.prefix(8))
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit {
        LogScan.expectCleanLogs(of: path)
        try? FileManager.default.removeItem(atPath: path)
    }
    var antenna: String { path + "/nfc.sock" }
    var deployment: DeploymentDirectory { DeploymentDirectory(path: path) }
}

/// The issuer's side of the test cards: the issuer master key the test personalises cards with, and DPANs.
enum TestIssuer {
    static let masterKey = SymmetricKey(data: [UInt8](repeating: 0x31, count: 8) + [UInt8](repeating: 0x42, count: 8))
    static let visaDPAN = "4761739001010119"
    static let mastercardDPAN = "5204740009900014"

    static func cardMasterKey(_ dpan: String) throws -> SymmetricKey {
        try EMVKeyDerivation.masterKey(issuerMasterKey: masterKey, pan: dpan, panSequenceNumber: 0)
    }
}

/// A card in the test process behind an antenna (the device process is tested end to end elsewhere).
actor CardTarget: NFCTarget {
    private var card: ContactlessCard
    private var authorized: Bool
    private(set) var fieldOffs = 0

    init(
        dpan: String = TestIssuer.visaDPAN, scheme: PaymentScheme = .visa, authorized: Bool = true,
        issuerKey: SymmetricKey = TestIssuer.masterKey
    ) throws {
        let profile = try CardApplicationProfile(
            scheme: scheme, pan: dpan, expiry: "3106",
            masterKey: try EMVKeyDerivation.masterKey(issuerMasterKey: issuerKey, pan: dpan, panSequenceNumber: 0))
        card = try ContactlessCard(applications: [CardApplication(profile: profile, atcStore: InMemoryATCStore())])
        self.authorized = authorized
    }

    func fieldOn(_ polling: NFCPolling) async -> NFCFieldAnswer {
        if authorized { card.authorize(CardholderAuthorization(verifiedBy: .face)) }
        return .join(ready: authorized)
    }

    func isAuthorized() async -> Bool { authorized }

    func transceive(_ command: [UInt8]) async throws(NFCRefusal) -> [UInt8] { card.process(bytes: command) }

    func fieldOff() async {
        fieldOffs += 1
        card.reset()
    }
}

/// An acquirer, network and issuer in one, for the terminal's tests: it verifies the ARQC with the EMV
/// verifier and the test issuer master key, keeps the last ATC per DPAN, checks that the chip data's amount
/// and currency are the request's, and answers idempotently per key. Each call can be scripted to time out,
/// be unreachable or be refused.
actor TestAcquirer: AuthorizationGateway {
    enum Behaviour: Sendable {
        case answer
        /// Decide, but answer only after `delay` (the terminal's deadline passes first).
        case slow(Duration)
        /// Decide, then lose the answer: the gateway reports a timeout at once (what the HTTPS gateway
        /// does when its deadline passes), so the test does not depend on how busy the machine is.
        case lost
        case unreachable
        case refuse
        /// Approve or decline with this code whatever the cryptogram.
        case code(String)
    }

    private var script: [Behaviour]
    private var lastATC: [String: UInt16] = [:]
    private var answers: [String: AuthorizationResponse] = [:]
    private(set) var authorizationKeys: [String] = []
    private(set) var decisions = 0
    private(set) var reversals: [ReversalRequest] = []
    private(set) var requests: [AuthorizationRequest] = []
    private var reversalScript: [Behaviour]

    init(script: [Behaviour] = [], reversalScript: [Behaviour] = []) {
        self.script = script
        self.reversalScript = reversalScript
    }

    func authorize(_ request: AuthorizationRequest) async throws -> AuthorizationResponse {
        authorizationKeys.append(request.idempotencyKey)
        requests.append(request)
        let behaviour = script.isEmpty ? .answer : script.removeFirst()
        switch behaviour {
        case .unreachable: throw TerminalError(.gatewayUnreachable, "connection refused")
        case .refuse: throw TerminalError(.gatewayRefused, "400 unknown terminal")
        default: break
        }
        let answer: AuthorizationResponse
        if let previous = answers[request.idempotencyKey] {
            answer = previous
        } else {
            if case .code(let code) = behaviour {
                answer = try AuthorizationResponse(responseCode: code, approvalCode: code == "00" ? "A1B2C3" : nil)
            } else {
                answer = try decide(request)
            }
            answers[request.idempotencyKey] = answer
            decisions += 1
        }
        if case .slow(let delay) = behaviour { try? await Task.sleep(for: delay) }
        if case .lost = behaviour { throw TerminalError(.gatewayTimedOut, "no answer") }
        return answer
    }

    func reverse(_ request: ReversalRequest) async throws -> ReversalResponse {
        let behaviour = reversalScript.isEmpty ? .answer : reversalScript.removeFirst()
        if case .unreachable = behaviour { throw TerminalError(.gatewayUnreachable, "connection refused") }
        reversals.append(request)
        return ReversalResponse(reversed: answers[request.idempotencyKey] != nil)
    }

    /// The issuer's decision: `88` with the verifier's reason for a cryptogram that fails.
    func decide(_ request: AuthorizationRequest) throws -> AuthorizationResponse {
        let verdict = Self.verify(request, lastATC: lastATC[request.pan.digits])
        switch verdict {
        case .success(let atc):
            lastATC[request.pan.digits] = atc
            return try AuthorizationResponse(
                responseCode: "00", approvalCode: "A1B2C3", authorizationID: "auth-\(request.systemTraceAuditNumber)")
        case .failure(let reason):
            return try AuthorizationResponse(responseCode: "88", declineReason: reason.reason)
        }
    }

    struct Rejection: Error {
        let reason: String
    }

    /// The card-side check of an authorization: the cryptogram over field 55 with the card key derived from
    /// the test issuer master key, the ATC above the last one seen, and field 55's amount and currency
    /// equal to the request's.
    static func verify(_ request: AuthorizationRequest, lastATC: UInt16?) -> Result<UInt16, Rejection> {
        do {
            let data = try ChipAuthorizationData(
                pan: request.pan.digits, panSequenceNumber: request.panSequenceNumber, field55: request.chipData
            )
            switch try CryptogramVerifier().verify(data, issuerMasterKey: TestIssuer.masterKey, lastSeenATC: lastATC) {
            case .invalid(let rejection):
                return .failure(Rejection(reason: rejection.reason.description))
            case .valid(let verified):
                guard data.value(.amountAuthorised) == (try EMVNumeric.amount(UInt64(request.amount.minorUnits))),
                    data.value(.transactionCurrencyCode)
                        == (try EMVNumeric.numeric(UInt64(request.amount.currency.numericCode), byteCount: 2))
                else { return .failure(Rejection(reason: "amountMismatch")) }
                return .success(verified.atc)
            }
        } catch {
            return .failure(Rejection(reason: "malformedData"))
        }
    }
}

extension TerminalPolicy {
    /// Deadlines far beyond what a busy machine needs (the whole suite shares two cooperative threads), except
    /// the wait for an authentication that never comes.
    static var test: TerminalPolicy {
        TerminalPolicy(
            readyTimeout: .milliseconds(200),
            link: NFCLinkLimits(joinTimeout: .seconds(30), exchangeTimeout: .seconds(30)), attemptTimeout: .seconds(30),
            retryBackoff: .milliseconds(10))
    }
}

/// A terminal over an in-memory store and `gateway`, with a log kept in memory.
func makeTerminal(
    gateway: any AuthorizationGateway, store: any TerminalStore = InMemoryTerminalStore(),
    policy: TerminalPolicy = .test,
    settings: TerminalSettings? = nil, log: InMemoryLogSink = InMemoryLogSink()
) async throws -> PaymentTerminal {
    let settings = try settings ?? TerminalSettings(terminalID: "T-TEST-1")
    try await store.saveTerminal(settings)
    return PaymentTerminal(
        settings: settings, store: store, gateway: gateway, policy: policy,
        random: InsecureDeterministicRandom(seed: Array("terminal-tests".utf8)),
        logger: Logger(label: "test", level: .debug, sink: log))
}

func usd(_ text: String) throws -> Money { try Money(parsing: text, currency: try Currency("USD")) }

extension Array where Element == UInt8 {
    func containsSequence(_ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return false }
        for start in 0...(count - needle.count) where self[start] == needle[0] {
            if Array(self[start..<(start + needle.count)]) == needle { return true }
        }
        return false
    }
}

/// The DPAN as ASCII digits and as packed BCD (as it appears in Track 2 or tag 5A).
func cardNumberForms(_ pan: String) -> [[UInt8]] {
    let digits = pan.utf8.map { $0 - 0x30 }
    let bcd = stride(from: 0, to: digits.count - 1, by: 2).map { digits[$0] << 4 | digits[$0 + 1] }
    return [Array(pan.utf8), bcd]
}
