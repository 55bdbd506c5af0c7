import Device
import EMV
import Foundation
import OrchardCrypto
import OrchardRuntime
import PaymentCredential
import SecureElement
import Wallet

/// Test cards for a device: personalisation envelopes as a token service seals them.
enum TestCards {
    static let issuerMasterKey = SymmetricKey(
        data: [UInt8](repeating: 0x31, count: 8) + [UInt8](repeating: 0x42, count: 8))
    static let remoteKey = SymmetricKey(data: [UInt8](repeating: 0x6B, count: 16))
    static let visaDPAN = "4761739001010119"
    static let passcode = "739146"

    /// What a token service would send: a personalisation envelope sealed to the device's Secure Element.
    static func envelope(for identity: DeviceIdentity, dpan: String, network: String = "visa") throws -> [UInt8] {
        let data = try PersonalisationData(
            tokenReference: "tok_\(dpan.suffix(8))", dpan: dpan, panSequenceNumber: 0, expiry: "3011",
            network: network,
            proximityMasterKey: try EMVKeyDerivation.masterKey(
                issuerMasterKey: issuerMasterKey, pan: dpan, panSequenceNumber: 0),
            remoteMasterKey: remoteKey)
        return try data.encoded().withUnsafeBytes { bytes in
            try SealedEnvelope.seal(
                bytes, to: try identity.certificate.secureElementKey, purpose: PersonalisationData.envelopePurpose)
        }
    }

    static var display: CardDisplayInput {
        CardDisplayInput(type: .credit, suffix: "4242", displayName: "Orchard Bank Visa")
    }
}

/// Creates a device named `name` in `directory` with the test passcode set and returns it opened.
func makeDevice(
    _ directory: TemporaryDirectory, name: String = "alice-phone", kind: DeviceKind = .phone,
    biometry: Biometry = .face
) async throws -> (Device, DeviceIdentity) {
    let clock = ManualClock(now: Date(timeIntervalSince1970: 1_750_000_000))
    let identity = try Device.create(
        in: directory.deployment, name: name,
        profile: try DeviceProfile(kind: kind, biometry: biometry, account: "alice"), clock: clock)
    let device = try await Device.open(in: directory.deployment, name: name, clock: clock)
    try await device.secureEnclave.setPasscode(SecureBytes(Array(TestCards.passcode.utf8)), current: nil)
    return (device, identity)
}
