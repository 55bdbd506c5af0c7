public import AppPayments
public import Device
import Foundation
import OrchardCrypto
public import OrchardX509
import PayAPI
public import SecureElement
public import Wallet

/// The user at the payment sheet: which card, which contacts, which shipping method, and how they
/// authenticate. The CLI and tests script it; a UI would ask.
public protocol PaymentSheetUser: Sendable {
    /// The card to pay with among the eligible ones (`proposed` first: the default or the one chosen by hand);
    /// nil cancels.
    func chooseCard(_ eligible: [WalletCard], proposed: WalletCard) async -> WalletCard?
    /// The full shipping contact (from the wallet's recent contacts, or typed); nil cancels.
    func shippingContact() async -> PaymentContact?
    /// The full billing contact; nil cancels.
    func billingContact() async -> PaymentContact?
    /// One of `methods`; nil cancels.
    func chooseShippingMethod(_ methods: [ShippingMethod]) async -> ShippingMethod?
    /// The evidence for the sheet's authentication (Face ID, Touch ID, passcode, a watch's double-click).
    func authenticate(on profile: DeviceProfile) async -> AuthenticationEvidence?
}

/// A user who accepts what the sheet proposes and authenticates with the device's own method (Face ID, Touch ID,
/// or a watch's double-click); contacts and shipping method as given.
public struct AcceptingSheetUser: PaymentSheetUser {
    public let contact: PaymentContact
    public let shippingMethodIdentifier: String?
    public init(contact: PaymentContact, shippingMethodIdentifier: String? = nil) {
        self.contact = contact
        self.shippingMethodIdentifier = shippingMethodIdentifier
    }
    public func chooseCard(_ eligible: [WalletCard], proposed: WalletCard) async -> WalletCard? { proposed }
    public func shippingContact() async -> PaymentContact? { contact }
    public func billingContact() async -> PaymentContact? { contact }
    public func chooseShippingMethod(_ methods: [ShippingMethod]) async -> ShippingMethod? {
        methods.first { $0.identifier == shippingMethodIdentifier } ?? methods.first
    }
    public func authenticate(on profile: DeviceProfile) async -> AuthenticationEvidence? {
        switch (profile.kind, profile.biometry) {
        case (.watch, _): return .doubleClick
        case (_, .face): return .faceID(matched: true)
        case (_, .touch): return .touchID(matched: true)
        default: return nil
        }
    }
}

/// The device's payment sheet for in-app payments (ARCHITECTURE §2, In an app): the entitlement check before
/// the sheet, the card (eligible by network and credit/debit), the shipping contact (the app sees it redacted),
/// the shipping method, the total, the user's authentication for that card and amount, then a nonce from the Pay
/// server, the Secure Element's credential bound to it, and the exchange for the merchant's token.
///
/// The app receives only what ``AppPayments`` carries: summary-item labels and the raw applicationData stay on
/// the device (the credential holds amounts and the applicationData's SHA-256).
public final class DevicePaymentSheet: PaymentSheetHost {
    public let device: Device
    private let client: PayServerClient
    private let root: Certificate
    private let user: any PaymentSheetUser
    private let trace: @Sendable (String) -> Void

    public init(
        device: Device, client: PayServerClient, root: Certificate, user: any PaymentSheetUser,
        trace: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.device = device
        self.client = client
        self.root = root
        self.user = user
        self.trace = trace
    }

    public func canMakePayments() async -> Bool { device.profile.authorizesPayments }

    public func canMakePayments(
        usingNetworks networks: [PaymentNetwork], capabilities: MerchantCapabilities
    ) async
        -> Bool
    {
        guard device.profile.authorizesPayments else { return false }
        return !(await eligibleCards(networks: networks, capabilities: capabilities)).isEmpty
    }

    func eligibleCards(networks: [PaymentNetwork], capabilities: MerchantCapabilities) async -> [WalletCard] {
        let accepted = Set(networks.map { $0.rawValue.lowercased() })
        return await device.wallet.allCards.filter { card in
            card.state == .active && accepted.contains(card.network.lowercased())
                && capabilities.accepts(cardType: card.type.rawValue)
        }
    }

