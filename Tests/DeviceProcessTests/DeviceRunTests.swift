import CommandTestSupport
import Device
import DeviceControlAPI
import DeviceProcess
import DeviceTestSupport
import EMV
import Foundation
import OrchardCrypto
import OrchardRuntime
import OrchardX509
import PaymentCredential
import SecureElement
import Testing

/// `orchard device run` as a child process, driven through its socket and by `orchard device ...`.
@Suite("orchard device run", .serialized)
struct DeviceRunTests {
    /// Runs `orchard arguments` to completion; returns (exit code, stdout, stderr).
    static func command(_ arguments: [String], stdin: String? = nil) async throws -> (Int32, String, String) {
        let output = try await orchard(arguments, stdin: stdin)
        return (output.status, output.stdout, output.stderr)
    }

    /// The terminal reaching the device through the control socket.
    struct SocketLink: CardTransport {
        let socket: String
        func transmit(_ command: CommandAPDU) async throws -> ResponseAPDU {
            let answer = try await ControlSocketClient.send(SendAPDU(bytes: try command.encoded()), to: socket).get()
            guard let bytes = answer.bytes else { throw EMVError(.transportFailure, "the answer is not hex") }
            return try ResponseAPDU(bytes: bytes)
        }
    }

    @discardableResult
    static func send<Request: DeviceControlRequest>(_ socket: String, _ request: Request) async throws -> Request.Answer
    {
        try await ControlSocketClient.send(request, to: socket).get()
    }

    @Test("A phone process: a card, Face ID and a tap across the socket; commands; SIGTERM removes the socket")
    func phoneProcess() async throws {
        let directory = try TemporaryDirectory()
        let deployment = directory.deployment
        try TestInstallAuthority.pin(in: deployment)
        let (created, _, createErrors) = try await Self.command(
            [
                "device", "create", "--data-dir", directory.path, "--name", "p", "--kind", "phone", "--biometry",
                "face",
                "--passcode-file", "-",
            ], stdin: "8642\n")
        #expect(created == 0, "\(createErrors)")
        // The token service's part, played here: a card sealed to the device certificate's key.
        let identity = try Device.identity(of: "p", in: deployment)
        let issuerKey = SymmetricKey(data: [UInt8](repeating: 0x3C, count: 16))
        let dpan = "4000123412341234"
        let personalisation = try PersonalisationData(
            tokenReference: "tok_run", dpan: dpan, panSequenceNumber: 0, expiry: "3106", network: "visa",
            proximityMasterKey: try EMVKeyDerivation.masterKey(
                issuerMasterKey: issuerKey, pan: dpan, panSequenceNumber: 0),
            remoteMasterKey: SymmetricKey(data: [UInt8](repeating: 0x44, count: 16)))
        let sealed = try personalisation.encoded().withUnsafeBytes { bytes in
            try SealedEnvelope.seal(
                bytes, to: try identity.certificate.secureElementKey, purpose: PersonalisationData.envelopePurpose)
        }
        let envelope = try TestInstallAuthority.sign(sealed, for: identity.certificate.derRepresentation)

        let process = try ChildProcess(
            try orchardExecutable(), ["device", "run", "--data-dir", directory.path, "--name", "p"], stdout: .capture)
        let socket = Device.controlSocketPath(of: "p", in: deployment)
        var waited = 0
        while !ControlSocketClient.isRunning(at: socket), waited < 200 {
            try await Task.sleep(for: .milliseconds(50))
            waited += 1
        }
        #expect(ControlSocketClient.isRunning(at: socket))

        let cardID = try await Self.send(
            socket, AddCard(envelope: Data(envelope), type: "credit", suffix: "9876", displayName: "Card")
        ).id
        // `orchard device` commands go to the running process.
        let (listed, cardsOutput, _) = try await Self.command([
            "device", "cards", "--data-dir", directory.path, "--name", "p",
        ])
        #expect(listed == 0 && cardsOutput.contains(cardID) && !cardsOutput.contains(dpan))
        let (authenticated, authOutput, _) = try await Self.command([
            "device", "authenticate", "--data-dir", directory.path, "--name", "p", "--method", "face-id",
        ])
        #expect(authenticated == 0 && authOutput.contains("authorized"))
        #expect(try await Self.send(socket, GetDeviceStatus()).contactless == "armed")

        try await Self.send(socket, FieldOn())
        let kernel = TerminalKernel(configuration: TerminalConfiguration(countryCode: 840, currencyCode: 840))
        let outcome = try await kernel.run(
            TransactionParameters(amount: 4200, date: try TransactionDate(yymmdd: "250615")),
            card: SocketLink(socket: socket))
        try await Self.send(socket, FieldOff())
        #expect(outcome.status == .onlineRequest)
        let verification = try CryptogramVerifier().verify(
            ChipAuthorizationData(try #require(outcome.card)), issuerMasterKey: issuerKey, lastSeenATC: nil)
        #expect(verification.isValid)
        let (refused, _, refusal) = try await Self.command([
            "device", "authenticate", "--data-dir", directory.path, "--name", "p", "--method", "touch-id",
        ])
        #expect(refused == 1 && refusal.contains("methodUnavailable"))

        process.terminate()  // SIGTERM
        #expect(await process.exit() == .exited(0))
        let printed = process.stdout
        #expect(printed.contains(#""event":"listening""#) && printed.contains(#""event":"stopped""#))
        #expect(!FileManager.default.fileExists(atPath: socket))
        // Without the process, commands act on the store: the card and its ATC are there.
        let (offline, statusOutput, _) = try await Self.command([
            "device", "status", "--data-dir", directory.path, "--name", "p",
        ])
        #expect(offline == 0 && statusOutput.contains(cardID))
    }
}
