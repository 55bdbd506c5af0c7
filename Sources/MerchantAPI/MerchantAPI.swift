public import AccessPolicy
public import Foundation

/// The wire format between an app and the merchant server (JSON over HTTPS; apps present no client certificate),
/// docs/merchant-server.md.
///
/// The app imports this module and nothing of the merchant's; the merchant server registers its routes from
/// ``Route`` and reads and writes these types, and a contract test binds the two. Answers are encoded with sorted
/// keys; optional members that are absent are left out, never written as `null`. Byte strings (applicationData)
/// travel as standard base64 with padding.
public enum MerchantAPI {
    /// The merchant server's routes.
    public enum Route {
        /// `POST`: ``CreateOrder`` → ``OrderCreated`` (201).
        public static let orders = "/v1/orders"
        /// The path parameter naming the order in ``orderPattern`` and ``paymentPattern``.
        public static let orderIDParameter = "orderID"
        /// `GET /v1/orders/{orderID}` as a router pattern: → ``OrderStatus``.
        public static let orderPattern = orders + "/:" + orderIDParameter
        /// `POST /v1/orders/{orderID}/payment` as a router pattern: ``PaymentSubmission`` → ``PaymentResult``.
        public static let paymentPattern = orderPattern + "/payment"

        /// `GET`: the order's ``OrderStatus``.
        public static func order(_ orderID: String) -> String { orders + "/" + orderID }
        /// `POST`: a ``PaymentSubmission`` for the order → ``PaymentResult``.
        public static func payment(_ orderID: String) -> String { order(orderID) + "/payment" }
    }

    /// The routes with their policy, as the merchant server registers them: apps present no client certificate
    /// (an order's ID is its capability).
    public enum Declared {
        public static let orders = DeclaredRoute("POST", Route.orders, .anyone)
        public static let order = DeclaredRoute("GET", Route.orderPattern, .anyone)
        public static let payment = DeclaredRoute("POST", Route.paymentPattern, .anyone)
        public static let all = [orders, order, payment]
    }

    /// The most applicationData an order takes, in bytes (decoded): 64 KiB.
    public static let maxApplicationDataBytes = 64 * 1024

    /// The body of `POST /v1/orders`: `{"item": "Coffee", "amount": "9.99", "currency": "USD"}`, and optionally
    /// the app's own `applicationData`.
    public struct CreateOrder: Codable, Sendable, Hashable {
        /// What is bought: 1 to 128 characters, no control characters.
        public let item: String
        /// A decimal string with at most the currency's ISO 4217 exponent of decimals.
        public let amount: String
        /// ISO 4217 alphabetic (default USD when absent).
        public let currency: String?
        /// The app's applicationData: canonical standard base64 with padding, no whitespace, 1 byte to
        /// ``MerchantAPI/maxApplicationDataBytes`` decoded. The merchant keeps it with the order and accepts only
        /// a token whose header carries its SHA-256. Absent: the merchant makes the order's own
        /// (`{"orderID":"<orderID>"}`).
        public let applicationData: String?

        /// An order whose applicationData, if any, is `applicationData` (encoded here as canonical base64).
        public init(item: String, amount: String, currency: String? = nil, applicationData: Data? = nil) {
            self.init(
                item: item, amount: amount, currency: currency,
                applicationDataBase64: applicationData?.base64EncodedString())
        }

        /// An order whose applicationData is the base64 text `applicationDataBase64` as the caller has it (the
        /// merchant checks it and refuses it with `invalidApplicationData` if it is not canonical base64).
        public init(item: String, amount: String, currency: String?, applicationDataBase64: String?) {
            self.item = item
            self.amount = amount
            self.currency = currency
            self.applicationData = applicationDataBase64
        }
    }

