public import AppPayments
public import Foundation
public import MerchantAPI
public import OrchardHTTP
import PaymentToken

/// The demo app (`orchard app buy`, `orchard demo`): an app that buys from the demo merchant with Apple Pay
/// (ARCHITECTURE §2, In an app). It asks the merchant's server for an order, builds a ``PaymentRequest`` from it,
/// presents the device's payment sheet, and on authorization sends the token to the merchant's server, which
/// decrypts it and charges through the acquirer.
///
/// The app holds no device and no service: the sheet comes from a ``PaymentSheetHost`` (in process, or the
/// device process's control socket) and the merchant is reached with the given HTTP client.
public struct DemoApp: Sendable {
    /// The demo app's identifier, the one the demo merchant expects.
    public static let identifier = "dev.orchard.demo-app"

    /// What one purchase came to, as `orchard app buy` prints it (a masked card number only).
    public struct Purchase: Encodable, Sendable {
        public let orderID: String
        public let merchantIdentifier: String
        public let item: String
        public let amount: String
        public let device: String
        public let card: String
        /// The order's applicationData (base64), whose SHA-256 the token's header carries.
        public let applicationData: String
        public let outcome: String
        public let responseCode: String
        public let reason: String?
        public let transactionIdentifier: String?
    }

    /// Why a purchase did not complete: the merchant's refusal, the sheet's, or a cancelled sheet. One line with no
    /// card data.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let message: String
        /// The token the sheet produced, when the failure came after it (the merchant refused it).
        public let token: Data?
        public var description: String { message }
    }

    let client: HTTPClient
    let merchant: FailoverEndpoints
    let application: String
    let trace: @Sendable (String) -> Void

    /// - Parameters:
    ///   - client: reaches the merchant's server (trusting the deployment's root); the caller shuts it down.
    ///   - merchantBaseURLs: the merchant server's base URLs, one per instance, first preferred: a request goes to
    ///     the next when an instance cannot be reached or answers 503.
    ///   - application: the app identifier the sheet shows and the token is made for.
    public init(
        client: HTTPClient, merchantBaseURLs: [String], application: String = DemoApp.identifier,
        trace: @escaping @Sendable (String) -> Void
    ) throws(HTTPError) {
        self.client = client
        merchant = try FailoverEndpoints(merchantBaseURLs)
        self.application = application
        self.trace = trace
    }

    /// Orders `orderRequest` at the merchant and pays for it with the sheet `host` shows. The payment request carries
    /// the order's applicationData, or `tamperedApplicationData` to demonstrate the merchant's refusal of a token
    /// made for other data. `merchantIdentifier` overrides the order's. Returns the merchant's answer and the token
    /// as the merchant received it (nil if the sheet gave none); throws ``Failure`` when the order, the sheet or the payment is refused.
    public func buy(
        _ orderRequest: MerchantAPI.CreateOrder, host: any PaymentSheetHost, deviceName: String,
        merchantIdentifier: String? = nil, tamperedApplicationData: Data? = nil
    ) async throws -> (purchase: Purchase, token: Data?) {
        let created = try await client.send(
            try HTTPClientRequest.json(.post, MerchantAPI.Route.orders, orderRequest), failover: merchant)
        guard created.status == .created else {
            throw Failure(message: Self.refusal("the order", created), token: nil)
        }
        let order = try JSONDecoder().decode(MerchantAPI.OrderCreated.self, from: created.body)
        guard let orderData = StrictEncoding.base64Decode(order.applicationData) else {
            throw Failure(message: "the merchant's order carries no base64 applicationData", token: nil)
        }
        if tamperedApplicationData != nil {
            trace("app: DEMONSTRATION: the payment request carries other applicationData than the order's")
        }
        trace(
            "app → merchant server: order \(order.orderID) for \(orderRequest.item), \(order.total) \(order.currency)")
        let request = PaymentRequest(
            merchantIdentifier: merchantIdentifier ?? order.merchantIdentifier, countryCode: order.countryCode,
            currencyCode: order.currency, supportedNetworks: order.supportedNetworks.map(PaymentNetwork.init),
            merchantCapabilities: MerchantCapabilities(names: order.merchantCapabilities),
            paymentSummaryItems: [
                PaymentSummaryItem(label: orderRequest.item, amount: order.total),
                PaymentSummaryItem(label: "Orchard Demo Store", amount: order.total),
            ],
            applicationData: tamperedApplicationData ?? Data(orderData),
            requiredBillingContactFields: [.name], requiredShippingContactFields: [.name, .postalAddress])
        let delegate = CheckoutDelegate(
            client: client, merchant: merchant, paymentPath: MerchantAPI.Route.payment(order.orderID), trace: trace)
        let controller = PaymentAuthorizationController(
            paymentRequest: request, host: host, applicationIdentifier: application)
        let outcome: PaymentSheetOutcome
        do {
            outcome = try await controller.present(delegate: delegate)
        } catch let error as PaymentSheetError {
            throw Failure(message: "the payment sheet refused: \(error)", token: nil)
        }
        guard case .completed = outcome else { throw Failure(message: "the payment sheet was cancelled", token: nil) }
        let token = delegate.token
        if let failure = delegate.failure { throw Failure(message: failure, token: token) }
        guard let answer = delegate.answer else { throw Failure(message: "the merchant gave no answer", token: token) }
        trace(
            "merchant server → acquirer → token service → issuer: \(answer.outcome) \(answer.responseCode)"
                + " (\(answer.maskedPAN))")
        let purchase = Purchase(
            orderID: order.orderID, merchantIdentifier: request.merchantIdentifier, item: orderRequest.item,
            amount: "\(order.total) \(order.currency)", device: deviceName, card: answer.maskedPAN,
            applicationData: order.applicationData, outcome: answer.outcome, responseCode: answer.responseCode,
            reason: answer.reason, transactionIdentifier: answer.transactionIdentifier)
        return (purchase, token)
    }

    /// A contact the user approved on the sheet, in the merchant's wire form (PassKit's nested form).
    static func contact(_ contact: PaymentContact?) -> MerchantAPI.Contact? {
        contact.map {
            MerchantAPI.Contact(
                name: $0.name.map(MerchantAPI.Contact.Name.init(full:)), emailAddress: $0.emailAddress,
                phoneNumber: $0.phoneNumber,
                postalAddress: $0.postalAddress.map {
                    MerchantAPI.Contact.PostalAddress(
                        street: $0.street, city: $0.city, state: $0.state, postalCode: $0.postalCode,
                        country: $0.country)
                })
        }
    }

    /// `the merchant refused <what> (<status> <code>): <message>`, from the merchant's error body.
    static func refusal(_ what: String, _ response: HTTPResponse) -> String {
        let status = response.status.code
        guard let body = try? JSONDecoder().decode(MerchantAPI.ErrorBody.self, from: response.body) else {
            return "the merchant refused \(what) (\(status)): "
                + String(decoding: response.body.prefix(300), as: UTF8.self)
        }
        return "the merchant refused \(what) (\(status) \(body.error.code)): \(body.error.message)"
    }

    /// The app's delegate: on authorization it sends the token to the merchant's server and reports its answer.
    final class CheckoutDelegate: PaymentAuthorizationControllerDelegate, @unchecked Sendable {
        // @unchecked: the three results are guarded by `lock`; the rest is immutable.
        let client: HTTPClient
        let merchant: FailoverEndpoints
        /// The order's payment route (`/v1/orders/ID/payment`), sent to the merchant's instances in turn.
        let paymentPath: String
        let trace: @Sendable (String) -> Void
        private let lock = NSLock()
        private var _answer: MerchantAPI.PaymentResult?
        private var _token: Data?
        private var _failure: String?
        var answer: MerchantAPI.PaymentResult? { lock.withLock { _answer } }
        var token: Data? { lock.withLock { _token } }
        var failure: String? { lock.withLock { _failure } }

        init(
            client: HTTPClient, merchant: FailoverEndpoints, paymentPath: String,
            trace: @escaping @Sendable (String) -> Void
        ) {
            self.client = client
            self.merchant = merchant
            self.paymentPath = paymentPath
            self.trace = trace
        }

        func didSelectShippingContact(_ contact: PaymentContact, request: PaymentRequest) async -> PaymentRequestUpdate
        {
            trace(
                "app: shipping region \(contact.postalAddress?.city ?? "?"), \(contact.postalAddress?.state ?? "?") "
                    + "\(contact.postalAddress?.postalCode ?? "?") \(contact.postalAddress?.country ?? "?") (redacted)")
            return PaymentRequestUpdate(paymentSummaryItems: request.paymentSummaryItems)
        }

        func didAuthorizePayment(_ payment: Payment) async -> PaymentAuthorizationResult {
            lock.withLock { _token = payment.token }
            do {
                let submission = MerchantAPI.PaymentSubmission(
                    token: payment.token, shippingContact: DemoApp.contact(payment.shippingContact),
                    billingContact: DemoApp.contact(payment.billingContact),
                    shippingMethod: payment.shippingMethod.map {
                        MerchantAPI.ShippingMethod(
                            identifier: $0.identifier, label: $0.label, detail: $0.detail, amount: $0.amount)
                    })
                let request = HTTPClientRequest(
                    method: .post, url: paymentPath, headers: ["Content-Type": "application/json"],
                    body: try submission.body())
                let response = try await client.send(request, failover: merchant)
                guard response.status == .ok else {
                    let refusal = DemoApp.refusal("the payment", response)
                    lock.withLock { _failure = refusal }
                    return PaymentAuthorizationResult(status: .failure, errors: [refusal])
                }
                let answer = try JSONDecoder().decode(MerchantAPI.PaymentResult.self, from: response.body)
                lock.withLock { _answer = answer }
                return PaymentAuthorizationResult(status: answer.isApproved ? .success : .failure)
            } catch {
                lock.withLock { _failure = "the merchant cannot be reached: \(error)" }
                return PaymentAuthorizationResult(status: .failure, errors: ["\(error)"])
            }
        }
    }
}
