public import AppPayments
public import DeviceControlAPI
import Foundation
public import SecureElement
import Wallet

/// What the user does on a presented payment sheet. The sheet (``DevicePaymentSheet``) takes one action at a
/// time, in any order, until the user authenticates or cancels.
public enum PaymentSheetAction: Sendable {
    /// Pay with this wallet card (its identifier); it must be one of the sheet's eligible cards.
    case chooseCard(String)
    /// The full shipping contact; the app is told only its redacted form.
    case shippingContact(PaymentContact)
    /// The full billing contact; the app receives it only with the authorized payment.
    case billingContact(PaymentContact)
    /// The shipping method with this identifier, one of the request's.
    case shippingMethod(String)
    /// The coupon code the user entered (empty: removed), for a request that supports coupon codes.
    case couponCode(String)
    /// A web sheet's fresh merchant session, verified by the browser agent, after the app's failure kept the sheet:
    /// the spent session cannot pay again (W4), so the next authorization binds this one. For the same domain.
    case merchantSession(WebPaymentContext)
    /// Face ID, Touch ID, the passcode or a watch's double-click, for the selected card and the total.
    case authenticate(AuthenticationEvidence)
    /// Dismiss the sheet: the app gets ``PaymentSheetOutcome/cancelled``.
    case cancel
}

/// How the sheet took the user's previous action.
public enum PaymentSheetActionResult: Sendable {
    /// Applied (a selection equal to the current one changes nothing and is accepted too).
    case accepted
    /// Not applied; the sheet is as before. The error is a ``PaymentSheetError`` for the sheet's own refusals
    /// (a card that is not eligible, a missing contact) or the Secure Enclave's refusal (locked out).
    case refused(any Error)
    /// The biometric did not match or the passcode was wrong; `offered` are the methods the user may try now.
    case authenticationRejected(offered: [AuthenticationMethod])
}

/// The user's side of the sheet: asked for the next action each time the sheet waits for the user.
///
/// ``DevicePaymentSheet`` runs one state machine for every kind of user: a scripted ``PaymentSheetUser``
/// (through an internal adapter), or a person at the device's control API (`DeviceProcess`).
public protocol PaymentSheetDriver: Sendable {
    /// Whether the sheet stays up after a failed authentication or an app's errors, for the user to retry or
    /// change a selection. When false, a failed authentication throws ``PaymentSheetError/Code/authenticationFailed``
    /// and errors in the app's update throw ``PaymentSheetError/Code/requestRejectedByApp``, as a script cannot
    /// react to them.
    var staysOnFailure: Bool { get }
    /// The user's next action on the sheet now showing `sheet`; `result` says how the previous one went (nil for
    /// the first question).
    func nextAction(_ sheet: PaymentSheetView, after result: PaymentSheetActionResult?) async -> PaymentSheetAction
    /// The sheet changed while the user's action is being applied (it is about to ask the app): what it shows now.
    func show(_ sheet: PaymentSheetView) async
}

extension PaymentSheetDriver {
    /// A script looks at the sheet only when asked for an action.
    public func show(_ sheet: PaymentSheetView) async {}
}

extension PaymentSheetError.Code {
    /// The card the user chose is not one of the sheet's eligible cards.
    public static let cardNotEligible = PaymentSheetError.Code("cardNotEligible")
    /// The action does not fit the request (a contact it does not ask for, an unknown shipping method) or the
    /// sheet's state (authentication before a required contact was given).
    public static let invalidAction = PaymentSheetError.Code("invalidAction")
    /// The sheet was not completed in time and was cancelled.
    public static let timedOut = PaymentSheetError.Code("timedOut")
}

/// Adapts a scripted ``PaymentSheetUser`` to the sheet's state machine: it answers the steps in the order a person
/// goes through the sheet (card, shipping contact, shipping method, billing contact, authentication) and cancels
/// when the sheet refuses one of its answers.
final class ScriptedSheetDriver: PaymentSheetDriver, @unchecked Sendable {
    // @unchecked: `step` is guarded by `lock`; the rest is immutable.
    private let user: any PaymentSheetUser
    private let eligible: [WalletCard]
    private let proposed: WalletCard
    private let profile: DeviceProfile
    private let lock = NSLock()
    private var step = 0

    init(user: any PaymentSheetUser, eligible: [WalletCard], proposed: WalletCard, profile: DeviceProfile) {
        self.user = user
        self.eligible = eligible
        self.proposed = proposed
        self.profile = profile
    }

    var staysOnFailure: Bool { false }

    func nextAction(_ sheet: PaymentSheetView, after result: PaymentSheetActionResult?) async -> PaymentSheetAction {
        if case .refused = result { return .cancel }
        while true {
            let current = lock.withLock { () -> Int in
                defer { step += 1 }
                return step
            }
            switch current {
            case 0:
                guard let card = await user.chooseCard(eligible, proposed: proposed) else { return .cancel }
                return .chooseCard(card.id)
            case 1 where !sheet.requiredShippingContactFields.isEmpty:
                guard let contact = await user.shippingContact() else { return .cancel }
                return .shippingContact(contact)
            case 2 where !sheet.shippingMethods.isEmpty:
                guard let method = await user.chooseShippingMethod(sheet.shippingMethods) else { return .cancel }
                return .shippingMethod(method.identifier)
            case 3 where !sheet.requiredBillingContactFields.isEmpty:
                guard let contact = await user.billingContact() else { return .cancel }
                return .billingContact(contact)
            case 1, 2, 3:
                continue
            default:
                guard let evidence = await user.authenticate(on: profile) else { return .cancel }
                return .authenticate(evidence)
            }
        }
    }
}
