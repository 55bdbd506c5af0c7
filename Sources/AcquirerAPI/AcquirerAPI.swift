public import AccessPolicy

/// The wire format of the network's acquiring routes (JSON over HTTPS, the caller presenting a client
/// certificate with role `acquiring`), for its two kinds of callers: terminals, which send their terminal ID
/// and STAN, and merchant servers, which send an idempotency key.
///
/// The callers import this module and nothing of the network's; the network reads the same JSON into its own
/// types, and a test binds the two. Byte strings travel as arrays of numbers (`JSONEncoder`'s form for
/// `[UInt8]`). Every request also carries the header `Idempotency-Key` (``AuthorizationRequest/idempotencyHeader``).
public enum AcquirerAPI {
    /// The acquiring routes of the network service.
    public enum Route {
        /// `POST`: ``AuthorizationRequest`` → ``AuthorizationAnswer``.
        public static let authorizations = "/v1/acquirer/authorizations"
        /// `POST`: ``ReversalRequest`` → ``ReversalAnswer``.
        public static let reversals = "/v1/acquirer/reversals"
    }

    /// Who may call the acquiring routes: a client certificate with role `acquiring` that names a terminal (and
    /// its merchant) or a merchant. A terminal's body names that terminal (`terminalID`) and its merchant
    /// (`merchantID`; the acquirer also checks the terminal belongs to it) and carries no idempotency key; a
    /// merchant server's body names that merchant (`merchantID`) and no terminal or STAN. So each caller's
    /// idempotency keys (a terminal's ID + STAN, a merchant's key under its merchant ID) are its own: nobody can
    /// replay or preempt another's.
    public static let callers = AccessPolicy.identified(
        role: CallerRoles.acquiring,
        IdentityBinding(
            kind: CallerIdentity.terminal, bodyFields: ["terminalID"], ownerBodyFields: ["merchantID"],
            absentBodyFields: ["idempotencyKey"]),
        IdentityBinding(
            kind: CallerIdentity.merchant, bodyFields: ["merchantID"], absentBodyFields: ["terminalID", "stan"]))

    /// The acquiring routes with their policy, as the network registers them.
    public enum Declared {
        public static let authorizations = DeclaredRoute("POST", Route.authorizations, callers)
        public static let reversals = DeclaredRoute("POST", Route.reversals, callers)
        public static let all = [authorizations, reversals]
    }

    /// An amount in minor units with its ISO 4217 numeric currency (three digits).
    public struct Money: Codable, Sendable, Hashable {
        public let minorUnits: Int64
        public let currency: String

        public init(minorUnits: Int64, currency: String) {
            self.minorUnits = minorUnits
            self.currency = currency
        }
    }

    /// A card's expiry month.
    public struct Expiry: Codable, Sendable, Hashable {
        public let year: Int
        public let month: Int

        public init(year: Int, month: Int) {
            self.year = year
            self.month = month
        }
    }

    /// The cryptogram and the data it covers: a contactless ARQC (`proximityARQC`, with field 55) or an in-app
    /// remote cryptogram (`remote`, with `RemoteTransactionData`).
    public struct Cryptogram: Codable, Sendable, Hashable {
        public let kind: String
        public let cryptogram: [UInt8]
        public let applicationTransactionCounter: UInt16
        public let transactionData: [UInt8]

        public init(kind: String, cryptogram: [UInt8], applicationTransactionCounter: UInt16, transactionData: [UInt8])
        {
            self.kind = kind
            self.cryptogram = cryptogram
            self.applicationTransactionCounter = applicationTransactionCounter
            self.transactionData = transactionData
        }
    }

