// Test support for DeviceTests, not shipped: a device that pays at a terminal again and again and is killed
// with SIGKILL by the test at an arbitrary moment.
//
//   orchard-device-crasher DIR NAME COUNT
//
// For each of COUNT transactions: Face ID authorizes a contactless payment, the field comes on, the EMV
// terminal kernel runs a whole transaction against the Secure Element, the field goes off, and the line
// "ATC <atc> <cryptogram hex>" is printed once the cryptogram was released. "DONE" ends a complete run.
// The card's ATC must be on disk before each cryptogram is released, so after a kill the next run never
// prints an ATC already printed.
//
// With ORCHARD_CRASH_VFS=1 (SQLiteCrashVFS) SQLite runs over the crash VFS, so a SIGKILL is a power loss: whatever
// the device wrote but did not sync is lost.
import Device
import EMV
import Foundation
import OrchardCrypto
import OrchardRuntime
import SQLiteCrashVFS
import SecureElement

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let arguments = CommandLine.arguments
guard arguments.count == 4, let count = Int(arguments[3]), count > 0 else {
    FileHandle.standardError.write(Data("usage: orchard-device-crasher DIR NAME COUNT\n".utf8))
    exit(2)
}

CrashVFS.installFromEnvironment()
do {
    let device = try await Device.open(in: DeploymentDirectory(path: arguments[1]), name: arguments[2])
    let kernel = TerminalKernel(configuration: TerminalConfiguration(countryCode: 840, currencyCode: 840))
    let date = try TransactionDate(yymmdd: "250615")
    for index in 0..<count {
        guard case .authorized = try await device.authenticate(.faceID(matched: true)) else {
            say("FAILED not authorized")
            exit(1)
        }
        try await device.fieldOn()
        let outcome = try await kernel.run(
            TransactionParameters(amount: UInt64(100 + index % 50), date: date),
            card: SecureElementFieldLink(device.secureElement))
        try await device.fieldOff()
        guard let card = outcome.card else {
            say("FAILED \(outcome)")
            exit(1)
        }
        say("ATC \(card.atc) \(Hex.encode(card.cryptogram))")
    }
    say("DONE")
} catch {
    say("FAILED \(error)")
    exit(1)
}
