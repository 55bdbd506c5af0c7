public import AppPayments
import CardBasics
public import Device
import DeviceControlAPI
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
/// One state machine for every way the sheet is driven: the app's delegate answers each selection with its update,
/// and a ``PaymentSheetDriver`` gives the user's actions in any order (a scripted ``PaymentSheetUser`` in process,
/// or a person through the device process's control API). The sheet proposes a card and the first shipping
/// method; it lets the user authenticate once every required contact was given and the app's last update carried no
/// errors. Nothing is asked of the Pay server or the Secure Element before the user authenticated, so a cancelled
/// sheet consumes no nonce and no ATC.
///
/// The app receives only what ``AppPayments`` carries: summary-item labels and the raw applicationData stay on
/// the device (the credential holds amounts and the applicationData's SHA-256).
public final class DevicePaymentSheet: PaymentSheetHost {
    /// Who gives the user's actions.
    private enum User: Sendable {
        case scripted(any PaymentSheetUser)
        case driver(any PaymentSheetDriver)
    }

    public let device: Device
    private let client: PayServerClient
    private let root: Certificate
    private let user: User
    private let trace: @Sendable (String) -> Void

    /// A sheet whose user is scripted: it walks the steps in order, and a failed authentication or errors in the
    /// app's update end the sheet with an error.
    public convenience init(
        device: Device, client: PayServerClient, root: Certificate, user: any PaymentSheetUser,
        trace: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.init(device: device, client: client, root: root, user: .scripted(user), trace: trace)
    }

    /// A sheet driven by `driver` (a person at the device's control API).
    public convenience init(
        device: Device, client: PayServerClient, root: Certificate, driver: any PaymentSheetDriver,
        trace: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.init(device: device, client: client, root: root, user: .driver(driver), trace: trace)
    }

    private init(
        device: Device, client: PayServerClient, root: Certificate, user: User,
        trace: @escaping @Sendable (String) -> Void
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
        await Self.eligibleCards(in: device, networks: networks, capabilities: capabilities)
    }

    /// The cards of `device` that may pay a merchant accepting `networks` and `capabilities`: active, on one of the
    /// networks, of an accepted type. Needs no Pay server (the capability queries of an app).
    public static func eligibleCards(
        in device: Device, networks: [PaymentNetwork], capabilities: MerchantCapabilities
    ) async -> [WalletCard] {
        let accepted = Set(networks.map { $0.rawValue.lowercased() })
        return await device.wallet.allCards.filter { card in
            card.state == .active && accepted.contains(card.network.lowercased())
                && capabilities.accepts(cardType: card.type.rawValue)
        }
    }

    /// What the sheet holds while it is up.
    private struct State {
        var request: PaymentRequest
        let applicationIdentifier: String
        let eligible: [WalletCard]
        let proposed: WalletCard
        var card: WalletCard
        var shippingContact: PaymentContact?
        var billingContact: PaymentContact?
        var shippingMethod: ShippingMethod?
        var couponCode: String?
        var appErrors: [String] = []
        /// A web page's payment: its domain and merchant session (nil for an app's).
        var web: WebPaymentContext?
        /// A web payment's merchant session was spent by a token the page refused with errors to correct: the user
        /// authorizes again only with a fresh one (``PaymentSheetAction/merchantSession(_:)``).
        var sessionSpent = false

        /// What the user must still do before paying.
        var needs: [String] {
            var needs: [String] = []
            if !request.requiredShippingContactFields.isEmpty, shippingContact == nil {
                needs.append("shippingContact")
            }
            if !request.requiredBillingContactFields.isEmpty, billingContact == nil { needs.append("billingContact") }
            if sessionSpent { needs.append("merchantSession") }
            return needs + ["authentication"]
        }

        var method: PaymentMethod {
            PaymentMethod(
                displayName: "\(card.displayName) •••• \(card.suffix)", network: PaymentNetwork(rawValue: card.network),
                type: card.type.rawValue)
        }
    }

    public func present(
        _ request: PaymentRequest, applicationIdentifier: String, delegate: any PaymentAuthorizationControllerDelegate
    ) async throws -> PaymentSheetOutcome {
        try await run(request, applicationIdentifier: applicationIdentifier, web: nil, delegate: delegate)
    }