    /// The answer of `POST /v1/orders` (201): what the app puts in its payment request.
    public struct OrderCreated: Codable, Sendable, Hashable {
        public let orderID: String
        public let merchantIdentifier: String
        /// ISO 3166-1 alpha-2.
        public let countryCode: String
        /// ISO 4217 alphabetic.
        public let currency: String
        /// The total as a decimal string with the currency's decimals (`9.99`): the one form the amount travels
        /// in to the app's payment request, as PassKit's summary items take it.
        public let total: String
        public let supportedNetworks: [String]
        public let merchantCapabilities: [String]
        /// The order's applicationData, base64: the app's own if it sent one, else the UTF-8 JSON
        /// `{"orderID":"<orderID>"}`. The app puts exactly these bytes in its payment request; the token's header
        /// must carry their SHA-256.
        public let applicationData: String

        public init(
            orderID: String, merchantIdentifier: String, countryCode: String, currency: String, total: String,
            supportedNetworks: [String], merchantCapabilities: [String], applicationData: String
        ) {
            self.orderID = orderID
            self.merchantIdentifier = merchantIdentifier
            self.countryCode = countryCode
            self.currency = currency
            self.total = total
            self.supportedNetworks = supportedNetworks
            self.merchantCapabilities = merchantCapabilities
            self.applicationData = applicationData
        }
    }

    /// A contact as the app passes it on: Apple Pay JS's flat `ApplePayPaymentContact` (`givenName`,
    /// `familyName`, `emailAddress`, `phoneNumber`, `addressLines`, `locality`, `administrativeArea`,
    /// `postalCode`, `countryCode`) or the nested PassKit-style form (`name` as a string or {`givenName`,
    /// `familyName`}, `emailAddress`, `phoneNumber`, `postalAddress` {`street`, `city`, `state`, `postalCode`,
    /// `country`, `isoCountryCode`}). The merchant keeps only what fulfilment needs (``Fulfilment``); the rest,
    /// such as the phone number, is read past.
    public struct Contact: Codable, Sendable, Hashable {
        /// A full name as one string (encoded as a JSON string), or its parts (an object).
        public struct Name: Codable, Sendable, Hashable {
            public let full: String?
            public let givenName: String?
            public let familyName: String?

            private enum Keys: String, CodingKey { case givenName, familyName }

            /// A name as one string.
            public init(full: String) {
                self.full = full
                givenName = nil
                familyName = nil
            }

            /// A name in parts.
            public init(givenName: String?, familyName: String?) {
                full = nil
                self.givenName = givenName
                self.familyName = familyName
            }

            public init(from decoder: any Decoder) throws {
                if let text = try? decoder.singleValueContainer().decode(String.self) {
                    self.init(full: text)
                } else {
                    let container = try decoder.container(keyedBy: Keys.self)
                    self.init(
                        givenName: try container.decodeIfPresent(String.self, forKey: .givenName),
                        familyName: try container.decodeIfPresent(String.self, forKey: .familyName))
                }
            }

            public func encode(to encoder: any Encoder) throws {
                if let full {
                    var container = encoder.singleValueContainer()
                    try container.encode(full)
                } else {
                    var container = encoder.container(keyedBy: Keys.self)
                    try container.encodeIfPresent(givenName, forKey: .givenName)
                    try container.encodeIfPresent(familyName, forKey: .familyName)
                }
            }
        }

        /// The nested form's address.
        public struct PostalAddress: Codable, Sendable, Hashable {
            /// Lines separated by newlines.
            public let street: String?
            public let city: String?
            public let state: String?
            public let postalCode: String?
            /// A country name, or its ISO 3166-1 alpha-2 code.
            public let country: String?
            /// ISO 3166-1 alpha-2.
            public let isoCountryCode: String?

            public init(
                street: String? = nil, city: String? = nil, state: String? = nil, postalCode: String? = nil,
                country: String? = nil, isoCountryCode: String? = nil
            ) {
                self.street = street
                self.city = city
                self.state = state
                self.postalCode = postalCode
                self.country = country
                self.isoCountryCode = isoCountryCode
            }
        }

        public let givenName: String?
        public let familyName: String?
        public let name: Name?
        public let emailAddress: String?
        public let phoneNumber: String?
        public let addressLines: [String]?
        public let locality: String?
        public let administrativeArea: String?
        public let postalCode: String?
        /// ISO 3166-1 alpha-2.
        public let countryCode: String?
        public let postalAddress: PostalAddress?

