public import CardBasics
import Foundation
public import Issuer
import OrchardCrypto
public import PaymentCredential

/// Check Card: the wallet's card data, sealed to the token service (``CardDataPayload``).
public struct CheckCardRequest: Hashable, Sendable {
    /// A retry with the same key and request gets the first answer.
    public let idempotencyKey: String
    public let tokenRequestorID: String
    public let deviceID: String
    /// `phone`, `watch`, `ipad` or `mac`.
    public let deviceKind: String
    public let encryptedCardData: EncryptedEnvelope

    public init(
        idempotencyKey: String, tokenRequestorID: String, deviceID: String, deviceKind: String,
        encryptedCardData: EncryptedEnvelope
    ) {
        self.idempotencyKey = idempotencyKey
        self.tokenRequestorID = tokenRequestorID
        self.deviceID = deviceID
        self.deviceKind = deviceKind
        self.encryptedCardData = encryptedCardData
    }
}

/// The answer to Check Card (and to a step-up code).
public struct CheckCardResponse: Hashable, Sendable, Codable {
    /// The provisioning session to continue with; nil when declined.
    public let sessionID: String?
    public let decision: CardCheckDecision
    /// The terms the user must accept before Link and Provision; nil when declined.
    public let termsID: String?

    public init(sessionID: String?, decision: CardCheckDecision, termsID: String?) {
        self.sessionID = sessionID
        self.decision = decision
        self.termsID = termsID
    }
}

/// Link and Provision: create the token for this device and personalise its Secure Element.
public struct LinkAndProvisionRequest: Hashable, Sendable {
    public let idempotencyKey: String
    public let sessionID: String
    public let deviceID: String
    /// The device certificate chain (DER, leaf first): the Secure Element's key, certified by the Orchard
    /// device CA for this device.
    public let secureElementCertificateChain: [[UInt8]]
    public let termsAccepted: Bool
    /// The domains the token may be used in; nil for everything the token requestor may use.
    public let domainControls: DomainControls?

    public init(
        idempotencyKey: String, sessionID: String, deviceID: String,
        secureElementCertificateChain: [[UInt8]], termsAccepted: Bool, domainControls: DomainControls? = nil
    ) {
        self.idempotencyKey = idempotencyKey
        self.sessionID = sessionID
        self.deviceID = deviceID
        self.secureElementCertificateChain = secureElementCertificateChain
        self.termsAccepted = termsAccepted
        self.domainControls = domainControls
    }
}

/// A token as the wallet learns of it: its reference, display data and the sealed SE personalisation.
/// The DPAN itself travels only inside the envelope.
public struct ProvisionedToken: Hashable, Sendable, Codable {
    public let tokenReference: String
    /// Last four digits of the DPAN (Wallet shows them as the device account number).
    public let dpanSuffix: String
    public let tokenExpiry: CardExpiry
    public let domainControls: DomainControls
    public let profile: CardProfile
    /// ``PaymentCredential/PersonalisationData`` sealed to the device's SE key, bound to its certificate and signed
    /// by the token service.
    public let personalisation: SignedPersonalisation
}

/// The answer to Link and Provision.
public enum LinkAndProvisionResponse: Hashable, Sendable, Codable {
    case provisioned(ProvisionedToken)
    case declined(CardCheckDeclineReason)
}

extension TokenService {
    static let termsID = "orchard-pay-terms-v1"
    static let deviceKinds: Set<String> = ["phone", "watch", "ipad", "mac"]
    static let contactlessDeviceKinds: Set<String> = ["phone", "watch"]

    /// Check Card: opens the card data, asks the issuer, and keeps the decision (with the FPAN encrypted,
    /// never the CVV) for Link and Provision. Idempotent per token requestor and key.
    public func checkCard(_ request: CheckCardRequest) async throws -> CheckCardResponse {
        try Self.screenClientKey(request.idempotencyKey)
        let fingerprint = Self.fingerprint([
            Array(request.tokenRequestorID.utf8), Array(request.deviceID.utf8), Array(request.deviceKind.utf8),
            request.encryptedCardData.serialized,
        ])
        return try await idempotent(
            scope: "check-card:" + request.tokenRequestorID, key: request.idempotencyKey, fingerprint: fingerprint
        ) { try await performCheckCard(request) }
    }