    /// Presents a web page's payment (docs/web.md, "The browser agent"): no app entitlement, but a merchant
    /// session the browser agent verified; the user authenticates for a web payment and the Secure Element's
    /// credential (version 2) carries the session's identifier and nonce and the page's domain as its
    /// application. `request.merchantIdentifier` is the session's merchant (its hash, as the session names it).
    public func present(
        _ request: PaymentRequest, web: WebPaymentContext, delegate: any PaymentAuthorizationControllerDelegate
    ) async throws -> PaymentSheetOutcome {
        try await run(request, applicationIdentifier: web.domain, web: web, delegate: delegate)
    }

    private func run(
        _ request: PaymentRequest, applicationIdentifier: String, web: WebPaymentContext?,
        delegate: any PaymentAuthorizationControllerDelegate
    ) async throws -> PaymentSheetOutcome {
        let currency: Currency
        do {
            currency = try Currency(request.currencyCode)
        } catch {
            throw PaymentSheetError(.invalidRequest, error.message)
        }
        guard request.merchantCapabilities.contains(.threeDSecure) else {
            throw PaymentSheetError(.invalidRequest, "the merchant must support 3-D Secure (supports3DS)")
        }
        guard device.profile.authorizesPayments else {
            throw PaymentSheetError(.deviceCannotPay, "this \(device.profile.kind.rawValue) cannot authorize payments")
        }
        guard !device.isInLostMode else {
            throw PaymentSheetError(
                .deviceInLostMode,
                "this \(device.profile.kind.rawValue) is in lost mode: it pays again once its owner leaves lost mode "
                    + "with the device passcode")
        }
        if web == nil {
            // Before anything is shown: may this app pay for this merchant? (A page's merchant session was
            // verified by the browser agent instead.)
            let entitled = try await payServer { try await $0.entitlements(of: applicationIdentifier) }
            guard entitled.merchantIdentifiers.contains(request.merchantIdentifier) else {
                throw PaymentSheetError(
                    .notEntitled, "\(applicationIdentifier) is not entitled to pay for \(request.merchantIdentifier)")
            }
            trace("sheet: \(applicationIdentifier) is entitled to \(request.merchantIdentifier)")
        }

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
        let driver: any PaymentSheetDriver
        switch user {
        case .scripted(let scripted):
            driver = ScriptedSheetDriver(
                user: scripted, eligible: eligible, proposed: proposed, profile: device.profile)
        case .driver(let given):
            driver = given
        }
        var state = State(
            request: request, applicationIdentifier: applicationIdentifier, eligible: eligible, proposed: proposed,
            card: proposed, shippingMethod: request.shippingMethods.first, couponCode: request.couponCode, web: web)
        // The sheet opens on the proposed card: the app learns its network, type and display name.
        await driver.show(await view(of: state))
        try apply(await delegate.didSelectPaymentMethod(state.method, request: state.request), to: &state, driver)
        trace(
            "sheet: card \(state.method.displayName) (\(state.method.network), \(state.method.type)); "
                + "the app saw no number"
        )

        var result: PaymentSheetActionResult?
        while true {
            let action = await driver.nextAction(await view(of: state), after: result)
            result = .accepted
            switch action {
            case .cancel:
                trace("sheet: the user cancelled")
                return .cancelled
            case .chooseCard(let id):
                guard let card = eligible.first(where: { $0.id == id }) else {
                    // (The identifier is not echoed: it is whatever the user typed.)
                    result = .refused(
                        PaymentSheetError(.cardNotEligible, "the chosen card is not one of the sheet's eligible cards"))
                    continue
                }
                guard card != state.card else { continue }
                state.card = card
                await driver.show(await view(of: state))
                try apply(
                    await delegate.didSelectPaymentMethod(state.method, request: state.request), to: &state, driver)
                trace("sheet: card \(state.method.displayName) (\(state.method.network), \(state.method.type))")
            case .shippingContact(let contact):
                if let refusal = Self.check(contact, state.request.requiredShippingContactFields, "shipping") {
                    result = .refused(refusal)
                    continue
                }
                state.shippingContact = contact
                await driver.show(await view(of: state))
                try apply(
                    await delegate.didSelectShippingContact(contact.redacted, request: state.request), to: &state,
                    driver)
                trace(
                    "sheet: shipping to \(contact.postalAddress?.city ?? "?"); the app saw city, state, postal code, "
                        + "country")
            case .shippingMethod(let identifier):
                guard let method = state.request.shippingMethods.first(where: { $0.identifier == identifier }) else {
                    result = .refused(
                        PaymentSheetError(.invalidAction, "the request has no shipping method \(identifier)"))
                    continue
                }
                guard method != state.shippingMethod else { continue }
                state.shippingMethod = method
                await driver.show(await view(of: state))
                try apply(await delegate.didSelectShippingMethod(method, request: state.request), to: &state, driver)
            case .couponCode(let code):
                guard state.request.supportsCouponCode else {
                    result = .refused(PaymentSheetError(.invalidAction, "the request offers no coupon code"))
                    continue
                }
                guard code.count <= 64 else {
                    result = .refused(PaymentSheetError(.invalidAction, "a coupon code has at most 64 characters"))
                    continue
                }
                state.couponCode = code
                await driver.show(await view(of: state))
                try apply(await delegate.didChangeCouponCode(code, request: state.request), to: &state, driver)
            case .merchantSession(let context):
                guard let web = state.web, state.sessionSpent, context.domain == web.domain,
                    context.merchantSessionIdentifier != web.merchantSessionIdentifier
                else {
                    result = .refused(
                        PaymentSheetError(.invalidAction, "the sheet does not wait for a fresh merchant session"))
                    continue
                }
                state.web = context
                state.sessionSpent = false
                trace("sheet: a fresh merchant session for \(context.domain); the user may authorize again")
                await driver.show(await view(of: state))
            case .billingContact(let contact):
                if let refusal = Self.check(contact, state.request.requiredBillingContactFields, "billing") {
                    result = .refused(refusal)
                    continue
                }
                state.billingContact = contact
            case .authenticate(let evidence):
                let missing = state.needs.dropLast()
                guard missing.isEmpty, state.appErrors.isEmpty else {
                    let reason =
                        missing.isEmpty
                        ? "the app's update has errors: \(state.appErrors.joined(separator: "; "))"
                        : "the sheet still needs \(missing.joined(separator: " and "))"
                    result = .refused(PaymentSheetError(.invalidAction, reason))
                    continue
                }
                guard let total = state.request.paymentSummaryItems.last else {
                    throw PaymentSheetError(
                        .invalidRequest, "a payment request needs summary items (the last is the total)")
                }
                // The one conversion of the app's decimal total into minor units (the Secure Element's form).
                let money: Money
                do {
                    money = try Money(parsing: total.amount, currency: currency)
                } catch {
                    throw PaymentSheetError(
                        .invalidRequest, "the total \"\(total.amount.prefix(24))\": \(error.message)")
                }
                let amount = try PaymentAmount(minorUnits: money.minorUnits, currency: money.currency.numericCode)
                // Authentication for this card and amount, in-app.
                let outcome: AuthenticationOutcome
                do {
                    outcome = try await device.authenticate(
                        evidence, for: state.web == nil ? .inApp : .web, card: state.card.id, amount: amount)
                } catch {
                    guard driver.staysOnFailure else { throw error }
                    result = .refused(error)
                    continue
                }
                switch outcome {
                case .authorized(let statement):
                    trace("sheet: \(total.label) \(total.amount) \(currency) authorized by \(evidence)")
                    let verdict = try await pay(state, statement: statement, amount: amount, delegate: delegate)
                    guard verdict.keepsSheet, driver.staysOnFailure else { return .completed(verdict) }
                    // WebKit: a failure with contact errors keeps the sheet; the user corrects the contact (the
                    // app's answer to the new selection clears the errors) and authorizes again.
                    trace("sheet: the app refused the payment with errors to correct; the sheet stays")
                    state.appErrors = verdict.errors
                    // A page's merchant session pays once: the next authorization needs a fresh one.
                    if state.web != nil { state.sessionSpent = true }
                    await driver.show(await view(of: state))
                case .rejected(let offered):
                    guard driver.staysOnFailure else {
                        throw PaymentSheetError(.authenticationFailed, "the user did not authenticate")
                    }
                    trace("sheet: \(evidence) rejected; the sheet waits")
                    result = .authenticationRejected(offered: offered)
                }
            }
        }
    }

