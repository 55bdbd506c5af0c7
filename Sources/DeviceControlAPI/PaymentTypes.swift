import AppPayments
import Foundation

// Version 14 payment types in an app's request over the control socket (docs/in-app.md, "Payment types over the
// control socket"): PassKit's `PKRecurringPaymentRequest`, `PKAutomaticReloadPaymentRequest` and
// `PKDeferredPaymentRequest`, at most one per request. The device checks them as the browser agent checks a page's
// (the same limits and wording), shows them on the sheet as it shows a page's, and asks the Pay server for the
// merchant token of the merchant and card.

/// PassKit's `PKRecurringPaymentSummaryItem`: a recurring charge.
public struct RecurringBillingBody: Codable, Sendable, Hashable {
    public let label: String
    /// A decimal string in the request's currency.
    public let amount: String
    /// An ISO 8601 date (`2027-01-01`), absent: from now.
    public var startDate: String?
    /// An ISO 8601 date, absent: no end.
    public var endDate: String?
    /// `year`, `month`, `day`, `hour` or `minute`; absent: `month`.
    public var intervalUnit: String?
    /// At least 1; absent: 1.
    public var intervalCount: Int?

    public init(
        label: String, amount: String, startDate: String? = nil, endDate: String? = nil, intervalUnit: String? = nil,
        intervalCount: Int? = nil
    ) {
        self.label = label
        self.amount = amount
        self.startDate = startDate
        self.endDate = endDate
        self.intervalUnit = intervalUnit
        self.intervalCount = intervalCount
    }
}

/// PassKit's `PKRecurringPaymentRequest`.
public struct RecurringPaymentRequestBody: Codable, Sendable, Hashable {
    public let paymentDescription: String
    public let regularBilling: RecurringBillingBody
    /// A first, trial period's charge.
    public var trialBilling: RecurringBillingBody?
    /// Where the user manages the payment: an https URL.
    public let managementURL: String
    public var billingAgreement: String?
    /// An https URL; checked, not used (Orchard sends no token notifications).
    public var tokenNotificationURL: String?

    public init(
        paymentDescription: String, regularBilling: RecurringBillingBody, managementURL: String,
        trialBilling: RecurringBillingBody? = nil, billingAgreement: String? = nil, tokenNotificationURL: String? = nil
    ) {
        self.paymentDescription = paymentDescription
        self.regularBilling = regularBilling
        self.managementURL = managementURL
        self.trialBilling = trialBilling
        self.billingAgreement = billingAgreement
        self.tokenNotificationURL = tokenNotificationURL
    }
}

/// PassKit's `PKAutomaticReloadPaymentSummaryItem`: a reload charged when the balance falls below a threshold.
public struct AutomaticReloadBillingBody: Codable, Sendable, Hashable {
    public let label: String
    public let amount: String
    /// The balance below which the reload is charged (a decimal string).
    public let thresholdAmount: String

    public init(label: String, amount: String, thresholdAmount: String) {
        self.label = label
        self.amount = amount
        self.thresholdAmount = thresholdAmount
    }
}

/// PassKit's `PKAutomaticReloadPaymentRequest`.
public struct AutomaticReloadPaymentRequestBody: Codable, Sendable, Hashable {
    public let paymentDescription: String
    public let automaticReloadBilling: AutomaticReloadBillingBody
    public let managementURL: String
    public var billingAgreement: String?
    public var tokenNotificationURL: String?

    public init(
        paymentDescription: String, automaticReloadBilling: AutomaticReloadBillingBody, managementURL: String,
        billingAgreement: String? = nil, tokenNotificationURL: String? = nil
    ) {
        self.paymentDescription = paymentDescription
        self.automaticReloadBilling = automaticReloadBilling
        self.managementURL = managementURL
        self.billingAgreement = billingAgreement
        self.tokenNotificationURL = tokenNotificationURL
    }
}

/// PassKit's `PKDeferredPaymentSummaryItem`: one charge on a later date.
public struct DeferredBillingBody: Codable, Sendable, Hashable {
    public let label: String
    public let amount: String
    /// An ISO 8601 date.
    public let deferredDate: String

