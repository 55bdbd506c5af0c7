import Foundation
import OrchardHTTP
import OrchardRuntime
import OrchardServices
import PayServer
import WebMerchantAPI

/// `orchard merchant association-file` and `orchard merchant domain …`: Apple Pay on the web's merchant side at
/// the Pay server (docs/web.md). The commands call the Pay server's web merchant routes with the merchant's portal
/// certificate (`pki/merchant-portal-<hash>`, `MerchantPortal`), at `https://pay.orchard.test` mapped to the Pay
/// server's port (libcurl connect-to); a Pay server not running is started in this process for the call.
enum WebMerchantCommands {
    static let associationFile = Command(
        name: "association-file",
        summary: "Write a new domain-association file for a merchant, to host on each of its domains.",
        discussion: """
            The Pay server issues the file: the upper-case hex of {"createdOn","pspId","signature","version"}, signed
            by its token-signing leaf. Host it exactly as written at
            https://DOMAIN/.well-known/apple-developer-merchantid-domain-association (no .txt, status 200, no
            redirect). Prints JSON: the merchant, its hash (pspId) and the file written.
            """,
        options: [merchantOption, fileOutOption]
    ) { arguments, context in
        try await runAssociationFile(arguments, context)
    }

    static let processingCertificate = Command(
        name: "processing-certificate",
        summary: "Have the Pay server issue a processing certificate for your processor's CSR (delegation).",
        discussion: """
            The merchant's side of delegating token decryption to a processor (a PSP), as a merchant uploads its
            PSP's CSR at Apple's developer portal: the request goes with the merchant's portal certificate, so only
            the merchant can ask, for its own merchant ID. The CSR (P-256 for EC_v1, RSA-2048 for RSA_v1, subject UID
            the merchant ID) comes from the processor, which keeps its key. Writes the certificate chain (PEM) to
            --out for the processor and prints JSON: merchant, serial, processor and expiry. New tokens are
            encrypted to the valid processing certificate that expires last (`orchard merchant certs` lists them,
            --revoke ends one).
            """,
        options: [merchantOption, csrFileOption, processorOption, chainOutOption]
    ) { arguments, context in
        let merchant = arguments[merchantOption]
        let path = arguments[csrFileOption]
        let request: String
        do {
            request = String(decoding: try SecureFile.read(path, limit: 64 << 10), as: UTF8.self)
        } catch {
            throw CLIError.failure("cannot read the CSR \(path): \(error)")
        }
        let issued = try await runPortal(context, merchant: merchant, print: false) { portal in
            try await portal.send(
                .post, WebMerchantAPI.Route.processingCertificates(merchant: merchant),
                body: ProcessingCertificateRequest(
                    certificateSigningRequest: request, processor: arguments[processorOption]),
                as: ProcessingCertificateResponse.self)
        }
        let out = arguments[chainOutOption]
        try SecureFile.write(Array(issued.certificateChain.joined().utf8), to: out, mode: 0o644)
        context.trace("wrote \(out): the processing certificate and the merchant CA's, for \(issued.processor)")
        try context.outputJSON(
            DelegatedCertificate(
                merchantIdentifier: issued.merchantIdentifier, serial: issued.serial, processor: issued.processor,
                notAfter: issued.notAfter, certificateChain: out))
    }

    /// What `processing-certificate` prints: the issued certificate and where its chain went.
    struct DelegatedCertificate: Encodable {
        let merchantIdentifier: String
        let serial: String
        let processor: String
        let notAfter: String
        let certificateChain: String
    }

    static let csrFileOption = Option.required(
        "csr", "FILE", help: "The processor's certificate signing request (PEM).")
    static let processorOption = Option.required(
        "processor", "NAME", help: "Who processes with it: lowercase letters, digits, '.', '_', '-' (psp.example).")
    static let chainOutOption = Option.required(
        "out", "FILE", help: "Where to write the certificate chain (PEM) for the processor.")

    static let domain = Command(
        name: "domain",
        summary: "Register, validate, list and remove a web merchant's domains at the Pay server.",
        subcommands: [add, verify, list, remove])

    static let add = Command(
        name: "add",
        summary: "Register a domain (the host name in the address bar) for a merchant.",
        discussion: "Registering it again changes nothing. Prints the domain's record as JSON.",
        options: [merchantOption, domainOption]
    ) { arguments, context in
        try await runPortal(context, merchant: arguments[merchantOption]) { portal in
            try await portal.send(
                .post, WebMerchantAPI.Route.domains(merchant: arguments[merchantOption]),
                body: DomainRequest(domain: arguments[domainOption]), as: DomainRecord.self)
        }
    }

