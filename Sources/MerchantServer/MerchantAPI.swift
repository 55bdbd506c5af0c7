import Foundation

/// The merchant server's JSON (docs/merchant-server.md). Encoded with sorted keys and unescaped slashes.
public enum MerchantAPI {
    /// `POST /v1/orders`.
    public static let orders = "/v1/orders"

    /// `POST /v1/orders/{orderID}/payment`.
    public static func payment(_ orderID: String) -> String { "/v1/orders/\(orderID)/payment" }

    /// `GET /v1/orders/{orderID}`.
    public static func order(_ orderID: String) -> String { "/v1/orders/\(orderID)" }

    /// The body of `POST /v1/orders`: `{"item": "Coffee", "amount": "9.99", "currency": "USD"}`.
    public struct CreateOrder: Codable, Sendable, Hashable {
        public let item: String
        /// A decimal string with at most the currency's ISO 4217 exponent of decimals.
        public let amount: String
        /// ISO 4217 alphabetic (default USD when absent).
        public let currency: String?

        public init(item: String, amount: String, currency: String?) {
            self.item = item
            self.amount = amount
            self.currency = currency
        }
    }

    /// The answer of `POST /v1/orders` (201): what the app puts in its payment request.
    public struct OrderCreated: Codable, Sendable, Hashable {
        public let orderID: String
        public let merchantIdentifier: String
        /// ISO 3166-1 alpha-2.
        public let countryCode: String
        public let currency: String
        public let amountMinor: Int64
        /// The total as a decimal string (`9.99`).
        public let total: String
        public let supportedNetworks: [String]
        public let merchantCapabilities: [String]
        /// The order's applicationData, base64: the UTF-8 JSON `{"orderID":"<orderID>"}`. The token's header
        /// must carry its SHA-256.
        public let applicationData: String
    }

    /// The answer of `POST /v1/orders/{orderID}/payment` (200) when the acquirer decided.
    public struct PaymentResult: Codable, Sendable, Hashable {
        public let orderID: String
        /// `approved` or `declined`.
        public let outcome: String
        /// ISO 8583 field 39 (`00` approved).
        public let responseCode: String
        /// Why: `approved`, or the network's decline reason.
        public let reason: String
        /// The DPAN masked: first six, last four.
        public let maskedPAN: String
        /// The token's transactionIdentifier (upper-case hex of `header.transactionId`).
        public let transactionIdentifier: String
        public let approvalCode: String?
    }

    /// The answer of `GET /v1/orders/{orderID}`.
    public struct OrderStatus: Codable, Sendable, Hashable {
        public let orderID: String
        public let merchantIdentifier: String
        public let item: String
        public let currency: String
        public let amountMinor: Int64
        public let total: String
        public let applicationData: String
        /// `open` (not paid: no payment yet, or the last one declined or reversed), `processing` (a charge is on
        /// its way) or `paid`.
        public let status: String
        /// When the order was created (RFC 3339, UTC).
        public let createdAt: String
        /// The latest payment's state: `processing`, `approved`, `declined`, `reversed` or `failed`.
        public let paymentStatus: String?
        /// The latest payment's answer, when it has one of ``PaymentResult``'s form.
        public let payment: PaymentResult?
        /// What the merchant kept to fulfil a paid order (see ``Fulfilment``).
        public let fulfilment: Fulfilment?
    }

    /// What the merchant keeps of the approved contact and shipping data: only what it needs to send the order
    /// and its receipt. The shipping contact's name and postal address, the e-mail address for the receipt
    /// (from the shipping contact, else the billing contact), and the shipping method's identifier and label.
    /// Nothing of the billing address, no phone number, no phonetic names; nothing at all for a declined
    /// payment.
    public struct Fulfilment: Codable, Sendable, Hashable {
        public let recipientName: String?
        public let addressLines: [String]?
        public let locality: String?
        public let administrativeArea: String?
        public let postalCode: String?
        /// ISO 3166-1 alpha-2.
        public let countryCode: String?
        public let receiptEmail: String?
        public let shippingMethodIdentifier: String?
        public let shippingMethodLabel: String?

