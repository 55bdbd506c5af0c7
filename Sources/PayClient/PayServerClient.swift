public import Device
import Foundation
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
public import OrchardX509
public import PayAPI

/// A device's HTTPS client of the Pay server: mutual TLS with the device's client identity, trusting only the
/// Orchard root. Each call maps to one route of ``PayAPI/Route``; a refusal carries the server's status and
/// error code.
///
/// Given several instances of the Pay server (``init(baseURLs:trustedRootPEM:identity:)``), each call goes to the
/// first that answers: an instance that cannot be reached or answers 503 is passed over for the next, with the
/// same request and `Idempotency-Key` (``OrchardHTTP/HTTPClient/send(_:failover:)``).
public final class PayServerClient: Sendable {
    /// The first instance's `https://host:port`.
    public let baseURL: String
    /// Every instance, in the order they are tried.
    public let endpoints: [String]
    private let failover: FailoverEndpoints
    private let client: HTTPClient

    /// - Parameters:
    ///   - baseURL: `https://host:port` of the Pay server.
    ///   - trustedRootPEM: the Orchard root (`DIR/pki/root/root-ca.pem`).
    ///   - identity: the device's client identity (``Device/clientIdentity(of:in:clock:random:)``).
    public convenience init(
        baseURL: String, trustedRootPEM: String, identity: DeviceClientIdentity
    ) throws(PayClientError) {
        try self.init(baseURLs: [baseURL], trustedRootPEM: trustedRootPEM, identity: identity)
    }

    /// A client of several instances of the Pay server on one database (`https://host:port` each, first
    /// preferred), failing over from one to the next.
    public init(baseURLs: [String], trustedRootPEM: String, identity: DeviceClientIdentity) throws(PayClientError) {
        guard let first = baseURLs.first, baseURLs.allSatisfy({ $0.hasPrefix("https://") }) else {
            throw PayClientError(.invalidArgument, "the Pay server's URL is https://")
        }
        do {
            failover = try FailoverEndpoints(baseURLs)
        } catch {
            throw PayClientError(.invalidArgument, "the Pay server's addresses are not usable: \(error.message)")
        }
        baseURL = first.hasSuffix("/") ? String(first.dropLast()) : first
        endpoints = failover.baseURLs
        do {
            client = try HTTPClient(
                configuration: HTTPClientConfiguration(
                    trustedRootsPEM: trustedRootPEM, clientCertificateChainPEM: identity.certificateChainPEM,
                    clientPrivateKeyPEM: identity.privateKeyPEM, connectTimeout: .seconds(3),
                    requestTimeout: .seconds(15), maxResponseBytes: 256 << 10))
        } catch {
            throw PayClientError(.invalidArgument, "cannot set up the connection to the Pay server: \(error.message)")
        }
    }

    deinit { client.shutdown() }

    /// Registers the device (idempotent): the Secure Element certificate goes with the TLS client certificate, and
    /// the Secure Enclave's key, which the Pay server keeps to check passcode attestations.
    public func register(
        secureElementCertificate: Certificate, enclavePublicKey: P256.Signing.PublicKey
    ) async throws(PayClientError) -> RegisteredDevice {
        try await post(
            PayAPI.Route.register,
            DeviceRegistrationRequest(
                secureElementCertificate: Data(secureElementCertificate.derRepresentation).base64EncodedString(),
                enclavePublicKey: Data(enclavePublicKey.x963Representation).base64EncodedString()))
    }

    /// The token service's provisioning certificate as the Pay server relays it (not yet checked: see
    /// ``ProvisioningKey``).
    public func provisioningCertificate() async throws(PayClientError) -> Certificate {
        let body: ProvisioningKeyResponse = try await get(PayAPI.Route.provisioningKey)
        guard let der = Data(base64Encoded: body.certificate),
            let certificate = try? Certificate(derEncoded: Array(der))
        else {
            throw PayClientError(.protocolViolation, "the provisioning certificate is not a DER certificate")
        }
        return certificate
    }

    public func checkCard(_ body: CheckCardBody) async throws(PayClientError) -> CardCheckResult {
        try await post(PayAPI.Route.checkCard, body, idempotencyKey: body.idempotencyKey)
    }

    public func submitOneTimeCode(_ body: OneTimeCodeBody) async throws(PayClientError) -> CardCheckResult {
        try await post(PayAPI.Route.oneTimeCode, body)
    }

    public func terms(_ termsID: String) async throws(PayClientError) -> TermsResponse {
        try await get(PayAPI.Route.terms + termsID)
    }