    static let verify = Command(
        name: "verify",
        summary: "Validate a registered domain now: fetch and check its association file.",
        discussion: """
            Runs only once the merchant's identity certificate exists. The Pay server maps the name to its loopback
            port (config.json names; never an Orchard service's port), connects with TLS 1.2 or later and SNI,
            checks the chain, expects 200 with no redirect at the extensionless path, and checks the file's
            signature and merchant. The Pay server checks a validated domain again daily (and at its site
            certificate's expiry): a wrong or missing file fails it at once, a site it cannot reach is tried 3 more
            times 15 minutes apart first; a failed domain gets no merchant session until this command validates it
            again. Prints the report as JSON, or with --explain each check and its result, one per line, then the
            domain's state, last check, next check and failure; exits 1 when the domain did not validate.
            """,
        options: [merchantOption, domainOption, explainOption]
    ) { arguments, context in
        let explain = arguments[explainOption]
        let report = try await runPortal(context, merchant: arguments[merchantOption], print: !explain) { portal in
            try await portal.send(
                .post,
                WebMerchantAPI.Route.verify(merchant: arguments[merchantOption], domain: arguments[domainOption]),
                as: DomainVerificationReport.self)
        }
        if explain { context.output(explanation(report)) }
        guard report.verified else {
            throw CLIError.failure(
                "\(report.record.domain) did not validate: \(report.record.failure ?? "failed")"
                    + (explain ? "" : " (--explain shows every check)"))
        }
    }

    static let list = Command(
        name: "list",
        summary: "List a merchant's domains with their state, last and next check, and failure.",
        discussion: """
            Prints JSON: each domain's status (registered, verified, retrying, failed, lapsed), checkedAt,
            nextCheckAt, failure (the failed check and why), retriesLeft while retrying, verifiedAt and expiresAt.
            """,
        options: [merchantOption]
    ) { arguments, context in
        try await runPortal(context, merchant: arguments[merchantOption]) { portal in
            try await portal.send(
                .get, WebMerchantAPI.Route.domains(merchant: arguments[merchantOption]), as: [DomainRecord].self)
        }
    }

    static let remove = Command(
        name: "remove",
        summary: "Remove a merchant's domain. Prints the domains left.",
        options: [merchantOption, domainOption]
    ) { arguments, context in
        try await runPortal(context, merchant: arguments[merchantOption]) { portal in
            try await portal.send(
                .delete,
                WebMerchantAPI.Route.domain(merchant: arguments[merchantOption], domain: arguments[domainOption]),
                as: [DomainRecord].self)
        }
    }

    static let merchantOption = Option.required("merchant", "ID", help: "The merchant ID (merchant.<reverse DNS>).")
    static let domainOption = Option.required(
        "domain", "DOMAIN", help: "The host name shown in the address bar, e.g. store.orchard.test.")
    static let explainOption = Option.flag("explain", help: "Print each check and its result instead of JSON.")
    static let fileOutOption = Option.required("out", "FILE", help: "Where to write the association file.")

    /// The checks, one per line: result, check, detail; then the domain's state as the Pay server keeps it.
    static func explanation(_ report: DomainVerificationReport) -> String {
        let width = DomainCheck.Name.allCases.map(\.rawValue.count).max() ?? 0
        let checks = report.checks.map { check in
            let name = check.name.rawValue
            return check.result.padding(toLength: 8, withPad: " ", startingAt: 0)
                + name.padding(toLength: width + 2, withPad: " ", startingAt: 0) + check.detail
        }
        return (checks + [state(report.record, width: width)]).joined(separator: "\n")
    }

    /// `state   verified  checked …, next check …`, with the retries left and the failure when there is one.
    static func state(_ record: DomainRecord, width: Int) -> String {
        var parts = ["checked \(record.checkedAt ?? "never")", "next check \(record.nextCheckAt ?? "none")"]
        if let left = record.retriesLeft { parts.append("\(left) retries left") }
        if let failure = record.failure { parts.append("failure \(failure)") }
        return "state".padding(toLength: 8, withPad: " ", startingAt: 0)
            + record.status.padding(toLength: width + 2, withPad: " ", startingAt: 0) + parts.joined(separator: "; ")
    }