    private func performCheckCard(_ request: CheckCardRequest) async throws -> CheckCardResponse {
        guard requestors[request.tokenRequestorID] != nil else {
            throw TokenServiceError(.invalidRequest, "the token requestor is not registered")
        }
        try Self.validateIdentifier(request.deviceID, "device ID")
        guard Self.deviceKinds.contains(request.deviceKind) else {
            throw TokenServiceError(.invalidRequest, "a device kind is phone, watch, ipad or mac")
        }
        let plaintext = try keyStore.openEnvelope(
            request.encryptedCardData, key: keys.provisioningKey, label: cardDataLabel(deviceID: request.deviceID))
        let card = try CardDataPayload.open(plaintext)
        // A DPAN is not a card: tokens of tokens are refused.
        if ranges.contains(where: { $0.contains(card.pan) }) {
            return CheckCardResponse(sessionID: nil, decision: .decline(.notEligible), termsID: nil)
        }
        guard let route = issuerRoute(for: card.pan) else {
            return CheckCardResponse(sessionID: nil, decision: .decline(.unknownCard), termsID: nil)
        }
        let decision: CardCheckDecision
        do {
            decision = try await route.host.checkCard(
                CardCheckRequest(
                    pan: card.pan, expiry: card.expiry, cardVerificationValue: card.cardVerificationValue,
                    cardholderName: card.cardholderName, tokenRequestorID: request.tokenRequestorID,
                    deviceKind: request.deviceKind))
        } catch {
            throw TokenServiceError(.issuerUnavailable, "the issuer could not check the card")
        }
        if case .decline = decision { return CheckCardResponse(sessionID: nil, decision: decision, termsID: nil) }
        let sessionID = randomIdentifier("chk_")
        let shared = try await vault.sharedClock()
        let session = ProvisioningSession(
            sessionID: sessionID, tokenRequestorID: request.tokenRequestorID, deviceID: request.deviceID,
            deviceKind: request.deviceKind, issuerID: route.issuerID,
            encryptedCard: try sealCard(pan: card.pan, expiry: card.expiry, context: "session:" + sessionID),
            decision: decision, expiresAt: (shared ?? clock.now()).addingTimeInterval(configuration.sessionLifetime),
            tokenReference: nil, closed: false)
        sessionDeadlines.start(sessionID, now: monotonicClock.nanoseconds())
        try await vault.saveSession(session)
        return CheckCardResponse(sessionID: sessionID, decision: decision, termsID: Self.termsID)
    }

    /// Passes the user's one-time code to the issuer for a session in step-up. A session already approved
    /// answers its approval again.
    public func submitOneTimeCode(
        sessionID: String, deviceID: String, code: String
    ) async throws
        -> CheckCardResponse
    {
        await serializer.acquire("session:" + sessionID)
        defer { serializer.release("session:" + sessionID) }
        var session = try await openSession(sessionID, deviceID: deviceID)
        switch session.decision {
        case .approve:
            return CheckCardResponse(sessionID: sessionID, decision: session.decision, termsID: Self.termsID)
        case .decline:
            throw TokenServiceError(.sessionState, "the provisioning session was declined")
        case .stepUp(let challenge, _):
            guard let route = issuers[session.issuerID] else {
                throw TokenServiceError(.configuration, "the session's issuer is no longer configured")
            }
            let decision: CardCheckDecision
            do {
                decision = try await route.host.verifyOneTimeCode(reference: challenge.reference, code: code)
            } catch {
                throw TokenServiceError(.issuerUnavailable, "the issuer could not check the code")
            }
            session.decision = decision
            if case .decline = decision { session.closed = true }
            try await vault.saveSession(session)
            if case .decline = decision { return CheckCardResponse(sessionID: nil, decision: decision, termsID: nil) }
            return CheckCardResponse(sessionID: sessionID, decision: decision, termsID: Self.termsID)
        }
    }

