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
