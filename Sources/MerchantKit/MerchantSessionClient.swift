public import Foundation

/// How a ``MerchantSessionClient`` reaches the gateway: one HTTPS POST presenting the merchant identity
/// certificate (mutual TLS). MerchantKit does no networking itself; the server supplies the transport (Orchard's
/// merchant server uses libcurl).
public protocol MerchantSessionTransport: Sendable {
    /// POSTs `body` (`Content-Type: application/json`) to `url` over mutual TLS with the merchant identity
    /// certificate, and answers the status and the body as received.
    func post(url: URL, body: [UInt8]) async throws -> MerchantSessionResponse
}

/// What the gateway answered.
public struct MerchantSessionResponse: Sendable, Hashable {
    /// The HTTP status.
    public let status: Int
    /// The body, as received.
    public let body: [UInt8]

    /// A response of `status` with `body`.
    public init(status: Int, body: [UInt8]) {
        self.status = status
        self.body = body
    }
}

/// Asks Apple's gateway (or the sandbox's) for a merchant session when the page's `onvalidatemerchant` fires
/// (notes/apple-pay-web.md §2): checks the validation URL first, so the identity certificate only ever goes to the
/// gateway (a server that POSTs it to any URL the page names is an SSRF), builds the request body, and returns
/// the session exactly as received, for the page to pass to `completeMerchantValidation`.
public struct MerchantSessionClient: Sendable {
    /// The merchant ID the identity certificate belongs to.
    public let merchantIdentifier: String
    /// Shown on the Touch Bar.
    public let displayName: String
    /// Host names accepted besides Apple's gateways (a sandbox's, e.g. `apple-pay-gateway.orchard.test`).
    public let sandboxGateways: Set<String>
    private let transport: any MerchantSessionTransport

    /// A client for `merchantIdentifier` that sends through `transport`. `sandboxGateways` are host names
    /// accepted besides Apple's (lower-case).
    public init(
        merchantIdentifier: String, displayName: String, sandboxGateways: Set<String> = [],
        transport: any MerchantSessionTransport
    ) {
        self.merchantIdentifier = merchantIdentifier
        self.displayName = displayName
        self.sandboxGateways = Set(sandboxGateways.map { $0.lowercased() })
        self.transport = transport
    }

    /// Whether `host` is one of Apple's gateways: `^(cn-)?apple-pay-gateway(-[a-z0-9-]+)?\.apple\.com$`, which
    /// covers the production, sandbox (`-cert`) and pod hosts.
    public static func isAppleGateway(_ host: String) -> Bool {
        var name = Substring(host.lowercased())
        if name.hasPrefix("cn-") { name = name.dropFirst(3) }
        guard name.hasPrefix("apple-pay-gateway"), name.hasSuffix(".apple.com") else { return false }
        let middle = name.dropFirst("apple-pay-gateway".count).dropLast(".apple.com".count)
        guard !middle.isEmpty else { return true }
        return middle.count > 1 && middle.first == "-"
            && middle.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D }
    }

    /// The validation URL as a request target, or the reason it is refused: `https`, no credentials, port 443 or
    /// none, no query or fragment, a gateway host (``isAppleGateway(_:)`` or ``sandboxGateways``), and the path
    /// `/paymentservices/paymentSession` or the legacy `/paymentservices/startSession`.
    public func checkValidationURL(_ text: String) throws(MerchantKitError) -> URL {
        func refuse(_ why: String) -> MerchantKitError {
            MerchantKitError(.validationURLRefused, "the validation URL is refused: \(why)")
        }
        guard text.utf8.count <= 2048, let components = URLComponents(string: text), let url = components.url else {
            throw refuse("it is not a URL")
        }
        guard components.scheme?.lowercased() == "https" else { throw refuse("it is not https") }
        guard components.user == nil, components.password == nil else { throw refuse("it carries credentials") }
        guard components.port == nil || components.port == 443 else { throw refuse("it names a port other than 443") }
        guard components.query == nil, components.fragment == nil else { throw refuse("it has a query or fragment") }
        guard let host = components.host?.lowercased(),
            Self.isAppleGateway(host) || sandboxGateways.contains(host)
        else { throw refuse("its host is not Apple's gateway") }
        guard ["/paymentservices/paymentSession", "/paymentservices/startSession"].contains(components.path) else {
            throw refuse("its path is not /paymentservices/paymentSession")
        }
        return url
    }

    /// The request body for a page at `domain`: `{"displayName","initiative":"web","initiativeContext",
    /// "merchantIdentifier"}` (keys sorted).
    public func requestBody(domain: String) throws(MerchantKitError) -> [UInt8] {
        let bytes = Array(domain.utf8)
        guard (1...253).contains(bytes.count),
            bytes.allSatisfy({ (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D || $0 == 0x2E })
        else {
            throw MerchantKitError(
                .invalidConfiguration,
                "the domain is the lower-case host name in the address bar, without scheme or path")
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return Array(
                try encoder.encode([
                    "merchantIdentifier": merchantIdentifier, "displayName": displayName, "initiative": "web",
                    "initiativeContext": domain,
                ]))
        } catch {
            throw MerchantKitError(.invalidConfiguration, "the request body cannot be encoded")
        }
    }

    /// Checks `validationURL`, then POSTs the request for `domain` through the transport; answers the session
    /// untouched. A refusal from the gateway is ``MerchantKitError/Code/sessionRequestFailed`` with its
    /// `statusMessage`.
    public func session(validationURL: String, domain: String) async throws(MerchantKitError) -> [UInt8] {
        let url = try checkValidationURL(validationURL)
        let body = try requestBody(domain: domain)
        let response: MerchantSessionResponse
        do {
            response = try await transport.post(url: url, body: body)
        } catch {
            throw MerchantKitError(.sessionRequestFailed, "the gateway cannot be reached")
        }
        guard response.status == 200 else {
            struct Refusal: Decodable { let statusMessage: String }
            let message = (try? JSONDecoder().decode(Refusal.self, from: Data(response.body)))?.statusMessage
            throw MerchantKitError(
                .sessionRequestFailed, "the gateway answered \(response.status)" + (message.map { ": " + $0 } ?? ""))
        }
        return response.body
    }
}
