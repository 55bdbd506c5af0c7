import AccessPolicy
import Foundation
import OrchardHTTP
import OrchardServices
import OrchardX509
import WebMerchantAPI

extension PayServer {
    /// The merchant portal's web routes (WebMerchantAPI): domains, association files and processing certificates
    /// for the merchant's processors. Only a merchant's portal
    /// certificate (issued by the Orchard root, OU `merchant-portal`, UID `merchant:<ID>`) may call them, for the
    /// merchant it names (the router checks the path's `:merchant` against it).
    func installWebMerchantRoutes(into router: inout Router, root: Certificate) {
        router.roles[WebMerchantAPI.portalRole] = ServiceAccess.requirement(
            [ServiceRole(WebMerchantAPI.portalRole)], root: root)
        let domains = self.domains
        router.add(WebMerchantAPI.Declared.addDomain) { request in
            let (merchant, body) = try Self.webInput(request, DomainRequest.self)
            return try Self.webJSON(try await domains.add(body.domain, merchantIdentifier: merchant), status: .created)
        }
        router.add(WebMerchantAPI.Declared.listDomains) { request in
            try Self.webJSON(try await domains.list(merchantIdentifier: try Self.webParameter(request, "merchant")))
        }
        router.add(WebMerchantAPI.Declared.removeDomain) { request in
            let merchant = try Self.webParameter(request, "merchant")
            try await domains.remove(try Self.webParameter(request, "domain"), merchantIdentifier: merchant)
            return try Self.webJSON(try await domains.list(merchantIdentifier: merchant))
        }
        router.add(WebMerchantAPI.Declared.verifyDomain) { request in
            let merchant = try Self.webParameter(request, "merchant")
            let domain = try Self.webParameter(request, "domain")
            return try Self.webJSON(try await domains.verify(domain, merchantIdentifier: merchant))
        }
        let merchants = self.merchants
        router.add(WebMerchantAPI.Declared.requestProcessingCertificate) { request in
            let (merchant, body) = try Self.webInput(request, ProcessingCertificateRequest.self)
            guard ProcessingCertificateRequest.isProcessorName(body.processor) else {
                throw PayServerError(
                    .invalidRequest,
                    "processor is 1 to 64 lowercase letters, digits, '.', '_' and '-' (for example psp.example)")
            }
            let chain = try await merchants.issueDelegatedProcessingCertificate(
                requestPEM: body.certificateSigningRequest, processor: body.processor, merchantIdentifier: merchant)
            return try Self.webJSON(
                ProcessingCertificateResponse(
                    merchantIdentifier: merchant, serial: Hex.encode(chain[0].serialNumber), processor: body.processor,
                    certificateChain: chain.map(\.pemRepresentation),
                    notAfter: ISO8601DateFormatter().string(from: chain[0].notValidAfter)),
                status: .created)
        }
        router.add(WebMerchantAPI.Declared.associationFile) { request in
            let merchant = try Self.webParameter(request, "merchant")
            let file = try await domains.issueAssociationFile(merchantIdentifier: merchant)
            return try Self.webJSON(AssociationFileResponse(merchantIdentifier: merchant, file: file.fileContents))
        }
    }

    // MARK: Synchronous helpers (typed throws directly in async closures crash release builds;
    // docs/compiler-workarounds.md §1)

    static func webParameter(_ request: HTTPRequest, _ name: String) throws -> String {
        try request.parameter(name)
    }

    static func webInput<Body: Decodable>(_ request: HTTPRequest, _ type: Body.Type) throws -> (String, Body) {
        (try request.parameter("merchant"), try request.decodeJSON(type))
    }

    static func webJSON(_ value: some Encodable, status: HTTPStatus = .ok) throws -> HTTPResponse {
        try HTTPResponse.json(value, status: status)
    }
}
