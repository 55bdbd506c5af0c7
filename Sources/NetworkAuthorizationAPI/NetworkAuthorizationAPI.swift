public import Foundation

/// What an acquirer asks of the card network it routes to: authorize a token transaction, and reverse one.
///
/// The acquirer imports this module and nothing of the network's; the token service implements
/// ``AcquiringNetwork`` and reads these values into its own types. The card number, expiry, amount and merchant
/// travel as plain values (digits, ISO codes, minor units), as in the project's other contract modules, so that no
/// party's types cross the boundary; the cryptogram travels as the ``CryptogramSubmission`` both sides share.
public enum NetworkAuthorizationAPI {
    /// The decline reason of an authorization that arrived after its own reversal (response code `12`).
    public static let reversedBeforeAuthorization = "reversedBeforeAuthorization"

    /// An amount in minor units with its ISO 4217 numeric currency (three digits).
    public struct Money: Hashable, Sendable {
        public let minorUnits: Int64
        public let currency: String

        public init(minorUnits: Int64, currency: String) {
            self.minorUnits = minorUnits
            self.currency = currency
        }
    }

    /// A card's expiry month.
    public struct Expiry: Hashable, Sendable {
        public let year: Int
        public let month: Int

        public init(year: Int, month: Int) {
            self.year = year
            self.month = month
        }
    }

    /// The merchant as the acquirer describes it (ISO 8583 DE 42, DE 43, DE 18 and the country).
    public struct Merchant: Hashable, Sendable {
        public let merchantID: String
        public let name: String
        /// ISO 18245 merchant category code, four digits.
        public let categoryCode: String
        /// ISO 3166-1 numeric country code, three digits.
        public let countryCode: String
        /// The Apple-style merchant ID (`merchant.…`) an in-app or web payment is charged for, which the acquirer
        /// has checked this merchant's account may charge for; nil for card-present payments. The token service
        /// declines a remote cryptogram made for another merchant ID.
        public let appleMerchantID: String?

        public init(
            merchantID: String, name: String, categoryCode: String, countryCode: String, appleMerchantID: String? = nil
        ) {
            self.merchantID = merchantID
            self.name = name
            self.categoryCode = categoryCode
            self.countryCode = countryCode
            self.appleMerchantID = appleMerchantID
        }
    }

    /// An authorization as the acquirer sends it: the token (DPAN) the device presented, never an FPAN. Its
    /// description, debug description and mirror show neither the card number nor the cryptogram.
    public struct AuthorizationRequest: Hashable, Sendable, CustomStringConvertible, CustomDebugStringConvertible,
        CustomReflectable
    {
        public let acquirerID: String
        /// Unique per acquirer and transaction; a retry carries the same value.
        public let transactionID: String
        /// The DPAN's digits.
        public let pan: String
        public let expiry: Expiry?
        public let amount: Money
        /// `contactless`, `inApp`, `web`, `magneticStripe` or `manualEntry`.
        public let channel: String
        public let merchant: Merchant
        public let cryptogram: CryptogramSubmission?
        public let transmittedAt: Date

        public init(
            acquirerID: String, transactionID: String, pan: String, expiry: Expiry?, amount: Money, channel: String,
            merchant: Merchant, cryptogram: CryptogramSubmission?, transmittedAt: Date
        ) {
            self.acquirerID = acquirerID
            self.transactionID = transactionID
            self.pan = pan
            self.expiry = expiry
            self.amount = amount
            self.channel = channel
            self.merchant = merchant
            self.cryptogram = cryptogram
            self.transmittedAt = transmittedAt
        }

        public var description: String {
            "network authorization \(acquirerID):\(transactionID) …\(pan.suffix(4)) \(amount.minorUnits) "
                + "\(amount.currency) (\(channel))"
        }
        public var debugDescription: String { description }
        public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
    }

    /// The network's answer: no card number at all (neither the FPAN it looked up nor the DPAN it was sent).
    public struct AuthorizationAnswer: Hashable, Sendable {
        public let transactionID: String
        /// The ISO 8583 response code, two characters: `00` approves.
        public let responseCode: String
        /// The issuer's approval code; present only when approved.
        public let approvalCode: String?
        /// Why the network declined or passed on the issuer's decline (`unknownToken`, `issuerDeclined`, …);
        /// nil when approved.
        public let declineReason: String?
        /// The last four digits of the card behind the token (for receipts), when the token was found.
        public let cardSuffix: String?

