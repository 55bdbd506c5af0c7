public import AppPayments
import Foundation

// The payment sheet on the control socket (docs/in-app.md): an app presents its request, long-polls the sheet's
// events and answers them; the user looks at the sheet (`current`) and acts on it.

/// `POST /payment-sheets`: an app presents its payment request. Answered 201 with the sheet's identifier.
public struct PresentPaymentSheet: DeviceControlRequest, Codable, Hashable {
    public typealias Answer = PresentedPaymentSheet
    public let applicationIdentifier: String
    public let request: PaymentSheetRequestBody

    public init(applicationIdentifier: String, request: PaymentSheetRequestBody) {
        self.applicationIdentifier = applicationIdentifier
        self.request = request
    }

    public var route: DeviceControlRoute { .presentSheet }
    public var body: Self { self }
}

/// A ``PaymentRequest`` as JSON: applicationData in base64, capabilities and contact fields by name.
public struct PaymentSheetRequestBody: Codable, Sendable, Hashable {
    public let merchantIdentifier: String
    public let countryCode: String
    public let currencyCode: String
    public let supportedNetworks: [String]
    /// `supports3DS`, `supportsEMV`, `supportsCredit`, `supportsDebit`.
    public let merchantCapabilities: [String]
    public let paymentSummaryItems: [PaymentSummaryItem]
    public let applicationData: String?
    public let requiredBillingContactFields: [String]
    public let requiredShippingContactFields: [String]
    public let shippingMethods: [ShippingMethod]
    /// Whether the sheet offers a coupon code field (Apple Pay JS version 12, PassKit's `supportsCouponCode`);
    /// absent: it does not.
    public let supportsCouponCode: Bool?
    /// The coupon code the sheet starts with (at most 64 characters); absent: none.
    public let couponCode: String?
    /// Version 14 payment types (PassKit's), at most one per request: a recurring payment, an automatic reload or a
    /// deferred payment. The sheet shows it and the token's payment data carries the merchant token of the merchant
    /// and card. ``init(_:)`` leaves them absent (a ``PaymentRequest``'s `paymentType` is what the sheet shows, not
    /// the request); an app sets one on the body. Absent: the JSON is as before.
    public var recurringPaymentRequest: RecurringPaymentRequestBody?
    /// PassKit's `automaticReloadPaymentRequest` (see ``recurringPaymentRequest``).
    public var automaticReloadPaymentRequest: AutomaticReloadPaymentRequestBody?
    /// PassKit's `deferredPaymentRequest` (see ``recurringPaymentRequest``).
    public var deferredPaymentRequest: DeferredPaymentRequestBody?

    /// The JSON of `request`.
    public init(_ request: PaymentRequest) {
        merchantIdentifier = request.merchantIdentifier
        countryCode = request.countryCode
        currencyCode = request.currencyCode
        supportedNetworks = request.supportedNetworks.map(\.rawValue)
        merchantCapabilities = MerchantCapabilities.names(of: request.merchantCapabilities)
        paymentSummaryItems = request.paymentSummaryItems
        applicationData = request.applicationData?.base64EncodedString()
        requiredBillingContactFields = request.requiredBillingContactFields.map(\.rawValue).sorted()
        requiredShippingContactFields = request.requiredShippingContactFields.map(\.rawValue).sorted()
        shippingMethods = request.shippingMethods
        supportsCouponCode = request.supportsCouponCode ? true : nil
        couponCode = request.couponCode
    }

    /// The request, or why it is malformed.
    public func paymentRequest() -> Result<PaymentRequest, PaymentSheetError> {
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
        if let couponCode, couponCode.count > 64 {
            return .failure(PaymentSheetError(.invalidRequest, "a coupon code has at most 64 characters"))
        }
        var request = PaymentRequest(
            merchantIdentifier: merchantIdentifier, countryCode: countryCode, currencyCode: currencyCode,
            supportedNetworks: supportedNetworks.map(PaymentNetwork.init(rawValue:)),
            merchantCapabilities: MerchantCapabilities(names: merchantCapabilities),
            paymentSummaryItems: paymentSummaryItems, applicationData: data,
            requiredBillingContactFields: fields[0], requiredShippingContactFields: fields[1],
            shippingMethods: shippingMethods)
        request.supportsCouponCode = supportsCouponCode ?? false
        request.couponCode = couponCode
        switch PaymentTypeCheck.paymentType(self) {
        case .success(let type): request.paymentType = type
        case .failure(let error): return .failure(error)
        }
        return .success(request)
    }
}

