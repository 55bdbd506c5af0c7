import MerchantKit
import OrchardCrypto
import OrchardX509
import PaymentToken

/// The order as the merchant's own database holds it: what the token must pay for.
public struct Order: Sendable {
    /// In minor units (cents for USD).
    public var amount: Int64
    /// ISO 4217 numeric, e.g. "840" for USD.
    public var currencyCode: String
    /// The bytes the checkout page put in the payment request's `applicationData` (the order reference),
    /// or nil if it sent none. The token's header must carry their SHA-256.
    public var applicationData: [UInt8]?

    public init(amount: Int64, currencyCode: String, applicationData: [UInt8]?) {
        self.amount = amount
        self.currencyCode = currencyCode
        self.applicationData = applicationData
    }
}

/// What the merchant sends its payment processor for a 3-D Secure Apple Pay payment: the device account
/// number (DPAN) with its expiry, the online payment cryptogram and the ECI, and the amount.
///
/// Its `description` shows only the DPAN's last four digits, never the cryptogram, so it is safe to log.
public struct ProcessorAuthorization: Sendable, CustomStringConvertible {
    /// The device account number (DPAN): send it, never log it.
    public let dpan: String
    /// YYMMDD.
    public let expirationDate: String
    /// The online payment cryptogram (base64), single use.
    public let cryptogram: String
    /// The electronic commerce indicator, when the network sets one (Visa and Amex do, Mastercard does not).
    public let eci: String?
    /// In minor units.
    public let amount: Int64
    /// ISO 4217 numeric.
    public let currencyCode: String
    /// The token's `header.transactionId` (hex): the key to refuse a second use of the same token.
    public let transactionId: String

    public var description: String {
        "ProcessorAuthorization(…\(dpan.suffix(4)), \(amount) \(currencyCode), ECI \(eci ?? "none"))"
    }
}

/// Why a checkout was refused.
public enum CheckoutError: Error, Equatable, CustomStringConvertible {
    /// MerchantKit refused the token: not Apple's, not for this merchant's key, stale, tampered, or not for
    /// this order. The error's code says which; its message never holds a card number.
    case refused(MerchantKitError)
    /// An EMV token (China UnionPay): this merchant's processor takes 3-D Secure cryptograms only.
    case unsupportedPaymentDataType

    public var description: String {
        switch self {
        case .refused(let error): "refused: \(error)"
        case .unsupportedPaymentDataType: "refused: EMV payment data is not supported"
        }
    }
}

/// Turns the Apple Pay token a checkout page posts into the processor's authorization request.
///
/// Keep one per process: it caches verified certificate chains.
public final class CheckoutService: Sendable {
    private let decryptor: PaymentTokenDecryptor

    /// - Parameters:
    ///   - certificatePEM: the Apple Pay payment processing certificate (not the merchant identity certificate).
    ///   - privateKeyPEM: its private key (P-256 for EC_v1, RSA for RSA_v1).
    ///   - trustRoots: Apple Root CA - G3 in production; a test or sandbox Pay server's root otherwise.
    ///   - clock: the time a token's signing time is checked against (within 5 minutes); the system's in
    ///     production.
    public init(
        certificatePEM: String, privateKeyPEM: String,
        trustRoots: [Certificate] = [AppleRootCertificates.rootCAG3], clock: any WallClock = SystemClock()
    ) throws(MerchantKitError) {
        let identity = try MerchantIdentity(certificatePEM: certificatePEM, privateKeyPEM: privateKeyPEM)
        // One process's memory: several server instances need a shared store (a TransactionReplayGuard of
        // their own over their database) so that a token cannot be spent once on each.
        decryptor = try PaymentTokenDecryptor(
            identities: [identity], trustRoots: trustRoots, clock: clock,
            replayGuard: InMemoryReplayGuard(clock: clock))
    }

    /// Verifies and decrypts `tokenJSON` (the `PKPaymentToken` the page posts, or its bare `paymentData`),
    /// checks it against `order` and returns what to send the processor. A token is accepted once.
    public func authorize(tokenJSON: [UInt8], for order: Order) throws(CheckoutError) -> ProcessorAuthorization {
        let result: PaymentTokenDecryptor.Result
        do {
            let token = try PaymentToken(jsonBytes: tokenJSON)
            result = try decryptor.decrypt(
                token,
                order: ExpectedOrder(
                    applicationData: order.applicationData, amount: order.amount, currencyCode: order.currencyCode))
        } catch let error as MerchantKitError {
            throw .refused(error)
        } catch {
            throw .refused(MerchantKitError(.malformedToken, "the token is not Apple's JSON", underlying: error))
        }
        let payment = result.payment
        guard case .threeDSecure(let cryptogram, let eci) = payment.credential else {
            throw .unsupportedPaymentDataType
        }
        return ProcessorAuthorization(
            dpan: payment.applicationPrimaryAccountNumber, expirationDate: payment.applicationExpirationDate,
            cryptogram: cryptogram, eci: eci, amount: payment.transactionAmount, currencyCode: payment.currencyCode,
            transactionId: result.transactionId)
    }
}
