public import AccessPolicy

extension MerchantAPI {
    /// The merchant's website's routes for Apple Pay on the web (docs/web.md), served at the page's origin
    /// (`https://store.orchard.test`): the page asks for a merchant session when `onvalidatemerchant` fires, and
    /// posts the `ApplePayPayment` when `onpaymentauthorized` fires. Pages call them without client certificates.
    public enum Web {
        /// `POST` ``MerchantSessionRequest``: answers the merchant session exactly as the gateway sent it.
        public static let merchantSession = "/v1/web/merchant-session"
        /// `POST` an `ApplePayPayment` (`{"token", "billingContact", "shippingContact"}`, the body of
        /// ``MerchantAPI/PaymentSubmission``) for an order created with `POST /v1/orders`; answers
        /// ``MerchantAPI/PaymentResult``.
        public static let paymentPattern = "/v1/web/orders/:" + Route.orderIDParameter + "/payment"
        /// The payment path of `orderID`.
        public static func payment(_ orderID: String) -> String { "/v1/web/orders/\(orderID)/payment" }

        /// The routes with their policy.
        public enum Declared {
            public static let merchantSession = DeclaredRoute("POST", Web.merchantSession, .anyone)
            public static let payment = DeclaredRoute("POST", Web.paymentPattern, .anyone)
            /// Every web route.
            public static let all = [merchantSession, payment]
        }
    }

    /// The page's `POST /v1/web/merchant-session` body: the `validationURL` of the `onvalidatemerchant` event.
    public struct MerchantSessionRequest: Codable, Sendable, Hashable {
        public let validationURL: String
        public init(validationURL: String) { self.validationURL = validationURL }
    }
}
