public import CardBasics
public import Foundation
public import OrchardCrypto

/// How an issuer is set up.
public struct IssuerConfiguration: Sendable {
    /// The issuer's identifier in the network's routing table.
    public var issuerID: String
    /// The bank's name, shown in wallets.
    public var name: String
    /// The BIN prefixes of the issuer's real cards. Token ranges must never overlap them.
    public var cardBINPrefixes: [String]
    /// The one-time code every step-up challenge accepts. Orchard sends no SMS, so the code is fixed and
    /// documented (`123456`); a deployment with a real channel would draw it at random.
    public var stepUpCode: String
    /// How long a step-up challenge stays valid.
    public var stepUpLifetime: TimeInterval
    /// Wrong codes allowed before the challenge declines.
    public var maxStepUpAttempts: Int

    public init(
        issuerID: String, name: String, cardBINPrefixes: [String], stepUpCode: String = "123456",
        stepUpLifetime: TimeInterval = 600, maxStepUpAttempts: Int = 3
    ) {
        self.issuerID = issuerID
        self.name = name
        self.cardBINPrefixes = cardBINPrefixes
        self.stepUpCode = stepUpCode
        self.stepUpLifetime = stepUpLifetime
        self.maxStepUpAttempts = maxStepUpAttempts
    }
}

