public import CardBasics
public import Foundation
public import Issuer
public import NetworkAuthorizationAPI
import OrchardCrypto

/// An authorization as the token service reads the acquirer's ``NetworkAuthorizationAPI/AuthorizationRequest``:
/// the DPAN, never an FPAN.
public struct NetworkAuthorizationRequest: Hashable, Sendable, Codable {
    public let acquirerID: String
    /// Unique per acquirer and transaction; a retry carries the same value and gets the first answer.
    public let transactionID: String
    /// The token (DPAN) the device presented.
    public let pan: PrimaryAccountNumber
    /// The expiry the device presented (the token's), if any.
    public let expiry: CardExpiry?
    public let amount: Money
    public let channel: PaymentChannel
    public let merchant: MerchantInfo
    /// The Apple-style merchant ID (`merchant.…`) the acquirer charges an in-app or web payment for, having
    /// checked that the merchant's account may charge for it. A cryptogram that covers a merchant ID is declined
    /// unless it is this one.
    public let appleMerchantID: String?
    public let cryptogram: CryptogramSubmission?
    public let transmittedAt: Date

    public init(
        acquirerID: String, transactionID: String, pan: PrimaryAccountNumber, expiry: CardExpiry?, amount: Money,
        channel: PaymentChannel, merchant: MerchantInfo, appleMerchantID: String? = nil,
        cryptogram: CryptogramSubmission?, transmittedAt: Date
    ) {
        self.acquirerID = acquirerID
        self.transactionID = transactionID
        self.pan = pan
        self.expiry = expiry
        self.amount = amount
        self.channel = channel
        self.merchant = merchant
        self.appleMerchantID = appleMerchantID
        self.cryptogram = cryptogram
        self.transmittedAt = transmittedAt
    }
}

/// Why the network declined (or passed on the issuer's decline). Extensible; explains the response code.
public struct NetworkDeclineReason: Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    public static let unknownToken = NetworkDeclineReason(rawValue: "unknownToken")
    public static let tokenSuspended = NetworkDeclineReason(rawValue: "tokenSuspended")
    public static let tokenDeleted = NetworkDeclineReason(rawValue: "tokenDeleted")
    public static let tokenExpired = NetworkDeclineReason(rawValue: "tokenExpired")
    public static let expiryMismatch = NetworkDeclineReason(rawValue: "expiryMismatch")
    /// The channel is outside the token's domain controls (or is magnetic stripe / key entry).
    public static let domainNotAllowed = NetworkDeclineReason(rawValue: "domainNotAllowed")
    public static let cryptogramMissing = NetworkDeclineReason(rawValue: "cryptogramMissing")
    /// The cryptogram's kind does not fit the channel (a proximity ARQC online, a remote one at a terminal).
    public static let cryptogramKindMismatch = NetworkDeclineReason(rawValue: "cryptogramKindMismatch")
    public static let cryptogramInvalid = NetworkDeclineReason(rawValue: "cryptogramInvalid")
    /// The cryptogram verified but covers another amount, currency or ATC than the request.
    public static let cryptogramDataMismatch = NetworkDeclineReason(rawValue: "cryptogramDataMismatch")
    /// The cryptogram verified but was made for another merchant than the one charging (response code `03`): a
    /// token made for merchant A, charged through merchant B's acquiring account.
    public static let merchantMismatch = NetworkDeclineReason(rawValue: "merchantMismatch")
    public static let atcReplayed = NetworkDeclineReason(rawValue: "atcReplayed")
    public static let atcStale = NetworkDeclineReason(rawValue: "atcStale")
    public static let atcTooFarAhead = NetworkDeclineReason(rawValue: "atcTooFarAhead")
    public static let issuerUnavailable = NetworkDeclineReason(rawValue: "issuerUnavailable")
    /// The issuer declined; its response code is passed on.
    public static let issuerDeclined = NetworkDeclineReason(rawValue: "issuerDeclined")

    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
    public var description: String { rawValue }
}

