import Foundation
import OrchardHTTP
import WebMerchantAPI

extension PayServer {
    /// The web gateway (`apple-pay-gateway.orchard.test`, docs/web.md): merchant sessions for a merchant's server
    /// presenting its identity certificate. Every refusal is Apple's 400 `{"statusMessage","statusCode"}`.
    /// The gateway is a virtual host of the Pay server's listener: its routes only under its name, nothing else there.
    func installGatewayRoutes(into router: inout Router) {
        let sessions = self.sessions
        router.serve(WebMerchantAPI.Gateway.Declared.all, onlyAt: WebMerchantAPI.HostNames.gateway)
        for (declared, legacy) in [
            (WebMerchantAPI.Gateway.Declared.paymentSession, false),
            (WebMerchantAPI.Gateway.Declared.startSession, true),
        ] {
            router.add(declared) { request in
                let outcome = try await sessions.session(
                    body: request.body, contentType: request.headers["Content-Type"],
                    certificateDER: request.clientCertificate?.derRepresentation, legacy: legacy)
                return try Self.gatewayAnswer(outcome)
            }
        }
        for declared in [
            WebMerchantAPI.Gateway.Declared.paymentSessionGET, WebMerchantAPI.Gateway.Declared.startSessionGET,
        ] {
            router.add(declared) { _ in
                try Self.gatewayAnswer(
                    .failure(
                        MerchantSessions.Refusal(
                            .get, "reason=\"GET is not supported: POST the request body as application/json\"")))
            }
        }
    }

    static func gatewayAnswer(_ outcome: Result<MerchantSession, MerchantSessions.Refusal>) throws -> HTTPResponse {
        switch outcome {
        case .success(let session):
            return HTTPResponse(
                status: .ok, headers: ["Content-Type": "application/json"], body: Data(session.json))
        case .failure(let refusal):
            return try HTTPResponse.json(refusal.error, status: .badRequest)
        }
    }
}
