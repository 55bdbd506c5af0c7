public import Foundation

/// A payment network as Apple Pay names it in `supportedNetworks`.
public struct PaymentNetwork: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public static let visa = PaymentNetwork(rawValue: "visa")
    public static let masterCard = PaymentNetwork(rawValue: "masterCard")
    public static let amex = PaymentNetwork(rawValue: "amex")
    public static let discover = PaymentNetwork(rawValue: "discover")
    public var description: String { rawValue }
}

/// What the merchant can process (PassKit's `PKMerchantCapability`).
public struct MerchantCapabilities: OptionSet, Hashable, Sendable, Codable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// 3-D Secure payment data (required: the only format Orchard's in-app tokens carry).
    public static let threeDSecure = MerchantCapabilities(rawValue: 1 << 0)
    public static let emv = MerchantCapabilities(rawValue: 1 << 1)
    public static let credit = MerchantCapabilities(rawValue: 1 << 2)
    public static let debit = MerchantCapabilities(rawValue: 1 << 3)

    /// Apple Pay JS names: `supports3DS`, `supportsEMV`, `supportsCredit`, `supportsDebit`.
    public init(names: [String]) {
        var capabilities: MerchantCapabilities = []
        for name in names {
            switch name {
            case "supports3DS": capabilities.insert(.threeDSecure)
            case "supportsEMV": capabilities.insert(.emv)
            case "supportsCredit": capabilities.insert(.credit)
            case "supportsDebit": capabilities.insert(.debit)
            default: continue
            }
        }
        self = capabilities
    }

    /// Whether a card of `type` (`credit`, `debit`, `prepaid`) may pay: a merchant that names neither credit
    /// nor debit takes both; prepaid cards count as debit.
    public func accepts(cardType type: String) -> Bool {
        guard contains(.credit) || contains(.debit) else { return true }
        return type == "credit" ? contains(.credit) : contains(.debit)
    }
}

/// One line of the sheet: the last item is the total, with the merchant's name as its label.
public struct PaymentSummaryItem: Hashable, Sendable, Codable {
    public enum ItemType: String, Hashable, Sendable, Codable { case final, pending }
    public let label: String
    /// A decimal string in the request's currency (`"9.99"`).
    public let amount: String
    public let type: ItemType
    public init(label: String, amount: String, type: ItemType = .final) {
        self.label = label
        self.amount = amount
        self.type = type
    }
}

/// A way to ship, with its cost.
public struct ShippingMethod: Hashable, Sendable, Codable {
    public let identifier: String
    public let label: String
    public let detail: String
    public let amount: String
    public init(identifier: String, label: String, detail: String = "", amount: String) {
        self.identifier = identifier
        self.label = label
        self.detail = detail
        self.amount = amount
    }
}

/// Contact fields a request may require.
public enum ContactField: String, Hashable, Sendable, Codable, CaseIterable {
    case name, emailAddress, phoneNumber, postalAddress
}

/// A postal address.
public struct PostalAddress: Hashable, Sendable, Codable {
    public var street: String
    public var city: String
    public var state: String
    public var postalCode: String
    public var country: String
    public init(street: String, city: String, state: String, postalCode: String, country: String) {
        self.street = street
        self.city = city
        self.state = state
        self.postalCode = postalCode
        self.country = country
    }
}

/// A contact as the app receives it: only the fields the request required; before authorization, a
/// shipping contact holds only locality, administrative area, postal code and country.
public struct PaymentContact: Hashable, Sendable, Codable {
    public var name: String?
    public var emailAddress: String?
    public var phoneNumber: String?
    public var postalAddress: PostalAddress?
    public init(
        name: String? = nil, emailAddress: String? = nil, phoneNumber: String? = nil,
        postalAddress: PostalAddress? = nil
    ) {
        self.name = name
        self.emailAddress = emailAddress
        self.phoneNumber = phoneNumber
        self.postalAddress = postalAddress
    }

    /// The fields in `fields` only.
    public func limited(to fields: Set<ContactField>) -> PaymentContact {
        PaymentContact(
            name: fields.contains(.name) ? name : nil,
            emailAddress: fields.contains(.emailAddress) ? emailAddress : nil,
            phoneNumber: fields.contains(.phoneNumber) ? phoneNumber : nil,
            postalAddress: fields.contains(.postalAddress) ? postalAddress : nil)
    }

    /// What the app may see while the user is still choosing: city, state, postal code and country.
    public var redacted: PaymentContact {
        PaymentContact(
            postalAddress: postalAddress.map {
                PostalAddress(
                    street: "", city: $0.city, state: $0.state, postalCode: $0.postalCode, country: $0.country)
            })
    }
}

/// The card the user picked, as the app sees it: never a number.
public struct PaymentMethod: Hashable, Sendable, Codable {
    public let displayName: String
    public let network: PaymentNetwork
    /// `credit`, `debit` or `prepaid`.
    public let type: String
    public init(displayName: String, network: PaymentNetwork, type: String) {
        self.displayName = displayName
        self.network = network
        self.type = type
    }
}

