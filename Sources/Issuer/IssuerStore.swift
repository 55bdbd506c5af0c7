public import CardBasics
public import Foundation

/// A cardholder's account at the issuer.
public struct IssuerAccount: Hashable, Sendable, Codable {
    public enum Status: String, Hashable, Sendable, Codable {
        /// Usable.
        case open
        /// Temporarily blocked by the issuer: authorizations answer `62`.
        case frozen
        /// Closed: authorizations answer `05`.
        case closed
    }

    public let accountID: String
    public var holderName: String
    /// ISO 4217 numeric code; only this currency is authorized (no conversion).
    public let currency: String
    /// Credit accounts spend a credit line; debit and prepaid accounts spend their balance.
    public let kind: CardType
    /// Debit and prepaid: funds available. Credit: the amount owed. Minor units.
    public var balance: Int64
    /// Credit: the credit line. Zero for debit and prepaid.
    public var creditLimit: Int64
    /// The largest single authorization allowed, if any (answer `61` above it).
    public var perTransactionLimit: Int64?
    public var status: Status
    /// Merchant category codes this account may not pay (answer `57`).
    public var blockedCategoryCodes: Set<String>

    public init(
        accountID: String, holderName: String, currency: String, kind: CardType, balance: Int64,
        creditLimit: Int64 = 0, perTransactionLimit: Int64? = nil, status: Status = .open,
        blockedCategoryCodes: Set<String> = []
    ) {
        self.accountID = accountID
        self.holderName = holderName
        self.currency = currency
        self.kind = kind
        self.balance = balance
        self.creditLimit = creditLimit
        self.perTransactionLimit = perTransactionLimit
        self.status = status
        self.blockedCategoryCodes = blockedCategoryCodes
    }

    /// What the cardholder can still spend, in minor units.
    public var available: Int64 { kind == .credit ? creditLimit - balance : balance }
}

/// A card the issuer has issued on an account.
public struct IssuedCard: Hashable, Sendable, Codable {
    public enum Status: String, Hashable, Sendable, Codable {
        case active
        /// Restricted by the issuer (answer `62`; provisioning declined).
        case restricted
        /// Replaced by a re-issued card or closed (answer `05`; provisioning declined).
        case closed
    }

    /// How the issuer answers a provisioning check for this card (its risk decision, fixed per card here).
    public enum ProvisioningPolicy: String, Hashable, Sendable, Codable {
        case approve, stepUp, decline
    }

    public let pan: PrimaryAccountNumber
    public var expiry: CardExpiry
    public let network: CardNetwork
    public let type: CardType
    public let accountID: String
    public let cardholderName: String
    public var status: Status
    public var provisioningPolicy: ProvisioningPolicy
    /// Channels this card may be used in (answer `57` otherwise).
    public var allowedChannels: Set<PaymentChannel>
    public let productName: String
    /// Where step-up codes go, masked.
    public let stepUpDestinationHint: String

    public init(
        pan: PrimaryAccountNumber, expiry: CardExpiry, network: CardNetwork, type: CardType, accountID: String,
        cardholderName: String, status: Status = .active, provisioningPolicy: ProvisioningPolicy = .approve,
        allowedChannels: Set<PaymentChannel> = Set(PaymentChannel.allCases), productName: String,
        stepUpDestinationHint: String = "•••• 0142"
    ) {
        self.pan = pan
        self.expiry = expiry
        self.network = network
        self.type = type
        self.accountID = accountID
        self.cardholderName = cardholderName
        self.status = status
        self.provisioningPolicy = provisioningPolicy
        self.allowedChannels = allowedChannels
        self.productName = productName
        self.stepUpDestinationHint = stepUpDestinationHint
    }
}

/// One authorization decision, kept so a retry gets the same answer and for the account's history.
public struct IssuerAuthorizationEntry: Hashable, Sendable, Codable {
    public let response: IssuerAuthorizationResponse
    public let accountID: String?
    public let amount: Money
    /// A digest of the request's fields, to refuse a retry that changed them.
    public let requestFingerprint: String
    public let decidedAt: Date
    /// When a reversal cancelled this authorization (or, for a reversal that came first, blocked it).
    public var reversedAt: Date? = nil
    /// The card number masked (first six, last four), so a reconciliation report can name the card without the
    /// number. Nil for entries written before it was recorded and for reversal markers.
    public var maskedPAN: String? = nil

