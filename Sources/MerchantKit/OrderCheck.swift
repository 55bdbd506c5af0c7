import Foundation
import OrchardCrypto
public import PaymentToken

/// What the merchant itself knows about the order a token must pay for (Step 6 of Apple's reference).
public struct ExpectedOrder: Sendable {
    /// The raw applicationData bytes the merchant put in the payment request, or nil if it sent none.
    public var applicationData: [UInt8]?
    /// In minor units; nil skips the amount check (only for tools that do not know the order).
    public var amount: Int64?
    /// ISO 4217 numeric, e.g. "840"; nil skips the currency check.
    public var currencyCode: String?

    /// The order a token must pay for; a nil field skips its check (`applicationData` nil requires a token without
    /// one).
    public init(applicationData: [UInt8]?, amount: Int64?, currencyCode: String?) {
        self.applicationData = applicationData
        self.amount = amount
        self.currencyCode = currencyCode
    }

    /// Checks the signed header hash and the decrypted amount and currency against this order.
    ///
    /// A header hash without order data, or order data without a header hash, is a mismatch: either means the
    /// token was made for another request.
    public func check(header: Header, payment: DecryptedPaymentData) throws(MerchantKitError) {
        switch (applicationData, header.applicationData) {
        case (nil, nil):
            break
        case (nil, .some):
            throw MerchantKitError(
                .orderMismatch, "the token carries an applicationData hash but the order has no applicationData")
        case (.some, nil):
            throw MerchantKitError(
                .orderMismatch, "the order has applicationData but the token carries no applicationData hash")
        case (.some(let data), .some(let hash)):
            guard constantTimeEquals(SHA256.hash(data), hash) else {
                throw MerchantKitError(.orderMismatch, "the applicationData hash does not match this order's data")
            }
        }
        if let currencyCode, payment.currencyCode != currencyCode {
            throw MerchantKitError(
                .orderMismatch, "the token pays in currency \(payment.currencyCode), the order is in \(currencyCode)")
        }
        if let amount, payment.transactionAmount != amount {
            throw MerchantKitError(
                .orderMismatch, "the token pays \(payment.transactionAmount), the order is for \(amount) (minor units)")
        }
    }
}
