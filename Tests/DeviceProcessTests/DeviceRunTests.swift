import CommandTestSupport
import Device
import DeviceProcess
import EMV
import Foundation
import OrchardCrypto
import OrchardRuntime
import PaymentCredential
import SecureElement
import Testing

/// `orchard device run` as a child process, driven through its socket and by `orchard device ...`.
@Suite("orchard device run", .serialized)
struct DeviceRunTests {
    /// Runs `orchard arguments` to completion; returns (exit code, stdout, stderr).
    static func command(_ arguments: [String]) async throws -> (Int32, String, String) {
        let output = try await orchard(arguments)
        return (output.status, output.stdout, output.stderr)
    }

    /// The terminal reaching the device through the control socket.
    struct SocketLink: CardTransport {
        let socket: String
        func transmit(_ command: CommandAPDU) async throws -> ResponseAPDU {
            let hex = try command.encoded().map { String(format: "%02X", $0) }.joined()
            let response = try await ControlSocketClient.send(
                ControlRequest(
                    method: "POST", path: "/field/apdu",
                    body: try JSONSerialization.data(withJSONObject: ["command": hex])),
                to: socket
            ).get()
            let json = try JSONSerialization.jsonObject(with: response.body) as? [String: String]
            guard response.status == 200, let answer = json?["response"] else {
                throw EMVError(.transportFailure, String(decoding: response.body, as: UTF8.self))
            }
            var bytes: [UInt8] = []
            var index = answer.startIndex
            while index < answer.endIndex {
                let next = answer.index(index, offsetBy: 2)
                bytes.append(UInt8(answer[index..<next], radix: 16) ?? 0)
                index = next
            }
            return try ResponseAPDU(bytes: bytes)
        }
    }

    static func call(
        _ socket: String, _ method: String, _ path: String, _ body: [String: Any]? = nil
    ) async throws
        -> (Int, [String: Any])
    {
        let data = try body.map { try JSONSerialization.data(withJSONObject: $0) } ?? Data()
        let response = try await ControlSocketClient.send(
            ControlRequest(method: method, path: path, body: data), to: socket
        ).get()
        return (response.status, (try? JSONSerialization.jsonObject(with: response.body) as? [String: Any]) ?? [:])
    }

    @Test("A phone process: a card, Face ID and a tap across the socket; commands; SIGTERM removes the socket")
    func phoneProcess() async throws {
        let directory = try TemporaryDirectory()
        let deployment = directory.deployment
        let (created, _, createErrors) = try await Self.command([
            "device", "create", "--data-dir", directory.path, "--name", "p", "--kind", "phone", "--biometry", "face",
            "--passcode", "8642",
        ])
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
        let envelope = try personalisation.encoded().withUnsafeBytes { bytes in
            try SealedEnvelope.seal(
                bytes, to: try identity.certificate.secureElementKey, purpose: PersonalisationData.envelopePurpose)
        }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: try orchardExecutable())
        process.arguments = ["device", "run", "--data-dir", directory.path, "--name", "p"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let socket = Device.controlSocketPath(of: "p", in: deployment)
        var waited = 0
        while !ControlSocketClient.isRunning(at: socket), waited < 200 {
            try await Task.sleep(for: .milliseconds(50))
            waited += 1
        }
        #expect(ControlSocketClient.isRunning(at: socket))

        let (installed, card) = try await Self.call(
            socket, "POST", "/cards",
            [
                "envelope": Data(envelope).base64EncodedString(), "type": "credit", "suffix": "9876",
                "displayName": "Card",
            ])
        #expect(installed == 201)
        let cardID = try #require(card["id"] as? String)
        // `orchard device` commands go to the running process.
        let (listed, cardsOutput, _) = try await Self.command([
            "device", "cards", "--data-dir", directory.path, "--name", "p",
        ])
        #expect(listed == 0 && cardsOutput.contains(cardID) && !cardsOutput.contains(dpan))
        let (authenticated, authOutput, _) = try await Self.command([
            "device", "authenticate", "--data-dir", directory.path, "--name", "p", "--method", "face-id",
        ])
        #expect(authenticated == 0 && authOutput.contains("authorized"))
        #expect(try await Self.call(socket, "GET", "/status").1["contactless"] as? String == "armed")

        #expect(try await Self.call(socket, "POST", "/field/on").0 == 200)
        let kernel = TerminalKernel(configuration: TerminalConfiguration(countryCode: 840, currencyCode: 840))
        let outcome = try await kernel.run(
            TransactionParameters(amount: 4200, date: try TransactionDate(yymmdd: "250615")),
            card: SocketLink(socket: socket))
        #expect(try await Self.call(socket, "POST", "/field/off").0 == 200)
        #expect(outcome.status == .onlineRequest)
        let verification = try CryptogramVerifier().verify(
            ChipAuthorizationData(try #require(outcome.card)), issuerMasterKey: issuerKey, lastSeenATC: nil)
        #expect(verification.isValid)
        let (refused, _, refusal) = try await Self.command([
            "device", "authenticate", "--data-dir", directory.path, "--name", "p", "--method", "touch-id",
        ])
        #expect(refused == 1 && refusal.contains("methodUnavailable"))

        process.terminate()  // SIGTERM
        while process.isRunning { try await Task.sleep(for: .milliseconds(20)) }
        #expect(process.terminationStatus == 0)
        let printed = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(printed.contains(#""event":"listening""#) && printed.contains(#""event":"stopped""#))
        #expect(!FileManager.default.fileExists(atPath: socket))
        // Without the process, commands act on the store: the card and its ATC are there.
        let (offline, statusOutput, _) = try await Self.command([
            "device", "status", "--data-dir", directory.path, "--name", "p",
        ])
        #expect(offline == 0 && statusOutput.contains(cardID))
    }
}