    public init(
        response: IssuerAuthorizationResponse, accountID: String?, amount: Money, requestFingerprint: String,
        decidedAt: Date
    ) {
        self.response = response
        self.accountID = accountID
        self.amount = amount
        self.requestFingerprint = requestFingerprint
        self.decidedAt = decidedAt
    }
}

/// A pending step-up challenge.
public struct StepUpRecord: Hashable, Sendable, Codable {
    public let reference: String
    public let pan: PrimaryAccountNumber
    public let profile: CardProfile
    /// Where the code went, masked.
    public let destinationHint: String
    public var failedAttempts: Int
    public let expiresAt: Date
    /// Set once the challenge ended (approved or declined): a challenge is single use.
    public var finished: Bool

    public init(
        reference: String, pan: PrimaryAccountNumber, profile: CardProfile, destinationHint: String,
        failedAttempts: Int, expiresAt: Date, finished: Bool
    ) {
        self.reference = reference
        self.pan = pan
        self.profile = profile
        self.destinationHint = destinationHint
        self.failedAttempts = failedAttempts
        self.expiresAt = expiresAt
        self.finished = finished
    }
}

/// The issuer's persistence. An SQLite implementation lives with the service; ``InMemoryIssuerStore`` serves
/// tests and the embedded demo. Writes are upserts keyed by the record's identifier.
public protocol IssuerStore: Sendable {
    func account(id: String) async throws -> IssuerAccount?
    func saveAccount(_ account: IssuerAccount) async throws
    func card(pan: PrimaryAccountNumber) async throws -> IssuedCard?
    func saveCard(_ card: IssuedCard) async throws
    func allCards() async throws -> [IssuedCard]
    func authorization(networkTransactionID: String) async throws -> IssuerAuthorizationEntry?
    func saveAuthorization(_ entry: IssuerAuthorizationEntry) async throws
    /// Stores `entry` and, when given, `account` in one durable step (an authorization or a reversal and
    /// the balance it moves).
    func saveAuthorization(_ entry: IssuerAuthorizationEntry, account: IssuerAccount?) async throws
    /// Every authorization entry decided before `date`, oldest first (reconciliation looks for open holds).
    func authorizations(decidedBefore date: Date) async throws -> [IssuerAuthorizationEntry]
    func stepUp(reference: String) async throws -> StepUpRecord?
    func saveStepUp(_ record: StepUpRecord) async throws
}

/// An ``IssuerStore`` in memory, for tests and the embedded demo.
public final class InMemoryIssuerStore: IssuerStore, @unchecked Sendable {
    // Every property is guarded by `lock`.
    private let lock = NSLock()
    private var accounts: [String: IssuerAccount] = [:]
    private var cards: [String: IssuedCard] = [:]
    private var authorizations: [String: IssuerAuthorizationEntry] = [:]
    private var stepUps: [String: StepUpRecord] = [:]

    public init() {}

    public func account(id: String) async throws -> IssuerAccount? { lock.withLock { accounts[id] } }
    public func saveAccount(_ account: IssuerAccount) async throws {
        lock.withLock { accounts[account.accountID] = account }
    }
    public func card(pan: PrimaryAccountNumber) async throws -> IssuedCard? { lock.withLock { cards[pan.digits] } }
    public func saveCard(_ card: IssuedCard) async throws { lock.withLock { cards[card.pan.digits] = card } }
    public func allCards() async throws -> [IssuedCard] {
        lock.withLock { cards.values.sorted { $0.pan.digits < $1.pan.digits } }
    }
    public func authorization(networkTransactionID: String) async throws -> IssuerAuthorizationEntry? {
        lock.withLock { authorizations[networkTransactionID] }
    }
    public func saveAuthorization(_ entry: IssuerAuthorizationEntry) async throws {
        lock.withLock { authorizations[entry.response.networkTransactionID] = entry }
    }
    public func saveAuthorization(_ entry: IssuerAuthorizationEntry, account: IssuerAccount?) async throws {
        lock.withLock {
            if let account { accounts[account.accountID] = account }
            authorizations[entry.response.networkTransactionID] = entry
        }
    }
    public func authorizations(decidedBefore date: Date) async throws -> [IssuerAuthorizationEntry] {
        lock.withLock { authorizations.values.filter { $0.decidedAt < date }.sorted { $0.decidedAt < $1.decidedAt } }
    }
    public func stepUp(reference: String) async throws -> StepUpRecord? { lock.withLock { stepUps[reference] } }
    public func saveStepUp(_ record: StepUpRecord) async throws { lock.withLock { stepUps[record.reference] = record } }
}
