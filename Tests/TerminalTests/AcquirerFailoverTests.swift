import AcquirerAPI
import CardBasics
import EMV
import Foundation
import OrchardHTTP
import OrchardLogging
import Synchronization
import Terminal
import Testing

/// The terminal's acquirer gateway in front of several instances of the acquirer (the network service's instances
/// on one database): an instance that cannot be reached or answers 503 is passed over for the next, with the same
/// request and Idempotency-Key; any other answer is the acquirer's, and the next instance is not asked.
@Suite("The terminal's acquirer gateway fails over between instances")
struct AcquirerFailoverTests {
    /// A stub acquirer instance over TLS: answers both acquiring routes with `status` (an approval or a reversal
    /// when 200) and records each request's path and Idempotency-Key.
    final class Instance: Sendable {
        let server: HTTPServer
        private let log: Log

        var url: String { "https://127.0.0.1:\(server.port)" }
        var requests: [String] { log.lines.withLock { $0 } }

        init(answering status: HTTPStatus, certificate: EphemeralCertificate) throws {
            var router = Router()
            let log = Log()
            self.log = log
            router.post(AcquirerAPI.Route.authorizations) { request in
                log.append("authorization \(request.headers["Idempotency-Key"] ?? "none")")
                guard status == .ok else { return HTTPResponse(status: status, headers: ["Retry-After": "1"]) }
                return try HTTPResponse.json(
                    AcquirerAPI.AuthorizationAnswer(
                        authorizationID: "auth-1", responseCode: "00", approvalCode: "A1B2C3", declineReason: nil,
                        maskedPAN: nil))
            }
            router.post(AcquirerAPI.Route.reversals) { request in
                log.append("reversal \(request.headers["Idempotency-Key"] ?? "none")")
                guard status == .ok else { return HTTPResponse(status: status) }
                return try HTTPResponse.json(AcquirerAPI.ReversalAnswer(reversed: true))
            }
            server = try HTTPServer(
                configuration: HTTPServerConfiguration(
                    listeners: [
                        .init(
                            port: 0,
                            tls: TLSServerConfiguration(
                                certificateChainPEM: certificate.certificatePEM,
                                privateKeyPEM: certificate.privateKeyPEM))
                    ], threads: 1, shutdownDeadline: .seconds(1)),
                router: router, logger: .disabled)
            try server.start()
        }

        func stop() async { await server.shutdown() }

        final class Log: Sendable {
            let lines = Mutex<[String]>([])
            func append(_ line: String) { lines.withLock { $0.append(line) } }
        }
    }

    /// A port nothing listens on (bound, read, closed).
    func closedURL(_ certificate: EphemeralCertificate) async throws -> String {
        let instance = try Instance(answering: .ok, certificate: certificate)
        let url = instance.url
        await instance.stop()
        return url
    }

    func request(stan: String) throws -> Terminal.AuthorizationRequest {
        Terminal.AuthorizationRequest(
            terminalID: "T0001", systemTraceAuditNumber: stan, merchantID: "merchant.dev.orchard.demo",
            pan: try PrimaryAccountNumber("4111111111111111"), expiry: "3412", panSequenceNumber: 0,
            amount: try Money(minorUnits: 450, currency: Currency("840")), scheme: .visa,
            cryptogram: Array(repeating: 0x11, count: 8), applicationTransactionCounter: 1,
            chipData: [0x9F, 0x36, 0x02, 0x00, 0x01], transmittedAt: Date())
    }

    @Test("A closed port and a 503 are passed over: the next instance approves, with the same STAN and key")
    func failsOver() async throws {
        let certificate = try EphemeralCertificate()
        let closed = try await closedURL(certificate)
        let busy = try Instance(answering: .serviceUnavailable, certificate: certificate)
        let healthy = try Instance(answering: .ok, certificate: certificate)
        let gateway = try AcquirerHTTPSGateway(
            baseURLs: [closed, busy.url + "/", healthy.url], trustedRootsPEM: certificate.certificatePEM,
            requestTimeout: .seconds(10))
        #expect(gateway.baseURL == closed && gateway.baseURLs == [closed, busy.url, healthy.url])

        let approved = try await gateway.authorize(try request(stan: "000123"))
        #expect(approved.responseCode == "00" && approved.approvalCode == "A1B2C3")
        #expect(busy.requests == ["authorization terminal-T0001-000123"])
        #expect(healthy.requests == ["authorization terminal-T0001-000123"])

        let reversal = ReversalRequest(
            terminalID: "T0001", systemTraceAuditNumber: "000123", merchantID: "merchant.dev.orchard.demo",
            amountMinorUnits: 450, currency: "840", reason: "timeout")
        #expect(try await gateway.reverse(reversal).reversed)
        #expect(healthy.requests.last == "reversal terminal-T0001-000123")
        await busy.stop()
        await healthy.stop()
    }

    @Test("Every instance closed: unreachable; every instance at 503: the outcome is unknown; a refusal is final")
    func whenNoInstanceAnswers() async throws {
        let certificate = try EphemeralCertificate()
        let closed = try await closedURL(certificate)
        let busy = try Instance(answering: .serviceUnavailable, certificate: certificate)
        let refusing = try Instance(answering: .badRequest, certificate: certificate)
        let healthy = try Instance(answering: .ok, certificate: certificate)

        // Nothing reached an acquirer that acted on it (a 503 is a refusal to act): unreachable.
        for urls in [[closed], [busy.url, closed]] {
            let unreachable = try AcquirerHTTPSGateway(baseURLs: urls, trustedRootsPEM: certificate.certificatePEM)
            do {
                _ = try await unreachable.authorize(try request(stan: "000200"))
                Issue.record("an authorization no instance took was answered")
            } catch let error as TerminalError {
                #expect(error.code == .gatewayUnreachable)
            }
        }
        let onlyBusy = try AcquirerHTTPSGateway(baseURLs: [busy.url], trustedRootsPEM: certificate.certificatePEM)
        do {
            _ = try await onlyBusy.authorize(try request(stan: "000202"))
            Issue.record("a 503 was taken for an answer")
        } catch let error as TerminalError {
            #expect(error.code == .gatewayTimedOut)
        }

        // A 400 is the acquirer's refusal of the request itself: the next instance is not asked.
        let refused = try AcquirerHTTPSGateway(
            baseURLs: [refusing.url, healthy.url], trustedRootsPEM: certificate.certificatePEM)
        do {
            _ = try await refused.authorize(try request(stan: "000203"))
            Issue.record("a refusal was passed over")
        } catch let error as TerminalError {
            #expect(error.code == .gatewayRefused)
        }
        #expect(healthy.requests.isEmpty)

        #expect(throws: TerminalError.self) {
            try AcquirerHTTPSGateway(baseURLs: [], trustedRootsPEM: certificate.certificatePEM)
        }
        #expect(throws: TerminalError.self) {
            try AcquirerHTTPSGateway(
                baseURLs: [healthy.url, "http://127.0.0.1:1"], trustedRootsPEM: certificate.certificatePEM)
        }
        for instance in [busy, refusing, healthy] { await instance.stop() }
    }
}