    /// `POST /v1/acquirer/authorizations`. Holds the device account number in clear (the acquirer needs it):
    /// its description, debug description and mirror show it masked.
    public struct AuthorizationRequest: Codable, Sendable, CustomStringConvertible, CustomDebugStringConvertible,
        CustomReflectable
    {
        public let merchantID: String
        public let terminalID: String?
        public let stan: String?
        public let idempotencyKey: String?
        public let pan: String
        public let expiry: Expiry?
        public let amount: Money
        /// `contactless` or `inApp`.
        public let channel: String
        public let cryptogram: Cryptogram
        /// ISO 8583 DE 23 and DE 22, from terminals, for an acquirer that reads them.
        public let panSequenceNumber: Int?
        public let posEntryMode: String?
        /// The token's ECI, from merchant servers, for an acquirer that reads it.
        public let eci: String?
        /// From merchant servers: the Apple-style merchant ID (`merchant.…`) the token was made for. The acquirer
        /// refuses (403, `merchantIDNotAllowed`) one the merchant's account may not charge for, and the network
        /// declines (`03`, `merchantMismatch`) a cryptogram made for another merchant ID.
        public let appleMerchantID: String?

        /// A terminal's authorization: its terminal ID and STAN are the acquirer's idempotency key.
        public init(
            merchantID: String, terminalID: String, stan: String, pan: String, expiry: Expiry?, amount: Money,
            cryptogram: Cryptogram, panSequenceNumber: Int, posEntryMode: String
        ) {
            self.merchantID = merchantID
            self.terminalID = terminalID
            self.stan = stan
            idempotencyKey = nil
            self.pan = pan
            self.expiry = expiry
            self.amount = amount
            channel = "contactless"
            self.cryptogram = cryptogram
            self.panSequenceNumber = panSequenceNumber
            self.posEntryMode = posEntryMode
            eci = nil
            appleMerchantID = nil
        }

        /// A merchant server's in-app (or, with `channel` `web`, web) charge, identified by its idempotency key.
        public init(
            merchantID: String, idempotencyKey: String, pan: String, expiry: Expiry, amount: Money,
            cryptogram: Cryptogram, eci: String?, appleMerchantID: String? = nil, channel: String = "inApp"
        ) {
            self.merchantID = merchantID
            terminalID = nil
            stan = nil
            self.idempotencyKey = idempotencyKey
            self.pan = pan
            self.expiry = expiry
            self.amount = amount
            self.channel = channel
            self.cryptogram = cryptogram
            panSequenceNumber = nil
            posEntryMode = nil
            self.eci = eci
            self.appleMerchantID = appleMerchantID
        }

        public var description: String {
            "authorization \(merchantID) …\(pan.suffix(4)) \(amount.minorUnits) \(amount.currency) (\(channel))"
        }
        public var debugDescription: String { description }
        public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
    }

    /// `POST /v1/acquirer/reversals`: the authorization's own terminal ID and STAN, or idempotency key, and
    /// amount; `reason` says why (`timeout`, `recovery`, …).
    public struct ReversalRequest: Codable, Sendable, Hashable {
        public let merchantID: String
        public let terminalID: String?
        public let stan: String?
        public let idempotencyKey: String?
        public let amount: Money
        public let reason: String

        /// A terminal's reversal.
        public init(merchantID: String, terminalID: String, stan: String, amount: Money, reason: String) {
            self.merchantID = merchantID
            self.terminalID = terminalID
            self.stan = stan
            idempotencyKey = nil
            self.amount = amount
            self.reason = reason
        }

        /// A merchant server's reversal.
        public init(merchantID: String, idempotencyKey: String, amount: Money, reason: String) {
            self.merchantID = merchantID
            terminalID = nil
            stan = nil
            self.idempotencyKey = idempotencyKey
            self.amount = amount
            self.reason = reason
        }
    }

    /// What callers read of the acquirer's decision (the network sends more).
    public struct AuthorizationAnswer: Codable, Sendable, Hashable {
        public let authorizationID: String?
        /// ISO 8583 field 39: `00` approves.
        public let responseCode: String
        public let approvalCode: String?
        public let declineReason: String?
        /// The card number masked by the acquirer (first six, last four).
        public let maskedPAN: String?

        public var isApproved: Bool { responseCode == "00" }

        public init(
            authorizationID: String?, responseCode: String, approvalCode: String?, declineReason: String?,
            maskedPAN: String?
        ) {
            self.authorizationID = authorizationID
            self.responseCode = responseCode
            self.approvalCode = approvalCode
            self.declineReason = declineReason
            self.maskedPAN = maskedPAN
        }
    }

    /// What callers read of a reversal's outcome: whether an authorization was found and cancelled (false: it
    /// never arrived, so there is nothing to undo).
    public struct ReversalAnswer: Codable, Sendable, Hashable {
        public let reversed: Bool

        public init(reversed: Bool) { self.reversed = reversed }
    }
}
