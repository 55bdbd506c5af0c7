import AppPayments
import BrowserAgentAPI
import DeviceControlAPI
import Foundation
import OrchardHTTP

/// The version 12 and 14 members of a page's request, checked again by the agent (the page's script is the page's:
/// `orchard-pay.js` validated them first, but the device trusts nothing a page sends): the coupon code and the one
/// payment type the sheet shows (docs/web.md, "The API by version").
enum WebPaymentTypes {
    static let maxText = 512
    static let timings = ["immediate", "recurring", "deferred", "automaticReload"]
    static let units = ["year", "month", "day", "hour", "minute"]

    /// Apple Pay JS's request as the device's payment request (the merchant comes from the verified session).
    static func paymentRequest(_ request: BrowserAgentAPI.PaymentRequest) -> Result<PaymentRequest, RequestProblem> {
        var items: [PaymentSummaryItem] = []
        for item in (request.lineItems ?? []) + [request.total] {
            items.append(
                PaymentSummaryItem(
                    label: item.label, amount: item.amount ?? "0",
                    type: item.type == "pending" ? .pending : .final))
        }
        func fields(_ names: [String]?) -> Result<Set<ContactField>, RequestProblem> {
            var set = Set<ContactField>()
            for name in names ?? [] {
                switch name {
                case "email": set.insert(.emailAddress)
                case "phone": set.insert(.phoneNumber)
                case "name": set.insert(.name)
                case "postalAddress": set.insert(.postalAddress)
                case "phoneticName": continue
                default: return .failure(RequestProblem("\"\(name.prefix(32))\" is not a valid contact field."))
                }
            }
            return .success(set)
        }
        var applicationData: Data?
        if let text = request.applicationData {
            guard let data = Data(base64Encoded: text) else {
                return .failure(RequestProblem("\"applicationData\" must be a Base64-encoded string."))
            }
            applicationData = data
        }
        let shipping: Set<ContactField>
        let billing: Set<ContactField>
        switch (fields(request.requiredShippingContactFields), fields(request.requiredBillingContactFields)) {
        case (.success(let s), .success(let b)):
            shipping = s
            billing = b
        case (.failure(let problem), _), (_, .failure(let problem)):
            return .failure(problem)
        }
        var converted = PaymentRequest(
            merchantIdentifier: "", countryCode: request.countryCode, currencyCode: request.currencyCode,
            supportedNetworks: request.supportedNetworks.map(PaymentNetwork.init(rawValue:)),
            merchantCapabilities: MerchantCapabilities(names: request.merchantCapabilities),
            paymentSummaryItems: items, applicationData: applicationData,
            requiredBillingContactFields: billing, requiredShippingContactFields: shipping,
            shippingMethods: (request.shippingMethods ?? []).map {
                ShippingMethod(identifier: $0.identifier, label: $0.label, detail: $0.detail ?? "", amount: $0.amount)
            })
        // Versions 12 and 14: the coupon code and the payment type.
        return WebPaymentTypes.apply(request, to: &converted).map { converted }
    }

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

    /// A page's recurring, automatic reload or deferred payment (checked by ``paymentType(_:currency:)``) as the
    /// control socket's request carries it (PassKit's names), for the phone or watch that pays for a Mac (Handoff),
    /// which reads it into the same payment type. Several merchants' tokens are not carried (no merchant token), nor
    /// `tokenNotificationURL` (checked, not used).
    static func carry(_ type: BrowserAgentAPI.PaymentType?, into body: inout PaymentSheetRequestBody) {
        guard let type, let description = type.paymentDescription, let billing = type.billing,
            let amount = billing.amount, let management = type.managementURL
        else { return }
        switch type.kind {
        case "recurring":
            func item(_ line: BrowserAgentAPI.LineItem) -> RecurringBillingBody {
                RecurringBillingBody(
                    label: line.label, amount: line.amount ?? "0", startDate: line.recurringPaymentStartDate,
                    endDate: line.recurringPaymentEndDate, intervalUnit: line.recurringPaymentIntervalUnit,
                    intervalCount: line.recurringPaymentIntervalCount)
            }
            body.recurringPaymentRequest = RecurringPaymentRequestBody(
                paymentDescription: description, regularBilling: item(billing), managementURL: management,
                trialBilling: type.trialBilling.map(item), billingAgreement: type.billingAgreement)
        case "automaticReload":
            guard let threshold = billing.automaticReloadPaymentThresholdAmount else { return }
            body.automaticReloadPaymentRequest = AutomaticReloadPaymentRequestBody(
                paymentDescription: description,
                automaticReloadBilling: AutomaticReloadBillingBody(
                    label: billing.label, amount: amount, thresholdAmount: threshold),
                managementURL: management, billingAgreement: type.billingAgreement)
        case "deferred":
            guard let date = billing.deferredPaymentDate else { return }
            body.deferredPaymentRequest = DeferredPaymentRequestBody(
                paymentDescription: description,
                deferredBilling: DeferredBillingBody(label: billing.label, amount: amount, deferredDate: date),
                managementURL: management, billingAgreement: type.billingAgreement)
        default:
            return
        }
    }