    /// After the user authenticated: nonce, credential, exchange, and the app's verdict.
    private func pay(
        _ state: State, statement: SignedEnclaveStatement, amount: PaymentAmount,
        delegate: any PaymentAuthorizationControllerDelegate
    ) async throws -> PaymentAuthorizationResult {
        let request = state.request
        // A recurring, automatic reload or deferred payment asks for the merchant token of this merchant and card
        // (its token reference, which the Secure Element keeps with the card; never its DPAN).
        var merchantToken: MerchantTokenRequest?
        if let kind = request.paymentType.flatMap({ MerchantTokenRequest.Kind(rawValue: $0.kind.rawValue) }) {
            guard
                let reference = await device.secureElement.cards().first(where: { $0.card.hex == state.card.id })?
                    .tokenReference
            else {
                throw PaymentSheetError(.secureElementRefused, "the chosen card has no token in the Secure Element")
            }
            merchantToken = MerchantTokenRequest(kind: kind, tokenReference: reference)
        }
        let key = try PayCredentialKey(
            certificate: try await payServer { try await $0.credentialCertificate() }, root: root, now: Date())
        let nonce = try await payServer { try await $0.paymentNonce() }
        trace("Pay server → device: a single-use nonce issued to \(device.name)")
        let sealed: [UInt8]
        do {
            sealed = try await credential(
                statement: statement, card: state.card.id, request: request,
                applicationIdentifier: state.applicationIdentifier, web: state.web, amount: amount, nonce: nonce,
                key: key)
        } catch {
            throw PaymentSheetError(.secureElementRefused, "\(error)")
        }
        trace(
            "Secure Element: credential (DPAN, remote cryptogram, amount, nonce, SHA-256 of applicationData) signed "
                + "and sealed to the Pay server (\(sealed.count) bytes)")
        let method = state.method
        let exchange = PaymentCredentialExchange(
            credential: Data(sealed).base64EncodedString(),
            paymentMethod: PaymentMethodDisplay(
                displayName: method.displayName, network: method.network.rawValue, type: method.type),
            merchantToken: merchantToken)
        let token = try await payServer { try await $0.exchange(exchange) }
        trace("Pay server → device: the token, re-encrypted to the merchant's processing certificate and signed")
        let payment = Payment(
            token: token, paymentMethod: method,
            billingContact: state.billingContact?.limited(to: request.requiredBillingContactFields),
            shippingContact: state.shippingContact?.limited(to: request.requiredShippingContactFields),
            shippingMethod: request.shippingMethods.isEmpty ? nil : state.shippingMethod)
        return await delegate.didAuthorizePayment(payment)
    }