    public func present(
        _ request: PaymentRequest, applicationIdentifier: String, delegate: any PaymentAuthorizationControllerDelegate
    ) async throws -> PaymentSheetOutcome {
        var request = request
        let currency = try CurrencyCode(request.currencyCode)
        guard request.merchantCapabilities.contains(.threeDSecure) else {
            throw PaymentSheetError(.invalidRequest, "the merchant must support 3-D Secure (supports3DS)")
        }
        guard device.profile.authorizesPayments else {
            throw PaymentSheetError(.deviceCannotPay, "this \(device.profile.kind.rawValue) cannot authorize payments")
        }
        // Before anything is shown: may this app pay for this merchant?
        let entitled = try await payServer { try await $0.entitlements(of: applicationIdentifier) }
        guard entitled.merchantIdentifiers.contains(request.merchantIdentifier) else {
            throw PaymentSheetError(
                .notEntitled, "\(applicationIdentifier) is not entitled to pay for \(request.merchantIdentifier)")
        }
        trace("sheet: \(applicationIdentifier) is entitled to \(request.merchantIdentifier)")

        let eligible = await eligibleCards(
            networks: request.supportedNetworks, capabilities: request.merchantCapabilities)
        let proposed: WalletCard?
        if let offered = await device.wallet.cardForField()?.card, eligible.contains(offered) {
            proposed = offered
        } else {
            proposed = eligible.first
        }
        guard let proposed else {
            throw PaymentSheetError(
                .noEligibleCard, "no card in the wallet fits the merchant's networks and capabilities")
        }
        guard let card = await user.chooseCard(eligible, proposed: proposed), eligible.contains(card) else {
            return .cancelled
        }
        let method = PaymentMethod(
            displayName: "\(card.displayName) •••• \(card.suffix)", network: PaymentNetwork(rawValue: card.network),
            type: card.type.rawValue)
        try apply(await delegate.didSelectPaymentMethod(method, request: request), to: &request)
        trace("sheet: card \(method.displayName) (\(method.network), \(method.type)); the app saw no number")

        var shippingContact: PaymentContact?
        var shippingMethod: ShippingMethod?
        if !request.requiredShippingContactFields.isEmpty {
            guard let contact = await user.shippingContact() else { return .cancelled }
            shippingContact = contact
            try apply(await delegate.didSelectShippingContact(contact.redacted, request: request), to: &request)
            trace(
                "sheet: shipping to \(contact.postalAddress?.city ?? "?"); the app saw city, state, postal code, country"
            )
        }
        if !request.shippingMethods.isEmpty {
            guard let chosen = await user.chooseShippingMethod(request.shippingMethods) else { return .cancelled }
            shippingMethod = chosen
            try apply(await delegate.didSelectShippingMethod(chosen, request: request), to: &request)
        }
        var billingContact: PaymentContact?
        if !request.requiredBillingContactFields.isEmpty {
            guard let contact = await user.billingContact() else { return .cancelled }
            billingContact = contact
        }
        guard let total = request.paymentSummaryItems.last else {
            throw PaymentSheetError(.invalidRequest, "a payment request needs summary items (the last is the total)")
        }
        let amount = try PaymentAmount(minorUnits: try currency.minorUnits(total.amount), currency: currency.numeric)

        // Authentication for this card and amount, in-app.
        guard let evidence = await user.authenticate(on: device.profile) else { return .cancelled }
        let statement: SignedEnclaveStatement
        switch try await device.authenticate(evidence, for: .inApp, card: card.id, amount: amount) {
        case .authorized(let signed): statement = signed
        default: throw PaymentSheetError(.authenticationFailed, "the user did not authenticate")
        }
        trace("sheet: \(total.label) \(total.amount) \(currency) authorized by \(evidence)")

        // Nonce, credential, exchange.
        let key = try PayCredentialKey(
            certificate: try await payServer { try await $0.credentialCertificate() }, root: root, now: Date())
        let nonce = try await payServer { try await $0.paymentNonce() }
        trace("Pay server → device: a single-use nonce issued to \(device.name)")
        let sealed: [UInt8]
        do {
            sealed = try await credential(
                statement: statement, card: card.id, request: request, applicationIdentifier: applicationIdentifier,
                amount: amount, nonce: nonce, key: key)
        } catch {
            throw PaymentSheetError(.secureElementRefused, "\(error)")
        }
        trace(
            "Secure Element: credential (DPAN, remote cryptogram, amount, nonce, SHA-256 of applicationData) signed "
                + "and sealed to the Pay server (\(sealed.count) bytes)")
        let token = try await payServer {
            try await $0.exchange(
                PaymentCredentialExchange(
                    credential: Data(sealed).base64EncodedString(),
                    paymentMethod: PaymentMethodDisplay(
                        displayName: method.displayName, network: method.network.rawValue, type: method.type)))
        }
        trace("Pay server → device: the token, re-encrypted to the merchant's processing certificate and signed")
        let payment = Payment(
            token: token, paymentMethod: method,
            billingContact: billingContact?.limited(to: request.requiredBillingContactFields),
            shippingContact: shippingContact?.limited(to: request.requiredShippingContactFields),
            shippingMethod: shippingMethod)
        return .completed(await delegate.didAuthorizePayment(payment))
    }

    /// The Secure Element's sealed credential (untyped throws: a typed do/catch around an actor call in async
    /// code crashes the Swift 6.3 compiler).
    private func credential(
        statement: SignedEnclaveStatement, card: String, request: PaymentRequest, applicationIdentifier: String,
        amount: PaymentAmount, nonce: [UInt8], key: PayCredentialKey
    ) async throws -> [UInt8] {
        let remote = try RemotePaymentRequest(
            merchantIdentifier: request.merchantIdentifier, applicationIdentifier: applicationIdentifier,
            amount: amount, applicationDataHash: request.applicationData.map { SHA256.hash(Array($0)) })
        return try await device.secureElement.remotePaymentCredential(
            authorization: statement, card: try CardIdentifier(hex: card), request: remote, nonce: nonce,
            payServerKey: key.publicKey)
    }

    private func apply(_ update: PaymentRequestUpdate, to request: inout PaymentRequest) throws(PaymentSheetError) {
        guard update.errors.isEmpty else {
            throw PaymentSheetError(.requestRejectedByApp, update.errors.joined(separator: "; "))
        }
        request.paymentSummaryItems = update.paymentSummaryItems
        if let methods = update.shippingMethods { request.shippingMethods = methods }
    }

    private func payServer<T>(_ body: (PayServerClient) async throws -> T) async throws -> T {
        do {
            return try await body(client)
        } catch let error as PayClientError {
            throw PaymentSheetError(.payServerFailed, error.message)
        }
    }
}