    /// Link and Provision: creates this device's token (a new DPAN from the issuer's token range), derives its
    /// card keys in the HSM and seals them with the DPAN to the device's SE. Idempotent: a retry returns the
    /// first answer and never creates a second DPAN.
    public func linkAndProvision(_ request: LinkAndProvisionRequest) async throws -> LinkAndProvisionResponse {
        try Self.screenClientKey(request.idempotencyKey)
        var fields: [[UInt8]] = [
            Array(request.sessionID.utf8), Array(request.deviceID.utf8),
            [request.termsAccepted ? 1 : 0], request.domainControls.map { [1, $0.rawValue] } ?? [0],
        ]
        fields.append(contentsOf: request.secureElementCertificateChain)
        return try await idempotent(
            scope: "link-and-provision", key: request.idempotencyKey, fingerprint: Self.fingerprint(fields)
        ) { try await performLinkAndProvision(request) }
    }

    private func performLinkAndProvision(
        _ request: LinkAndProvisionRequest
    ) async throws
        -> LinkAndProvisionResponse
    {
        await serializer.acquire("session:" + request.sessionID)
        defer { serializer.release("session:" + request.sessionID) }
        var session = try await openSession(request.sessionID, deviceID: request.deviceID)
        guard session.tokenReference == nil else {
            throw TokenServiceError(.sessionState, "the provisioning session already created a token")
        }
        guard case .approve(let profile) = session.decision else {
            throw TokenServiceError(.sessionState, "Link and Provision needs an approved Check Card decision")
        }
        guard request.termsAccepted else {
            session.closed = true
            try await vault.saveSession(session)
            return .declined(.termsNotAccepted)
        }
        let seKey: P256.KeyAgreement.PublicKey
        do {
            seKey = try deviceKeys.verifiedSecureElementKey(
                certificateChain: request.secureElementCertificateChain, deviceID: request.deviceID)
        } catch {
            throw TokenServiceError(.deviceNotTrusted, "the Secure Element's certificate did not verify")
        }
        // The verifier checked the chain, leaf first; the install is bound to that leaf.
        guard let leafCertificate = request.secureElementCertificateChain.first else {
            throw TokenServiceError(.deviceNotTrusted, "the Secure Element's certificate did not verify")
        }
        guard let requestor = requestors[session.tokenRequestorID] else {
            throw TokenServiceError(.configuration, "the session's token requestor is no longer registered")
        }
        var controls = (request.domainControls ?? requestor.allowedDomains).intersection(requestor.allowedDomains)
        // Only phones and watches join an NFC field: other devices' tokens get no contactless domain.
        if !Self.contactlessDeviceKinds.contains(session.deviceKind) { controls.remove(.contactless) }
        guard !controls.isEmpty else {
            throw TokenServiceError(.invalidRequest, "the token would be usable in no domain")
        }
        guard let range = ranges.first(where: { $0.issuerID == session.issuerID && $0.network == profile.network })
        else { throw TokenServiceError(.configuration, "no token range for this issuer and network") }

        let (pan, cardExpiry) = try openCard(session.encryptedCard, context: "session:" + session.sessionID)
        let lookup = try panLookup(pan)
        await serializer.acquire("card:" + lookup)
        defer { serializer.release("card:" + lookup) }
        let now = clock.now()
        var card: CardRecord
        if let existing = try await vault.card(panLookup: lookup) {
            card = existing
            if card.issuerID != session.issuerID {
                throw TokenServiceError(.configuration, "the card is held for another issuer")
            }
        } else {
            let cardID = randomIdentifier("card_")
            card = CardRecord(
                cardID: cardID, issuerID: session.issuerID, panLookup: lookup,
                encryptedCard: try sealCard(pan: pan, expiry: cardExpiry, context: "card:" + cardID),
                paymentAccountReference: newPaymentAccountReference(), profile: profile, updatedAt: now)
        }
        card.profile = profile
        card.updatedAt = now
        try await vault.saveCard(card)

        let dpan = try await drawUnusedDPAN(in: range)
        let tokenExpiry: CardExpiry
        do {
            tokenExpiry = try CardExpiry.months(configuration.tokenValidityMonths, after: now)
        } catch {
            throw TokenServiceError(.configuration, "the token validity gives an impossible expiry")
        }
        let token = TokenRecord(
            tokenReference: randomIdentifier("tok_"), dpan: dpan, panSequenceNumber: 0, tokenExpiry: tokenExpiry,
            rangeID: range.rangeID, issuerID: session.issuerID, cardID: card.cardID,
            tokenRequestorID: session.tokenRequestorID, deviceID: session.deviceID, deviceKind: session.deviceKind,
            domainControls: controls, suspendedBy: [], deleted: false, atcWindow: ATCWindow(), createdAt: now,
            updatedAt: now)
        // Signed, bound to this SE's certificate and a fresh install ID: the SE installs nothing else.
        let envelope = try keyStore.sealPersonalisation(
            PersonalisationTemplate(
                tokenReference: token.tokenReference, dpan: dpan, panSequenceNumber: token.panSequenceNumber,
                tokenExpiry: tokenExpiry, network: range.network),
            proximityKey: range.proximityKey, remoteKey: range.remoteKey, to: seKey,
            label: Self.personalisationLabel,
            install: PersonalisationInstall(
                installID: random.bytes(16), certificateDigest: SHA256.hash(leafCertificate)),
            signingKey: keys.personalisationSigningKey)
        try await vault.saveToken(token)
        session.tokenReference = token.tokenReference
        try await vault.saveSession(session)
        await notify(token, event: .provisioned)
        return .provisioned(
            ProvisionedToken(
                tokenReference: token.tokenReference, dpanSuffix: dpan.suffix, tokenExpiry: tokenExpiry,
                domainControls: controls, profile: profile, personalisation: envelope))
    }

