import AppPayments
import Device
import Foundation
import MerchantKit
import MerchantServer
import OrchardCrypto
import OrchardServices
import OrchardX509
import PayClient
import PaymentToken
import SecureElement
import Testing
import Wallet

/// The app's records of what the sheet told it.
final class RecordingDelegate: PaymentAuthorizationControllerDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var _shippingContacts: [PaymentContact] = []
    private var _methods: [AppPayments.PaymentMethod] = []
    private var _payments: [Payment] = []
    var shippingContacts: [PaymentContact] { lock.withLock { _shippingContacts } }
    var methods: [AppPayments.PaymentMethod] { lock.withLock { _methods } }
    var payments: [Payment] { lock.withLock { _payments } }

    func didSelectShippingContact(_ contact: PaymentContact, request: PaymentRequest) async -> PaymentRequestUpdate {
        lock.withLock { _shippingContacts.append(contact) }
        // Shipping to that region: the app adds a shipping line and a new total.
        return PaymentRequestUpdate(paymentSummaryItems: [
            PaymentSummaryItem(label: "Secret Roast Blend", amount: "9.99"),
            PaymentSummaryItem(label: "Shipping", amount: "2.00"),
            PaymentSummaryItem(label: "Orchard Demo Store", amount: "11.99"),
        ])
    }
    func didSelectPaymentMethod(
        _ method: AppPayments.PaymentMethod, request: PaymentRequest
    ) async -> PaymentRequestUpdate {
        lock.withLock { _methods.append(method) }
        return PaymentRequestUpdate(paymentSummaryItems: request.paymentSummaryItems)
    }
    func didAuthorizePayment(_ payment: Payment) async -> PaymentAuthorizationResult {
        lock.withLock { _payments.append(payment) }
        return PaymentAuthorizationResult(status: .success)
    }
}

/// A user whose Face ID does not match.
struct FailingUser: PaymentSheetUser {
    func chooseCard(_ eligible: [WalletCard], proposed: WalletCard) async -> WalletCard? { proposed }
    func shippingContact() async -> PaymentContact? { nil }
    func billingContact() async -> PaymentContact? { nil }
    func chooseShippingMethod(_ methods: [ShippingMethod]) async -> ShippingMethod? { methods.first }
    func authenticate(on profile: DeviceProfile) async -> AuthenticationEvidence? { .faceID(matched: false) }
}

@Suite("In-app: the payment sheet, the Secure Element credential and the Pay server's token", .serialized)
struct PaymentSheetTests {
    static let alice = PaymentContact(
        name: "Alice Doe", emailAddress: "alice@example.com", phoneNumber: "+1 555 0100",
        postalAddress: PostalAddress(
            street: "1 Infinite Loop", city: "Cupertino", state: "CA", postalCode: "95014", country: "US"))

    static func request(
        merchant: String = "merchant.dev.orchard.demo", networks: [PaymentNetwork] = [.visa, .masterCard],
        capabilities: MerchantCapabilities = [.threeDSecure, .credit, .debit],
        applicationData: Data? = Data("order-42".utf8)
    ) -> PaymentRequest {
        PaymentRequest(
            merchantIdentifier: merchant, countryCode: "US", currencyCode: "USD", supportedNetworks: networks,
            merchantCapabilities: capabilities,
            paymentSummaryItems: [
                PaymentSummaryItem(label: "Secret Roast Blend", amount: "9.99"),
                PaymentSummaryItem(label: "Orchard Demo Store", amount: "9.99"),
            ],
            applicationData: applicationData, requiredBillingContactFields: [.name],
            requiredShippingContactFields: [.postalAddress, .name],
            shippingMethods: [ShippingMethod(identifier: "standard", label: "Standard", amount: "0.00")])
    }

    func sheet(
        _ sandbox: Sandbox, _ device: Device, user: any PaymentSheetUser = AcceptingSheetUser(contact: alice)
    )
        throws -> DevicePaymentSheet
    {
        DevicePaymentSheet(device: device, client: try sandbox.client(device.name), root: sandbox.root, user: user)
    }

    @Test(
        "canMakePayments: no card, networks not accepted, a debit card for a credit-only merchant, a Mac without Touch ID"
    )
    func canMakePayments() async throws {
        let sandbox = try await Sandbox()
        let phone = try await sandbox.makeDevice("phone", kind: .phone, biometry: .face)
        let host = try sheet(sandbox, phone)
        #expect(await host.canMakePayments())
        #expect(!(await host.canMakePayments(usingNetworks: [.visa], capabilities: [.threeDSecure])))
        _ = try await sandbox.addCard("4000056655665556", to: phone)  // Visa debit
        #expect(await host.canMakePayments(usingNetworks: [.visa], capabilities: [.threeDSecure]))
        #expect(!(await host.canMakePayments(usingNetworks: [.masterCard, .amex], capabilities: [.threeDSecure])))
        #expect(!(await host.canMakePayments(usingNetworks: [.visa], capabilities: [.threeDSecure, .credit])))
        #expect(await host.canMakePayments(usingNetworks: [.visa], capabilities: [.threeDSecure, .debit]))
        let mac = try await sandbox.makeDevice("mac", kind: .mac, biometry: .none)
        #expect(!(try await sheet(sandbox, mac).canMakePayments()))
        await sandbox.close()
    }