    static func isAmount(_ text: String) -> Bool {
        text.count <= 32 && text.wholeMatch(of: /-?[0-9]+(\.[0-9]+)?/) != nil
    }

    static func isDate(_ text: String) -> Bool {
        text.count <= 40 && text.prefixMatch(of: /[0-9]{4}-[0-9]{2}-[0-9]{2}/) != nil
    }
}

/// The agent's reading of what a page's frame sends it (docs/web.md, "The browser agent"), public for the fuzz target
/// `FuzzAgentMessage`: every frame body decodes into its contract type or is refused, and a `begin()` body's request
/// becomes the device's payment request or a refusal, never a crash.
public enum BrowserAgentMessage {
    /// The frame's routes whose bodies ``refusal(of:route:)`` reads.
    public static let routes = [
        BrowserAgentAPI.Route.sessions, BrowserAgentAPI.Route.hello, BrowserAgentAPI.Route.activeCard,
        BrowserAgentAPI.Route.answer,
    ]

    /// Reads `body` as the body of the frame's route `route` (a ``BrowserAgentAPI/Route`` pattern): nil when the
    /// agent would take it, else why not (the message its 400 answer carries).
    public static func refusal(of body: [UInt8], route: String) -> String? {
        let data = Data(body)
        switch route {
        case BrowserAgentAPI.Route.hello:
            return refusal(data, as: BrowserAgentAPI.PageContext.self, otherwise: "the body is a page context")
        case BrowserAgentAPI.Route.activeCard:
            return refusal(
                data, as: BrowserAgentAPI.ActiveCardQuery.self, otherwise: "the body is {merchantIdentifier, page}")
        case BrowserAgentAPI.Route.answer:
            // Decoded by the device's sheet, which refuses a key given twice.
            return (try? DeviceControlJSON.decoder().decode(AnswerPaymentSheetEvent.Body.self, from: data)) == nil
                ? "the body is an answer" : nil
        case BrowserAgentAPI.Route.sessions:
            let begin: BrowserAgentAPI.BeginSession
            do throws(AgentBodyRefusal) {
                begin = try AgentBody.decode(data, otherwise: "the body is {version, page, request}")
            } catch {
                return error.message
            }
            switch WebPaymentTypes.paymentRequest(begin.request) {
            case .success: return nil
            case .failure(let problem): return problem.message
            }
        default:
            return "no such route"
        }
    }

    private static func refusal<T: Decodable>(_ body: Data, as type: T.Type, otherwise message: String) -> String? {
        do throws(AgentBodyRefusal) {
            _ = try AgentBody.decode(body, as: type, otherwise: message)
            return nil
        } catch {
            return error.message
        }
    }
}

/// The agent's reading of a frame's or sheet's body: OrchardHTTP's one strict decoder, so a key given twice is
/// refused with 400 `duplicate_key` as every Orchard party refuses it (a page and the agent could otherwise act on
/// different values), and any other body that is not the route's type with 400 `invalidRequest`.
enum AgentBody {
    static func decode<T: Decodable>(
        _ body: Data, as type: T.Type = T.self, otherwise message: String = "the body is not this route's JSON"
    ) throws(AgentBodyRefusal) -> T {
        do throws(HTTPError) {
            return try JSONCoding.decodeRequestBody(T.self, from: body)
        } catch  where error.code == .duplicateKey {
            throw AgentBodyRefusal(code: error.code.description, message: error.message)
        } catch {
            throw AgentBodyRefusal(code: "invalidRequest", message: message)
        }
    }
}

/// A body the agent refuses: its 400 answer's code and message.
struct AgentBodyRefusal: Error {
    let code: String
    let message: String
}
