import Foundation

/// The app's side of the payment sheet's events (PassKit's `PKPaymentAuthorizationControllerDelegate`, async).
/// Every method has a default that changes nothing, except the authorization, which the app must handle.
public protocol PaymentAuthorizationControllerDelegate: Sendable {
    /// The user chose a shipping contact: the app sees only city, state, postal code and country, and may
    /// answer with new items and shipping methods (e.g. shipping cost and tax for that region).
    func didSelectShippingContact(_ contact: PaymentContact, request: PaymentRequest) async -> PaymentRequestUpdate
    func didSelectShippingMethod(_ method: ShippingMethod, request: PaymentRequest) async -> PaymentRequestUpdate
    /// The user chose a card: network, type and display name only.
    func didSelectPaymentMethod(_ method: PaymentMethod, request: PaymentRequest) async -> PaymentRequestUpdate
    /// The user entered or changed the coupon code (a request that ``PaymentRequest/supportsCouponCode``): the app
    /// answers with new items, or errors (an invalid or expired code) the sheet shows.
    func didChangeCouponCode(_ couponCode: String, request: PaymentRequest) async -> PaymentRequestUpdate
    /// The user authorized: the token and exactly the contact fields and shipping method the request required.
    func didAuthorizePayment(_ payment: Payment) async -> PaymentAuthorizationResult
}

extension PaymentAuthorizationControllerDelegate {
    public func didSelectShippingContact(
        _ contact: PaymentContact, request: PaymentRequest
    ) async
        -> PaymentRequestUpdate
    { PaymentRequestUpdate(paymentSummaryItems: request.paymentSummaryItems, shippingMethods: request.shippingMethods) }
    public func didSelectShippingMethod(
        _ method: ShippingMethod, request: PaymentRequest
    ) async
        -> PaymentRequestUpdate
    { PaymentRequestUpdate(paymentSummaryItems: request.paymentSummaryItems) }
    public func didSelectPaymentMethod(
        _ method: PaymentMethod, request: PaymentRequest
    ) async
        -> PaymentRequestUpdate
    { PaymentRequestUpdate(paymentSummaryItems: request.paymentSummaryItems) }
    public func didChangeCouponCode(
        _ couponCode: String, request: PaymentRequest
    ) async
        -> PaymentRequestUpdate
    { PaymentRequestUpdate(paymentSummaryItems: request.paymentSummaryItems) }
}

/// What the device provides to apps: the payment sheet and the capability queries. Implemented by the device
/// (`PayClient.DevicePaymentSheet`); an app never sees the wallet, the Secure Element or the Pay server.
public protocol PaymentSheetHost: Sendable {
    /// Whether this device can pay at all (a device that cannot authorize payments answers false).
    func canMakePayments() async -> Bool
    /// Whether the wallet holds an active card on one of `networks` that `capabilities` accept.
    func canMakePayments(usingNetworks networks: [PaymentNetwork], capabilities: MerchantCapabilities) async -> Bool
    /// Shows the sheet for `request` on behalf of `applicationIdentifier`, drives it with `delegate`'s answers,
    /// and ends when the app has answered the authorization, or the user cancelled, or the device refused.
    func present(
        _ request: PaymentRequest, applicationIdentifier: String, delegate: any PaymentAuthorizationControllerDelegate
    ) async throws -> PaymentSheetOutcome
}

/// How a sheet ended.
public enum PaymentSheetOutcome: Sendable {
    /// The payment was authorized and the app answered.
    case completed(PaymentAuthorizationResult)
    /// The user dismissed the sheet without paying.
    case cancelled
}

/// Why the sheet could not be shown or could not pay.
public struct PaymentSheetError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }
        /// The app may not pay for this merchant ID (checked before the sheet).
        public static let notEntitled = Code("notEntitled")
        /// The request is malformed (amounts, currency, networks, no 3-D Secure capability).
        public static let invalidRequest = Code("invalidRequest")
        /// No card on the wallet fits the request (network, credit/debit).
        public static let noEligibleCard = Code("noEligibleCard")
        /// The device cannot authorize payments (a Mac without Touch ID hands off).
        public static let deviceCannotPay = Code("deviceCannotPay")
        /// The account owner put the device in lost mode: it pays again once the owner leaves lost mode with the
        /// device passcode.
        public static let deviceInLostMode = Code("deviceInLostMode")
        /// The user did not authenticate.
        public static let authenticationFailed = Code("authenticationFailed")
        /// The app's answer to a selection carried errors; the user cannot pay.
        public static let requestRejectedByApp = Code("requestRejectedByApp")
        /// The Pay server refused or could not be reached.
        public static let payServerFailed = Code("payServerFailed")
        /// The Secure Element refused.
        public static let secureElementRefused = Code("secureElementRefused")
    }
    public let code: Code
    public let message: String
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }
    public var description: String { "\(code): \(message)" }
}

/// Presents a payment request (PassKit's `PKPaymentAuthorizationController`).
public final class PaymentAuthorizationController: Sendable {
    public let paymentRequest: PaymentRequest
    private let host: any PaymentSheetHost
    private let applicationIdentifier: String

    /// - Parameters:
    ///   - host: the device the app runs on.
    ///   - applicationIdentifier: the app's identifier (its entitlements name the merchant IDs it may use).
    public init(paymentRequest: PaymentRequest, host: any PaymentSheetHost, applicationIdentifier: String) {
        self.paymentRequest = paymentRequest
        self.host = host
        self.applicationIdentifier = applicationIdentifier
    }

    /// Shows the sheet; `delegate` receives its events.
    public func present(delegate: any PaymentAuthorizationControllerDelegate) async throws -> PaymentSheetOutcome {
        try await host.present(paymentRequest, applicationIdentifier: applicationIdentifier, delegate: delegate)
    }

    public static func canMakePayments(on host: any PaymentSheetHost) async -> Bool { await host.canMakePayments() }

    public static func canMakePayments(
        on host: any PaymentSheetHost, usingNetworks networks: [PaymentNetwork], capabilities: MerchantCapabilities
    ) async -> Bool {
        await host.canMakePayments(usingNetworks: networks, capabilities: capabilities)
    }
}