/// A card-issuing bank: accounts with balances and limits, cards, provisioning decisions and
/// authorization decisions with ISO 8583 response codes (see ``ResponseCode``).
///
/// The issuer holds the FPAN (its own card records) and never a DPAN key. It recomputes CVVs from its card
/// verification key and stores none. Authorizations are idempotent per network transaction ID, and
/// decisions on one account are serialized so two concurrent authorizations cannot spend the same funds.
public actor Issuer: IssuerHost {
    public nonisolated let issuerID: String
    public nonisolated let configuration: IssuerConfiguration
    let store: any IssuerStore
    private let cardVerificationKey: CardVerificationKey
    let clock: any WallClock
    /// Step-up challenges expire on it (R6), in this process.
    private let monotonicClock: any MonotonicClock
    private var stepUpDeadlines: MonotonicDeadlines
    private let random: any RandomSource
    private var network: (any IssuerNetworkLink)?
    let serializer = KeyedSerializer()

    public init(
        configuration: IssuerConfiguration, store: any IssuerStore, cardVerificationKey: CardVerificationKey,
        clock: any WallClock = SystemClock(), random: any RandomSource = SystemRandom(),
        monotonicClock: any MonotonicClock = SystemClock()
    ) {
        self.monotonicClock = monotonicClock
        stepUpDeadlines = MonotonicDeadlines(lifetimeSeconds: configuration.stepUpLifetime)
        self.issuerID = configuration.issuerID
        self.configuration = configuration
        self.store = store
        self.cardVerificationKey = cardVerificationKey
        self.clock = clock
        self.random = random
    }

    /// Connects the issuer to the network it sends FPAN updates and token lifecycle actions to.
    public func connect(to network: any IssuerNetworkLink) { self.network = network }

    // MARK: - Accounts and cards

    /// Opens an account. Throws ``IssuerError/Code/duplicate`` if the identifier is taken.
    public func openAccount(_ account: IssuerAccount) async throws {
        guard try await store.account(id: account.accountID) == nil else {
            throw IssuerError(.duplicate, "an account with this identifier already exists")
        }
        try await store.saveAccount(account)
    }

    /// Issues a card on an existing account. Throws if the PAN is taken or outside this issuer's BINs.
    public func issueCard(_ card: IssuedCard) async throws {
        guard configuration.cardBINPrefixes.contains(where: { card.pan.digits.hasPrefix($0) }) else {
            throw IssuerError(.invalidInput, "the card number is outside this issuer's BIN ranges")
        }
        guard try await store.account(id: card.accountID) != nil else {
            throw IssuerError(.notFound, "the card's account does not exist")
        }
        guard try await store.card(pan: card.pan) == nil else {
            throw IssuerError(.duplicate, "a card with this number already exists")
        }
        try await store.saveCard(card)
    }

    public func account(id: String) async throws -> IssuerAccount? { try await store.account(id: id) }
    public func card(pan: PrimaryAccountNumber) async throws -> IssuedCard? { try await store.card(pan: pan) }

    /// The CVV2 the issuer expects for `card` (to print on the card; never stored).
    public func cardVerificationValue(for card: IssuedCard) throws -> String {
        try cardVerificationKey.cardVerificationValue(pan: card.pan, expiry: card.expiry)
    }

    /// Changes a card's status (restrict, reactivate, close).
    public func setCardStatus(_ status: IssuedCard.Status, pan: PrimaryAccountNumber) async throws {
        guard var card = try await store.card(pan: pan) else { throw IssuerError(.notFound, "no such card") }
        card.status = status
        try await store.saveCard(card)
    }

    /// Changes an account's status (freeze, reopen, close).
    public func setAccountStatus(_ status: IssuerAccount.Status, accountID: String) async throws {
        await serializer.acquire(accountID)
        defer { serializer.release(accountID) }
        guard var account = try await store.account(id: accountID) else {
            throw IssuerError(.notFound, "no such account")
        }
        account.status = status
        try await store.saveAccount(account)
    }

    /// Re-issues a card: a new expiry, and a new number when `newPAN` is given. The old card closes when the
    /// number changes; the network is told, so existing tokens keep their DPAN and follow the new card.
    /// Returns the new card.
    @discardableResult
    public func reissueCard(
        pan: PrimaryAccountNumber, newPAN: PrimaryAccountNumber?, newExpiry: CardExpiry
    )
        async throws -> IssuedCard
    {
        guard var old = try await store.card(pan: pan) else { throw IssuerError(.notFound, "no such card") }
        guard newExpiry >= old.expiry else {
            throw IssuerError(.invalidInput, "a re-issued card cannot expire before the card it replaces")
        }
        var replacement = old
        if let newPAN, newPAN != pan {
            guard configuration.cardBINPrefixes.contains(where: { newPAN.digits.hasPrefix($0) }) else {
                throw IssuerError(.invalidInput, "the new card number is outside this issuer's BIN ranges")
            }
            guard try await store.card(pan: newPAN) == nil else {
                throw IssuerError(.duplicate, "a card with the new number already exists")
            }
            replacement = IssuedCard(
                pan: newPAN, expiry: newExpiry, network: old.network, type: old.type, accountID: old.accountID,
                cardholderName: old.cardholderName, status: .active, provisioningPolicy: old.provisioningPolicy,
                allowedChannels: old.allowedChannels, productName: old.productName,
                stepUpDestinationHint: old.stepUpDestinationHint)
            old.status = .closed
            try await store.saveCard(old)
        } else {
            replacement.expiry = newExpiry
        }
        try await store.saveCard(replacement)
        if let network {
            _ = try await network.cardReplaced(
                issuerID: issuerID, oldPAN: pan, newPAN: replacement.pan, newExpiry: newExpiry)
        }
        return replacement
    }

    /// Suspends, resumes or deletes every token of a card at the network, as the issuer.
    /// Only the issuer can resume what the issuer suspended. Returns how many tokens changed.
    @discardableResult
    public func tokenAction(_ action: TokenLifecycleAction, pan: PrimaryAccountNumber) async throws -> Int {
        guard try await store.card(pan: pan) != nil else { throw IssuerError(.notFound, "no such card") }
        guard let network else {
            throw IssuerError(.notPermitted, "the issuer is not connected to a network")
        }
        return try await network.applyIssuerAction(action, issuerID: issuerID, pan: pan)
    }

    // MARK: - Provisioning decisions

    public func checkCard(_ request: CardCheckRequest) async throws -> CardCheckDecision {
        guard let card = try await store.card(pan: request.pan) else { return .decline(.unknownCard) }
        // Both factors are checked before answering, so the answer does not tell which one was wrong.
        let expected = try cardVerificationKey.cardVerificationValue(pan: card.pan, expiry: card.expiry)
        let cvvMatches = request.cardVerificationValue.matches(expected)
        guard cvvMatches, request.expiry == card.expiry else { return .decline(.verificationFailed) }
        if card.expiry.isExpired(at: clock.now()) { return .decline(.cardExpired) }
        guard card.status == .active, let account = try await store.account(id: card.accountID),
            account.status == .open
        else { return .decline(.notEligible) }
        let profile = profile(of: card)
        switch card.provisioningPolicy {
        case .approve:
            return .approve(profile)
        case .decline:
            return .decline(.notEligible)
        case .stepUp:
            let record = StepUpRecord(
                reference: randomReference(), pan: card.pan, profile: profile,
                destinationHint: card.stepUpDestinationHint, failedAttempts: 0,
                expiresAt: clock.now().addingTimeInterval(configuration.stepUpLifetime), finished: false)
            stepUpDeadlines.start(record.reference, now: monotonicClock.nanoseconds())
            try await store.saveStepUp(record)
            let challenge = StepUpChallenge(
                reference: record.reference, method: "sms", destinationHint: card.stepUpDestinationHint)
            return .stepUp(challenge, profile)
        }
    }

    public func verifyOneTimeCode(reference: String, code: String) async throws -> CardCheckDecision {
        await serializer.acquire("stepup:" + reference)
        defer { serializer.release("stepup:" + reference) }
        guard var record = try await store.stepUp(reference: reference) else {
            throw IssuerError(.notFound, "no such step-up challenge")
        }
        // The monotonic clock of this process decides (R6): a wall clock set an hour either way neither ends a
        // challenge early nor keeps it alive; a challenge from before a restart has no deadline here and is expired.
        guard !record.finished, stepUpDeadlines.isLive(reference, now: monotonicClock.nanoseconds()) else {
            return .decline(.challengeExpired)
        }
        if constantTimeEquals(Array(code.utf8), Array(configuration.stepUpCode.utf8)) {
            record.finished = true
            try await store.saveStepUp(record)
            return .approve(record.profile)
        }
        record.failedAttempts += 1
        if record.failedAttempts >= configuration.maxStepUpAttempts {
            record.finished = true
            try await store.saveStepUp(record)
            return .decline(.tooManyAttempts)
        }
        try await store.saveStepUp(record)
        let challenge = StepUpChallenge(reference: reference, method: "sms", destinationHint: record.destinationHint)
        return .stepUp(challenge, record.profile)
    }

    // MARK: - Authorization decisions

    public func authorize(_ request: IssuerAuthorizationRequest) async throws -> IssuerAuthorizationResponse {
        let fingerprint = Self.fingerprint(of: request)
        // Serialize per transaction (retries) and, below, per account (funds).
        await serializer.acquire("txn:" + request.networkTransactionID)
        defer { serializer.release("txn:" + request.networkTransactionID) }
        if let previous = try await store.authorization(networkTransactionID: request.networkTransactionID) {
            // A reversal came first: the authorization is declined and moves nothing.
            if previous.requestFingerprint == Self.preemptedFingerprint { return previous.response }
            guard previous.requestFingerprint == fingerprint else {
                throw IssuerError(.duplicate, "this network transaction ID was already used for another request")
            }
            return previous.response
        }
        guard let card = try await store.card(pan: request.pan) else {
            return try await record(request, fingerprint, nil, .invalidCardNumber, "no such card")
        }
        await serializer.acquire("account:" + card.accountID)
        defer { serializer.release("account:" + card.accountID) }
        guard var account = try await store.account(id: card.accountID) else {
            return try await record(request, fingerprint, nil, .doNotHonour, "the card has no account")
        }
        let (code, reason) = decide(request, card: card, account: account)
        guard code.isApproved else { return try await record(request, fingerprint, account.accountID, code, reason) }
        account.balance += account.kind == .credit ? request.amount.minorUnits : -request.amount.minorUnits
        // The balance and the decision are written in one step: a crash cannot move money without a record.
        return try await record(request, fingerprint, account.accountID, .approved, "approved", moving: account)
    }

    /// The checks, in the order a real issuer host applies them; the first failure answers.
    private func decide(
        _ request: IssuerAuthorizationRequest, card: IssuedCard, account: IssuerAccount
    )
        -> (ResponseCode, String)
    {
        switch card.status {
        case .active: break
        case .restricted: return (.restrictedCard, "the card is restricted")
        case .closed: return (.doNotHonour, "the card is closed")
        }
        if let expiry = request.expiry, expiry != card.expiry { return (.expiredCard, "the expiry does not match") }
        // The issuer's own clock decides expiry, not the time the network wrote into the request.
        if card.expiry.isExpired(at: clock.now()) { return (.expiredCard, "the card has expired") }
        if request.token != nil, !request.cryptogramVerified {
            return (.cryptographicFailure, "a token transaction arrived without a verified cryptogram")
        }
        switch account.status {
        case .open: break
        case .frozen: return (.restrictedCard, "the account is frozen")
        case .closed: return (.doNotHonour, "the account is closed")
        }
        guard card.allowedChannels.contains(request.channel) else {
            return (.notPermittedToCardholder, "the card may not be used in this channel")
        }
        guard !account.blockedCategoryCodes.contains(request.merchant.categoryCode) else {
            return (.notPermittedToCardholder, "the account blocks this merchant category")
        }
        guard request.amount.currency.numericString == account.currency else {
            return (.notPermittedToCardholder, "the account does not pay in this currency")
        }
        if let limit = account.perTransactionLimit, request.amount.minorUnits > limit {
            return (.exceedsAmountLimit, "the amount exceeds the per-transaction limit")
        }
        guard request.amount.minorUnits <= account.available else {
            return (.insufficientFunds, "insufficient funds")
        }
        return (.approved, "approved")
    }

    private func record(
        _ request: IssuerAuthorizationRequest, _ fingerprint: String, _ accountID: String?, _ code: ResponseCode,
        _ reason: String, moving account: IssuerAccount? = nil
    ) async throws -> IssuerAuthorizationResponse {
        let response = IssuerAuthorizationResponse(
            networkTransactionID: request.networkTransactionID, responseCode: code,
            approvalCode: code.isApproved ? approvalCode() : nil, reason: reason)
        var entry = IssuerAuthorizationEntry(
            response: response, accountID: accountID, amount: request.amount, requestFingerprint: fingerprint,
            decidedAt: clock.now())
        entry.maskedPAN = request.pan.masked
        try await store.saveAuthorization(entry, account: account)
        return response
    }

    // MARK: - Helpers

    private func profile(of card: IssuedCard) -> CardProfile {
        CardProfile(
            network: card.network, type: card.type, suffix: card.pan.suffix, issuerName: configuration.name,
            productName: card.productName)
    }

    private func randomReference() -> String {
        Hex.encode(random.bytes(16), lowercase: true)
    }

    /// Six characters from digits and upper-case letters, drawn without modulo bias.
    private func approvalCode() -> String {
        let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        var out: [UInt8] = []
        while out.count < 6 {
            for byte in random.bytes(8) where byte < 252 && out.count < 6 {
                out.append(alphabet[Int(byte) % alphabet.count])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// SHA-256 over the fields that define a transaction, so a retry that changed one is refused.
    static func fingerprint(of request: IssuerAuthorizationRequest) -> String {
        let fields = [
            request.networkTransactionID, request.pan.digits, String(request.amount.minorUnits),
            request.amount.currency.numericString, request.channel.rawValue, request.merchant.merchantID,
        ]
        let digest = SHA256.hash(Array(fields.joined(separator: "\u{1F}").utf8))
        return Hex.encode(digest, lowercase: true)
    }
}