extension MerchantCapabilities {
    /// The Apple Pay JS names of `capabilities` (`supports3DS`, ...), the inverse of `MerchantCapabilities(names:)`.
    public static func names(of capabilities: MerchantCapabilities) -> [String] {
        let names: [(MerchantCapabilities, String)] = [
            (.threeDSecure, "supports3DS"), (.emv, "supportsEMV"), (.credit, "supportsCredit"),
            (.debit, "supportsDebit"),
        ]
        return names.filter { capabilities.contains($0.0) }.map(\.1)
    }
}

/// `201` to a presentation.
public struct PresentedPaymentSheet: Codable, Sendable, Hashable {
    public let id: String
    /// The device process was started with `--auto-auth`: it approves the sheet itself.
    public let automatic: Bool

    public init(id: String, automatic: Bool) {
        self.id = id
        self.automatic = automatic
    }
}

/// `POST /payment-sheets/can-make-payments` `{"networks"?, "capabilities"?}`: without networks, whether the device
/// can pay at all; with them, whether it holds an eligible card.
public struct CanMakePayments: DeviceControlRequest, Codable, Hashable {
    public typealias Answer = CanMakePaymentsAnswer
    public let networks: [String]?
    public let capabilities: [String]?

    public init(networks: [String]? = nil, capabilities: [String]? = nil) {
        self.networks = networks
        self.capabilities = capabilities
    }

    public var route: DeviceControlRoute { .canMakePayments }
    public var body: Self { self }
}

/// The answer to ``CanMakePayments``.
public struct CanMakePaymentsAnswer: Codable, Sendable, Hashable {
    public let canMakePayments: Bool
    public init(canMakePayments: Bool) { self.canMakePayments = canMakePayments }
}

/// `GET /payment-sheets/{id}`: the sheet as the user sees it.
public struct GetPaymentSheet: DeviceControlRequest, Hashable {
    public typealias Answer = PaymentSheetStatusAnswer
    /// The sheet's identifier, or `current` for the device's latest sheet.
    public let sheet: String
    public init(sheet: String = "current") { self.sheet = sheet }
    public var route: DeviceControlRoute { .sheet(sheet) }
}

/// The answer to ``GetPaymentSheet``.
public struct PaymentSheetStatusAnswer: Codable, Sendable, Hashable {
    public let id: String
    public let applicationIdentifier: String
    public let automatic: Bool
    public let sheet: PaymentSheetView?

    public init(id: String, applicationIdentifier: String, automatic: Bool, sheet: PaymentSheetView?) {
        self.id = id
        self.applicationIdentifier = applicationIdentifier
        self.automatic = automatic
        self.sheet = sheet
    }
}

/// `GET /payment-sheets/{id}/events?wait=SECONDS`: the app's next event (`none` when nothing happened in the wait).
public struct NextPaymentSheetEvent: DeviceControlRequest, Hashable {
    public typealias Answer = PaymentSheetAppEvent
    public let sheet: String
    /// How long the device may hold the poll (at most 25 seconds; default 20).
    public let wait: Int?
    public init(sheet: String, wait: Int? = nil) {
        self.sheet = sheet
        self.wait = wait
    }
    public var route: DeviceControlRoute { .sheetEvents(sheet, wait: wait) }
}

/// An event for the app.
public struct PaymentSheetAppEvent: Codable, Sendable, Hashable {
    /// What happened.
    public enum Kind: String, Codable, Sendable, Hashable {
        case paymentMethodSelected, shippingContactSelected, shippingMethodSelected, paymentAuthorized, ended
        /// The user entered or changed the coupon code.
        case couponCodeChanged
        /// Nothing happened within the wait: ask again.
        case none
    }
    public let sheet: String
    public let kind: Kind
    /// The number the app's answer names (events that wait for an answer only).
    public var sequence: Int?
    public var paymentMethod: PaymentMethod?
    /// Redacted: city, state, postal code and country only.
    public var shippingContact: PaymentContact?
    public var shippingMethod: ShippingMethod?
    /// The coupon code the user entered (``Kind/couponCodeChanged``).
    public var couponCode: String?
    public var payment: PaymentSheetPayment?
    /// `completed`, `cancelled` or `failed` (ended).
    public var outcome: String?
    /// The app's own verdict on the payment (ended, completed).
    public var result: PaymentSheetVerdict?
    /// Why the sheet failed or was cancelled by the device (ended).
    public var error: DeviceControlErrorBody.Detail?