/// The network's answer: the DPAN again (the FPAN swapped back out), the response code and, when approved,
/// the issuer's approval code.
public struct NetworkAuthorizationResponse: Hashable, Sendable, Codable {
    public let transactionID: String
    public let pan: PrimaryAccountNumber
    public let responseCode: ResponseCode
    public let approvalCode: String?
    /// Nil when approved.
    public let declineReason: NetworkDeclineReason?
    /// Last four digits of the card behind the token (for receipts), when the token was found.
    public let cardSuffix: String?

    public init(
        transactionID: String, pan: PrimaryAccountNumber, responseCode: ResponseCode, approvalCode: String?,
        declineReason: NetworkDeclineReason?, cardSuffix: String?
    ) {
        self.transactionID = transactionID
        self.pan = pan
        self.responseCode = responseCode
        self.approvalCode = approvalCode
        self.declineReason = declineReason
        self.cardSuffix = cardSuffix
    }
}

extension TokenService {
    /// Authorizes a token transaction: token state and expiry, domain controls, cryptogram (through the HSM's
    /// verifier for its kind), the ATC window, then detokenisation, the issuer's decision, and the DPAN swapped
    /// back into the response.
    ///
    /// Exactly once per acquirer and transaction ID, across crashes (``AuthorizationStep``): the ATC is recorded
    /// in one transaction with a record that the authorization started; a retry of the same request that finds
    /// that record resumes at the issuer, which answers a transaction ID it knows with its first answer; the
    /// final answer then replaces the started record, and every later retry gets it. Another request with the
    /// same transaction ID is refused (``TokenServiceError/Code/idempotencyConflict``).
    public func authorize(_ request: NetworkAuthorizationRequest) async throws -> NetworkAuthorizationResponse {
        let scope = "authorization:" + request.acquirerID
        let key = request.transactionID
        guard (1...200).contains(key.utf8.count) else {
            throw TokenServiceError(.invalidRequest, "an idempotency key is 1 to 200 bytes")
        }
        let fingerprint = Self.authorizationFingerprint(request)
        // The same serializer key as the reversal and the reconciliation of this transaction take.
        await serializer.acquire(scope + "\u{0}" + key)
        defer { serializer.release(scope + "\u{0}" + key) }
        var started: StartedAuthorization?
        if let stored = try await vault.idempotencyRecord(scope: scope, key: key) {
            guard stored.requestFingerprint == fingerprint else {
                throw TokenServiceError(.idempotencyConflict, "this idempotency key was used for a different request")
            }
            guard let resumable = stored.started else {
                do {
                    return try JSONDecoder().decode(NetworkAuthorizationResponse.self, from: Data(stored.response))
                } catch {
                    throw TokenServiceError(.storeFailure, "a stored response could not be decoded")
                }
            }
            started = resumable
        }
        let response: NetworkAuthorizationResponse
        if try await reversalRecorded(acquirerID: request.acquirerID, transactionID: key) {
            // A reversal came first (or reconciliation released a hold whose answer was lost): declined, nothing
            // checked, nothing asked of the issuer again.
            response = NetworkAuthorizationResponse(
                transactionID: key, pan: request.pan, responseCode: .invalidTransaction, approvalCode: nil,
                declineReason: .reversedBeforeAuthorization, cardSuffix: nil)
        } else if let started {
            response = try await resume(request, started)
        } else {
            await serializer.acquire("token:" + request.pan.digits)
            defer { serializer.release("token:" + request.pan.digits) }
            response = try await decide(request, scope: scope, fingerprint: fingerprint)
        }
        try await saveAnswer(response, scope: scope, key: key, fingerprint: fingerprint)
        await probe?.reached(.networkAnswerRecorded, transactionID: key)
        return response
    }