    public func link(_ body: LinkBody) async throws(PayClientError) -> LinkResult {
        try await post(PayAPI.Route.link, body, idempotencyKey: body.idempotencyKey)
    }

    /// The cards of this device as the Pay server knows them (display data and state).
    public func cards() async throws(PayClientError) -> [DeviceCard] {
        try await get(PayAPI.Route.cards)
    }

    /// Pending token-status notifications; those up to `after` are acknowledged.
    public func notifications(after: Int64) async throws(PayClientError) -> [TokenNotification] {
        try await notificationsAndState(after: after).notifications
    }

    /// Pending token-status notifications (those up to `after` are acknowledged) and the device's own state
    /// (lost mode).
    public func notificationsAndState(after: Int64) async throws(PayClientError) -> NotificationsResponse {
        try await get(PayAPI.Route.notifications + "?after=\(after)")
    }

    /// The account owner's action on one of its devices (this one or another of the same account): lost mode or
    /// erase. Leaving lost mode is ``resume(device:attest:)``.
    public func lifecycle(
        device: String, action: PayAPI.LifecycleAction
    ) async throws(PayClientError)
        -> LifecycleResult
    {
        try await post(PayAPI.Route.lifecycle(device: device, action: action), EmptyBody())
    }

    /// Leaves lost mode: asks the Pay server for a challenge, has `attest` get the device's Secure Enclave to sign
    /// it once the user entered the passcode (DER ECDSA), and sends the signature.
    public func resume(
        device: String, attest: @Sendable ([UInt8]) async throws -> [UInt8]
    ) async throws -> LifecycleResult {
        let issued: ResumeChallenge = try await post(PayAPI.Route.resumeChallenge(device: device), EmptyBody())
        guard let challenge = Data(base64Encoded: issued.challenge) else {
            throw PayClientError(.protocolViolation, "the resume challenge is not base64")
        }
        let signature = try await attest(Array(challenge))
        return try await post(
            PayAPI.Route.lifecycle(device: device, action: .resume),
            ResumeRequest(challenge: issued.challenge, attestation: Data(signature).base64EncodedString()))
    }

    private struct EmptyBody: Codable, Sendable {}

    func get<Output: Decodable>(_ path: String) async throws(PayClientError) -> Output {
        try await send(HTTPClientRequest(method: .get, url: path))
    }

    func post<Output: Decodable>(
        _ path: String, _ body: some Encodable & Sendable, idempotencyKey: String? = nil
    ) async throws(PayClientError) -> Output {
        let request: HTTPClientRequest
        do {
            request = try HTTPClientRequest.json(
                .post, path, body, headers: idempotencyKey.map { ["Idempotency-Key": $0] } ?? [:])
        } catch {
            throw PayClientError(.invalidArgument, "the request could not be encoded")
        }
        return try await send(request)
    }

    /// POSTs `body` and returns the answer's bytes as they came.
    func postRaw(_ path: String, _ body: some Encodable & Sendable) async throws(PayClientError) -> Data {
        let request: HTTPClientRequest
        do {
            request = try HTTPClientRequest.json(.post, path, body)
        } catch {
            throw PayClientError(.invalidArgument, "the request could not be encoded")
        }
        return try await exchange(request).body
    }

    private func send<Output: Decodable>(_ request: HTTPClientRequest) async throws(PayClientError) -> Output {
        let response = try await exchange(request)
        do {
            // A key given twice is refused, as every Orchard party refuses it (DuplicateJSONKeys).
            guard DuplicateJSONKeys.first(in: response.body) == nil else { throw HTTPError(.duplicateKey, "") }
            return try JSONDecoder().decode(Output.self, from: response.body)
        } catch {
            throw PayClientError(.protocolViolation, "the Pay server's answer is not the expected JSON")
        }
    }

    private func exchange(_ request: HTTPClientRequest) async throws(PayClientError) -> HTTPResponse {
        let response: HTTPResponse
        do {
            response = try await client.send(request, failover: failover)
        } catch {
            let addresses = endpoints.joined(separator: ", ")
            throw PayClientError(.unreachable, "the Pay server cannot be reached at \(addresses): \(error.code)")
        }
        guard (200..<300).contains(response.status.code) else {
            let problem = response.errorBody
            throw PayClientError(
                .refused,
                "the Pay server refused (\(response.status.code)): " + (problem?.message ?? "no reason given"),
                httpStatus: response.status.code, serverCode: problem?.code)
        }
        return response
    }
}