    public init(sheet: String, kind: Kind) {
        self.sheet = sheet
        self.kind = kind
    }
}

/// The authorized payment as the app receives it: the token exactly as the Pay server made it (base64) and only
/// the contact fields the request required.
public struct PaymentSheetPayment: Codable, Sendable, Hashable {
    public let token: String
    public let paymentMethod: PaymentMethod
    public let billingContact: PaymentContact?
    public let shippingContact: PaymentContact?
    public let shippingMethod: ShippingMethod?

    /// The JSON of `payment`.
    public init(_ payment: Payment) {
        token = payment.token.base64EncodedString()
        paymentMethod = payment.paymentMethod
        billingContact = payment.billingContact
        shippingContact = payment.shippingContact
        shippingMethod = payment.shippingMethod
    }

    /// The payment, or nil when the token is not base64.
    public var value: Payment? {
        Data(base64Encoded: token).map {
            Payment(
                token: $0, paymentMethod: paymentMethod, billingContact: billingContact,
                shippingContact: shippingContact, shippingMethod: shippingMethod)
        }
    }
}

/// `POST /payment-sheets/{id}/answers`: the app's update for a selection, or its verdict on the authorization.
/// Answered `{"accepted": true}`; 409 when the sheet no longer waits for it.
public struct AnswerPaymentSheetEvent: DeviceControlRequest, Hashable {
    public typealias Answer = PaymentSheetAnswerAccepted
    /// The body.
    public struct Body: Codable, Sendable, Hashable {
        /// The event's ``PaymentSheetAppEvent/sequence``.
        public let sequence: Int
        public var update: PaymentSheetUpdateBody?
        public var result: PaymentSheetVerdict?

        public init(sequence: Int, update: PaymentSheetUpdateBody? = nil, result: PaymentSheetVerdict? = nil) {
            self.sequence = sequence
            self.update = update
            self.result = result
        }
    }
    public let sheet: String
    public let body: Body
    public init(sheet: String, _ body: Body) {
        self.sheet = sheet
        self.body = body
    }
    public var route: DeviceControlRoute { .sheetAnswer(sheet) }
}

/// The answer to ``AnswerPaymentSheetEvent``.
public struct PaymentSheetAnswerAccepted: Codable, Sendable, Hashable {
    public let accepted: Bool
    public init(accepted: Bool) { self.accepted = accepted }
}

/// A ``PaymentRequestUpdate`` as JSON.
public struct PaymentSheetUpdateBody: Codable, Sendable, Hashable {
    public let paymentSummaryItems: [PaymentSummaryItem]
    public let shippingMethods: [ShippingMethod]?
    public let errors: [String]?

    /// The JSON of `update`.
    public init(_ update: PaymentRequestUpdate) {
        paymentSummaryItems = update.paymentSummaryItems
        shippingMethods = update.shippingMethods
        errors = update.errors.isEmpty ? nil : update.errors
    }

    /// The update.
    public var value: PaymentRequestUpdate {
        PaymentRequestUpdate(
            paymentSummaryItems: paymentSummaryItems, shippingMethods: shippingMethods, errors: errors ?? [])
    }
}

/// A ``PaymentAuthorizationResult`` as JSON.
public struct PaymentSheetVerdict: Codable, Sendable, Hashable {
    /// `success` or `failure`.
    public let status: String
    public let errors: [String]?
    /// `true`: a failure the user corrects on the sheet, which stays (absent: the sheet ends).
    public let keepsSheet: Bool?

    /// The JSON of `result`.
    public init(_ result: PaymentAuthorizationResult) {
        status = result.status.rawValue
        errors = result.errors.isEmpty ? nil : result.errors
        keepsSheet = result.keepsSheet ? true : nil
    }

    /// The result, or nil for an unknown status.
    public var value: PaymentAuthorizationResult? {
        PaymentAuthorizationResult.Status(rawValue: status).map {
            PaymentAuthorizationResult(status: $0, errors: errors ?? [], keepsSheet: keepsSheet ?? false)
        }
    }
}

// MARK: The user at the sheet