        var isEmpty: Bool {
            recipientName == nil && addressLines == nil && locality == nil && administrativeArea == nil
                && postalCode == nil && countryCode == nil && receiptEmail == nil && shippingMethodIdentifier == nil
                && shippingMethodLabel == nil
        }
    }

    /// A contact as the app passes it on: Apple Pay JS's flat `ApplePayPaymentContact` (`givenName`,
    /// `familyName`, `emailAddress`, `phoneNumber`, `addressLines`, `locality`, `administrativeArea`,
    /// `postalCode`, `country`, `countryCode`, ...) or the nested PassKit-style form (`name` as a string or
    /// {`givenName`, `familyName`}, `emailAddress`, `phoneNumber`, `postalAddress` {`street`, `city`, `state`,
    /// `postalCode`, `country`, `isoCountryCode`}), as `AppPayments.PaymentContact` encodes it. Fields the
    /// merchant does not keep are read past.
    struct Contact: Decodable, Sendable {
        /// A full name as one string, or its parts.
        struct Name: Decodable, Sendable {
            let full: String?
            let givenName: String?
            let familyName: String?

            private enum Keys: String, CodingKey { case givenName, familyName }

            init(from decoder: any Decoder) throws {
                if let text = try? decoder.singleValueContainer().decode(String.self) {
                    full = text
                    givenName = nil
                    familyName = nil
                } else {
                    let container = try decoder.container(keyedBy: Keys.self)
                    full = nil
                    givenName = try container.decodeIfPresent(String.self, forKey: .givenName)
                    familyName = try container.decodeIfPresent(String.self, forKey: .familyName)
                }
            }
        }
        struct PostalAddress: Decodable, Sendable {
            let street: String?
            let city: String?
            let state: String?
            let postalCode: String?
            let country: String?
            let isoCountryCode: String?
        }
        let givenName: String?
        let familyName: String?
        let name: Name?
        let emailAddress: String?
        let addressLines: [String]?
        let locality: String?
        let administrativeArea: String?
        let postalCode: String?
        let countryCode: String?
        let postalAddress: PostalAddress?

        var recipientName: String? {
            if let full = name?.full, !full.isEmpty { return full }
            let parts = [givenName ?? name?.givenName, familyName ?? name?.familyName].compactMap { $0 }
                .filter { !$0.isEmpty }
            return parts.isEmpty ? nil : parts.joined(separator: " ")
        }
        var lines: [String]? {
            if let addressLines, !addressLines.isEmpty { return addressLines }
            guard let street = postalAddress?.street, !street.isEmpty else { return nil }
            return street.split(separator: "\n").map(String.init)
        }
        var city: String? { locality ?? postalAddress?.city }
        var area: String? { administrativeArea ?? postalAddress?.state }
        var postal: String? { postalCode ?? postalAddress?.postalCode }
        /// ISO 3166-1 alpha-2 (`country` counts only when it is two letters).
        var country: String? {
            let named = postalAddress?.country.flatMap { $0.count == 2 ? $0 : nil }
            return (countryCode ?? postalAddress?.isoCountryCode ?? named)?.uppercased()
        }

        /// Every string the contact holds, for the size checks.
        var strings: [String] {
            [
                givenName, familyName, name?.full, name?.givenName, name?.familyName, emailAddress, locality,
                administrativeArea, postalCode, countryCode, postalAddress?.street, postalAddress?.city,
                postalAddress?.state, postalAddress?.postalCode, postalAddress?.country, postalAddress?.isoCountryCode,
            ].compactMap { $0 } + (addressLines ?? [])
        }
    }

    /// A shipping method: `identifier`, `label` (amount and detail are read past: the order's total is the
    /// amount charged).
    struct ShippingMethod: Decodable, Sendable {
        let identifier: String?
        let label: String?
    }
}
