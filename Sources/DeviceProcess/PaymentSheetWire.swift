import AppPayments
import Foundation

/// The JSON of the `/payment-sheets` routes between an app and the device process (docs/in-app.md, "The payment
/// sheet through the device's control API"). Both sides are in this module.
enum PaymentSheetWire {
    /// `POST /payment-sheets`.
    struct Presentation: Codable, Sendable {
        let applicationIdentifier: String
        let request: Request
    }

    /// A ``PaymentRequest`` as JSON: applicationData in base64, capabilities and contact fields by name.
    struct Request: Codable, Sendable {
        let merchantIdentifier: String
        let countryCode: String
        let currencyCode: String
        let supportedNetworks: [String]
        /// `supports3DS`, `supportsEMV`, `supportsCredit`, `supportsDebit`.
        let merchantCapabilities: [String]
        let paymentSummaryItems: [PaymentSummaryItem]
        let applicationData: String?
        let requiredBillingContactFields: [String]
        let requiredShippingContactFields: [String]
        let shippingMethods: [ShippingMethod]

        init(_ request: PaymentRequest) {
            merchantIdentifier = request.merchantIdentifier
            countryCode = request.countryCode
            currencyCode = request.currencyCode
            supportedNetworks = request.supportedNetworks.map(\.rawValue)
            merchantCapabilities = PaymentSheetWire.names(of: request.merchantCapabilities)
            paymentSummaryItems = request.paymentSummaryItems
            applicationData = request.applicationData?.base64EncodedString()
            requiredBillingContactFields = request.requiredBillingContactFields.map(\.rawValue).sorted()
            requiredShippingContactFields = request.requiredShippingContactFields.map(\.rawValue).sorted()
            shippingMethods = request.shippingMethods
        }

        /// The request, or nil with the reason it is malformed.
        func paymentRequest() -> Result<PaymentRequest, PaymentSheetError> {
            var data: Data?
            if let text = applicationData {
                guard let decoded = Data(base64Encoded: text) else {
                    return .failure(PaymentSheetError(.invalidRequest, "applicationData is not base64"))
                }
                data = decoded
            }
            var fields: [Set<ContactField>] = []
            for names in [requiredBillingContactFields, requiredShippingContactFields] {
                var set = Set<ContactField>()
                for name in names {
                    guard let field = ContactField(rawValue: name) else {
                        return .failure(PaymentSheetError(.invalidRequest, "unknown contact field \(name)"))
                    }
                    set.insert(field)
                }
                fields.append(set)
            }
            return .success(
                PaymentRequest(
                    merchantIdentifier: merchantIdentifier, countryCode: countryCode, currencyCode: currencyCode,
                    supportedNetworks: supportedNetworks.map(PaymentNetwork.init(rawValue:)),
                    merchantCapabilities: MerchantCapabilities(names: merchantCapabilities),
                    paymentSummaryItems: paymentSummaryItems, applicationData: data,
                    requiredBillingContactFields: fields[0], requiredShippingContactFields: fields[1],
                    shippingMethods: shippingMethods))
        }
    }

    /// `201` to a presentation.
    struct Presented: Codable, Sendable {
        let id: String
        /// The device process was started with `--auto-auth`: it approves the sheet itself.
        let automatic: Bool
    }

    /// An event for the app (`GET /payment-sheets/{id}/events`).
    struct Event: Codable, Sendable {
        enum Kind: String, Codable, Sendable {
            case paymentMethodSelected, shippingContactSelected, shippingMethodSelected, paymentAuthorized, ended
            /// Nothing happened within the wait: ask again.
            case none
        }
        let sheet: String
        let kind: Kind
        /// The number the app's answer names (events that wait for an answer only).
        var sequence: Int?
        var paymentMethod: PaymentMethod?
        /// Redacted: city, state, postal code and country only.
        var shippingContact: PaymentContact?
        var shippingMethod: ShippingMethod?
        var payment: Payment?
        /// `completed`, `cancelled` or `failed` (ended).
        var outcome: String?
        /// The app's own verdict on the payment (ended, completed).
        var result: Verdict?
        /// Why the sheet failed or was cancelled by the device (ended).
        var error: ErrorBody?

        init(sheet: String, kind: Kind) {
            self.sheet = sheet
            self.kind = kind
        }
    }

    /// The authorized payment as the app receives it: the token exactly as the Pay server made it (base64) and only
    /// the contact fields the request required.
    struct Payment: Codable, Sendable {
        let token: String
        let paymentMethod: PaymentMethod
        let billingContact: PaymentContact?
        let shippingContact: PaymentContact?
        let shippingMethod: ShippingMethod?
    }

    struct ErrorBody: Codable, Sendable {
        let code: String
        let message: String
    }

    /// `POST /payment-sheets/{id}/answers`: the update for a selection, or the result for the authorization.
    struct Answer: Codable, Sendable {
        let sequence: Int
        var update: Update?
        var result: Verdict?
    }

    struct Update: Codable, Sendable {
        let paymentSummaryItems: [PaymentSummaryItem]
        let shippingMethods: [ShippingMethod]?
        let errors: [String]?

        init(_ update: PaymentRequestUpdate) {
            paymentSummaryItems = update.paymentSummaryItems
            shippingMethods = update.shippingMethods
            errors = update.errors.isEmpty ? nil : update.errors
        }

        var value: PaymentRequestUpdate {
            PaymentRequestUpdate(
                paymentSummaryItems: paymentSummaryItems, shippingMethods: shippingMethods, errors: errors ?? [])
        }
    }

    struct Verdict: Codable, Sendable {
        /// `success` or `failure`.
        let status: String
        let errors: [String]?

        init(_ result: PaymentAuthorizationResult) {
            status = result.status.rawValue
            errors = result.errors.isEmpty ? nil : result.errors
        }

        var value: PaymentAuthorizationResult? {
            PaymentAuthorizationResult.Status(rawValue: status).map {
                PaymentAuthorizationResult(status: $0, errors: errors ?? [])
            }
        }
    }

    /// `POST /payment-sheets/can-make-payments`.
    struct CapabilityQuery: Codable, Sendable {
        let networks: [String]?
        let capabilities: [String]?
    }

    struct CapabilityAnswer: Codable, Sendable {
        let canMakePayments: Bool
    }

    /// The Apple Pay JS names of `capabilities` (`supports3DS`, ...), the inverse of `MerchantCapabilities(names:)`.
    static func names(of capabilities: MerchantCapabilities) -> [String] {
        let names: [(MerchantCapabilities, String)] = [
            (.threeDSecure, "supports3DS"), (.emv, "supportsEMV"), (.credit, "supportsCredit"),
            (.debit, "supportsDebit"),
        ]
        return names.filter { capabilities.contains($0.0) }.map(\.1)
    }

    static func encode(_ value: some Encodable) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(value)
    }
}
