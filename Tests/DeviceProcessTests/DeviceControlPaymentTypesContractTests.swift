import AppPayments
import DeviceControlAPI
import DeviceProcess
import Foundation
import Testing

/// Version 14 payment types in an app's request over the control socket: PassKit's names on the wire (pinned), read
/// by the device into the payment type its sheet shows (the same wording as a page's), and every malformed one, or
/// more than one, a typed `invalidRequest` that presents nothing.
@Suite("Device control wire format: an app's recurring, automatic reload and deferred payment requests")
struct DeviceControlPaymentTypesContractTests {
    static let base = PaymentRequest(
        merchantIdentifier: "merchant.dev.orchard.demo", countryCode: "US", currencyCode: "USD",
        supportedNetworks: [.visa], merchantCapabilities: [.threeDSecure],
        paymentSummaryItems: [PaymentSummaryItem(label: "Orchard", amount: "9.99")])

    static let recurring = RecurringPaymentRequestBody(
        paymentDescription: "Coffee club",
        regularBilling: RecurringBillingBody(
            label: "Monthly beans", amount: "9.99", startDate: "2027-01-01", intervalUnit: "month", intervalCount: 1),
        managementURL: "https://store.orchard.test/subscriptions",
        trialBilling: RecurringBillingBody(label: "Trial", amount: "0.00", intervalUnit: "month"),
        billingAgreement: "Cancel any time.", tokenNotificationURL: "https://store.orchard.test/tokens")

    static func body(
        recurring: RecurringPaymentRequestBody? = nil, reload: AutomaticReloadPaymentRequestBody? = nil,
        deferred: DeferredPaymentRequestBody? = nil
    ) -> PaymentSheetRequestBody {
        var body = PaymentSheetRequestBody(base)
        body.recurringPaymentRequest = recurring
        body.automaticReloadPaymentRequest = reload
        body.deferredPaymentRequest = deferred
        return body
    }

    static func refusal(_ body: PaymentSheetRequestBody) -> PaymentSheetError? {
        guard case .failure(let error) = body.paymentRequest() else { return nil }
        return error
    }

    @Test("The wire keys are PassKit's, absent when unset; what an app writes the device reads as the sheet shows it")
    func writtenAndReadTheSameWay() throws {
        let encoder = DeviceControlJSON.encoder()
        let plain = String(decoding: try encoder.encode(PaymentSheetRequestBody(Self.base)), as: UTF8.self)
        #expect(!plain.contains("PaymentRequest"))
        let recurring = String(
            decoding: try encoder.encode(Self.body(recurring: Self.recurring).recurringPaymentRequest), as: UTF8.self)
        #expect(
            recurring
                == #"{"billingAgreement":"Cancel any time.","managementURL":"https://store.orchard.test/subscriptions","#
                + #""paymentDescription":"Coffee club","regularBilling":{"amount":"9.99","intervalCount":1,"#
                + #""intervalUnit":"month","label":"Monthly beans","startDate":"2027-01-01"},"#
                + #""tokenNotificationURL":"https://store.orchard.test/tokens","#
                + #""trialBilling":{"amount":"0.00","intervalUnit":"month","label":"Trial"}}"#)
        let decoded = try DeviceControlJSON.decoder().decode(
            PaymentSheetRequestBody.self, from: try encoder.encode(Self.body(recurring: Self.recurring)))
        #expect(decoded == Self.body(recurring: Self.recurring))
        let type = try #require(try decoded.paymentRequest().get().paymentType)
        #expect(type.kind == .recurring && type.paymentDescription == "Coffee club")
        #expect(type.billing == PaymentSummaryItem(label: "Monthly beans", amount: "9.99"))
        #expect(type.schedule == "every month from 2027-01-01; first Trial 0.00 USD")
        #expect(type.managementURL == "https://store.orchard.test/subscriptions")
        #expect(type.billingAgreement == "Cancel any time.")

        let reload = AutomaticReloadPaymentRequestBody(
            paymentDescription: "Transit card",
            automaticReloadBilling: AutomaticReloadBillingBody(
                label: "Reload", amount: "20.00", thresholdAmount: "5.00"),
            managementURL: "https://store.orchard.test/reload")
        let reloaded = try #require(try Self.body(reload: reload).paymentRequest().get().paymentType)
        #expect(reloaded.kind == .automaticReload && reloaded.schedule == "when the balance is below 5.00 USD")
        let json =
            #"{"automaticReloadBilling":{"amount":"20.00","label":"Reload","thresholdAmount":"5.00"},"#
            + #""managementURL":"https://store.orchard.test/reload","paymentDescription":"Transit card"}"#
        #expect(
            try DeviceControlJSON.decoder().decode(AutomaticReloadPaymentRequestBody.self, from: Data(json.utf8))
                == reload)