        public init(
            givenName: String? = nil, familyName: String? = nil, name: Name? = nil, emailAddress: String? = nil,
            phoneNumber: String? = nil, addressLines: [String]? = nil, locality: String? = nil,
            administrativeArea: String? = nil, postalCode: String? = nil, countryCode: String? = nil,
            postalAddress: PostalAddress? = nil
        ) {
            self.givenName = givenName
            self.familyName = familyName
            self.name = name
            self.emailAddress = emailAddress
            self.phoneNumber = phoneNumber
            self.addressLines = addressLines
            self.locality = locality
            self.administrativeArea = administrativeArea
            self.postalCode = postalCode
            self.countryCode = countryCode
            self.postalAddress = postalAddress
        }
    }

    /// The shipping method the user chose. The merchant keeps `identifier` and `label`; `detail` and `amount`
    /// are read past (the order's total is the amount charged).
    public struct ShippingMethod: Codable, Sendable, Hashable {
        public let identifier: String?
        public let label: String?
        public let detail: String?
        public let amount: String?

        public init(identifier: String?, label: String?, detail: String? = nil, amount: String? = nil) {
            self.identifier = identifier
            self.label = label
            self.detail = detail
            self.amount = amount
        }
    }

    /// The body of `POST /v1/orders/{orderID}/payment`: `{"token": <the PKPaymentToken>, "shippingContact"?,
    /// "billingContact"?, "shippingMethod"?}`.
    ///
    /// The token travels exactly as the app received it (its bytes are spliced in, not re-encoded), so that the
    /// same token sent again is recognised as the same. Contacts are what the user approved on the payment sheet.
    public struct PaymentSubmission: Sendable, Hashable {
        /// The PKPaymentToken's JSON object, as received.
        public let token: Data
        public let shippingContact: Contact?
        public let billingContact: Contact?
        public let shippingMethod: ShippingMethod?

        public init(
            token: Data, shippingContact: Contact? = nil, billingContact: Contact? = nil,
            shippingMethod: ShippingMethod? = nil
        ) {
            self.token = token
            self.shippingContact = shippingContact
            self.billingContact = billingContact
            self.shippingMethod = shippingMethod
        }

        private struct Members: Encodable {
            let shippingContact: Contact?
            let billingContact: Contact?
            let shippingMethod: ShippingMethod?
        }

        /// The request body. Throws `EncodingError.invalidValue` when ``token`` is not a JSON object.
        public func body() throws -> Data {
            guard (try? JSONSerialization.jsonObject(with: token)) is [String: Any] else {
                throw EncodingError.invalidValue(
                    token, .init(codingPath: [], debugDescription: "the token is not a JSON object"))
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            let members = try encoder.encode(
                Members(
                    shippingContact: shippingContact, billingContact: billingContact, shippingMethod: shippingMethod))
            // `members` is `{...}`: its inside follows the token's member.
            let inside = members.dropFirst().dropLast()
            return Data("{\"token\":".utf8) + token + (inside.isEmpty ? Data() : Data(",".utf8) + inside)
                + Data("}".utf8)
        }
    }

    /// The answer of `POST /v1/orders/{orderID}/payment` (200) when the acquirer decided. The same token sent
    /// again gets the same answer, byte for byte.
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
        /// The issuer's approval code; absent for a decline.
        public let approvalCode: String?

        /// Whether the payment was approved.
        public var isApproved: Bool { outcome == "approved" }

        public init(
            orderID: String, outcome: String, responseCode: String, reason: String, maskedPAN: String,
            transactionIdentifier: String, approvalCode: String?
        ) {
            self.orderID = orderID
            self.outcome = outcome
            self.responseCode = responseCode
            self.reason = reason
            self.maskedPAN = maskedPAN
            self.transactionIdentifier = transactionIdentifier
            self.approvalCode = approvalCode
        }
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