    public init(label: String, amount: String, deferredDate: String) {
        self.label = label
        self.amount = amount
        self.deferredDate = deferredDate
    }
}

/// PassKit's `PKDeferredPaymentRequest`.
public struct DeferredPaymentRequestBody: Codable, Sendable, Hashable {
    public let paymentDescription: String
    public let deferredBilling: DeferredBillingBody
    public let managementURL: String
    public var billingAgreement: String?
    public var tokenNotificationURL: String?

    public init(
        paymentDescription: String, deferredBilling: DeferredBillingBody, managementURL: String,
        billingAgreement: String? = nil, tokenNotificationURL: String? = nil
    ) {
        self.paymentDescription = paymentDescription
        self.deferredBilling = deferredBilling
        self.managementURL = managementURL
        self.billingAgreement = billingAgreement
        self.tokenNotificationURL = tokenNotificationURL
    }
}

/// The checks of a request's payment type and what the sheet shows of it.
enum PaymentTypeCheck {
    static let maxText = 512
    static let units = ["year", "month", "day", "hour", "minute"]

    static func failure(_ message: String) -> PaymentSheetError { PaymentSheetError(.invalidRequest, message) }

    /// The one payment type of `body`, or why it cannot be: more than one, or a malformed one.
    static func paymentType(_ body: PaymentSheetRequestBody) -> Result<PaymentTypeRequest?, PaymentSheetError> {
        let set = [
            body.recurringPaymentRequest != nil, body.automaticReloadPaymentRequest != nil,
            body.deferredPaymentRequest != nil,
        ].filter { $0 }.count
        guard set <= 1 else {
            return .failure(
                failure(
                    "Only one of 'recurringPaymentRequest', 'automaticReloadPaymentRequest' and "
                        + "'deferredPaymentRequest' may be set."))
        }
        let currency = body.currencyCode
        if let recurring = body.recurringPaymentRequest { return recurringType(recurring, currency).map { $0 } }
        if let reload = body.automaticReloadPaymentRequest { return reloadType(reload, currency).map { $0 } }
        if let deferred = body.deferredPaymentRequest { return deferredType(deferred, currency).map { $0 } }
        return .success(nil)
    }

    /// The members every type has: description, management URL, texts' lengths, token notification URL.
    static func common(
        description: String, managementURL: String, billingAgreement: String?, tokenNotificationURL: String?,
        label: String, amount: String, member: String
    ) -> Result<URL, PaymentSheetError> {
        let texts = [description, managementURL, billingAgreement ?? "", tokenNotificationURL ?? "", label]
        guard texts.allSatisfy({ $0.count <= maxText }) else {
            return .failure(failure("a payment type's texts have at most \(maxText) characters"))
        }
        guard !description.isEmpty else { return .failure(failure("Missing 'paymentDescription'.")) }
        guard isAmount(amount), !label.isEmpty else {
            return .failure(failure("'\(member)' must have a label and a decimal amount"))
        }
        guard let url = httpsURL(managementURL) else {
            return .failure(failure("'managementURL' must be an https URL"))
        }
        if let notification = tokenNotificationURL, httpsURL(notification) == nil {
            return .failure(failure("'tokenNotificationURL' must be an https URL"))
        }
        return .success(url)
    }

    static func recurringType(
        _ type: RecurringPaymentRequestBody, _ currency: String
    ) -> Result<PaymentTypeRequest, PaymentSheetError> {
        let billing = type.regularBilling
        let url: URL
        switch common(
            description: type.paymentDescription, managementURL: type.managementURL,
            billingAgreement: type.billingAgreement, tokenNotificationURL: type.tokenNotificationURL,
            label: billing.label, amount: billing.amount, member: "regularBilling")
        {
        case .success(let checked): url = checked
        case .failure(let error): return .failure(error)
        }
        for (item, member) in [(billing, "regularBilling"), type.trialBilling.map { ($0, "trialBilling") }].compactMap(
            { $0 })
        {
            if let problem = check(item, member) { return .failure(problem) }
        }
        let count = billing.intervalCount ?? 1
        let unit = billing.intervalUnit ?? "month"
        var words = count == 1 ? "every \(unit)" : "every \(count) \(unit)s"
        if let start = billing.startDate { words += " from \(start.prefix(10))" }
        if let end = billing.endDate { words += " until \(end.prefix(10))" }
        if let trial = type.trialBilling { words += "; first \(trial.label) \(trial.amount) \(currency)" }
        return .success(
            PaymentTypeRequest(
                kind: .recurring, paymentDescription: type.paymentDescription,
                billing: PaymentSummaryItem(label: billing.label, amount: billing.amount), schedule: words,
                managementURL: url.absoluteString, billingAgreement: type.billingAgreement))
    }