/// `POST /payment-sheets/{id}/card` `{"card"}`: pay with another eligible card.
public struct ChoosePaymentSheetCard: DeviceControlRequest, Hashable {
    public typealias Answer = PaymentSheetActionAnswer
    /// The body.
    public struct Body: Codable, Sendable, Hashable {
        public let card: String
        public init(card: String) { self.card = card }
    }
    public let sheet: String
    public let card: String
    public init(sheet: String = "current", card: String) {
        self.sheet = sheet
        self.card = card
    }
    public var route: DeviceControlRoute { .sheetAction(sheet, .card) }
    public var body: Body { Body(card: card) }
}

/// `POST /payment-sheets/{id}/shipping-contact` or `/billing-contact` with the contact.
public struct GivePaymentSheetContact: DeviceControlRequest, Hashable {
    public typealias Answer = PaymentSheetActionAnswer
    /// Which contact.
    public enum Role: String, Sendable, Hashable, CaseIterable {
        case shipping, billing
    }
    public let sheet: String
    public let role: Role
    public let contact: PaymentContact
    public init(sheet: String = "current", role: Role, contact: PaymentContact) {
        self.sheet = sheet
        self.role = role
        self.contact = contact
    }
    public var route: DeviceControlRoute {
        .sheetAction(sheet, role == .shipping ? .shippingContact : .billingContact)
    }
    public var body: PaymentContact { contact }
}

/// `POST /payment-sheets/{id}/shipping-method` `{"identifier"}`.
public struct ChoosePaymentSheetShippingMethod: DeviceControlRequest, Hashable {
    public typealias Answer = PaymentSheetActionAnswer
    /// The body.
    public struct Body: Codable, Sendable, Hashable {
        public let identifier: String
        public init(identifier: String) { self.identifier = identifier }
    }
    public let sheet: String
    public let identifier: String
    public init(sheet: String = "current", identifier: String) {
        self.sheet = sheet
        self.identifier = identifier
    }
    public var route: DeviceControlRoute { .sheetAction(sheet, .shippingMethod) }
    public var body: Body { Body(identifier: identifier) }
}

/// `POST /payment-sheets/{id}/coupon-code` `{"couponCode"}` (empty: the code removed).
public struct ChangePaymentSheetCouponCode: DeviceControlRequest, Hashable {
    public typealias Answer = PaymentSheetActionAnswer
    /// The body.
    public struct Body: Codable, Sendable, Hashable {
        public let couponCode: String
        public init(couponCode: String) { self.couponCode = couponCode }
    }
    public let sheet: String
    public let couponCode: String
    public init(sheet: String = "current", couponCode: String) {
        self.sheet = sheet
        self.couponCode = couponCode
    }
    public var route: DeviceControlRoute { .sheetAction(sheet, .couponCode) }
    public var body: Body { Body(couponCode: couponCode) }
}

/// `POST /payment-sheets/{id}/authenticate` with the evidence: on success the device pays and the app is told;
/// the answer comes once the app gave its verdict.
public struct AuthenticatePaymentSheet: DeviceControlRequest, Hashable {
    public typealias Answer = PaymentSheetActionAnswer
    public let sheet: String
    public let evidence: AuthenticationEvidenceBody
    public init(sheet: String = "current", _ evidence: AuthenticationEvidenceBody) {
        self.sheet = sheet
        self.evidence = evidence
    }
    public var route: DeviceControlRoute { .sheetAction(sheet, .authenticate) }
    public var body: AuthenticationEvidenceBody { evidence }
}

/// `POST /payment-sheets/{id}/cancel`: the user dismisses the sheet.
public struct CancelPaymentSheet: DeviceControlRequest, Hashable {
    public typealias Answer = PaymentSheetActionAnswer
    public let sheet: String
    public init(sheet: String = "current") { self.sheet = sheet }
    public var route: DeviceControlRoute { .sheetAction(sheet, .cancel) }
}

/// How a user's action went: `accepted`, or `rejected` (an authentication that failed, with the methods offered
/// now), with the sheet as it shows afterwards. A refusal is an error answer instead.
public struct PaymentSheetActionAnswer: Codable, Sendable, Hashable {
    /// `accepted` or `rejected`.
    public let result: String
    public let offered: [String]?
    public let sheet: PaymentSheetView?

    public init(result: String, offered: [String]? = nil, sheet: PaymentSheetView?) {
        self.result = result
        self.offered = offered
        self.sheet = sheet
    }
}