    /// SHA-256 over what defines the transaction; the acquirer's transmission time is not part of it, so a
    /// retry sent later is the same request.
    static func authorizationFingerprint(_ request: NetworkAuthorizationRequest) -> String {
        var fields: [[UInt8]] = [
            Array(request.pan.digits.utf8), Array((request.expiry?.yymm ?? "").utf8),
            Array(String(request.amount.minorUnits).utf8), Array(request.amount.currency.numericString.utf8),
            Array(request.channel.rawValue.utf8), Array(request.merchant.merchantID.utf8),
        ]
        // Only when present, so that the fingerprints of requests without it stay as they were.
        if let appleMerchantID = request.appleMerchantID { fields.append(Array(appleMerchantID.utf8)) }
        if let cryptogram = request.cryptogram {
            fields += [
                Array(cryptogram.kind.rawValue.utf8), cryptogram.cryptogram,
                [
                    UInt8(cryptogram.applicationTransactionCounter >> 8),
                    UInt8(cryptogram.applicationTransactionCounter & 0xFF),
                ],
                cryptogram.transactionData,
            ]
        }
        return fingerprint(fields)
    }

    private func decide(
        _ request: NetworkAuthorizationRequest, scope: String, fingerprint: String, attempt: Int = 1
    ) async throws -> NetworkAuthorizationResponse {
        func decline(
            _ code: ResponseCode, _ reason: NetworkDeclineReason, suffix: String? = nil
        )
            -> NetworkAuthorizationResponse
        {
            NetworkAuthorizationResponse(
                transactionID: request.transactionID, pan: request.pan, responseCode: code, approvalCode: nil,
                declineReason: reason, cardSuffix: suffix)
        }
        guard var token = try await vault.token(dpan: request.pan) else {
            return decline(.invalidCardNumber, .unknownToken)
        }
        switch token.state {
        case .active: break
        case .suspended: return decline(.restrictedCard, .tokenSuspended)
        case .deleted: return decline(.restrictedCard, .tokenDeleted)
        }
        // The token service's own clock decides expiry, not a time an upstream party wrote.
        if token.tokenExpiry.isExpired(at: clock.now()) { return decline(.expiredCard, .tokenExpired) }
        if let expiry = request.expiry, expiry != token.tokenExpiry { return decline(.expiredCard, .expiryMismatch) }
        guard token.domainControls.allows(request.channel) else {
            return decline(.notPermittedToCardholder, .domainNotAllowed)
        }
        guard let cryptogram = request.cryptogram else { return decline(.cryptographicFailure, .cryptogramMissing) }
        let expectedKind: CryptogramKind = request.channel == .contactless ? .proximityARQC : .remote
        guard cryptogram.kind == expectedKind else { return decline(.cryptographicFailure, .cryptogramKindMismatch) }

        let atc = cryptogram.applicationTransactionCounter
        switch token.atcWindow.check(atc, policy: configuration.atcPolicy) {
        case .fresh: break
        case .replayed: return decline(.cryptographicFailure, .atcReplayed)
        case .stale: return decline(.cryptographicFailure, .atcStale)
        case .tooFarAhead: return decline(.cryptographicFailure, .atcTooFarAhead)
        }
        guard let range = ranges.first(where: { $0.rangeID == token.rangeID }) else {
            throw TokenServiceError(.configuration, "the token's range is no longer configured")
        }
        let verification = try keyStore.verifyCryptogram(
            cryptogram, issuerMasterKey: cryptogram.kind == .proximityARQC ? range.proximityKey : range.remoteKey,
            pan: token.dpan, panSequenceNumber: token.panSequenceNumber)
        guard case .valid(let covered) = verification else {
            return decline(.cryptographicFailure, .cryptogramInvalid)
        }
        guard covered.amount == request.amount, covered.applicationTransactionCounter == atc else {
            return decline(.cryptographicFailure, .cryptogramDataMismatch)
        }
        // A genuine cryptogram for another merchant: declined before its ATC is used, so the merchant it was made
        // for can still charge it.
        if let coveredMerchant = covered.merchantIdentifierHash {
            guard let appleMerchantID = request.appleMerchantID,
                constantTimeEquals(coveredMerchant, SHA256.hash(Array(appleMerchantID.utf8)))
            else { return decline(.invalidMerchant, .merchantMismatch) }
        }
        // The counter is used from here on, whatever the issuer answers: record it before asking, together with
        // the record that this transaction started (a retry after a crash resumes instead of reading a replay).
        // Only if the token is still as read: another instance of the token service on the same database may have
        // recorded a counter meanwhile (the same one, racing), and then the decision is taken again on the token
        // as it is now.
        let read = token
        token.atcWindow.record(atc)
        token.updatedAt = clock.now()
        let saved = try await vault.saveToken(
            token,
            with: IdempotencyRecord(
                scope: scope, key: request.transactionID, requestFingerprint: fingerprint, response: [],
                createdAt: clock.now(),
                started: StartedAuthorization(tokenReference: token.tokenReference, applicationTransactionCounter: atc)
            ), ifUnchangedFrom: read)
        guard saved else {
            guard attempt < 8 else {
                throw TokenServiceError(.storeFailure, "the token kept changing under this authorization; retry it")
            }
            return try await decide(request, scope: scope, fingerprint: fingerprint, attempt: attempt + 1)
        }
        await probe?.reached(.counterRecorded, transactionID: request.transactionID)
        return try await askIssuer(request, token: token)
    }

