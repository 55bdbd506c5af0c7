public import CardBasics
public import Foundation
public import Issuer

/// A merchant's account at the acquirer.
public struct MerchantAccount: Hashable, Sendable, Codable {
    public enum Status: String, Hashable, Sendable, Codable {
        case active, suspended
    }

    public let merchantID: String
    public let name: String
    /// ISO 18245 merchant category code.
    public let categoryCode: String
    /// ISO 3166-1 numeric country code.
    public let countryCode: String
    /// The terminals registered to the merchant (NFC payments come only from these).
    public var terminalIDs: Set<String>
    public var status: Status

    public init(
        merchantID: String, name: String, categoryCode: String, countryCode: String, terminalIDs: Set<String> = [],
        status: Status = .active
    ) {
        self.merchantID = merchantID
        self.name = name
        self.categoryCode = categoryCode
        self.countryCode = countryCode
        self.terminalIDs = terminalIDs
        self.status = status
    }
}

/// The outcome of an authorization as the acquirer reports and keeps it: the card number masked.
public struct AcquirerAuthorizationResult: Hashable, Sendable, Codable {
    /// The acquirer's reference for this authorization.
    public let authorizationID: String
    public let merchantID: String
    /// The DPAN masked: first six and last four digits. The acquirer keeps nothing more.
    public let maskedPAN: String
    public let amount: Money
    public let responseCode: ResponseCode
    public let approvalCode: String?
    /// The network's reason for a decline, if any.
    public let declineReason: String?
    public let decidedAt: Date

    public var isApproved: Bool { responseCode.isApproved }
}

/// What the acquirer stores per authorization: the idempotency key, a fingerprint of the request and the
/// result. No full card number.
public struct AcquirerAuthorizationRecord: Hashable, Sendable, Codable {
    public let idempotencyKey: String
    /// SHA-256 over the request's fields with the PAN masked, hex.
    public let requestFingerprint: String
    public let result: AcquirerAuthorizationResult

    public init(idempotencyKey: String, requestFingerprint: String, result: AcquirerAuthorizationResult) {
        self.idempotencyKey = idempotencyKey
        self.requestFingerprint = requestFingerprint
        self.result = result
    }
}

/// The acquirer's persistence. An SQLite implementation lives with the service; ``InMemoryAcquirerStore``
/// serves tests and the embedded demo.
public protocol AcquirerStore: Sendable {
    func merchant(id: String) async throws -> MerchantAccount?
    func saveMerchant(_ merchant: MerchantAccount) async throws
    /// The account that may charge for the Apple-style merchant ID `appleMerchantID`, if any.
    func merchantID(forAppleMerchantID appleMerchantID: String) async throws -> String?
    /// Lets `merchantID` charge for `appleMerchantID`; throws if another account already does.
    func saveAppleMerchantID(_ appleMerchantID: String, merchantID: String) async throws
    func authorization(idempotencyKey: String) async throws -> AcquirerAuthorizationRecord?
    func saveAuthorization(_ record: AcquirerAuthorizationRecord) async throws
    func reversal(idempotencyKey: String) async throws -> AcquirerReversalRecord?
    func saveReversal(_ record: AcquirerReversalRecord) async throws
    /// Records that an authorization was sent to the network. ``saveAuthorization(_:)`` and
    /// ``saveReversal(_:)`` of the same key remove it, in their own transaction.
    func savePendingAuthorization(_ pending: AcquirerPendingAuthorization) async throws
    /// The authorizations sent before `date` that have neither a result nor a reversal, oldest first.
    func pendingAuthorizations(sentBefore date: Date) async throws -> [AcquirerPendingAuthorization]
}

/// An authorization the acquirer sent to the network and holds no result for yet: what reconciliation
/// reverses when its client never comes back for the answer. The card number only masked.
public struct AcquirerPendingAuthorization: Hashable, Sendable, Codable {
    public let idempotencyKey: String
    public let origin: AcquirerAuthorizationRequest.Origin
    public let merchantID: String
    public let maskedPAN: String
    public let amount: Money
    public let sentAt: Date

    public init(
        idempotencyKey: String, origin: AcquirerAuthorizationRequest.Origin, merchantID: String, maskedPAN: String,
        amount: Money, sentAt: Date
    ) {
        self.idempotencyKey = idempotencyKey
        self.origin = origin
        self.merchantID = merchantID
        self.maskedPAN = maskedPAN
        self.amount = amount
        self.sentAt = sentAt
    }
}

/// An ``AcquirerStore`` in memory.
public final class InMemoryAcquirerStore: AcquirerStore, @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var merchants: [String: MerchantAccount] = [:]
    private var appleMerchantIDs: [String: String] = [:]
    private var authorizations: [String: AcquirerAuthorizationRecord] = [:]
    private var reversals: [String: AcquirerReversalRecord] = [:]
    private var pending: [String: AcquirerPendingAuthorization] = [:]

    public init() {}

    public func merchant(id: String) async throws -> MerchantAccount? { lock.withLock { merchants[id] } }
    public func saveMerchant(_ merchant: MerchantAccount) async throws {
        lock.withLock { merchants[merchant.merchantID] = merchant }
    }
    public func merchantID(forAppleMerchantID appleMerchantID: String) async throws -> String? {
        lock.withLock { appleMerchantIDs[appleMerchantID] }
    }
    public func saveAppleMerchantID(_ appleMerchantID: String, merchantID: String) async throws {
        try lock.withLock {
            if let owner = appleMerchantIDs[appleMerchantID], owner != merchantID {
                throw AcquirerError(.duplicate, "another merchant account already charges for this merchant ID")
            }
            appleMerchantIDs[appleMerchantID] = merchantID
        }
    }
    public func authorization(idempotencyKey: String) async throws -> AcquirerAuthorizationRecord? {
        lock.withLock { authorizations[idempotencyKey] }
    }
    public func saveAuthorization(_ record: AcquirerAuthorizationRecord) async throws {
        lock.withLock {
            authorizations[record.idempotencyKey] = record
            pending[record.idempotencyKey] = nil
        }
    }

    public func reversal(idempotencyKey: String) async throws -> AcquirerReversalRecord? {
        lock.withLock { reversals[idempotencyKey] }
    }
    public func saveReversal(_ record: AcquirerReversalRecord) async throws {
        lock.withLock {
            reversals[record.idempotencyKey] = record
            pending[record.idempotencyKey] = nil
        }
    }
    public func savePendingAuthorization(_ record: AcquirerPendingAuthorization) async throws {
        lock.withLock { pending[record.idempotencyKey] = record }
    }
    public func pendingAuthorizations(sentBefore date: Date) async throws -> [AcquirerPendingAuthorization] {
        lock.withLock {
            pending.values.filter { $0.sentAt < date }.sorted {
                ($0.sentAt, $0.idempotencyKey) < ($1.sentAt, $1.idempotencyKey)
            }
        }
    }

    /// Every stored authorization, for inspection.
    public var allAuthorizations: [AcquirerAuthorizationRecord] {
        lock.withLock { authorizations.values.sorted { $0.idempotencyKey < $1.idempotencyKey } }
    }
}
