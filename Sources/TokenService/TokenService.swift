import CardBasics
public import Foundation
public import Issuer
public import NetworkAuthorizationAPI
public import OrchardCrypto
import PaymentCredential

import let OrchardLogging.cardNumberShapedKeyMessage
import func OrchardLogging.containsCardNumberShape

/// How the token service is set up.
public struct TokenServiceConfiguration: Sendable {
    /// The token service's name in envelope labels (the recipient of card data, the sender of
    /// personalisation data).
    public var serviceName: String
    public var tokenRequestors: [TokenRequestor]
    /// A token's validity from its creation, in months (independent of the card's expiry).
    public var tokenValidityMonths: Int
    /// How long a Check Card decision waits for Link and Provision.
    public var sessionLifetime: TimeInterval
    public var atcPolicy: ATCPolicy
    /// The 4-character BIN controller ID that starts every payment account reference.
    public var parBINControllerID: String

    public init(
        serviceName: String = "token-service", tokenRequestors: [TokenRequestor] = [.orchardPay],
        tokenValidityMonths: Int = 36, sessionLifetime: TimeInterval = 900, atcPolicy: ATCPolicy = ATCPolicy(),
        parBINControllerID: String = "O001"
    ) {
        self.serviceName = serviceName
        self.tokenRequestors = tokenRequestors
        self.tokenValidityMonths = tokenValidityMonths
        self.sessionLifetime = sessionLifetime
        self.atcPolicy = atcPolicy
        self.parBINControllerID = parBINControllerID
    }
}

/// The token service's own keys in the HSM.
public struct TokenServiceKeys: Hashable, Sendable, Codable {
    /// ``HSMKeyUsage/vaultEncryption``: encrypts FPANs at rest.
    public let vaultKey: KeyHandle
    /// ``HSMKeyUsage/panLookup``: the keyed hash that finds a card without decrypting.
    public let lookupKey: KeyHandle
    /// ``HSMKeyUsage/provisioningDecryption``: wallets seal card data to its public key.
    public let provisioningKey: KeyHandle
    /// ``HSMKeyUsage/personalisationSigning``: signs card installs; Secure Elements pin its public key.
    public let personalisationSigningKey: KeyHandle

    public init(
        vaultKey: KeyHandle, lookupKey: KeyHandle, provisioningKey: KeyHandle, personalisationSigningKey: KeyHandle
    ) {
        self.vaultKey = vaultKey
        self.lookupKey = lookupKey
        self.provisioningKey = provisioningKey
        self.personalisationSigningKey = personalisationSigningKey
    }

    /// Generates the four keys in `keyStore`.
    public static func generate(in keyStore: any KeyStore) throws(TokenServiceError) -> TokenServiceKeys {
        TokenServiceKeys(
            vaultKey: try keyStore.generateKey(usage: .vaultEncryption, id: "tsp-vault-kek"),
            lookupKey: try keyStore.generateKey(usage: .panLookup, id: "tsp-pan-lookup"),
            provisioningKey: try keyStore.generateKey(usage: .provisioningDecryption, id: "tsp-provisioning"),
            personalisationSigningKey: try keyStore.generateKey(
                usage: .personalisationSigning, id: "tsp-personalisation-signing"))
    }
}

/// An issuer the network routes to: its real card BINs and how to reach it.
public struct IssuerRoute: Sendable {
    public let issuerID: String
    /// BIN prefixes of the issuer's real cards (never overlapping a token range).
    public let cardBINPrefixes: [String]
    public let host: any IssuerHost

    public init(issuerID: String, cardBINPrefixes: [String], host: any IssuerHost) {
        self.issuerID = issuerID
        self.cardBINPrefixes = cardBINPrefixes
        self.host = host
    }
}

/// Checks a device's Secure Element certificate and gives its key-agreement key. The X.509 module
/// provides the real check (a chain to the Orchard device CA); tests install a test double.
public protocol DeviceKeyVerifier: Sendable {
    /// The SE's P-256 key from `certificateChain` (DER, leaf first) if the chain verifies to the device CA
    /// and the leaf names the device `deviceID`; throws otherwise.
    func verifiedSecureElementKey(
        certificateChain: [[UInt8]], deviceID: String
    ) throws
        -> P256.KeyAgreement.PublicKey
}

