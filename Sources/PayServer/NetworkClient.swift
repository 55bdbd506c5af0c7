import Foundation
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import TokenRequestorAPI

/// The Pay server's HTTPS client of the network's token-requestor routes: mutual TLS with `pki/pay-client`
/// (role token-requestor), trusting only the Orchard root. The network is found per call
/// (``ServicePeers``), so it may start after the Pay server; with several instances of the network, each is tried
/// in turn (failover on connection errors and 503s, ``OrchardHTTP/HTTPClient/send(_:failover:)``).
///
/// The Pay server links none of the network's modules: paths, bodies and the error body are `TokenRequestorAPI`'s,
/// which the network serves too.
final class NetworkClient: Sendable {
    private let client: HTTPClient
    private let directory: DeploymentDirectory
    private let peers: ServicePeers
    /// The token requestor ID the network certified (the common name of `pki/pay-client`): the network assigns
    /// it, and a Pay side deployed on its own learns it from the network's answer bundle.
    let tokenRequestorID: String

    init(directory: DeploymentDirectory, peers: ServicePeers) throws {
        // The network's root only: the deployment's own, or the network party's imported one (`peers.json`).
        let root = try PeerAddresses.trustedRootPEM(for: .network, in: directory)
        let chain = try directory.readCertificate(named: PayService.Files.client)
        let key = try directory.readPrivateKey(named: PayService.Files.client)
        tokenRequestorID = try PayService.tokenRequestorID(ofChain: chain)
        client = try HTTPClient(
            configuration: HTTPClientConfiguration(
                trustedRootsPEM: root, clientCertificateChainPEM: chain, clientPrivateKeyPEM: key,
                connectTimeout: .seconds(3), requestTimeout: .seconds(15), maxResponseBytes: 1 << 20))
        self.directory = directory
        self.peers = peers
    }

    deinit { client.shutdown() }

    func get<Output: Decodable>(
        _ path: String, as type: Output.Type = Output.self
    ) async throws(PayServerError) -> Output {
        try await send(.get, path, body: Optional<Empty>.none)
    }

    func post<Output: Decodable>(
        _ path: String, _ body: some Encodable & Sendable, as type: Output.Type = Output.self
    ) async throws(PayServerError) -> Output {
        try await send(.post, path, body: body)
    }

    private struct Empty: Encodable, Sendable {}

    private func send<Output: Decodable>(
        _ method: HTTPMethod, _ path: String, body: (some Encodable & Sendable)?
    ) async throws(PayServerError) -> Output {
        // Every instance of the network service, tried in order (failover on connection errors and 503s).
        // try?: no instance found is the network not running (the error below).
        guard let endpoints = try? FailoverEndpoints(peers.baseURLs(of: .network, in: directory)) else {
            throw PayServerError(.networkUnavailable, "the network service is not running")
        }
        let request: HTTPClientRequest
        do {
            if let body {
                request = try HTTPClientRequest.json(method, path, body)
            } else {
                request = HTTPClientRequest(method: method, url: path)
            }
        } catch {
            throw PayServerError(.internalFailure, "cannot encode the request to the network")
        }
        let response: HTTPResponse
        do {
            response = try await client.send(request, failover: endpoints)
        } catch {
            throw PayServerError(.networkUnavailable, "the network cannot be reached: \(error.code)")
        }
        guard (200..<300).contains(response.status.code) else {
            // try?: an error body that is not the contract's is reported by its status alone.
            let refusal = try? JSONDecoder().decode(TokenRequestorAPI.ErrorAnswer.self, from: response.body)
            throw PayServerError(
                .networkRefused,
                "the network refused: "
                    + (refusal.map { "\($0.error.code): \($0.error.message)" } ?? "status \(response.status.code)"),
                relayedStatus: response.status.code)
        }
        do {
            // A key given twice is refused, as every Orchard party refuses it (DuplicateJSONKeys).
            guard DuplicateJSONKeys.first(in: response.body) == nil else { throw HTTPError(.duplicateKey, "") }
            return try JSONDecoder().decode(Output.self, from: response.body)
        } catch {
            throw PayServerError(.networkUnavailable, "the network's answer to \(path) is not the expected JSON")
        }
    }
}
