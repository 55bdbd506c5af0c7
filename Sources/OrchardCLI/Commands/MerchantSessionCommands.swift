import Foundation
import MerchantServer
import OrchardCrypto
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import OrchardX509
import PayServer
import WebMerchantAPI

/// `orchard merchant session --domain D` and `orchard merchant session verify FILE`: a merchant session from the
/// Pay server's web gateway (`https://apple-pay-gateway.orchard.test/paymentservices/paymentSession`, mutual
/// TLS with the merchant's identity certificate), and the check a device makes of one (docs/web.md).
enum MerchantSessionCommands {
    static let session = Command(
        name: "session",
        summary: "Ask the gateway for a merchant session for a validated domain, or verify one (`verify FILE`).",
        discussion: """
            With --domain: POSTs {merchantIdentifier, displayName, initiative: "web", initiativeContext: DOMAIN} to
            https://apple-pay-gateway.orchard.test/paymentservices/paymentSession with the merchant's identity
            certificate (default: the demo merchant's pki/merchant/merchant-identity.pem and .key) and prints the
            session exactly as answered. A refusal is Apple's statusMessage. A Pay server not running is started in
            this process for the call.
            With `verify FILE`: checks the session's format, its signature to pki/pay/token-root.pem at its
            signingTime (= epochTimestamp) and that it is at most 5 minutes old; prints a summary as JSON or fails.
            """,
        options: [
            domainOption, merchantOption, displayNameOption, certificateOption, keyOption,
        ],
        positionals: ["verify", "FILE"]
    ) { arguments, context in
        let positionals = arguments.positionals
        if positionals.isEmpty {
            guard let domain = arguments[domainOption] else {
                throw CLIError.usage("give --domain DOMAIN (a validated domain), or `verify FILE`")
            }
            try await request(arguments, domain: domain, context)
        } else {
            guard positionals.count == 2, positionals[0] == "verify" else {
                throw CLIError.usage("usage: orchard merchant session --domain DOMAIN | verify FILE")
            }
            try verify(file: positionals[1], context)
        }
    }

    static let domainOption = Option.optional(
        "domain", "DOMAIN", help: "The validated domain the session is for (initiativeContext).")
    static let merchantOption = Option.optional(
        "merchant", "ID", help: "The merchant ID (default: config.json merchant.merchantIdentifier).")
    static let displayNameOption = Option.optional(
        "display-name", "NAME", help: "The displayName sent (default: config.json merchant.displayName).")
    static let certificateOption = Option.optional(
        "cert", "FILE", help: "The identity certificate, PEM (default: DIR/pki/merchant/merchant-identity.pem).")
    static let keyOption = Option.optional(
        "key", "FILE",
        help: "The identity certificate's private key, PEM (default: DIR/pki/merchant/merchant-identity.key).")

    static func request(_ arguments: ParsedArguments, domain: String, _ context: CommandContext) async throws {
        let deployment = try MerchantCommands.initializedDeployment(context)
        let configuration = try DeploymentCommands.registry().loadConfiguration(
            from: deployment, environment: context.environment)
        let merchant = arguments[merchantOption] ?? configuration[MerchantService.merchantIdentifier]
        let displayName = arguments[displayNameOption] ?? configuration[MerchantService.displayName]
        let identity = try identity(arguments, deployment)
        let connections = try await DeploymentCommands.connect([.pay], of: deployment, context: context)
        let answer: HTTPResponse
        do {
            guard let port = connections.endpoints[.pay]?.port else {
                throw CLIError.failure("the Pay server is not reachable")
            }
            let client = try HTTPClient(
                configuration: HTTPClientConfiguration(
                    trustedRootsPEM: try connections.rootCertificatePEM(for: .pay),
                    clientCertificateChainPEM: identity.certificateChainPEM,
                    clientPrivateKeyPEM: identity.privateKeyPEM, maxAttempts: 1,
                    connectTo: [WebMerchantAPI.HostNames.gateway: port]))
            defer { client.shutdown() }
            let body = PaymentSessionRequest(
                merchantIdentifier: merchant, displayName: displayName, initiativeContext: domain)
            answer = try await client.send(
                try WebMerchantCommands.jsonRequest(
                    .post, "https://" + WebMerchantAPI.HostNames.gateway + WebMerchantAPI.Gateway.paymentSession, body))
        } catch {
            await connections.close()
            throw error
        }
        await connections.close()
        guard answer.status == .ok else {
            let refusal = try? JSONDecoder().decode(GatewayError.self, from: answer.body)
            throw CLIError.failure(refusal?.statusMessage ?? "the gateway answered \(answer.status.code)")
        }
        context.output(String(decoding: answer.body, as: UTF8.self))
    }

    /// The merchant's identity: --cert and --key, or the demo merchant's.
    static func identity(_ arguments: ParsedArguments, _ deployment: DeploymentDirectory) throws -> TLSIdentity {
        switch (arguments[certificateOption], arguments[keyOption]) {
        case (nil, nil):
            return try TLSIdentity.load(named: MerchantService.Files.identity, from: deployment)
        case (let certificate?, let key?):
            do {
                return TLSIdentity(
                    certificateChainPEM: try String(contentsOfFile: certificate, encoding: .utf8),
                    privateKeyPEM: SecureBytes(Array(try Data(contentsOf: URL(fileURLWithPath: key)))))
            } catch {
                throw CLIError.failure("cannot read \(certificate) or \(key): give PEM files")
            }
        default:
            throw CLIError.usage("--cert and --key go together")
        }
    }

    /// What `verify` prints.
    struct Summary: Encodable {
        let valid: Bool
        let merchantSessionIdentifier: String
        let merchantIdentifier: String
        let domainName: String
        let displayName: String
        let ageSeconds: Int64
        let signer: String
    }

    static func verify(file: String, _ context: CommandContext) throws {
        let deployment = try MerchantCommands.initializedDeployment(context)
        guard let bytes = FileManager.default.contents(atPath: file) else {
            throw CLIError.failure("cannot read \(file)")
        }
        var text = Array(bytes)
        while let last = text.last, last == 0x0A || last == 0x0D { text.removeLast() }
        let session: MerchantSession
        do {
            session = try MerchantSession(json: text)
        } catch {
            throw CLIError.failure("\(file) is not a merchant session: \(error.message)")
        }
        let root = try Certificate(pemEncoded: try deployment.readCertificate(named: PayService.Files.tokenRoot))
        let clock = SystemClock()
        let verifier = try MerchantSessions.verifier(root: root, clock: clock)
        if let problem = MerchantSessions.problem(with: session, verifier: verifier, now: clock.now()) {
            throw CLIError.failure("\(file): \(problem)")
        }
        try context.outputJSON(
            Summary(
                valid: true, merchantSessionIdentifier: session.merchantSessionIdentifier,
                merchantIdentifier: session.merchantIdentifier, domainName: session.domainName,
                displayName: session.displayName,
                ageSeconds: (Int64(clock.now().timeIntervalSince1970 * 1000) - session.epochTimestamp) / 1000,
                signer: "the Orchard merchant-session signing leaf, under pki/pay/token-root.pem"))
    }
}