    /// What the sheet shows now.
    private func view(of state: State) async -> PaymentSheetView {
        let request = state.request
        let card = { (card: WalletCard) in
            PaymentSheetView.Card(
                id: card.id, displayName: card.displayName, suffix: card.suffix, network: card.network,
                type: card.type.rawValue)
        }
        var view = PaymentSheetView(
            applicationIdentifier: state.applicationIdentifier, merchantIdentifier: request.merchantIdentifier,
            merchantName: request.paymentSummaryItems.last?.label ?? "", currencyCode: request.currencyCode,
            items: request.paymentSummaryItems, total: request.paymentSummaryItems.last?.amount ?? "",
            cards: state.eligible.map(card), proposedCard: state.proposed.id, selectedCard: state.card.id,
            shippingMethods: request.shippingMethods, selectedShippingMethod: state.shippingMethod?.identifier,
            requiredShippingContactFields: request.requiredShippingContactFields.map(\.rawValue).sorted(),
            requiredBillingContactFields: request.requiredBillingContactFields.map(\.rawValue).sorted(),
            shippingContact: state.shippingContact, billingContact: state.billingContact, appErrors: state.appErrors,
            needs: state.needs, authenticationMethods: await device.secureEnclave.paymentMethods().map(\.name),
            status: "presented", waitingFor: "user", failure: nil)
        if request.supportsCouponCode {
            view.supportsCouponCode = true
            view.couponCode = state.couponCode ?? ""
        }
        view.paymentType = request.paymentType.map {
            PaymentSheetView.PaymentType(
                kind: $0.kind.rawValue, paymentDescription: $0.paymentDescription, billing: $0.billing,
                schedule: $0.schedule, managementURL: $0.managementURL, billingAgreement: $0.billingAgreement)
        }
        return view
    }

