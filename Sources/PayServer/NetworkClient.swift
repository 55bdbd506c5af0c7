import Foundation
import OrchardHTTP
import OrchardRuntime
import OrchardServices

/// The Pay server's HTTPS client of the network's token-requestor routes: mutual TLS with `pki/pay-client`
/// (role token-requestor), trusting only the Orchard root. The network is found per call
/// (``ServicePeers``), so it may start after the Pay server.
///
/// The Pay server links none of the network's modules: these are its own views of the network's JSON.
final class NetworkClient: Sendable {
    private let client: HTTPClient
    private let directory: DeploymentDirectory
    private let peers: ServicePeers

    init(directory: DeploymentDirectory, peers: ServicePeers) throws {
        let root = try directory.readCertificate(named: PKIFiles.rootCA)
        let chain = try directory.readCertificate(named: PayService.Files.client)
        let key = try directory.readPrivateKey(named: PayService.Files.client)
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
        guard let base = peers.baseURL(of: .network, in: directory) else {
            throw PayServerError(.networkUnavailable, "the network service is not running")
        }
        let request: HTTPClientRequest
        do {
            if let body {
                request = try HTTPClientRequest.json(method, base + path, body)
            } else {
                request = HTTPClientRequest(method: method, url: base + path)
            }
        } catch {
            throw PayServerError(.internalFailure, "cannot encode the request to the network")
        }
        let response: HTTPResponse
        do {
            response = try await client.send(request)
        } catch {
            throw PayServerError(.networkUnavailable, "the network cannot be reached: \(error.code)")
        }
        guard (200..<300).contains(response.status.code) else {
            throw PayServerError(
                .networkRefused,
                "the network refused: " + (response.errorBody?.message ?? "status \(response.status.code)"),
                relayedStatus: response.status.code)
        }
        do {
            return try JSONDecoder().decode(Output.self, from: response.body)
        } catch {
            throw PayServerError(.networkUnavailable, "the network's answer to \(path) is not the expected JSON")
        }
    }
}

/// The network's JSON, as the Pay server reads and writes it.
enum NetworkWire {
    struct ProvisioningKey: Decodable {
        let certificate: String?
    }

    struct CheckCard: Encodable, Sendable {
        let idempotencyKey: String
        let tokenRequestorID: String
        let deviceID: String
        let deviceKind: String
        let encryptedCardData: String
    }

    struct OneTimeCode: Encodable, Sendable {
        let sessionID: String
        let deviceID: String
        let code: String
    }

    struct Profile: Decodable {
        let network: String
        let type: String
        let suffix: String
        let issuerName: String
        let productName: String
    }

    struct Challenge: Decodable {
        let method: String
        let destinationHint: String
    }

    /// `CardCheckDecision` as Swift's synthesized enum coding writes it: `{"approve":{"_0":profile}}`,
    /// `{"stepUp":{"_0":challenge,"_1":profile}}`, `{"decline":{"_0":"reason"}}`.
    struct Decision: Decodable {
        struct Approve: Decodable { let _0: Profile }
        struct StepUp: Decodable {
            let _0: Challenge
            let _1: Profile
        }
        struct Decline: Decodable { let _0: String }
        let approve: Approve?
        let stepUp: StepUp?
        let decline: Decline?
    }

    struct CheckCardAnswer: Decodable {
        let sessionID: String?
        let decision: Decision
        let termsID: String?
    }

    struct Link: Encodable, Sendable {
        let idempotencyKey: String
        let sessionID: String
        let deviceID: String
        let secureElementCertificateChain: [[UInt8]]
        let termsAccepted: Bool
    }

    struct ProvisionedToken: Decodable {
        let tokenReference: String
        let dpanSuffix: String
        let profile: Profile
        let personalisation: String
    }

    struct LinkAnswer: Decodable {
        struct Provisioned: Decodable { let _0: ProvisionedToken }
        struct Declined: Decodable { let _0: String }
        let provisioned: Provisioned?
        let declined: Declined?
    }

    struct Lifecycle: Encodable, Sendable {
        let actor: String
    }

    struct TokenStatus: Decodable {
        let tokenReference: String
        let deviceID: String
        let state: String
    }

    struct Feed: Decodable {
        struct Item: Decodable {
            struct Notification: Decodable {
                let tokenReference: String
                let deviceID: String
                let event: String
                let state: String
            }
            let sequence: Int64
            let notification: Notification
        }
        let notifications: [Item]
    }
}
