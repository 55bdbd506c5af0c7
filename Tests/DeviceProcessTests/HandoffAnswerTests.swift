import Device
import DeviceTestSupport
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
}
