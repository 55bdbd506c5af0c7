import CardBasics
import Foundation
import Issuer
public import NetworkAuthorizationAPI

/// The token service as the acquirer's network: it reads the contract's plain values into its own types and
/// answers through ``TokenService/authorize(_:)-(NetworkAuthorizationRequest)`` and
/// ``TokenService/reverse(_:)-(NetworkReversalRequest)``, which keep the idempotency, the FPAN and the
/// reversal rules; the answer drops the DPAN.
extension TokenService: AcquiringNetwork {
    public func authorize(
        _ request: NetworkAuthorizationAPI.AuthorizationRequest
    ) async throws(NetworkAuthorizationAPI.Failure) -> NetworkAuthorizationAPI.AuthorizationAnswer {
        guard let channel = PaymentChannel(rawValue: request.channel) else {
            throw NetworkAuthorizationAPI.Failure(.invalidRequest, "unknown payment channel")
        }
        let typed: NetworkAuthorizationRequest
        do {
            typed = NetworkAuthorizationRequest(
                acquirerID: request.acquirerID, transactionID: request.transactionID,
                pan: try PrimaryAccountNumber(request.pan),
                expiry: try request.expiry.map { expiry throws(CardBasicsError) in
                    try CardExpiry(year: expiry.year, month: expiry.month)
                },
                amount: try Money(
                    minorUnits: request.amount.minorUnits, currency: try Currency(request.amount.currency)),
                channel: channel,
                merchant: MerchantInfo(
                    merchantID: request.merchant.merchantID, name: request.merchant.name,
                    categoryCode: request.merchant.categoryCode, countryCode: request.merchant.countryCode),
                appleMerchantID: request.merchant.appleMerchantID, cryptogram: request.cryptogram,
                transmittedAt: request.transmittedAt)
        } catch {
            throw NetworkAuthorizationAPI.Failure(.invalidRequest, "the authorization's card number, expiry or amount")
        }
        let answer: NetworkAuthorizationResponse
        do {
            answer = try await authorize(typed)
        } catch {
            throw Self.networkFailure(error)
        }
        return NetworkAuthorizationAPI.AuthorizationAnswer(
            transactionID: answer.transactionID, responseCode: answer.responseCode.rawValue,
            approvalCode: answer.approvalCode, declineReason: answer.declineReason?.rawValue,
            cardSuffix: answer.cardSuffix)
    }

    public func reverse(
        _ request: NetworkAuthorizationAPI.ReversalRequest
    ) async throws(NetworkAuthorizationAPI.Failure) -> NetworkAuthorizationAPI.ReversalAnswer {
        let amount: Money
        do {
            amount = try Money(minorUnits: request.amount.minorUnits, currency: try Currency(request.amount.currency))
        } catch {
            throw NetworkAuthorizationAPI.Failure(.invalidRequest, "the reversal's amount")
        }
        do {
            let answer = try await reverse(
                NetworkReversalRequest(
                    acquirerID: request.acquirerID, transactionID: request.transactionID, amount: amount,
                    transmittedAt: request.transmittedAt))
            return NetworkAuthorizationAPI.ReversalAnswer(
                transactionID: answer.transactionID, outcome: answer.outcome.rawValue)
        } catch {
            throw Self.networkFailure(error)
        }
    }

    /// The contract's failure for an error of the token service: a refusal stays a refusal, anything else means
    /// the network did not decide (a retry with the same transaction ID is safe).
    static func networkFailure(_ error: any Error) -> NetworkAuthorizationAPI.Failure {
        guard let error = error as? TokenServiceError else {
            return NetworkAuthorizationAPI.Failure(.unavailable, "the network failed; retry")
        }
        if error.code == .invalidRequest {
            return NetworkAuthorizationAPI.Failure(.invalidRequest, "the network refused the request")
        }
        if error.code == .idempotencyConflict {
            return NetworkAuthorizationAPI.Failure(
                .idempotencyConflict, "the transaction ID was used for another request")
        }
        return NetworkAuthorizationAPI.Failure(.unavailable, "the network could not decide (\(error.code)); retry")
    }
}