/// What the sheet shows the user, as the device's control API returns it. The device's own screen: it holds the
/// summary-item labels and the contacts the user gave, never a card or account number.
public struct PaymentSheetView: Sendable, Hashable, Codable {
    /// A card as the sheet lists it: display data only.
    public struct Card: Sendable, Hashable, Codable {
        public let id: String
        public let displayName: String
        /// The last four digits of the card number as printed on the card.
        public let suffix: String
        public let network: String
        /// `credit`, `debit` or `prepaid`.
        public let type: String

        public init(id: String, displayName: String, suffix: String, network: String, type: String) {
            self.id = id
            self.displayName = displayName
            self.suffix = suffix
            self.network = network
            self.type = type
        }
    }

    public let applicationIdentifier: String
    public let merchantIdentifier: String
    /// The label of the total: the merchant's name.
    public let merchantName: String
    public let currencyCode: String
    /// The summary items as the sheet shows them now (the app may have updated them); the last is the total.
    public let items: [PaymentSummaryItem]
    public let total: String
    /// The cards that may pay (active, on an accepted network, of an accepted type).
    public let cards: [Card]
    /// The card the sheet proposed (the one chosen by hand, else the default, else the first eligible).
    public let proposedCard: String
    public let selectedCard: String
    public let shippingMethods: [ShippingMethod]
    public let selectedShippingMethod: String?
    public let requiredShippingContactFields: [String]
    public let requiredBillingContactFields: [String]
    public let shippingContact: PaymentContact?
    public let billingContact: PaymentContact?
    /// Errors of the app's last update: while there are any the user cannot pay.
    public let appErrors: [String]
    /// What the user must still do, in order: `shippingContact`, `billingContact`, `authentication`.
    public let needs: [String]
    /// The authentication methods the Secure Enclave offers now.
    public let authenticationMethods: [String]
    /// `presented` while the sheet is up; `completed`, `cancelled` or `failed` once it ended.
    public var status: String
    /// Who the sheet waits for: `user`, `app` (its answer to an event), `device` (the Secure Element, the Pay
    /// server), or `nobody` once it ended.
    public var waitingFor: String
    /// Why it failed, for `failed`.
    public var failure: String?
    /// Whether the sheet has a coupon code field (nil: it has none).
    public var supportsCouponCode: Bool?
    /// The coupon code entered (with ``supportsCouponCode``).
    public var couponCode: String?
    /// The request's recurring, automatic reload, deferred or multi-merchant payment, which the sheet shows.
    public var paymentType: PaymentType?

    /// A payment type beyond an immediate payment, as the sheet shows it.
    public struct PaymentType: Sendable, Hashable, Codable {
        /// `recurring`, `automaticReload`, `deferred` or `multiToken`.
        public let kind: String
        public let paymentDescription: String
        public let billing: PaymentSummaryItem?
        /// When the billing is charged, in words.
        public let schedule: String
        public let managementURL: String?
        public let billingAgreement: String?

        public init(
            kind: String, paymentDescription: String, billing: PaymentSummaryItem?, schedule: String,
            managementURL: String?, billingAgreement: String?
        ) {
            self.kind = kind
            self.paymentDescription = paymentDescription
            self.billing = billing
            self.schedule = schedule
            self.managementURL = managementURL
            self.billingAgreement = billingAgreement
        }
    }

    public init(
        applicationIdentifier: String, merchantIdentifier: String, merchantName: String, currencyCode: String,
        items: [PaymentSummaryItem], total: String, cards: [Card], proposedCard: String, selectedCard: String,
        shippingMethods: [ShippingMethod], selectedShippingMethod: String?, requiredShippingContactFields: [String],
        requiredBillingContactFields: [String], shippingContact: PaymentContact?, billingContact: PaymentContact?,
        appErrors: [String], needs: [String], authenticationMethods: [String], status: String, waitingFor: String,
        failure: String?
    ) {
        self.applicationIdentifier = applicationIdentifier
        self.merchantIdentifier = merchantIdentifier
        self.merchantName = merchantName
        self.currencyCode = currencyCode
        self.items = items
        self.total = total
        self.cards = cards
        self.proposedCard = proposedCard
        self.selectedCard = selectedCard
        self.shippingMethods = shippingMethods
        self.selectedShippingMethod = selectedShippingMethod
        self.requiredShippingContactFields = requiredShippingContactFields
        self.requiredBillingContactFields = requiredBillingContactFields
        self.shippingContact = shippingContact
        self.billingContact = billingContact
        self.appErrors = appErrors
        self.needs = needs
        self.authenticationMethods = authenticationMethods
        self.status = status
        self.waitingFor = waitingFor
        self.failure = failure
    }
}
