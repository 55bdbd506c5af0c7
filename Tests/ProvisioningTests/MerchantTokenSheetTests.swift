import AppPayments
import Device
import Foundation
import MerchantKit
import MerchantServer
import OrchardServices
import OrchardX509
import PayClient
import PaymentToken
import SecureElement
import Testing

/// A recurring payment through the device's sheet asks the Pay server for the merchant token of this
/// merchant and card (the card's token reference from the Secure Element); the token's payment data carries it.
@Suite("In-app: a recurring payment's token carries the merchant token of the merchant and card", .serialized)
struct MerchantTokenSheetTests {
    @Test(
        "A recurring payment through the sheet: merchantTokenIdentifier and metadata in the decrypted data, the same the next time; an immediate payment has none"
    )
    func recurringPaymentCarriesMerchantToken() async throws {
        let sandbox = try await Sandbox()
        let phone = try await sandbox.makeDevice("phone", kind: .phone, biometry: .face)
        _ = try await sandbox.addCard("4111111111111111", to: phone)
        try await sandbox.register("phone")
        let decryptor = try PaymentTokenDecryptor(
            identities: [try MerchantService.loadProcessingIdentity(from: sandbox.deployment)],
            trustRoots: [try DeploymentPKI.readCertificate(named: "token-root", from: sandbox.deployment)])
        func pay(_ paymentType: PaymentTypeRequest?) async throws -> DecryptedPaymentData {
            var request = PaymentSheetTests.request()
            request.paymentType = paymentType
            let delegate = RecordingDelegate()
            let controller = PaymentAuthorizationController(
                paymentRequest: request,
                host: DevicePaymentSheet(
                    device: phone, client: try sandbox.client("phone"), root: sandbox.root,
                    user: AcceptingSheetUser(contact: PaymentSheetTests.alice)),
                applicationIdentifier: "dev.orchard.demo-app")
            guard case .completed(let result) = try await controller.present(delegate: delegate),
                result.status == .success, let payment = delegate.payments.first
            else { throw MerchantTokenTestFailure("the sheet did not pay") }
            return try decryptor.decrypt(try PaymentToken(jsonBytes: Array(payment.token))).payment
        }
        let recurring = PaymentTypeRequest(
            kind: .recurring, paymentDescription: "Coffee club",
            billing: PaymentSummaryItem(label: "Monthly beans", amount: "9.99"), schedule: "every month",
            managementURL: "https://store.orchard.test/subscriptions")
        let first = try await pay(recurring)
        let identifier = try #require(first.merchantTokenIdentifier)
        #expect(identifier.hasPrefix("MTK"))
        #expect(first.merchantTokenMetadata?.cardMetadata?.fpanSuffix == "1111")
        #expect(!identifier.contains(first.applicationPrimaryAccountNumber) && !identifier.contains("4111111111111111"))
        let second = try await pay(recurring)
        #expect(second.merchantTokenIdentifier == identifier)
        let immediate = try await pay(nil)
        #expect(immediate.merchantTokenIdentifier == nil && immediate.merchantTokenMetadata == nil)
        await sandbox.close()
    }
}

struct MerchantTokenTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
