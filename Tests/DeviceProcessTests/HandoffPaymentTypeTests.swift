import AppPayments
import BrowserAgentAPI
import DeviceControlAPI
import Foundation
import Testing

@testable import DeviceProcess

/// A Mac's page with a version 14 payment type that pays with a nearby phone or watch (Handoff): the browser agent
/// writes the page's type into the request it sends (the control socket's body, PassKit's names), and the device
/// reads it into the payment type the page's own sheet would show, which asks its Pay server for the merchant token.
@Suite("Handoff: a page's recurring, automatic reload or deferred payment reaches the paying device")
struct HandoffPaymentTypeTests {
    static func line(_ label: String, _ amount: String, timing: String) -> BrowserAgentAPI.LineItem {
        var item = BrowserAgentAPI.LineItem(label: label, amount: amount)
        item.paymentTiming = timing
        return item
    }

    static func type(_ kind: String, billing: BrowserAgentAPI.LineItem) -> BrowserAgentAPI.PaymentType {
        var type = BrowserAgentAPI.PaymentType(kind: kind)
        type.paymentDescription = "Coffee club"
        type.billing = billing
        type.managementURL = "https://store.orchard.test/subscriptions"
        type.billingAgreement = "Cancel any time."
        type.tokenNotificationURL = "https://store.orchard.test/tokens"
        return type
    }

    @Test("Each kind as the device reads it is the payment type the page's sheet shows; other types carry nothing")
    func carriedAsShown() throws {
        var regular = Self.line("Monthly beans", "9.99", timing: "recurring")
        regular.recurringPaymentStartDate = "2027-01-01"
        regular.recurringPaymentIntervalUnit = "month"
        regular.recurringPaymentIntervalCount = 2
        var recurring = Self.type("recurring", billing: regular)
        recurring.trialBilling = Self.line("Trial", "0.00", timing: "recurring")
        var reloadBilling = Self.line("Reload", "20.00", timing: "automaticReload")
        reloadBilling.automaticReloadPaymentThresholdAmount = "5.00"
        var deferredBilling = Self.line("Room", "120.00", timing: "deferred")
        deferredBilling.deferredPaymentDate = "2027-03-01"
        let request = PaymentRequest(
            merchantIdentifier: "merchant.dev.orchard.demo", countryCode: "US", currencyCode: "USD",
            supportedNetworks: [.visa], merchantCapabilities: [.threeDSecure],
            paymentSummaryItems: [PaymentSummaryItem(label: "Orchard", amount: "9.99")])
        let types = [
            recurring, Self.type("automaticReload", billing: reloadBilling),
            Self.type("deferred", billing: deferredBilling),
        ]
        for type in types {
            let shown = try WebPaymentTypes.paymentType(type, currency: "USD").get()
            var body = PaymentSheetRequestBody(request)
            WebPaymentTypes.carry(type, into: &body)
            let read = try DeviceControlJSON.decoder().decode(
                PaymentSheetRequestBody.self, from: try DeviceControlJSON.encoder().encode(body))
            #expect(try read.paymentRequest().get().paymentType == shown, "\(type.kind)")
        }
        #expect(
            try WebPaymentTypes.paymentType(recurring, currency: "USD").get().schedule
                == "every 2 months from 2027-01-01; first Trial 0.00 USD")
        var multi = BrowserAgentAPI.PaymentType(kind: "multiToken")
        multi.paymentDescription = "Two stores"
        for type in [nil, multi] {
            var body = PaymentSheetRequestBody(request)
            WebPaymentTypes.carry(type, into: &body)
            #expect(body == PaymentSheetRequestBody(request))
        }
    }
}
