import CardBasics
public import Device
import EMV
public import Foundation
public import OrchardCrypto
public import OrchardRuntime
import PaymentCredential
public import SecureElement
import Wallet

/// Test cards for a device: personalisation envelopes as a token service seals them, with keys derived from a
/// known issuer master key (shared by the device and device-process tests).
public enum TestCards {
    public static let issuerMasterKey = SymmetricKey(
        data: [UInt8](repeating: 0x31, count: 8) + [UInt8](repeating: 0x42, count: 8))
    public static let remoteKey = SymmetricKey(data: [UInt8](repeating: 0x6B, count: 16))
    public static let visaDPAN = "4761739001010119"
    public static let mastercardDPAN = "5204740009900014"
    public static let passcode = "739146"

    /// The card master key a token service derives for `dpan` (PSN 0).
    public static func masterKey(_ dpan: String) throws -> SymmetricKey {
        try EMVKeyDerivation.masterKey(issuerMasterKey: issuerMasterKey, pan: dpan, panSequenceNumber: 0)
    }

    /// What a token service would send: a personalisation envelope sealed to the device's Secure Element.
    public static func envelope(
        for identity: DeviceIdentity, dpan: String, network: String = "visa"
    ) throws -> [UInt8] {
        let data = try PersonalisationData(
            tokenReference: "tok_\(dpan.suffix(8))", dpan: dpan, panSequenceNumber: 0, expiry: "3011",
            network: network, proximityMasterKey: try masterKey(dpan), remoteMasterKey: remoteKey)
        return try data.encoded().withUnsafeBytes { bytes in
            // As a token service does: the recipient key comes from the device certificate.
            try SealedEnvelope.seal(
                bytes, to: try identity.certificate.secureElementKey, purpose: PersonalisationData.envelopePurpose)
        }
    }

    /// The wallet's display data for the test card.
    public static var display: CardDisplayInput {
        CardDisplayInput(type: .credit, suffix: "4242", displayName: "Orchard Bank Visa")
    }
}

/// Creates a device named `name` in `deployment` with the test passcode set and returns it opened.
public func makeDevice(
    in deployment: DeploymentDirectory, name: String = "alice-phone", kind: DeviceKind = .phone,
    biometry: Biometry = .face,
    clock: ManualClock = ManualClock(now: Date(timeIntervalSince1970: 1_750_000_000))
) async throws -> (Device, DeviceIdentity) {
    let identity = try Device.create(
        in: deployment, name: name, profile: try DeviceProfile(kind: kind, biometry: biometry, account: "alice"),
        clock: clock)
    let device = try await Device.open(in: deployment, name: name, clock: clock)
    try await device.secureEnclave.setPasscode(SecureBytes(Array(TestCards.passcode.utf8)), current: nil)
    return (device, identity)
}