/// A payment request (PassKit's `PKPaymentRequest`).
public struct PaymentRequest: Hashable, Sendable {
    public var merchantIdentifier: String
    /// ISO 3166-1 alpha-2.
    public var countryCode: String
    /// ISO 4217 alpha-3.
    public var currencyCode: String
    public var supportedNetworks: [PaymentNetwork]
    public var merchantCapabilities: MerchantCapabilities
    /// The last item is the total.
    public var paymentSummaryItems: [PaymentSummaryItem]
    /// Bound to the token by its SHA-256 (the raw bytes never leave the device).
    public var applicationData: Data?
    public var requiredBillingContactFields: Set<ContactField>
    public var requiredShippingContactFields: Set<ContactField>
    public var shippingMethods: [ShippingMethod]
    /// Whether the sheet offers a coupon code field (PassKit's `supportsCouponCode`, Apple Pay JS version 12).
    public var supportsCouponCode = false
    /// The coupon code the sheet starts with.
    public var couponCode: String?
    /// A recurring, automatic reload or deferred payment, or several merchants' tokens (Apple Pay JS version 14):
    /// the sheet shows it (only one per request).
    public var paymentType: PaymentTypeRequest?

    public init(
        merchantIdentifier: String, countryCode: String, currencyCode: String, supportedNetworks: [PaymentNetwork],
        merchantCapabilities: MerchantCapabilities, paymentSummaryItems: [PaymentSummaryItem],
        applicationData: Data? = nil, requiredBillingContactFields: Set<ContactField> = [],
        requiredShippingContactFields: Set<ContactField> = [], shippingMethods: [ShippingMethod] = []
    ) {
        self.merchantIdentifier = merchantIdentifier
        self.countryCode = countryCode
        self.currencyCode = currencyCode
        self.supportedNetworks = supportedNetworks
        self.merchantCapabilities = merchantCapabilities
        self.paymentSummaryItems = paymentSummaryItems
        self.applicationData = applicationData
        self.requiredBillingContactFields = requiredBillingContactFields
        self.requiredShippingContactFields = requiredShippingContactFields
        self.shippingMethods = shippingMethods
    }
}

/// What the app changes after a selection: new items (and shipping methods), or errors to show.
public struct PaymentRequestUpdate: Hashable, Sendable {
    public var paymentSummaryItems: [PaymentSummaryItem]
    public var shippingMethods: [ShippingMethod]?
    /// Non-empty: the sheet shows them and does not let the user pay.
    public var errors: [String]
    public init(
        paymentSummaryItems: [PaymentSummaryItem], shippingMethods: [ShippingMethod]? = nil, errors: [String] = []
    ) {
        self.paymentSummaryItems = paymentSummaryItems
        self.shippingMethods = shippingMethods
        self.errors = errors
    }
}

/// An authorized payment (PassKit's `PKPayment`): the token and what the user approved, nothing else.
public struct Payment: Sendable {
    /// The PKPaymentToken JSON exactly as the Pay server returned it.
    public let token: Data
    public let paymentMethod: PaymentMethod
    public let billingContact: PaymentContact?
    public let shippingContact: PaymentContact?
    public let shippingMethod: ShippingMethod?
    public init(
        token: Data, paymentMethod: PaymentMethod, billingContact: PaymentContact?, shippingContact: PaymentContact?,
        shippingMethod: ShippingMethod?
    ) {
        self.token = token
        self.paymentMethod = paymentMethod
        self.billingContact = billingContact
        self.shippingContact = shippingContact
        self.shippingMethod = shippingMethod
    }
}

/// The app's verdict after it processed the payment (with its server).
public struct PaymentAuthorizationResult: Hashable, Sendable {
    public enum Status: String, Hashable, Sendable { case success, failure }
    public let status: Status
    public let errors: [String]
    /// A failure the user can correct on the sheet (WebKit: `STATUS_FAILURE` with contact errors and none
    /// `unknown`): the sheet stays, shows ``errors`` and lets the user authorize again. Only a failure with errors.
    public let keepsSheet: Bool
    public init(status: Status, errors: [String] = [], keepsSheet: Bool = false) {
        self.status = status
        self.errors = errors
        self.keepsSheet = status == .failure && !errors.isEmpty && keepsSheet
    }
}

/// The one payment type a request may carry beyond an immediate payment (PassKit's `recurringPaymentRequest`,
/// `automaticReloadPaymentRequest`, `deferredPaymentRequest`, `multiTokenContexts`): what the sheet shows the user
/// before they authorize.
public struct PaymentTypeRequest: Hashable, Sendable {
    /// Which payment type.
    public enum Kind: String, Hashable, Sendable {
        case recurring, automaticReload, deferred, multiToken
    }
    public var kind: Kind
    /// The merchant's description of the payment, which the sheet shows.
    public var paymentDescription: String
    /// The billing item (regular, reload or deferred billing); nil for several merchants' tokens.
    public var billing: PaymentSummaryItem?
    /// When the billing is charged, as the sheet says it: "every month from 2027-01-01", "when the balance is
    /// below 5.00", "on 2027-03-01".
    public var schedule: String
    /// Where the user manages the payment (absent for several merchants' tokens).
    public var managementURL: String?
    /// The merchant's billing agreement, shown before the user authorizes.
    public var billingAgreement: String?

    public init(
        kind: Kind, paymentDescription: String, billing: PaymentSummaryItem?, schedule: String,
        managementURL: String?, billingAgreement: String? = nil
    ) {
        self.kind = kind
        self.paymentDescription = paymentDescription
        self.billing = billing
        self.schedule = schedule
        self.managementURL = managementURL
        self.billingAgreement = billingAgreement
    }
}