    @Test(
        "A paid sheet: the app sees a redacted contact first, then only the fields it required; the token decrypts for the merchant with the order's applicationData"
    )
    func payment() async throws {
        let sandbox = try await Sandbox()
        let phone = try await sandbox.makeDevice("phone", kind: .phone, biometry: .face)
        _ = try await sandbox.addCard("4111111111111111", to: phone)
        try await sandbox.register("phone")
        let delegate = RecordingDelegate()
        let controller = PaymentAuthorizationController(
            paymentRequest: Self.request(), host: try sheet(sandbox, phone),
            applicationIdentifier: "dev.orchard.demo-app")
        guard case .completed(let result) = try await controller.present(delegate: delegate) else {
            Issue.record("the sheet did not complete"); return await sandbox.close()
        }
        #expect(result.status == .success)
        // Before authorization: city, state, postal code, country only.
        #expect(delegate.shippingContacts.count == 1)
        let redacted = try #require(delegate.shippingContacts.first)
        #expect(redacted.name == nil && redacted.emailAddress == nil && redacted.postalAddress?.street == "")
        #expect(redacted.postalAddress?.city == "Cupertino" && redacted.postalAddress?.postalCode == "95014")
        #expect(
            delegate.methods.first?.network == .visa && delegate.methods.first?.displayName.contains("1111") == true)
        let payment = try #require(delegate.payments.first)
        #expect(payment.shippingContact?.name == "Alice Doe" && payment.shippingContact?.emailAddress == nil)
        #expect(payment.billingContact?.postalAddress == nil && payment.billingContact?.name == "Alice Doe")
        #expect(payment.shippingMethod?.identifier == "standard")
        let text = String(decoding: payment.token, as: UTF8.self)
        #expect(!text.contains("Secret Roast") && !text.contains("order-42") && !text.contains("4111111111111111"))

        // The merchant: its processing identity, the token root; the order's applicationData and the updated total.
        let token = try PaymentToken(jsonBytes: Array(payment.token))
        let decryptor = try PaymentTokenDecryptor(
            identities: [try MerchantService.loadProcessingIdentity(from: sandbox.deployment)],
            trustRoots: [try DeploymentPKI.readCertificate(named: "token-root", from: sandbox.deployment)])
        let decrypted = try decryptor.decrypt(
            token, order: ExpectedOrder(applicationData: Array("order-42".utf8), amount: 1199, currencyCode: "840"))
        #expect(decrypted.payment.transactionAmount == 1199)
        #expect(throws: MerchantKitError.self) {
            try decryptor.decrypt(
                token, order: ExpectedOrder(applicationData: Array("order-43".utf8), amount: 1199, currencyCode: "840"))
        }
        await sandbox.close()
    }

    @Test("A11: An app entitled for one merchant asking for another is refused before the sheet")
    func entitlement() async throws {
        let sandbox = try await Sandbox()
        let phone = try await sandbox.makeDevice("phone", kind: .phone, biometry: .face)
        _ = try await sandbox.addCard("4111111111111111", to: phone)
        let delegate = RecordingDelegate()
        for (app, merchant) in [
            ("dev.orchard.demo-app", "merchant.dev.orchard.other"),
            ("dev.orchard.other-app", "merchant.dev.orchard.demo"),
        ] {
            let controller = PaymentAuthorizationController(
                paymentRequest: Self.request(merchant: merchant), host: try sheet(sandbox, phone),
                applicationIdentifier: app)
            do {
                _ = try await controller.present(delegate: delegate)
                Issue.record("\(app) paid for \(merchant)")
            } catch let error as PaymentSheetError {
                #expect(error.code == .notEntitled)
            }
        }
        #expect(delegate.methods.isEmpty && delegate.payments.isEmpty)
        await sandbox.close()
    }

    @Test("Without authentication there is no credential; a watch pays by its double-click")
    func authentication() async throws {
        let sandbox = try await Sandbox()
        let phone = try await sandbox.makeDevice("phone", kind: .phone, biometry: .face)
        _ = try await sandbox.addCard("4111111111111111", to: phone)
        let delegate = RecordingDelegate()
        var request = Self.request()
        request.requiredShippingContactFields = []
        request.requiredBillingContactFields = []
        do {
            _ = try await PaymentAuthorizationController(
                paymentRequest: request, host: try sheet(sandbox, phone, user: FailingUser()),
                applicationIdentifier: "dev.orchard.demo-app"
            ).present(delegate: delegate)
            Issue.record("a sheet without authentication paid")
        } catch let error as PaymentSheetError {
            #expect(error.code == .authenticationFailed)
        }
        #expect(delegate.payments.isEmpty)

        let watch = try await sandbox.makeDevice("watch", kind: .watch, biometry: .none)
        _ = try await sandbox.addCard("4111111111111111", to: watch)
        try await watch.secureEnclave.putOnWrist()
        _ = try await watch.unlock(.passcode(SecureBytes(Array("123456".utf8))))
        guard
            case .completed = try await PaymentAuthorizationController(
                paymentRequest: request, host: try sheet(sandbox, watch), applicationIdentifier: "dev.orchard.demo-app"
            ).present(delegate: delegate)
        else { Issue.record("the watch did not pay"); return await sandbox.close() }
        #expect(delegate.payments.count == 1)
        await sandbox.close()
    }
}
