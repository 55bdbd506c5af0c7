import Foundation
public import OrchardCrypto
public import OrchardRuntime
public import OrchardX509

/// The Pay server's merchant onboarding, as `init` and later the `merchant` commands use it: register a
/// merchant ID, issue its payment processing and identity certificates from its CSRs, entitle an app.
///
/// The Pay server's init step provides it (``InitializationContext/provide(_:)``); the merchant's init step,
/// which runs after it, uses it. The merchant never sees the Pay server's CA key.
public protocol MerchantOnboarding: Sendable {
    /// Registers `merchantIdentifier` (e.g. `merchant.dev.orchard.demo`) with a display name; registering
    /// the same identifier again with the same name changes nothing.
    func registerMerchant(identifier merchantIdentifier: String, displayName: String) async throws

    /// Issues a payment processing certificate from `request`: the subject UID must be `merchantIdentifier`;
    /// the certificate carries the merchant-ID extension (1.2.840.113635.100.6.32). Returns the chain, leaf
    /// first.
    func issuePaymentProcessingCertificate(
        for request: CertificateSigningRequest, merchantIdentifier: String
    ) async throws -> [Certificate]

    /// Issues a merchant identity certificate (a TLS client certificate, extended key usage clientAuth) from
    /// `request`, whose key must be RSA-2048 as Apple requires, for the merchant's mutual-TLS calls to the Pay
    /// server. Returns the chain, leaf first.
    func issueMerchantIdentityCertificate(
        for request: CertificateSigningRequest, merchantIdentifier: String
    ) async throws -> [Certificate]

    /// Entitles the app `applicationIdentifier` (e.g. `dev.orchard.demo-app`) to pay for `merchantIdentifiers`.
    func entitle(application applicationIdentifier: String, merchantIdentifiers: [String]) async throws
}

/// The Pay server's web-merchant onboarding, as `init` uses it for the demo merchant's site: association files
/// and domain validation. The Pay server's init step provides it (``InitializationContext/provideWebDomains(_:)``).
public protocol WebDomainOnboarding: Sendable {
    /// A new domain-association file for `merchantIdentifier`: the exact text the merchant hosts.
    func associationFile(for merchantIdentifier: String) async throws -> String

    /// Registers `domain` for `merchantIdentifier` and validates it now against the site serving on loopback
    /// `port` (init starts it on a port of its own, not the configured one, which another deployment's server may
    /// share through `SO_REUSEPORT`); returns nil when it validated, else the first failed check.
    func registerAndValidate(domain: String, merchantIdentifier: String, port: Int) async throws -> String?
}

/// What an ``OrchardService/initialize(_:)`` step gets: the new deployment's directory and configuration, the
/// Orchard root CA, injected time and randomness, and what earlier steps provided.
///
/// Steps run one after another; the lock only makes the type safe to hand across tasks.
public final class InitializationContext: @unchecked Sendable {
    // Thread-safety: `configuration`, the onboardings, `facts` and `cleanups` are guarded by `lock`.
    /// The directory being initialised (created, 0700, `pki/`, `logs/` and `run/` present).
    public let directory: DeploymentDirectory
    /// The Orchard root CA: issue what loopback clients must trust from it.
    public let rootCA: CertificateAuthority
    public let clock: any WallClock
    public let random: any RandomSource
    private let lock = NSLock()
    private var configuration: Configuration
    private var onboarding: (any MerchantOnboarding)?
    private var acquirerOnboarding: (any AcquirerOnboarding)?
    private var webDomains: (any WebDomainOnboarding)?
    private var facts: [String: String] = [:]
    private var requests: [PartyRequest] = []
    private var cleanups: [@Sendable () async -> Void] = []
    private let traceSink: @Sendable (String) -> Void

    init(
        directory: DeploymentDirectory, rootCA: CertificateAuthority, configuration: Configuration,
        clock: any WallClock, random: any RandomSource, party: DeploymentParty? = nil,
        trace: @escaping @Sendable (String) -> Void
    ) {
        self.party = party
        self.directory = directory
        self.rootCA = rootCA
        self.configuration = configuration
        self.clock = clock
        self.random = random
        self.traceSink = trace
    }

    /// The party this directory holds alone (`orchard init --party`), or nil for a directory of every party. A
    /// party's step then asks the other parties for what their steps would provide in one directory
    /// (``request(_:)``), and the root CA is the party's own.
    public let party: DeploymentParty?

    /// Asks another party for certificates or onboarding: written to `party.json`, carried by the party's bundle,
    /// answered by the other party's `orchard pki import`.
    public func request(_ request: PartyRequest) { lock.withLock { requests.append(request) } }

    /// The requests made so far.
    public var partyRequests: [PartyRequest] { lock.withLock { requests } }

    /// The configuration so far (written to `config.json` once every step succeeded).
    public var currentConfiguration: Configuration { lock.withLock { configuration } }

    /// The value of `key` in the configuration being written.
    public subscript<Value>(key: ConfigurationKey<Value>) -> Value { lock.withLock { configuration[key] } }

    /// Stores `value` for `key` in the new `config.json`.
    public func set<Value>(_ key: ConfigurationKey<Value>, _ value: Value) throws(ServicesError) {
        lock.lock()
        defer { lock.unlock() }
        do {
            try configuration.set(key, value)
        } catch {
            throw ServicesError(.invalidConfiguration, "cannot set \(key.path)", underlying: error)
        }
    }

    /// A readable line on what a step did (no secrets).
    public func trace(_ line: String) { traceSink(line) }

    /// Records a fact for `init`'s summary, such as `merchantIdentifier` → `merchant.dev.orchard.demo`.
    public func report(_ name: String, _ value: String) { lock.withLock { facts[name] = value } }

    /// The facts reported so far.
    public var reportedFacts: [String: String] { lock.withLock { facts } }

    /// Runs `body` once every step finished (or one failed): for resources later steps still use, such as the
    /// store behind a provided ``MerchantOnboarding``. Cleanups run in reverse order.
    public func atEnd(_ body: @escaping @Sendable () async -> Void) { lock.withLock { cleanups.append(body) } }

    func runCleanups() async {
        let pending = lock.withLock { () -> [@Sendable () async -> Void] in
            defer { cleanups.removeAll() }
            return cleanups.reversed()
        }
        for cleanup in pending { await cleanup() }
    }

    /// Called by the Pay server's step: makes its merchant onboarding available to later steps.
    public func provide(_ onboarding: any MerchantOnboarding) { lock.withLock { self.onboarding = onboarding } }

    /// The merchant onboarding an earlier step provided.
    public func merchantOnboarding() throws(ServicesError) -> any MerchantOnboarding {
        guard let onboarding = lock.withLock({ self.onboarding }) else {
            throw ServicesError(
                .notReady, "no merchant onboarding was provided: the pay service must come before merchants")
        }
        return onboarding
    }

    /// Called by the network's step: makes its acquirer onboarding available to later steps.
    public func provideAcquirer(_ onboarding: any AcquirerOnboarding) {
        lock.withLock { self.acquirerOnboarding = onboarding }
    }

    /// The acquirer onboarding an earlier step provided, if any.
    public func acquirer() -> (any AcquirerOnboarding)? { lock.withLock { acquirerOnboarding } }

    /// Called by the Pay server's step: makes its web-merchant onboarding available to later steps.
    public func provideWebDomains(_ onboarding: any WebDomainOnboarding) {
        lock.withLock { self.webDomains = onboarding }
    }

    /// The web-merchant onboarding an earlier step provided, if any.
    public func webDomainOnboarding() -> (any WebDomainOnboarding)? { lock.withLock { webDomains } }
}
