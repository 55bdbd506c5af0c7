import AppPayments
import BrowserAgentAPI
import Foundation

/// The version 12 and 14 members of a page's request, checked again by the agent (the page's script is the page's:
/// `orchard-pay.js` validated them first, but the device trusts nothing a page sends): the coupon code and the one
/// payment type the sheet shows (docs/web.md, "The API by version").
enum WebPaymentTypes {
    static let maxText = 512
    static let timings = ["immediate", "recurring", "deferred", "automaticReload"]
    static let units = ["year", "month", "day", "hour", "minute"]

    /// Applies the request's coupon code and payment type to `request`.
    static func apply(
        _ page: BrowserAgentAPI.PaymentRequest, to request: inout PaymentRequest
    ) -> Result<Void, RequestProblem> {
        if let code = page.couponCode, code.count > 64 {
            return .failure(RequestProblem("a coupon code has at most 64 characters"))
        }
        request.supportsCouponCode = page.supportsCouponCode ?? false
        request.couponCode = page.couponCode
        for item in (page.lineItems ?? []) + [page.total] {
            if let problem = check(item) { return .failure(problem) }
        }
        guard let type = page.paymentType else { return .success(()) }
        switch paymentType(type, currency: page.currencyCode) {
        case .success(let converted):
            request.paymentType = converted
            return .success(())
        case .failure(let problem):
            return .failure(problem)
        }
    }

    /// A line item's version 14 members.
    static func check(_ item: BrowserAgentAPI.LineItem) -> RequestProblem? {
        guard let timing = item.paymentTiming else { return nil }
        guard timings.contains(timing) else {
            return RequestProblem(
                "The provided value '\(timing.prefix(32))' is not a valid enum value of type ApplePayPaymentTiming.")
        }
        switch timing {
        case "recurring":
            if let unit = item.recurringPaymentIntervalUnit, !units.contains(unit) {
                return RequestProblem(
                    "The provided value '\(unit.prefix(32))' is not a valid enum value of type "
                        + "ApplePayRecurringPaymentDateUnit.")
            }
            if let count = item.recurringPaymentIntervalCount, count < 1 {
                return RequestProblem("'recurringPaymentIntervalCount' must be a positive whole number.")
            }
            for date in [item.recurringPaymentStartDate, item.recurringPaymentEndDate].compactMap({ $0 })
            where !isDate(date) {
                return RequestProblem("a recurring payment's dates are ISO 8601 dates")
            }
        case "deferred":
            guard let date = item.deferredPaymentDate else { return RequestProblem("Missing 'deferredPaymentDate'.") }
            guard isDate(date) else { return RequestProblem("'deferredPaymentDate' must be a date.") }
        case "automaticReload":
            guard let threshold = item.automaticReloadPaymentThresholdAmount, isAmount(threshold) else {
                return RequestProblem("Missing 'automaticReloadPaymentThresholdAmount'.")
            }
        default:
            break
        }
        return nil
    }

    static func paymentType(
        _ type: BrowserAgentAPI.PaymentType, currency: String
    ) -> Result<PaymentTypeRequest, RequestProblem> {
        let texts = [type.paymentDescription, type.billingAgreement, type.managementURL, type.tokenNotificationURL]
        guard texts.allSatisfy({ ($0?.count ?? 0) <= maxText }) else {
            return .failure(RequestProblem("a payment type's texts have at most \(maxText) characters"))
        }
        if type.kind == "multiToken" {
            guard let contexts = type.contexts, !contexts.isEmpty, contexts.count <= 16 else {
                return .failure(RequestProblem("'multiTokenContexts' must be a non-empty list."))
            }
            guard contexts.allSatisfy({ isAmount($0.amount) && $0.merchantName.count <= 128 }) else {
                return .failure(RequestProblem("a token context has a merchant name and an amount"))
            }
            let names = contexts.map { "\($0.merchantName) \($0.amount) \(currency)" }.joined(separator: ", ")
            return .success(
                PaymentTypeRequest(
                    kind: .multiToken, paymentDescription: "Payments to \(contexts.count) merchants", billing: nil,
                    schedule: names, managementURL: nil))
        }
        let kinds: [String: (PaymentTypeRequest.Kind, String, String)] = [
            "recurring": (.recurring, "regularBilling", "a 'recurring'"),
            "automaticReload": (.automaticReload, "automaticReloadBilling", "an 'automaticReload'"),
            "deferred": (.deferred, "deferredBilling", "a 'deferred'"),
        ]
        guard let (kind, member, article) = kinds[type.kind] else {
            return .failure(RequestProblem("\"\(type.kind.prefix(32))\" is not a payment type"))
        }
        guard let description = type.paymentDescription else {
            return .failure(RequestProblem("Missing 'paymentDescription'."))
        }
        guard let billing = type.billing else { return .failure(RequestProblem("Missing '\(member)'.")) }
        guard billing.paymentTiming == type.kind, let amount = billing.amount, isAmount(amount) else {
            return .failure(RequestProblem("'\(member)' must be \(article) line item."))
        }
        if let problem = check(billing) { return .failure(problem) }
        if let trial = type.trialBilling {
            guard trial.paymentTiming == "recurring" else {
                return .failure(RequestProblem("'trialBilling' must be a 'recurring' line item."))
            }
            if let problem = check(trial) { return .failure(problem) }
        }
        guard let management = type.managementURL, let url = URL(string: management), url.scheme == "https" else {
            return .failure(RequestProblem("Missing 'managementURL'."))
        }
        let schedule: String
        switch kind {
        case .recurring:
            let count = billing.recurringPaymentIntervalCount ?? 1
            let unit = billing.recurringPaymentIntervalUnit ?? "month"
            var words = count == 1 ? "every \(unit)" : "every \(count) \(unit)s"
            if let start = billing.recurringPaymentStartDate { words += " from \(start.prefix(10))" }
            if let end = billing.recurringPaymentEndDate { words += " until \(end.prefix(10))" }
            if let trial = type.trialBilling {
                words += "; first \(trial.label) \(trial.amount ?? "0") \(currency)"
            }
            schedule = words
        case .automaticReload:
            schedule = "when the balance is below \(billing.automaticReloadPaymentThresholdAmount ?? "?") \(currency)"
        case .deferred:
            schedule = "on \((billing.deferredPaymentDate ?? "").prefix(10))"
        case .multiToken:
            schedule = ""
        }
        return .success(
            PaymentTypeRequest(
                kind: kind, paymentDescription: description,
                billing: PaymentSummaryItem(label: billing.label, amount: amount), schedule: schedule,
                managementURL: url.absoluteString, billingAgreement: type.billingAgreement))
    }

    static func isAmount(_ text: String) -> Bool {
        text.count <= 32 && text.wholeMatch(of: /-?[0-9]+(\.[0-9]+)?/) != nil
    }

    static func isDate(_ text: String) -> Bool {
        text.count <= 40 && text.prefixMatch(of: /[0-9]{4}-[0-9]{2}-[0-9]{2}/) != nil
    }
}