    /// A retry of an authorization whose counter is recorded: the checks passed then, and the cryptogram is the
    /// same (the fingerprint covers it), so it goes on at the issuer.
    private func resume(
        _ request: NetworkAuthorizationRequest, _ started: StartedAuthorization
    ) async throws -> NetworkAuthorizationResponse {
        guard let token = try await vault.token(reference: started.tokenReference), token.dpan == request.pan else {
            throw TokenServiceError(.storeFailure, "the token a started authorization used is missing")
        }
        return try await askIssuer(request, token: token)
    }

    /// Detokenises, asks the token's issuer (which answers a transaction ID it knows with its first answer) and
    /// swaps the DPAN back into the answer. An issuer that does not answer is a `91` decline.
    private func askIssuer(
        _ request: NetworkAuthorizationRequest, token: TokenRecord
    ) async throws -> NetworkAuthorizationResponse {
        guard let card = try await vault.card(id: token.cardID) else {
            throw TokenServiceError(.storeFailure, "the token's card record is missing")
        }
        let (fpan, cardExpiry) = try openCard(card.encryptedCard, context: "card:" + card.cardID)
        let unavailable = NetworkAuthorizationResponse(
            transactionID: request.transactionID, pan: request.pan, responseCode: .issuerUnavailable,
            approvalCode: nil, declineReason: .issuerUnavailable, cardSuffix: card.profile.suffix)
        guard let issuer = issuers[token.issuerID] else { return unavailable }
        let issuerRequest = IssuerAuthorizationRequest(
            networkTransactionID: request.acquirerID + ":" + request.transactionID, pan: fpan, expiry: cardExpiry,
            amount: request.amount, channel: request.channel, merchant: request.merchant,
            token: TokenContext(
                tokenRequestorID: token.tokenRequestorID, paymentAccountReference: card.paymentAccountReference,
                tokenSuffix: token.dpan.suffix, tokenExpiry: token.tokenExpiry),
            cryptogramVerified: true, transmittedAt: request.transmittedAt)
        let answer: IssuerAuthorizationResponse
        do {
            answer = try await issuer.host.authorize(issuerRequest)
        } catch {
            return unavailable
        }
        await probe?.reached(.issuerAnswered, transactionID: request.transactionID)
        // The issuer saw the FPAN; the acquirer gets the DPAN back.
        return NetworkAuthorizationResponse(
            transactionID: request.transactionID, pan: request.pan, responseCode: answer.responseCode,
            approvalCode: answer.responseCode.isApproved ? answer.approvalCode : nil,
            declineReason: answer.responseCode.isApproved ? nil : .issuerDeclined, cardSuffix: card.profile.suffix)
    }
}
