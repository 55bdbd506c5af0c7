import AppPayments
import Device
import DeviceTestSupport
import Foundation
import OrchardCrypto
import RelayAPI
import SecureElement
import Testing
import Wallet

@testable import DeviceProcess

/// A phone's or watch's answer to a Mac's discovery (docs/handoff.md, "Discovery"), each condition on its own: the
/// device's kind, its user's setting, and whether it hears the Mac itself.
@Suite("Handoff: a phone or watch answers discovery only when it should")
struct HandoffAnswerTests {
    @Test("H3: A phone that does not hear the Mac refuses; a Mac, or payments on a Mac off, refuses too")
    func refusals() async throws {
        let directory = try TemporaryDirectory()
        let (phone, _) = try await makeDevice(in: directory.deployment, name: "phone")
        let (mac, _) = try await makeDevice(in: directory.deployment, name: "mac", kind: .mac, biometry: .none)
        // A radio that never started hears no one.
        let radio = RadioMedium(device: phone, deployment: directory.deployment, window: .seconds(5), trace: { _ in })
        let unheard = await Handoff.answer(
            device: phone, radio: radio, requester: "mac", requestID: "r1", random: SystemRandom())
        #expect(unheard.kind == .discoveryAnswer && unheard.requestID == "r1" && unheard.deviceKind == "phone")
        #expect(unheard.cards == nil && unheard.refusal == "this device does not hear mac")

        var settings = await phone.wallet.currentSettings
        settings.allowPaymentsOnMac = false
        try await phone.wallet.update(settings)
        let off = await Handoff.answer(
            device: phone, radio: radio, requester: "mac", requestID: "r2", random: SystemRandom())
        #expect(off.refusal == "payments on a Mac are turned off on this device")

        let macRadio = RadioMedium(device: mac, deployment: directory.deployment, window: .seconds(5), trace: { _ in })
        let fromMac = await Handoff.answer(
            device: mac, radio: macRadio, requester: "phone", requestID: "r3", random: SystemRandom())
        #expect(fromMac.refusal == "only a phone or a watch pays for a Mac")
    }

    @Test(
        "A Mac's cancellation that arrives before its payment request is kept: the sheet's delegate refuses the authorization; a verdict does not replace it"
    )
    func cancellationBeforeTheRequest() async throws {
        let directory = try TemporaryDirectory()
        let (phone, _) = try await makeDevice(in: directory.deployment, name: "phone")
        let radio = RadioMedium(device: phone, deployment: directory.deployment, window: .seconds(5), trace: { _ in })
        let underWay = Handoff.PaymentsUnderWay()
        let key = Handoff.PaymentsUnderWay.key("mac", "p1")
        await Handoff.follow(
            HandoffMessage(kind: .paymentCancel, requestID: "p1", refusal: "the page aborted its session"),
            from: "mac", underWay: underWay, sheets: nil, trace: { _ in })
        underWay.begin(key)
        var complete = HandoffMessage(kind: .paymentComplete, requestID: "p1")
        complete.verdict = "success"
        await Handoff.follow(complete, from: "mac", underWay: underWay, sheets: nil, trace: { _ in })
        #expect(underWay.word(key) == .cancelled("the page aborted its session"))
        // Another Mac's word, or another request's, is not this one's.
        #expect(underWay.word(Handoff.PaymentsUnderWay.key("other-mac", "p1")) == nil)
        #expect(underWay.attach("sheet-1", to: key) == .cancelled("the page aborted its session"))
        let delegate = Handoff.SheetDelegate(
            radio: radio, requester: "mac", underWay: underWay, key: key, verdictTimeout: .seconds(5))
        let payment = Payment(
            token: Data("{}".utf8),
            paymentMethod: PaymentMethod(displayName: "Visa 1111", network: .visa, type: "credit"),
            billingContact: nil, shippingContact: nil, shippingMethod: nil)
        let result = await delegate.didAuthorizePayment(payment)
        #expect(result.status == .failure && result.errors == ["the page aborted its session"])
        #expect(delegate.payment == nil && delegate.failure == "the page aborted its session")
        underWay.end(key)
        #expect(underWay.word(key) == nil)
    }
}