    /// Why `contact` cannot be the `role` contact of a request requiring `fields`, or nil.
    private static func check(
        _ contact: PaymentContact, _ fields: Set<ContactField>, _ role: String
    ) -> PaymentSheetError? {
        guard !fields.isEmpty else {
            return PaymentSheetError(.invalidAction, "the request asks for no \(role) contact")
        }
        let missing = fields.filter { field in
            switch field {
            case .name: contact.name?.isEmpty ?? true
            case .emailAddress: contact.emailAddress?.isEmpty ?? true
            case .phoneNumber: contact.phoneNumber?.isEmpty ?? true
            case .postalAddress: contact.postalAddress == nil
            }
        }
        guard missing.isEmpty else {
            let names = missing.map(\.rawValue).sorted().joined(separator: ", ")
            return PaymentSheetError(.invalidAction, "the \(role) contact lacks \(names)")
        }
        return nil
    }

    /// The Secure Element's sealed credential (untyped throws: a typed do/catch around an actor call in async
    /// code crashes the Swift 6.3 compiler).
    private func credential(
        statement: SignedEnclaveStatement, card: String, request: PaymentRequest, applicationIdentifier: String,
        web: WebPaymentContext?, amount: PaymentAmount, nonce: [UInt8], key: PayCredentialKey
    ) async throws -> [UInt8] {
        let remote = try RemotePaymentRequest(
            merchantIdentifier: request.merchantIdentifier, applicationIdentifier: applicationIdentifier,
            amount: amount, applicationDataHash: request.applicationData.map { SHA256.hash(Array($0)) },
            merchantSessionIdentifier: web?.merchantSessionIdentifier, merchantSessionNonce: web?.merchantSessionNonce)
        return try await device.secureElement.remotePaymentCredential(
            authorization: statement, card: try CardIdentifier(hex: card), request: remote, nonce: nonce,
            payServerKey: key.publicKey)
    }

    /// Applies the app's answer to a selection. Errors block the payment until a later update clears them; a
    /// scripted sheet, which cannot react, ends with them.
    private func apply(
        _ update: PaymentRequestUpdate, to state: inout State, _ driver: any PaymentSheetDriver
    ) throws(PaymentSheetError) {
        guard update.errors.isEmpty || driver.staysOnFailure else {
            throw PaymentSheetError(.requestRejectedByApp, update.errors.joined(separator: "; "))
        }
        state.appErrors = update.errors
        state.request.paymentSummaryItems = update.paymentSummaryItems
        if let methods = update.shippingMethods {
            state.request.shippingMethods = methods
            if let selected = state.shippingMethod, !methods.contains(selected) { state.shippingMethod = methods.first }
            if state.shippingMethod == nil { state.shippingMethod = methods.first }
        }
    }

    private func payServer<T>(_ body: (PayServerClient) async throws -> T) async throws -> T {
        do {
            return try await body(client)
        } catch let error as PayClientError {
            throw PaymentSheetError(.payServerFailed, error.message)
        }
    }
}

/// A web page's payment as the browser agent hands it to the sheet: the top-level page's domain and the merchant
/// session it verified.
public struct WebPaymentContext: Sendable, Hashable {
    /// The top-level page's host (the credential's application, tag 03).
    public let domain: String
    public let merchantSessionIdentifier: String
    public let merchantSessionNonce: String

    public init(domain: String, merchantSessionIdentifier: String, merchantSessionNonce: String) {
        self.domain = domain
        self.merchantSessionIdentifier = merchantSessionIdentifier
        self.merchantSessionNonce = merchantSessionNonce
    }
}
