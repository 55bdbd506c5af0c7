import AcquirerAPI
import CardBasics
import EMV
import Foundation
public import OrchardCrypto
import OrchardHTTP
import OrchardLogging
import OrchardRuntime

/// The terminal's acquirer connection over HTTPS (`OrchardHTTP`'s client, trusting only the given roots).
///
/// `POST {base}/v1/acquirer/authorizations` (the network service's acquiring route; the terminal ID and STAN
/// in the body are the acquirer's idempotency key) and `POST {base}/v1/acquirer/reversals`, JSON both ways,
/// with the header `Idempotency-Key: terminal-<terminal ID>-<STAN>` as well (docs/terminal.md has the
/// bodies). A 2xx answer is the acquirer's decision; 4xx is a refusal of the request itself
/// (``TerminalError/Code/gatewayRefused``); 409, 5xx, a timeout or a broken connection leave the outcome
/// unknown (``TerminalError/Code/gatewayTimedOut``); a connection that could not be made is
/// ``TerminalError/Code/gatewayUnreachable``. The client never retries
/// by itself: the terminal decides (same STAN, or a reversal).
///
/// Several instances of the acquirer (the network service's instances on one database) are tried in order, as
/// every Orchard client of several instances does (``OrchardHTTP/HTTPClient/send(_:failover:)``): an instance
/// that cannot be reached or answers 503 is passed over for the next with the same request and
/// `Idempotency-Key`, so a repeat reaching another instance gets the first answer. Each instance gets one attempt.
public final class AcquirerHTTPSGateway: AuthorizationGateway {
    /// The first (preferred) instance's base URL.
    public let baseURL: String
    /// Every instance's base URL, tried in this order.
    public let baseURLs: [String]
    private let endpoints: FailoverEndpoints
    private let client: HTTPClient

    /// A gateway to `baseURL` (`https://host:port`), trusting `trustedRootsPEM` only, and presenting the
    /// terminal's client certificate (a deployment's acquiring route requires one with role `acquiring`).
    public convenience init(
        baseURL: String, trustedRootsPEM: String, clientCertificateChainPEM: String? = nil,
        clientPrivateKeyPEM: SecureBytes? = nil, requestTimeout: Duration = .seconds(10)
    ) throws(TerminalError) {
        try self.init(
            baseURLs: [baseURL], trustedRootsPEM: trustedRootsPEM, clientCertificateChainPEM: clientCertificateChainPEM,
            clientPrivateKeyPEM: clientPrivateKeyPEM, requestTimeout: requestTimeout)
    }

    /// A gateway to the acquirer's instances at `baseURLs` (each `https://host:port`, first preferred), failing
    /// over from one to the next; trust and client certificate as for a single URL.
    public init(
        baseURLs: [String], trustedRootsPEM: String, clientCertificateChainPEM: String? = nil,
        clientPrivateKeyPEM: SecureBytes? = nil, requestTimeout: Duration = .seconds(10)
    ) throws(TerminalError) {
        guard let first = baseURLs.first else {
            throw TerminalError(.invalidArgument, "give at least one acquirer URL")
        }
        guard baseURLs.allSatisfy({ $0.hasPrefix("https://") }) else {
            throw TerminalError(.invalidArgument, "the acquirer URL is https://")
        }
        do {
            endpoints = try FailoverEndpoints(baseURLs)
        } catch {
            throw TerminalError(.invalidArgument, "the acquirer URLs are not valid: \(error.message)")
        }
        self.baseURLs = endpoints.baseURLs
        self.baseURL = first.hasSuffix("/") ? String(first.dropLast()) : first
        do {
            client = try HTTPClient(
                configuration: HTTPClientConfiguration(
                    trustedRootsPEM: trustedRootsPEM, clientCertificateChainPEM: clientCertificateChainPEM,
                    clientPrivateKeyPEM: clientPrivateKeyPEM, connectTimeout: .seconds(3),
                    requestTimeout: requestTimeout, maxResponseBytes: 64 << 10, maxAttempts: 1))
        } catch {
            throw TerminalError(.invalidArgument, "the acquirer connection cannot be set up: \(error.message)")
        }
    }

    deinit { client.shutdown() }