/// The network's token service (TSP): token ranges, the HSM-backed vault, provisioning (Check Card, Link and
/// Provision), authorization (token state, domain controls, cryptogram, ATC window, detokenisation) and the
/// token lifecycle.
///
/// It holds DPANs and, encrypted, FPANs; never a CVV. Provisioning calls and authorizations are idempotent;
/// operations on one token or idempotency key are serialized across `await`s.
public actor TokenService {
    let configuration: TokenServiceConfiguration
    let keyStore: any KeyStore
    let keys: TokenServiceKeys
    let ranges: [TokenRange]
    let issuers: [String: IssuerRoute]
    let vault: any TokenVaultStore
    let deviceKeys: any DeviceKeyVerifier
    let notifier: any TokenStatusNotifier
    let clock: any WallClock
    /// Provisioning sessions expire on it (R6), in this process.
    let monotonicClock: any MonotonicClock
    var sessionDeadlines: MonotonicDeadlines
    let random: any RandomSource
    let serializer = KeyedSerializer()
    let requestors: [String: TokenRequestor]
    /// Told at each durable step of an authorization (crash tests); nil in a deployment.
    let probe: (any AuthorizationProbe)?

    /// The key wallets seal card data to (``CardDataPayload``).
    public nonisolated let provisioningPublicKey: P256.KeyAgreement.PublicKey

    /// Checks the configuration: every range belongs to a known issuer and overlaps no real card BIN and no
    /// other range; the keys have the right usages.
    public init(
        configuration: TokenServiceConfiguration = TokenServiceConfiguration(), keyStore: any KeyStore,
        keys: TokenServiceKeys, ranges: [TokenRange], issuers: [IssuerRoute], vault: any TokenVaultStore,
        deviceKeys: any DeviceKeyVerifier, notifier: any TokenStatusNotifier, clock: any WallClock = SystemClock(),
        random: any RandomSource = SystemRandom(), authorizationProbe: (any AuthorizationProbe)? = nil,
        monotonicClock: any MonotonicClock = SystemClock()
    ) throws(TokenServiceError) {
        var routes: [String: IssuerRoute] = [:]
        for issuer in issuers {
            guard routes[issuer.issuerID] == nil else {
                throw TokenServiceError(.configuration, "issuer \(issuer.issuerID) is listed twice")
            }
            routes[issuer.issuerID] = issuer
        }
        let realBINs = issuers.flatMap(\.cardBINPrefixes)
        for (index, range) in ranges.enumerated() {
            guard routes[range.issuerID] != nil else {
                throw TokenServiceError(.configuration, "token range \(range.rangeID) names an unknown issuer")
            }
            if let bin = realBINs.first(where: { $0.hasPrefix(range.prefix) || range.prefix.hasPrefix($0) }) {
                throw TokenServiceError(
                    .configuration, "token range \(range.rangeID) overlaps the real card BIN \(bin)")
            }
            for other in ranges[(index + 1)...]
            where other.prefix.hasPrefix(range.prefix) || range.prefix.hasPrefix(other.prefix) {
                throw TokenServiceError(
                    .configuration, "token ranges \(range.rangeID) and \(other.rangeID) overlap")
            }
        }
        guard keys.vaultKey.usage == .vaultEncryption, keys.lookupKey.usage == .panLookup,
            keys.provisioningKey.usage == .provisioningDecryption,
            keys.personalisationSigningKey.usage == .personalisationSigning
        else { throw TokenServiceError(.keyUsageViolation, "the token service keys have the wrong usages") }
        let controllerID = Array(configuration.parBINControllerID.utf8)
        guard controllerID.count == 4, controllerID.allSatisfy({ Self.parAlphabet.contains($0) }) else {
            throw TokenServiceError(.configuration, "a BIN controller ID is 4 characters from 0-9 and A-Z")
        }
        self.configuration = configuration
        self.keyStore = keyStore
        self.keys = keys
        self.ranges = ranges
        self.issuers = routes
        self.vault = vault
        self.deviceKeys = deviceKeys
        self.notifier = notifier
        self.clock = clock
        self.monotonicClock = monotonicClock
        sessionDeadlines = MonotonicDeadlines(lifetimeSeconds: configuration.sessionLifetime)
        self.random = random
        self.probe = authorizationProbe
        self.requestors = Dictionary(configuration.tokenRequestors.map { ($0.id, $0) }) { first, _ in first }
        self.provisioningPublicKey = try keyStore.publicKey(of: keys.provisioningKey)
    }

    /// The envelope label wallets seal card data under (``CardDataPayload``).
    public nonisolated func cardDataLabel(deviceID: String) throws(TokenServiceError) -> EncryptedEnvelope.Label {
        try EncryptedEnvelope.Label(
            purpose: CardDataPayload.purpose, sender: "wallet/" + deviceID, recipient: configuration.serviceName)
    }

    /// The envelope label of every SE personalisation: purpose string
    /// `token-service>secure-element:personalisation`, the one the Secure Element opens with
    /// (`PersonalisationData.envelopePurpose`). The recipient is bound by its key (from the device
    /// certificate), not by the label.
    public static let personalisationLabel: EncryptedEnvelope.Label = {
        // The parts are constants that satisfy the label's rules.
        guard
            // try?: constant parts: a failure is the precondition below.
            let label = try? EncryptedEnvelope.Label(
                purpose: "personalisation", sender: "token-service", recipient: "secure-element")
        else { preconditionFailure("the personalisation label's constant parts are valid") }
        return label
    }()

    // MARK: - Shared helpers

    static let parAlphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)

    /// `prefix` followed by 32 random hex digits.
    func randomIdentifier(_ prefix: String) -> String { prefix + hexString(random.bytes(16)) }

    /// A payment account reference: the BIN controller ID and 25 random characters from 0-9, A-Z.
    func newPaymentAccountReference() -> String {
        var out = Array(configuration.parBINControllerID.utf8)
        while out.count < 29 {
            for byte in random.bytes(32) where byte < 252 && out.count < 29 {
                out.append(Self.parAlphabet[Int(byte) % Self.parAlphabet.count])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The keyed hash that finds a card by its FPAN.
    func panLookup(_ pan: PrimaryAccountNumber) throws(TokenServiceError) -> String {
        hexString(try keyStore.lookupHash(of: SecureBytes(Array(pan.digits.utf8)), key: keys.lookupKey))
    }

    /// The route for a real card number (longest matching BIN prefix).
    func issuerRoute(for pan: PrimaryAccountNumber) -> IssuerRoute? {
        var best: (route: IssuerRoute, length: Int)?
        for route in issuers.values {
            for prefix in route.cardBINPrefixes where pan.digits.hasPrefix(prefix) {
                if prefix.count > (best?.length ?? 0) { best = (route, prefix.count) }
            }
        }
        return best?.route
    }

    /// Encrypts an FPAN and its expiry under the vault key, bound to `context`.
    func sealCard(pan: PrimaryAccountNumber, expiry: CardExpiry, context: String) throws(TokenServiceError) -> [UInt8] {
        let plain = try SecretTLV.encoding([
            (0x01, SecretTLV.text(pan.digits)),
            (0x02, SecretTLV.text(expiry.yymm)),
        ])
        return try keyStore.seal(plain, key: keys.vaultKey, context: Self.vaultContext(context))
    }

    /// Decrypts what ``sealCard(pan:expiry:context:)`` made.
    func openCard(_ sealed: [UInt8], context: String) throws(TokenServiceError) -> (PrimaryAccountNumber, CardExpiry) {
        let plain = try keyStore.open(sealed, key: keys.vaultKey, context: Self.vaultContext(context))
        do {
            let items = try SecretTLV.decode(plain, allowedTags: [0x01, 0x02])
            return (
                try PrimaryAccountNumber(try items.text(0x01, "card number")),
                try CardExpiry(yymm: try items.text(0x02, "expiry"))
            )
        } catch {
            throw TokenServiceError(.storeFailure, "a vault record holds malformed card data")
        }
    }

    static func vaultContext(_ context: String) -> [UInt8] { Array("orchard-vault/v1\u{0}\(context)".utf8) }

    /// Runs `body` once per (scope, key): a retry with the same request gets the stored first response, a
    /// different request with the same key is refused. Callers serialize on the key first.
    func idempotent<Response: Codable & Sendable>(
        scope: String, key: String, fingerprint: String, _ body: () async throws -> Response
    ) async throws -> Response {
        guard (1...200).contains(key.utf8.count) else {
            throw TokenServiceError(.invalidRequest, "an idempotency key is 1 to 200 bytes")
        }
        await serializer.acquire(scope + "\u{0}" + key)
        defer { serializer.release(scope + "\u{0}" + key) }
        if let stored = try await vault.idempotencyRecord(scope: scope, key: key) {
            guard stored.requestFingerprint == fingerprint else {
                throw TokenServiceError(.idempotencyConflict, "this idempotency key was used for a different request")
            }
            do {
                return try JSONDecoder().decode(Response.self, from: Data(stored.response))
            } catch {
                throw TokenServiceError(.storeFailure, "a stored response could not be decoded")
            }
        }
        let response = try await body()
        try await saveAnswer(response, scope: scope, key: key, fingerprint: fingerprint)
        return response
    }

    /// Stores `response` (sorted-key JSON) as the final answer of `key` in `scope`, replacing a started record.
    func saveAnswer(_ response: some Encodable, scope: String, key: String, fingerprint: String) async throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try await vault.saveIdempotencyRecord(
            IdempotencyRecord(
                scope: scope, key: key, requestFingerprint: fingerprint, response: Array(try encoder.encode(response)),
                createdAt: clock.now()))
    }

    /// Refuses a wallet-chosen key that could hold a card number: keys are stored in clear. (Authorization
    /// keys are the acquirer's transaction IDs, machine-made hex, and are not screened: hex can contain
    /// long digit runs by chance.)
    static func screenClientKey(_ key: String) throws(TokenServiceError) {
        guard !containsCardNumberShape(key) else {
            throw TokenServiceError(.invalidRequest, cardNumberShapedKeyMessage)
        }
    }

    /// SHA-256 over length-prefixed fields, hex.
    static func fingerprint(_ fields: [[UInt8]]) -> String {
        var data: [UInt8] = []
        for field in fields {
            withUnsafeBytes(of: UInt32(field.count).bigEndian) { data.append(contentsOf: $0) }
            data.append(contentsOf: field)
        }
        return hexString(SHA256.hash(data))
    }
}