        let deferred = DeferredPaymentRequestBody(
            paymentDescription: "Hotel stay",
            deferredBilling: DeferredBillingBody(label: "Room", amount: "120.00", deferredDate: "2027-03-01"),
            managementURL: "https://store.orchard.test/bookings")
        let later = try #require(try Self.body(deferred: deferred).paymentRequest().get().paymentType)
        #expect(later.kind == .deferred && later.schedule == "on 2027-03-01" && later.billing?.amount == "120.00")
        #expect(try Self.body().paymentRequest().get().paymentType == nil)
    }

    @Test("A malformed payment type, or more than one, is invalidRequest with what to fix")
    func malformedOnesAreRefused() {
        let reload = AutomaticReloadPaymentRequestBody(
            paymentDescription: "Transit card",
            automaticReloadBilling: AutomaticReloadBillingBody(
                label: "Reload", amount: "20.00", thresholdAmount: "5.00"),
            managementURL: "https://store.orchard.test/reload")
        let two = Self.refusal(Self.body(recurring: Self.recurring, reload: reload))
        #expect(two?.code == .invalidRequest && two?.message.hasPrefix("Only one of") == true)

        func recurring(_ change: (inout RecurringPaymentRequestBody) -> Void) -> PaymentSheetError? {
            var type = Self.recurring
            change(&type)
            return Self.refusal(Self.body(recurring: type))
        }
        func billing(
            _ change: @escaping (inout RecurringBillingBody) -> Void
        ) -> (inout RecurringPaymentRequestBody) -> Void {
            { type in
                var item = type.regularBilling
                change(&item)
                type = RecurringPaymentRequestBody(
                    paymentDescription: type.paymentDescription, regularBilling: item,
                    managementURL: type.managementURL, trialBilling: type.trialBilling)
            }
        }
        let malformed: [(String, PaymentSheetError?)] = [
            (
                "no description",
                recurring {
                    $0 = RecurringPaymentRequestBody(
                        paymentDescription: "", regularBilling: $0.regularBilling, managementURL: $0.managementURL)
                }
            ),
            (
                "an http management URL",
                recurring {
                    $0 = RecurringPaymentRequestBody(
                        paymentDescription: "Coffee club", regularBilling: $0.regularBilling,
                        managementURL: "http://store.orchard.test/subscriptions")
                }
            ),
            ("an http token notification URL", recurring { $0.tokenNotificationURL = "http://store.orchard.test/t" }),
            ("a long billing agreement", recurring { $0.billingAgreement = String(repeating: "a", count: 513) }),
            (
                "an amount that is not decimal",
                recurring(billing { $0 = RecurringBillingBody(label: "M", amount: "9,99") })
            ),
            ("an unknown interval unit", recurring(billing { $0.intervalUnit = "fortnight" })),
            ("a zero interval count", recurring(billing { $0.intervalCount = 0 })),
            ("a start date that is not a date", recurring(billing { $0.startDate = "next month" })),
            (
                "a trial without an amount",
                recurring { $0.trialBilling = RecurringBillingBody(label: "Trial", amount: "") }
            ),
            (
                "a reload without a threshold",
                Self.refusal(
                    Self.body(
                        reload: AutomaticReloadPaymentRequestBody(
                            paymentDescription: "Transit card",
                            automaticReloadBilling: AutomaticReloadBillingBody(
                                label: "Reload", amount: "20.00", thresholdAmount: ""),
                            managementURL: "https://store.orchard.test/reload")))
            ),
            (
                "a deferred payment without a date",
                Self.refusal(
                    Self.body(
                        deferred: DeferredPaymentRequestBody(
                            paymentDescription: "Hotel stay",
                            deferredBilling: DeferredBillingBody(label: "Room", amount: "120.00", deferredDate: "soon"),
                            managementURL: "https://store.orchard.test/bookings")))
            ),
        ]
        for (name, error) in malformed {
            #expect(error?.code == .invalidRequest, "\(name) was not refused")
            #expect(error.map { !$0.message.isEmpty } == true, "\(name)")
        }
    }
}

extension DeviceControlPaymentTypesContractTests {
    @Test(
        "Over the socket: a malformed payment type is 400 invalidRequest and the device keeps no sheet; a valid one is read"
    )
    func throughTheSocket() async throws {
        let devices = try await DeviceControlAPIContractTests.Devices()
        var bad = Self.recurring
        bad.tokenNotificationURL = "ftp://store.orchard.test/tokens"
        let refused = try await devices.send(
            PresentPaymentSheet(applicationIdentifier: "dev.orchard.demo-app", request: Self.body(recurring: bad))
        ).failure()
        #expect(refused.status == 400 && refused.refusal?.code == "invalidRequest")
        #expect(try await devices.send(GetPaymentSheet()).failure().status == 404)
        // A valid one is read and claimed, refused only for want of a Pay server in this test.
        let read = try await devices.send(
            PresentPaymentSheet(
                applicationIdentifier: "dev.orchard.demo-app", request: Self.body(recurring: Self.recurring))
        ).failure()
        #expect(read.status == 503 && read.refusal?.code == "payServerUnavailable")
    }
}