    private func openSession(_ sessionID: String, deviceID: String) async throws -> ProvisioningSession {
        guard let session = try await vault.session(id: sessionID) else {
            throw TokenServiceError(.notFound, "no such provisioning session")
        }
        guard session.deviceID == deviceID else {
            throw TokenServiceError(.sessionState, "the provisioning session belongs to another device")
        }
        guard !session.closed else { throw TokenServiceError(.sessionState, "the provisioning session has ended") }
        // A store shared by several instances has one clock (the database's): any instance continues the session
        // until its expiry on that clock. Otherwise the monotonic clock of this process decides (R6): setting the
        // wall clock neither ends a session early nor keeps it alive; a session from before a restart has no
        // deadline here and is expired.
        let live: Bool
        if let shared = try await vault.sharedClock() {
            live = shared < session.expiresAt
        } else {
            live = sessionDeadlines.isLive(sessionID, now: monotonicClock.nanoseconds())
        }
        guard live else {
            throw TokenServiceError(.sessionState, "the provisioning session has expired; check the card again")
        }
        return session
    }

    private func drawUnusedDPAN(in range: TokenRange) async throws -> PrimaryAccountNumber {
        for _ in 0..<32 {
            guard let candidate = range.drawDPAN(using: random) else { continue }
            if try await vault.token(dpan: candidate) == nil { return candidate }
        }
        throw TokenServiceError(.rangeExhausted, "no unused DPAN found in token range \(range.rangeID)")
    }

    static func validateIdentifier(_ value: String, _ name: String) throws(TokenServiceError) {
        let bytes = Array(value.utf8)
        guard (1...128).contains(bytes.count), bytes.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw TokenServiceError(.invalidRequest, "a \(name) is 1 to 128 printable ASCII characters")
        }
    }
}

extension TokenService {
    /// Deletes the provisioning sessions whose wall-clock expiry has passed (the network service runs it with
    /// each reconciliation pass); returns how many. A session past its expiry can no longer be opened: its
    /// monotonic deadline, which decides, is never longer than the session lifetime either.
    @discardableResult
    public func purgeExpiredSessions() async throws -> Int {
        // A shared database's clock when instances share the vault (sessions expire on it), else this process's.
        try await vault.purgeSessions(expiredBefore: try await vault.sharedClock() ?? clock.now())
    }
}
