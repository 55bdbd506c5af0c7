public import AccessPolicy

/// The wire formats of Apple Pay on the web's merchant side at the Orchard Pay server (docs/web.md): the
/// domain routes the merchant portal (`orchard merchant domain …`) calls, and the domain-association file a
/// merchant hosts at ``associationFilePath``.
///
/// Both sides import this module and nothing else of each other: the Pay server writes and reads these bodies,
/// the CLI writes and reads the same types.
public enum WebMerchantAPI {
    /// Where Apple's verifier (and the Pay server's) fetches a domain's association file: no extension.
    public static let associationFilePath = "/.well-known/apple-developer-merchantid-domain-association"

    /// The host names a deployment serves (`config.json` `names`, each mapped to a loopback port).
    public enum HostNames {
        /// The Pay server's mutual-TLS web gateway (Apple: `apple-pay-gateway.apple.com`).
        public static let gateway = "apple-pay-gateway.orchard.test"
        /// The Pay server's public side (Apple's hosted script, later).
        public static let pay = "pay.orchard.test"
        /// The demo merchant's website.
        public static let store = "store.orchard.test"
        /// Every name, sorted.
        public static let all = [gateway, pay, store]
    }

    /// The role of a merchant's portal certificate (issued by the Orchard root, OU `merchant-portal`, subject UID
    /// `merchant:<merchant ID>`): the merchant's login to the Pay server's web merchant routes, as Apple's developer
    /// portal. It acts only for the merchant it names, which the path must name too.
    public static let portalRole = "merchant-portal"

    /// The routes' paths.
    public enum Route {
        /// `POST` (register, body ``DomainRequest``) and `GET` (list) a merchant's domains.
        public static func domains(merchant: String) -> String { "/v1/web/merchants/\(merchant)/domains" }
        /// `DELETE`: removes a domain.
        public static func domain(merchant: String, domain: String) -> String {
            "/v1/web/merchants/\(merchant)/domains/\(domain)"
        }
        /// `POST`: validates a registered domain now; answers ``DomainVerificationReport``.
        public static func verify(merchant: String, domain: String) -> String {
            "/v1/web/merchants/\(merchant)/domains/\(domain)/verify"
        }
        /// `POST`: issues a new association file for the merchant; answers ``AssociationFileResponse``.
        public static func associationFile(merchant: String) -> String {
            "/v1/web/merchants/\(merchant)/association-file"
        }
        /// `POST` ``ProcessingCertificateRequest``: issues a payment processing certificate for the merchant to the
        /// key of a processor's CSR; answers ``ProcessingCertificateResponse`` (201).
        public static func processingCertificates(merchant: String) -> String {
            "/v1/web/merchants/\(merchant)/processing-certificates"
        }
    }

    /// What a merchant's website serves to the verifier.
    public enum Site {
        /// `GET` the association file: anyone, no client certificate, status 200, no redirect.
        public static let associationFile = DeclaredRoute("GET", associationFilePath, .anyone)
    }

    /// The routes with their policy, as the Pay server registers them: a portal certificate whose merchant is the
    /// path's `:merchant` (403 `caller_mismatch` for another merchant's).
    public enum Declared {
        static let portal = AccessPolicy.identified(
            role: portalRole, IdentityBinding(kind: CallerIdentity.merchant, pathParameters: ["merchant"]))

        public static let addDomain = DeclaredRoute("POST", Route.domains(merchant: ":merchant"), portal)
        public static let listDomains = DeclaredRoute("GET", Route.domains(merchant: ":merchant"), portal)
        public static let removeDomain = DeclaredRoute(
            "DELETE", Route.domain(merchant: ":merchant", domain: ":domain"), portal)
        public static let verifyDomain = DeclaredRoute(
            "POST", Route.verify(merchant: ":merchant", domain: ":domain"), portal)
        public static let associationFile = DeclaredRoute(
            "POST", Route.associationFile(merchant: ":merchant"), portal)
        public static let requestProcessingCertificate = DeclaredRoute(
            "POST", Route.processingCertificates(merchant: ":merchant"), portal)

        /// Every route of the contract.
        public static var all: [DeclaredRoute] {
            [addDomain, listDomains, removeDomain, verifyDomain, associationFile, requestProcessingCertificate]
        }
    }
}

/// `POST …/domains`: the fully qualified domain name shown in the address bar (no scheme, port or path).
public struct DomainRequest: Codable, Sendable, Hashable {
    public let domain: String
    public init(domain: String) { self.domain = domain }
}

/// One registered domain of a merchant, as the Pay server reports it.
public struct DomainRecord: Codable, Sendable, Hashable {
    /// `registered` (not validated yet), `verified`, `retrying` (still validated: the last check could not reach
    /// the site and is tried again), `failed` (the last check failed: no merchant sessions until a `domain verify`
    /// passes) or `lapsed` (the site's TLS certificate expired since it was validated).
    public let status: String
    public let merchantIdentifier: String
    public let domain: String
    /// When the domain was last validated, ISO 8601.
    public let verifiedAt: String?
    /// When validation lapses: the site's TLS certificate's expiry, ISO 8601.
    public let expiresAt: String?
    /// When the Pay server checks the site again (a day after a pass, at `expiresAt` if sooner, 15 minutes after
    /// a try that could not reach it), ISO 8601; none for a registered or failed domain.
    public let nextCheckAt: String?
    /// Why the last check failed, as `<check>: <detail>`.
    public let failure: String?
    /// When the site was last checked, ISO 8601.
    public let checkedAt: String?
    /// For a `retrying` domain: the tries left before it fails.
    public let retriesLeft: Int?

    public init(
        status: String, merchantIdentifier: String, domain: String, verifiedAt: String?, expiresAt: String?,
        nextCheckAt: String?, failure: String?, checkedAt: String? = nil, retriesLeft: Int? = nil
    ) {
        self.status = status
        self.merchantIdentifier = merchantIdentifier
        self.domain = domain
        self.verifiedAt = verifiedAt
        self.expiresAt = expiresAt
        self.nextCheckAt = nextCheckAt
        self.failure = failure
        self.checkedAt = checkedAt
        self.retriesLeft = retriesLeft
    }
}

/// One check of a domain validation and its result (`--explain` prints them in order).
public struct DomainCheck: Codable, Sendable, Hashable {
    /// The checks, in the order they run.
    public enum Name: String, Codable, Sendable, CaseIterable {
        case identityCertificate = "identity certificate"
        case nameMapping = "name mapping"
        case connect
        case tlsVersion = "TLS version"
        case chain
        case status
        case redirect
        case file
        case signature
        case merchant
    }

    public let name: Name
    /// `pass`, `fail` or `skipped` (an earlier check failed).
    public let result: String
    public let detail: String

    public init(name: Name, result: String, detail: String) {
        self.name = name
        self.result = result
        self.detail = detail
    }
}

/// `POST …/verify`: every check with its result, and the domain's record afterwards.
public struct DomainVerificationReport: Codable, Sendable, Hashable {
    public let verified: Bool
    public let checks: [DomainCheck]
    public let record: DomainRecord

    public init(verified: Bool, checks: [DomainCheck], record: DomainRecord) {
        self.verified = verified
        self.checks = checks
        self.record = record
    }
}

/// `POST …/association-file`: the file's exact contents (upper-case hex text, ``DomainAssociationFile``).
public struct AssociationFileResponse: Codable, Sendable, Hashable {
    public let merchantIdentifier: String
    public let file: String

    public init(merchantIdentifier: String, file: String) {
        self.merchantIdentifier = merchantIdentifier
        self.file = file
    }
}