    public func authorize(_ request: AuthorizationRequest) async throws -> AuthorizationResponse {
        let response = try await post(
            AcquirerAPI.Route.authorizations, Self.wire(request), idempotencyKey: request.idempotencyKey)
        do {
            // A key given twice is refused, as every Orchard party refuses it (DuplicateJSONKeys).
            guard DuplicateJSONKeys.first(in: response) == nil else { throw HTTPError(.duplicateKey, "") }
            let answer = try JSONDecoder().decode(AcquirerAPI.AuthorizationAnswer.self, from: response)
            return try AuthorizationResponse(
                responseCode: answer.responseCode, approvalCode: answer.approvalCode,
                declineReason: answer.declineReason, authorizationID: answer.authorizationID)
        } catch {
            throw TerminalError(.protocolViolation, "the acquirer's authorization answer is not valid")
        }
    }

    public func reverse(_ request: ReversalRequest) async throws -> ReversalResponse {
        let body = AcquirerAPI.ReversalRequest(
            merchantID: request.merchantID, terminalID: request.terminalID, stan: request.systemTraceAuditNumber,
            amount: AcquirerAPI.Money(minorUnits: request.amountMinorUnits, currency: request.currency),
            reason: request.reason)
        let response = try await post(AcquirerAPI.Route.reversals, body, idempotencyKey: request.idempotencyKey)
        do {
            guard DuplicateJSONKeys.first(in: response) == nil else { throw HTTPError(.duplicateKey, "") }
            return ReversalResponse(
                reversed: try JSONDecoder().decode(AcquirerAPI.ReversalAnswer.self, from: response).reversed)
        } catch {
            throw TerminalError(.protocolViolation, "the acquirer's reversal answer is not valid")
        }
    }

    /// The authorization as the acquirer's route takes it: the DPAN in clear (the acquirer needs it), the expiry
    /// as year and month, the amount with the ISO 4217 numeric currency, and the ARQC with field 55 as the data
    /// it covers; `panSequenceNumber` and `posEntryMode` travel too (ISO 8583 DE 23 and DE 22).
    static func wire(_ request: AuthorizationRequest) -> AcquirerAPI.AuthorizationRequest {
        let yy = Int(request.expiry.prefix(2))
        let mm = Int(request.expiry.suffix(2))
        return AcquirerAPI.AuthorizationRequest(
            merchantID: request.merchantID, terminalID: request.terminalID, stan: request.systemTraceAuditNumber,
            pan: request.pan.digits,
            expiry: yy.flatMap { year in mm.map { AcquirerAPI.Expiry(year: 2000 + year, month: $0) } },
            amount: AcquirerAPI.Money(
                minorUnits: request.amount.minorUnits, currency: request.amount.currency.numericString),
            cryptogram: AcquirerAPI.Cryptogram(
                kind: "proximityARQC", cryptogram: request.cryptogram,
                applicationTransactionCounter: request.applicationTransactionCounter, transactionData: request.chipData),
            panSequenceNumber: request.panSequenceNumber, posEntryMode: request.posEntryMode)
    }

    private func post(
        _ path: String, _ body: some Encodable & Sendable, idempotencyKey: String
    ) async throws(TerminalError)
        -> Data
    {
        let request: HTTPClientRequest
        do {
            request = try HTTPClientRequest.json(
                .post, path, body, headers: ["Idempotency-Key": idempotencyKey])
        } catch {
            throw TerminalError(.invalidArgument, "the request could not be encoded")
        }
        let response: HTTPResponse
        do {
            response = try await client.send(request, failover: endpoints)
        } catch {
            switch error.code {
            case .connectionFailed, .invalidURL, .tlsFailure, .notRunning:
                throw TerminalError(.gatewayUnreachable, "the acquirer cannot be reached: \(error.code)")
            default:
                throw TerminalError(.gatewayTimedOut, "no answer from the acquirer: \(error.code)")
            }
        }
        switch response.status.code {
        case 200..<300:
            return response.body
        case 409, 500...:
            throw TerminalError(
                .gatewayTimedOut, "the acquirer answered \(response.status.code): the outcome is unknown")
        default:
            let decoded = try? JSONDecoder().decode([String: [String: String]].self, from: response.body)
            let message = decoded?["error"]?["message"] ?? "status \(response.status.code)"
            throw TerminalError(.gatewayRefused, "\(response.status.code) \(message.prefix(200))")
        }
    }
}