        public init(
            transactionID: String, responseCode: String, approvalCode: String?, declineReason: String?,
            cardSuffix: String?
        ) {
            self.transactionID = transactionID
            self.responseCode = responseCode
            self.approvalCode = approvalCode
            self.declineReason = declineReason
            self.cardSuffix = cardSuffix
        }
    }

    /// A reversal as the acquirer sends it: cancel the authorization it sent with this transaction ID.
    public struct ReversalRequest: Hashable, Sendable {
        public let acquirerID: String
        /// The ``AuthorizationRequest/transactionID`` of the authorization to cancel.
        public let transactionID: String
        /// The authorization's amount.
        public let amount: Money
        public let transmittedAt: Date

        public init(acquirerID: String, transactionID: String, amount: Money, transmittedAt: Date) {
            self.acquirerID = acquirerID
            self.transactionID = transactionID
            self.amount = amount
            self.transmittedAt = transmittedAt
        }
    }

    /// The network's answer to a reversal.
    public struct ReversalAnswer: Hashable, Sendable {
        public let transactionID: String
        /// `released` (an approved authorization was cancelled and its funds released), `notApproved` (it was
        /// declined: nothing to release) or `preempted` (it had not arrived: it will be declined with `12`).
        public let outcome: String

        public init(transactionID: String, outcome: String) {
            self.transactionID = transactionID
            self.outcome = outcome
        }
    }

    /// Why the network did not answer a request. Equality compares the code; messages hold no card number.
    public struct Failure: Error, Hashable, CustomStringConvertible, Sendable {
        public struct Code: Hashable, Sendable, CustomStringConvertible {
            private let name: String
            private init(_ name: String) { self.name = name }

            /// A field is malformed; the same request will be refused again.
            public static let invalidRequest = Code("invalidRequest")
            /// The transaction ID was used for a different request (another amount for a reversal).
            public static let idempotencyConflict = Code("idempotencyConflict")
            /// The network could not decide now (unreachable, its store or the issuer failed); a retry with the
            /// same transaction ID is safe.
            public static let unavailable = Code("unavailable")

            public var description: String { name }
        }

        public let code: Code
        public let message: String

        public init(_ code: Code, _ message: String) {
            self.code = code
            self.message = message
        }

        public var description: String { "\(code): \(message)" }
        public static func == (a: Self, b: Self) -> Bool { a.code == b.code }
        public func hash(into hasher: inout Hasher) { hasher.combine(code) }
    }
}

/// The card network as an acquirer reaches it: the token check, the cryptogram's verification, DPAN → FPAN, the
/// issuer's decision, and reversals. The token service implements it; tests substitute their own.
///
/// What every implementation guarantees:
/// - Idempotency per acquirer and transaction ID: a retry of an authorization or a reversal gets the first answer,
///   never a second decision; the same transaction ID with a different request throws
///   ``NetworkAuthorizationAPI/Failure/Code/idempotencyConflict``.
/// - A decline is an answer, not an error: any response code other than `00` comes back as an
///   ``NetworkAuthorizationAPI/AuthorizationAnswer`` with a decline reason. An error means the network did not
///   decide, so the acquirer may retry with the same transaction ID.
/// - No card number in an answer, an error or a description: the FPAN stays inside the network, and the answer
///   does not repeat the DPAN.
/// - An authorization that arrives after its own reversal is declined with `12` (`reversedBeforeAuthorization`).
public protocol AcquiringNetwork: Sendable {
    /// Decides an authorization: approved (`00`, with an approval code) or declined (with a reason).
    func authorize(
        _ request: NetworkAuthorizationAPI.AuthorizationRequest
    ) async throws(NetworkAuthorizationAPI.Failure) -> NetworkAuthorizationAPI.AuthorizationAnswer

    /// Cancels an authorization this acquirer sent, once; the issuer's ledger decides whether money moves.
    func reverse(
        _ request: NetworkAuthorizationAPI.ReversalRequest
    ) async throws(NetworkAuthorizationAPI.Failure) -> NetworkAuthorizationAPI.ReversalAnswer
}