    static func runAssociationFile(_ arguments: ParsedArguments, _ context: CommandContext) async throws {
        let merchant = arguments[merchantOption]
        let path = arguments[fileOutOption]
        let response = try await runPortal(context, merchant: merchant, print: false) { portal in
            try await portal.send(
                .post, WebMerchantAPI.Route.associationFile(merchant: merchant), as: AssociationFileResponse.self)
        }
        try Data(response.file.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
        context.trace(
            "wrote \(path): host it at https://DOMAIN\(WebMerchantAPI.associationFilePath) (no .txt, no redirect)")
        try context.outputJSON([
            "merchantIdentifier": merchant, "pspId": AssociationFiles.merchantHash(merchant), "file": path,
        ])
    }

    /// Connects to the Pay server as the portal, runs `body`, prints its result as JSON (unless `print` is
    /// false) and returns it.
    @discardableResult
    static func runPortal<Result: Encodable>(
        _ context: CommandContext, merchant: String, print: Bool = true, _ body: (Portal) async throws -> Result
    ) async throws -> Result {
        let deployment = try MerchantCommands.initializedDeployment(context)
        let identity = try portalIdentity(deployment, merchant: merchant)
        let connections = try await DeploymentCommands.connect([.pay], of: deployment, context: context)
        let result: Result
        do {
            let portal = try Portal(connections: connections, identity: identity)
            defer { portal.client.shutdown() }
            result = try await body(portal)
        } catch {
            await connections.close()
            throw error
        }
        await connections.close()
        if print { try context.outputJSON(result) }
        return result
    }

    /// The Pay server as the portal sees it: `https://pay.orchard.test`, mapped to the Pay server's port.
    struct Portal {
        let client: HTTPClient
        let base: String

        init(connections: ServiceConnections, identity: TLSIdentity) throws {
            guard let port = connections.endpoints[.pay]?.port else {
                throw CLIError.failure("the Pay server is not reachable")
            }
            client = try HTTPClient(
                configuration: HTTPClientConfiguration(
                    trustedRootsPEM: try connections.rootCertificatePEM(for: .pay),
                    clientCertificateChainPEM: identity.certificateChainPEM,
                    clientPrivateKeyPEM: identity.privateKeyPEM,
                    requestTimeout: .seconds(60), maxAttempts: 1, connectTo: [WebMerchantAPI.HostNames.pay: port]))
            base = "https://" + WebMerchantAPI.HostNames.pay
        }

        /// Sends a request and decodes a 2xx answer; an error answer fails the command with its message.
        func send<Answer: Decodable>(
            _ method: HTTPMethod, _ path: String, body: (some Encodable)? = nil as String?, as type: Answer.Type
        ) async throws -> Answer {
            var request = HTTPClientRequest(method: method, url: base + path)
            if let body {
                request = try WebMerchantCommands.jsonRequest(method, base + path, body)
            }
            let response = try await client.send(request)
            return try WebMerchantCommands.decode(response, as: type)
        }
    }

    // MARK: Synchronous helpers (typed throws directly in async closures crash release builds;
    // docs/compiler-workarounds.md §1)

    static func portalIdentity(_ deployment: DeploymentDirectory, merchant: String) throws -> TLSIdentity {
        let name = MerchantPortal.fileName(for: merchant)
        guard FileManager.default.fileExists(atPath: try deployment.certificatePath(named: name)) else {
            throw CLIError.failure(
                "\(deployment) holds no portal certificate for \(merchant) (pki/\(name).pem): register the merchant "
                    + "with `orchard merchant register` (a deployment made before web merchants needs "
                    + "`orchard init --force`)")
        }
        return try TLSIdentity.load(named: name, from: deployment)
    }

    static func jsonRequest(_ method: HTTPMethod, _ url: String, _ body: some Encodable) throws -> HTTPClientRequest {
        try HTTPClientRequest.json(method, url, body)
    }

    /// The answer of a 2xx response, or the Pay server's `{"error":{"message"}}` as the command's failure.
    /// The Pay server's error body.
    struct ErrorBody: Decodable {
        struct Detail: Decodable { let message: String }
        let error: Detail
    }

    static func decode<Answer: Decodable>(_ response: HTTPResponse, as type: Answer.Type) throws -> Answer {
        guard (200...299).contains(response.status.code) else {
            let message = (try? JSONDecoder().decode(ErrorBody.self, from: response.body))?.error.message
            throw CLIError.failure(message ?? "the Pay server answered \(response.status.code)")
        }
        do {
            return try JSONDecoder().decode(type, from: response.body)
        } catch {
            throw CLIError.failure("the Pay server's answer is not what this orchard expects: \(error)")
        }
    }
}
