import Foundation
import MerchantAPI
import MerchantKit
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import WebMerchantAPI

/// MerchantKit's ``MerchantSessionTransport`` over libcurl: the merchant identity certificate
/// (`pki/merchant/merchant-identity`) as the TLS client certificate, the Orchard root as the only trust root, and the
/// deployment's host names (`config.json` `names`) mapped with connect-to, so the gateway is reached by name. The
/// gateway's name follows the Pay server where it runs (an in-process peer, its run records, or an imported peer
/// address), which a command may have started on a free port. With several Pay server instances the request goes to
/// the next when one cannot be reached or answers 503: asking again only makes another session, and the unused one
/// expires.
final class CurlMerchantSessionTransport: MerchantSessionTransport {
    private let identity: TLSIdentity
    private let rootPEM: String
    private let hostNames: [String: Int]
    private let directory: DeploymentDirectory
    private let peers: ServicePeers

    init(directory: DeploymentDirectory, hostNames: [String: Int], peers: ServicePeers) throws {
        identity = try TLSIdentity.load(named: MerchantService.Files.identity, from: directory)
        // The Pay side's root only: the gateway is its service.
        rootPEM = try PeerAddresses.trustedRootPEM(for: .pay, in: directory)
        self.hostNames = hostNames
        self.directory = directory
        self.peers = peers
    }

    func post(url: URL, body: [UInt8]) async throws -> MerchantSessionResponse {
        // The gateway's port at each Pay server instance; nil keeps the configured mapping.
        let instances = peers.endpoints(of: .pay, in: directory).map(\.port)
        let ports: [Int?] = instances.isEmpty ? [nil] : instances
        for port in ports.dropLast() {
            // An instance that failed or answered 503: the next one is asked; the last one's answer stands.
            // try?: a failed instance is passed over, as the comment above says.
            if let answer = try? await send(url: url, body: body, gatewayPort: port), answer.status != 503 {
                return answer
            }
        }
        return try await send(url: url, body: body, gatewayPort: ports.last ?? nil)
    }

    private func send(url: URL, body: [UInt8], gatewayPort: Int?) async throws -> MerchantSessionResponse {
        var names = hostNames
        if let gatewayPort { names[WebMerchantAPI.HostNames.gateway] = gatewayPort }
        let client = try HTTPClient(
            configuration: HTTPClientConfiguration(
                trustedRootsPEM: rootPEM, clientCertificateChainPEM: identity.certificateChainPEM,
                clientPrivateKeyPEM: identity.privateKeyPEM, requestTimeout: .seconds(30), maxAttempts: 1,
                connectTo: names))
        defer { client.shutdown() }
        let answer = try await client.send(
            HTTPClientRequest(
                method: .post, url: url.absoluteString, headers: ["Content-Type": "application/json"],
                body: Data(body)))
        return MerchantSessionResponse(status: answer.status.code, body: Array(answer.body))
    }
}

extension PaymentProcessor {
    /// The website's Apple Pay routes (MerchantAPI.Web, and `POST /v1/orders`): a merchant session for the page at
    /// `domain` through `sessions`, and the page's `ApplePayPayment`, verified, decrypted, checked against the order
    /// and charged as an app's payment is.
    func addWebRoutes(to router: inout Router, sessions: MerchantSessionClient, domain: String) {
        // The page creates its order at its own origin, as an app does at the merchant's API.
        router.add(MerchantAPI.Declared.orders) { [self] request in try await createOrder(request.body) }
        router.add(MerchantAPI.Web.Declared.merchantSession) { request in
            let input = try Self.decodeSessionRequest(request)
            let session = try await Self.session(sessions, validationURL: input.validationURL, domain: domain)
            return HTTPResponse(status: .ok, headers: ["Content-Type": "application/json"], body: Data(session))
        }
        router.add(MerchantAPI.Web.Declared.payment) { [self] request in
            try await pay(orderID: try Self.parameter(request), body: request.body, web: true)
        }
    }

    /// The page's body through the one strict decoder: a key given twice is its 400 `duplicate_key`, anything
    /// else that is no validation URL `malformedRequest`.
    static func decodeSessionRequest(_ request: HTTPRequest) throws -> MerchantAPI.MerchantSessionRequest {
        do throws(HTTPError) {
            return try request.decodeJSON(MerchantAPI.MerchantSessionRequest.self)
        } catch  where error.code == .duplicateKey {
            throw error
        } catch {
            throw MerchantServerError(.malformedRequest, "the body is {\"validationURL\": \"https://…\"}")
        }
    }

    static func session(
        _ client: MerchantSessionClient, validationURL: String, domain: String
    ) async throws -> [UInt8] {
        do {
            return try await client.session(validationURL: validationURL, domain: domain)
        } catch  where error.code == .validationURLRefused {
            throw MerchantServerError(.malformedRequest, error.message)
        } catch {
            throw MerchantServerError(.merchantSessionFailed, error.message)
        }
    }
}
