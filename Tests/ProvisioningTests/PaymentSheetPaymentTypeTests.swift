import AppPayments
import DeviceControlAPI
import DeviceProcess
import Foundation
import OrchardRuntime
import OrchardStore
import PaymentToken
import Testing

extension PaymentSheetControlTests {
    /// A coffee subscription as an app writes it (PassKit's `PKRecurringPaymentRequest`).
    static let subscription = RecurringPaymentRequestBody(
        paymentDescription: "Coffee club",
        regularBilling: RecurringBillingBody(
            label: "Monthly beans", amount: "9.99", startDate: "2027-01-01", intervalUnit: "month"),
        managementURL: "https://store.orchard.test/subscriptions", billingAgreement: "Cancel any time.",
        tokenNotificationURL: "https://store.orchard.test/tokens")

    @Test(
        "An app's recurring payment request over the control socket: shown on the sheet, the token's decrypted data carries a merchant token; a malformed one or two payment types are refused and change nothing"
    )
    func recurringRequestThroughTheSocket() async throws {
        try await Self.withPhone(cards: ["4111111111111111"]) { sandbox, phone in
            var request = PaymentSheetTests.request()
            request.requiredShippingContactFields = []
            var body = PaymentSheetRequestBody(request)
            let nonces = try phone.nonceRows()

            // Refused by the device itself (the app's bytes, not the app's library): nothing presented or issued.
            var malformed = body
            malformed.recurringPaymentRequest = RecurringPaymentRequestBody(
                paymentDescription: "Coffee club", regularBilling: Self.subscription.regularBilling,
                managementURL: "http://store.orchard.test/subscriptions")
            var two = body
            two.recurringPaymentRequest = Self.subscription
            two.deferredPaymentRequest = DeferredPaymentRequestBody(
                paymentDescription: "Later",
                deferredBilling: .init(label: "L", amount: "1.00", deferredDate: "2027-03-01"),
                managementURL: "https://store.orchard.test/later")
            for refused in [malformed, two] {
                let answer = try await phone.send(
                    PresentPaymentSheet(applicationIdentifier: "dev.orchard.demo-app", request: refused))
                #expect(answer.refusal == Refusal(status: 400, code: "invalidRequest"))
            }
            #expect(try await phone.send(GetPaymentSheet()).refusal == Refusal(status: 404, code: "notFound"))
            #expect(try phone.nonceRows() == nonces && merchantTokens(sandbox) == 0)

            body.recurringPaymentRequest = Self.subscription
            let delegate = RecordingDelegate()
            let host = phone.host
            let app = Task {
                try await host.present(body, applicationIdentifier: "dev.orchard.demo-app", delegate: delegate)
            }
            let shown = try await phone.sheetWaiting(for: "user")
            let type = try #require(shown.paymentType)
            #expect(type.kind == "recurring" && type.paymentDescription == "Coffee club")
            #expect(type.schedule == "every month from 2027-01-01" && type.billing?.amount == "9.99")
            #expect(type.managementURL == "https://store.orchard.test/subscriptions")
            #expect(type.billingAgreement == "Cancel any time.")
            _ = try await phone.send(Self.billAlice).get()
            let final = try await phone.send(AuthenticatePaymentSheet(Self.face)).get()
            #expect(final.sheet?.status == "completed")
            guard case .completed(let result) = try await app.value else {
                Issue.record("the app's sheet did not complete")
                return
            }
            #expect(result.status == .success)
            let payment = try #require(delegate.payments.first)
            let data = try Self.decrypt(payment.token, sandbox, amount: 999)
            let identifier = try #require(data.merchantTokenIdentifier)
            #expect(identifier.hasPrefix("MTK") && data.merchantTokenMetadata?.cardMetadata?.fpanSuffix == "1111")
            #expect(try merchantTokens(sandbox) == 1)
        }
    }

    /// The Pay server's merchant tokens.
    private func merchantTokens(_ sandbox: Sandbox) throws -> Int {
        let database = try Database(
            path: sandbox.deployment.databasePath(for: .pay), options: StoreOptions(durability: .normal),
            access: .readOnly)
        return Int(try database.queryFirst("SELECT count(*) FROM merchant_tokens", [], { try $0.int(0) }) ?? -1)
    }
}
