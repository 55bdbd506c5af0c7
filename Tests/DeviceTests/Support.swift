import Device
import EMV
import Foundation
import OrchardCrypto
import OrchardRuntime
import PaymentCredential
import SecureElement
import Testing
import Wallet

/// A fresh directory under the system's temporary directory, removed when released.
final class TemporaryDirectory: @unchecked Sendable {
    let path: String
    init() throws {
        path = NSTemporaryDirectory() + "orchard-device-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
    var deployment: DeploymentDirectory { DeploymentDirectory(path: path) }
}

enum TestCards {
    static let issuerMasterKey = SymmetricKey(
        data: [UInt8](repeating: 0x31, count: 8) + [UInt8](repeating: 0x42, count: 8))
    static let remoteKey = SymmetricKey(data: [UInt8](repeating: 0x6B, count: 16))
    static let visaDPAN = "4761739001010119"
    static let mastercardDPAN = "5204740009900014"
    static let passcode = "739146"

    static func masterKey(_ dpan: String) throws -> SymmetricKey {
        try EMVKeyDerivation.masterKey(issuerMasterKey: issuerMasterKey, pan: dpan, panSequenceNumber: 0)
    }

    /// What a token service would send: a personalisation envelope sealed to the device's Secure Element.
    static func envelope(for identity: DeviceIdentity, dpan: String, network: String = "visa") throws -> [UInt8] {
        let data = try PersonalisationData(
            tokenReference: "tok_\(dpan.suffix(8))", dpan: dpan, panSequenceNumber: 0, expiry: "3011",
            network: network, proximityMasterKey: try masterKey(dpan), remoteMasterKey: remoteKey)
        return try data.encoded().withUnsafeBytes { bytes in
            // As a token service does: the recipient key comes from the device certificate.
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
    biometry: Biometry = .face,
    clock: ManualClock = ManualClock(now: Date(timeIntervalSince1970: 1_750_000_000))
) async throws -> (Device, DeviceIdentity) {
    let identity = try Device.create(
        in: directory.deployment, name: name,
        profile: try DeviceProfile(kind: kind, biometry: biometry, account: "alice"), clock: clock)
    let device = try await Device.open(in: directory.deployment, name: name, clock: clock)
    try await device.secureEnclave.setPasscode(SecureBytes(Array(TestCards.passcode.utf8)), current: nil)
    return (device, identity)
}

/// Runs a contactless transaction through the device's NFC entry points.
func tap(_ device: Device, amount: UInt64 = 2500, networks: [String] = []) async throws -> TerminalOutcome {
    try await device.fieldOn(requestedNetworks: networks)
    let kernel = TerminalKernel(configuration: TerminalConfiguration(countryCode: 840, currencyCode: 840))
    let outcome = try await kernel.run(
        TransactionParameters(amount: amount, date: try TransactionDate(yymmdd: "250615")),
        card: DeviceLink(device: device))
    try await device.fieldOff()
    return outcome
}

/// The terminal's view of the device in the field.
struct DeviceLink: CardTransport {
    let device: Device
    func transmit(_ command: CommandAPDU) async throws -> ResponseAPDU {
        try ResponseAPDU(bytes: try await device.transceive(try command.encoded()))
    }
}

func expectError<T>(
    _ matches: (any Error) -> Bool, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> T
) async {
    do {
        _ = try await body()
        Issue.record("expected an error, nothing was thrown", sourceLocation: sourceLocation)
    } catch {
        #expect(matches(error), "got \(error)", sourceLocation: sourceLocation)
    }
}

func code(_ code: SecureElementError.Code) -> (any Error) -> Bool {
    { ($0 as? SecureElementError)?.code == code }
}

func code(_ code: DeviceError.Code) -> (any Error) -> Bool {
    { ($0 as? DeviceError)?.code == code }
}

extension Array where Element == UInt8 {
    func containsSequence(_ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, needle.count <= count else { return false }
        for start in 0...(count - needle.count) where self[start] == needle[0] {
            if Array(self[start..<(start + needle.count)]) == needle { return true }
        }
        return false
    }
}