        public init(
            recipientName: String?, addressLines: [String]?, locality: String?, administrativeArea: String?,
            postalCode: String?, countryCode: String?, receiptEmail: String?, shippingMethodIdentifier: String?,
            shippingMethodLabel: String?
        ) {
            self.recipientName = recipientName
            self.addressLines = addressLines
            self.locality = locality
            self.administrativeArea = administrativeArea
            self.postalCode = postalCode
            self.countryCode = countryCode
            self.receiptEmail = receiptEmail
            self.shippingMethodIdentifier = shippingMethodIdentifier
            self.shippingMethodLabel = shippingMethodLabel
        }
    }

    /// The answer of `GET /v1/orders/{orderID}`.
    public struct OrderStatus: Codable, Sendable, Hashable {
        public let orderID: String
        public let merchantIdentifier: String
        public let item: String
        public let currency: String
        /// The total as a decimal string (as in ``OrderCreated``).
        public let total: String
        /// The order's applicationData, base64 (as in ``OrderCreated``).
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

        public init(
            orderID: String, merchantIdentifier: String, item: String, currency: String, total: String,
            applicationData: String, status: String, createdAt: String, paymentStatus: String?,
            payment: PaymentResult?, fulfilment: Fulfilment?
        ) {
            self.orderID = orderID
            self.merchantIdentifier = merchantIdentifier
            self.item = item
            self.currency = currency
            self.total = total
            self.applicationData = applicationData
            self.status = status
            self.createdAt = createdAt
            self.paymentStatus = paymentStatus
            self.payment = payment
            self.fulfilment = fulfilment
        }
    }

    /// Every refusal or failure: `{"error": {"code": "...", "message": "..."}}` with the status ``ErrorCode``
    /// gives. The message says what went wrong and what to do; never a card number, cryptogram or contact.
    public struct ErrorBody: Codable, Sendable, Hashable {
        public struct Problem: Codable, Sendable, Hashable {
            /// One of ``ErrorCode``'s.
            public let code: String
            public let message: String

            public init(code: String, message: String) {
                self.code = code
                self.message = message
            }
        }

        public let error: Problem

        public init(code: String, message: String) { error = Problem(code: code, message: message) }
    }

    /// The codes of ``ErrorBody``, with their HTTP status.
    public enum ErrorCode {
        /// 400: the request body is not what the route takes (JSON, fields, amount, currency, token syntax).
        public static let malformedRequest = "malformedRequest"
        /// 400: the order's applicationData is not canonical base64, is empty, or decodes to over 64 KiB.
        public static let invalidApplicationData = "invalidApplicationData"
        /// 404: no order with this ID.
        public static let orderNotFound = "orderNotFound"
        /// 409: the order was already paid (with another token).
        public static let orderAlreadyPaid = "orderAlreadyPaid"
        /// 409: a charge for this order (or this token) is on its way; ask again for its outcome.
        public static let paymentInProgress = "paymentInProgress"
        /// 409: this token (its transactionId) was already submitted for another order, or is another token
        /// with the transactionId of one already submitted.
        public static let tokenAlreadyUsed = "tokenAlreadyUsed"
        /// 422: the token's signature, chain or freshness does not verify, it was made for another merchant or
        /// processing key, or it does not decrypt.
        public static let tokenRejected = "tokenRejected"
        /// 422: the token pays another amount or currency than the order, or does not carry the SHA-256 of the
        /// order's applicationData. Nothing was charged; the order stays open.
        public static let orderMismatch = "orderMismatch"
        /// 502: the acquirer could not be reached or did not answer (a charge without an answer was reversed).
        public static let acquirerUnavailable = "acquirerUnavailable"
        /// 502: the acquirer refused the authorization request itself (not a card decline).
        public static let acquirerRefused = "acquirerRefused"
        /// 500: the merchant's own store or configuration failed.
        public static let internalFailure = "internalFailure"
        /// 502: the Apple Pay gateway refused the merchant-session request or could not be reached.
        public static let merchantSessionFailed = "merchantSessionFailed"
    }
}