    /// A recurring item's dates, unit and count.
    static func check(_ item: RecurringBillingBody, _ member: String) -> PaymentSheetError? {
        guard isAmount(item.amount), !item.label.isEmpty, item.label.count <= maxText else {
            return failure("'\(member)' must have a label and a decimal amount")
        }
        if let unit = item.intervalUnit, !units.contains(unit) {
            return failure("'\(member)': the interval unit is one of \(units.joined(separator: ", "))")
        }
        if let count = item.intervalCount, count < 1 {
            return failure("'\(member)': the interval count is a positive whole number")
        }
        for date in [item.startDate, item.endDate].compactMap({ $0 }) where !isDate(date) {
            return failure("'\(member)': a recurring payment's dates are ISO 8601 dates")
        }
        return nil
    }

    static func reloadType(
        _ type: AutomaticReloadPaymentRequestBody, _ currency: String
    ) -> Result<PaymentTypeRequest, PaymentSheetError> {
        let billing = type.automaticReloadBilling
        switch common(
            description: type.paymentDescription, managementURL: type.managementURL,
            billingAgreement: type.billingAgreement, tokenNotificationURL: type.tokenNotificationURL,
            label: billing.label, amount: billing.amount, member: "automaticReloadBilling")
        {
        case .success(let url):
            guard isAmount(billing.thresholdAmount) else {
                return .failure(failure("Missing 'automaticReloadPaymentThresholdAmount'."))
            }
            return .success(
                PaymentTypeRequest(
                    kind: .automaticReload, paymentDescription: type.paymentDescription,
                    billing: PaymentSummaryItem(label: billing.label, amount: billing.amount),
                    schedule: "when the balance is below \(billing.thresholdAmount) \(currency)",
                    managementURL: url.absoluteString, billingAgreement: type.billingAgreement))
        case .failure(let error):
            return .failure(error)
        }
    }

    static func deferredType(
        _ type: DeferredPaymentRequestBody, _ currency: String
    ) -> Result<PaymentTypeRequest, PaymentSheetError> {
        let billing = type.deferredBilling
        switch common(
            description: type.paymentDescription, managementURL: type.managementURL,
            billingAgreement: type.billingAgreement, tokenNotificationURL: type.tokenNotificationURL,
            label: billing.label, amount: billing.amount, member: "deferredBilling")
        {
        case .success(let url):
            guard isDate(billing.deferredDate) else {
                return .failure(failure("'deferredPaymentDate' must be a date."))
            }
            return .success(
                PaymentTypeRequest(
                    kind: .deferred, paymentDescription: type.paymentDescription,
                    billing: PaymentSummaryItem(label: billing.label, amount: billing.amount),
                    schedule: "on \(billing.deferredDate.prefix(10))",
                    managementURL: url.absoluteString, billingAgreement: type.billingAgreement))
        case .failure(let error):
            return .failure(error)
        }
    }

    static func httpsURL(_ text: String) -> URL? {
        guard let url = URL(string: text), url.scheme == "https", url.host?.isEmpty == false else { return nil }
        return url
    }

    static func isAmount(_ text: String) -> Bool {
        text.count <= 32 && text.wholeMatch(of: /-?[0-9]+(\.[0-9]+)?/) != nil
    }

    static func isDate(_ text: String) -> Bool {
        text.count <= 40 && text.prefixMatch(of: /[0-9]{4}-[0-9]{2}-[0-9]{2}/) != nil
    }
}
