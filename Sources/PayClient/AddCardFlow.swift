public import Foundation
public import OrchardCrypto
public import OrchardX509
public import PayAPI

/// Adding a card to a device's wallet through the Pay server (ARCHITECTURE §2, Provisioning): register the
/// device; fetch the token service's provisioning certificate and check it chains to the Orchard root; seal the
/// card data to its key on the device; Check Card; a one-time code when the issuer steps up; the terms; Link and
/// Provision; install the personalisation (sealed to this device's Secure Element) into the Secure Element.
///
/// The Pay server sees only envelopes it cannot open and the card's display data.
public struct AddCardFlow: Sendable {
    /// What the flow ended with.
    public enum Outcome: Sendable, Hashable {
        /// The card is in the wallet.
        case added(walletCardID: String, tokenReference: String, card: CardDisplay, deviceAccountSuffix: String)
        /// The issuer (or the token service) declined; nothing was installed.
        case declined(reason: String)
    }

    public let client: PayServerClient
    public let root: Certificate
    public let deviceID: String
    public let secureElementCertificate: Certificate
    /// The device's Secure Enclave key, registered with the Pay server for passcode attestations.
    public let enclavePublicKey: P256.Signing.PublicKey
    public let now: @Sendable () -> Date

    public init(
        client: PayServerClient, root: Certificate, deviceID: String, secureElementCertificate: Certificate,
        enclavePublicKey: P256.Signing.PublicKey, now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.client = client
        self.root = root
        self.deviceID = deviceID
        self.secureElementCertificate = secureElementCertificate
        self.enclavePublicKey = enclavePublicKey
        self.now = now
    }

    /// Runs the flow.
    ///
    /// - Parameters:
    ///   - idempotencyKey: the basis of Check Card's and Link and Provision's keys: running again with the same
    ///     key gets the first decisions and never a second token.
    ///   - oneTimeCode: asked when the issuer steps up (`nil`: no code, the flow fails with
    ///     ``PayClientError/Code/oneTimeCodeRequired``).
    ///   - acceptTerms: shown the terms; false ends the flow with ``PayClientError/Code/termsNotAccepted``.
    ///   - install: installs the personalisation envelope with the display data; returns the wallet's card ID.
    ///   - trace: one line per step, naming the party and what crossed which boundary (never a card number).
    public func run(
        card: CardEntry, idempotencyKey: String,
        oneTimeCode: @Sendable (CardCheckResult) async throws -> String?,
        acceptTerms: @Sendable (TermsResponse) async -> Bool,
        install: @Sendable ([UInt8], CardDisplay) async throws -> String,
        trace: @Sendable (String) -> Void = { _ in }
    ) async throws -> Outcome {
        let registered = try await client.register(
            secureElementCertificate: secureElementCertificate, enclavePublicKey: enclavePublicKey)
        trace("device \(deviceID) → Pay server: registered over mutual TLS (account \(registered.account))")
        let key = try ProvisioningKey(certificate: try await client.provisioningCertificate(), root: root, now: now())
        trace(
            "Pay server → device: the token service's provisioning certificate (relayed); the device checked it "
                + "chains to the Orchard root (CN \(key.recipient))")
        let sealed = try key.seal(card, deviceID: deviceID)
        trace(
            "device: card •••• \(card.suffix) sealed to the token service's key (\(sealed.count) bytes: "
                + "ephemeral P-256 ECDH, HKDF-SHA256, AES-256-GCM); the Pay server cannot open it")
        var decision = try await client.checkCard(
            CheckCardBody(
                idempotencyKey: idempotencyKey + "-check", encryptedCardData: Data(sealed).base64EncodedString()))
        trace("device → Pay server → token service → issuer: Check Card → \(Self.describe(decision))")
        if decision.outcome == .stepUp {
            guard let sessionID = decision.sessionID else {
                throw PayClientError(.protocolViolation, "a step-up without a session")
            }
            guard let code = try await oneTimeCode(decision) else {
                throw PayClientError(
                    .oneTimeCodeRequired,
                    "the issuer asks for the one-time code it sent by \(decision.stepUpMethod ?? "?") to "
                        + "\(decision.stepUpDestination ?? "?"); none was given")
            }
            decision = try await client.submitOneTimeCode(OneTimeCodeBody(sessionID: sessionID, code: code))
            trace(
                "device → issuer (through the Pay server and token service): one-time code → \(Self.describe(decision))"
            )
        }
        switch decision.outcome {
        case .declined:
            return .declined(reason: decision.declineReason ?? "declined")
        case .stepUp:
            throw PayClientError(.protocolViolation, "the issuer still asks for a step-up")
        case .approved:
            break
        }
        guard let sessionID = decision.sessionID, let termsID = decision.termsID else {
            throw PayClientError(.protocolViolation, "an approval without a session or terms")
        }
        let terms = try await client.terms(termsID)
        guard await acceptTerms(terms) else {
            throw PayClientError(.termsNotAccepted, "the terms \(termsID) were not accepted; the card was not added")
        }
        trace("user: accepted the terms \(termsID)")
        let linked = try await client.link(
            LinkBody(idempotencyKey: idempotencyKey + "-link", sessionID: sessionID, termsAccepted: true))
        guard linked.outcome == "provisioned", let reference = linked.tokenReference, let display = linked.card,
            let envelope = linked.personalisation.flatMap({ Data(base64Encoded: $0) }),
            let dpanSuffix = linked.deviceAccountSuffix
        else {
            if linked.outcome == "declined" { return .declined(reason: linked.declineReason ?? "declined") }
            throw PayClientError(.protocolViolation, "Link and Provision answered without a personalisation")
        }
        trace(
            "token service → Pay server → device: Link and Provision: token \(reference), device account number "
                + "•••• \(dpanSuffix); DPAN and card keys sealed to this device's Secure Element (\(envelope.count) "
                + "bytes), opaque to the Pay server")
        let walletCardID = try await install(Array(envelope), display)
        trace("Secure Element: applet installed; wallet: \(display.description) •••• \(display.suffix) added")
        return .added(
            walletCardID: walletCardID, tokenReference: reference, card: display, deviceAccountSuffix: dpanSuffix)
    }

    static func describe(_ result: CardCheckResult) -> String {
        switch result.outcome {
        case .approved: return "approved"
        case .stepUp:
            return "step-up (code sent by \(result.stepUpMethod ?? "?") to \(result.stepUpDestination ?? "?"))"
        case .declined: return "declined (\(result.declineReason ?? "no reason"))"
        }
    }
}

extension AddCardFlow {
    /// A fresh idempotency key: `prefix` and 26 random lowercase letters (no digits, so it can never look like
    /// a card number, which the token service refuses in a key).
    public static func newIdempotencyKey(prefix: String = "add-", random: any RandomSource = SystemRandom()) -> String {
        prefix + String(decoding: random.bytes(26).map { UInt8(ascii: "a") + $0 % 26 }, as: UTF8.self)
    }
}
