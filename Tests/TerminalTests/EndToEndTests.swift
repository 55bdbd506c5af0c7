import CardBasics
import CommandTestSupport
import Device
import DeviceControlAPI
import DeviceProcess
import EMV
import Foundation
import NFCLink
import OrchardCrypto
import OrchardRuntime
import SecureElement
import Terminal
import Testing

/// The terminal (`orchard terminal charge`) and the devices (`orchard device run`) as separate processes that
/// talk only through the NFC link's sockets; the acquirer is an HTTPS service in the test process that
/// verifies every ARQC with the EMV verifier against the issuer master key the cards were personalised with.
@Suite("In store, across processes", .serialized)
struct EndToEndTests {
    static let watchDPAN = "4761739001010127"

    @Test("A phone pays with Face ID, a watch with its double-click; the ARQCs verify; no DPAN in the terminal's files")
    func approvedTaps() async throws {
        let directory = try TemporaryDirectory()
        let acquirer = try AcquirerService(TestAcquirer(), directory: directory.path)
        try await setUpTerminal(directory, acquirer: acquirer)
        try await createDevice(directory, "phone", kind: "phone", biometry: "face")
        try await createDevice(directory, "watch", kind: "watch", biometry: "none")
        let phone = try await DeviceProcessHandle(directory.deployment, name: "phone", autoAuth: "face-id")
        let watch = try await DeviceProcessHandle(directory.deployment, name: "watch", autoAuth: "double-click")
        let phoneCard = try await phone.provision(dpan: TestIssuer.visaDPAN, network: "visa", suffix: "4242")
        _ = try await watch.provision(dpan: Self.watchDPAN, network: "visa", suffix: "4242")
        try await watch.send(SetWrist(on: true))
        #expect(
            try await watch.send(Unlock(AuthenticationEvidenceBody(method: "passcode", passcode: "8642"))).outcome
                == "unlocked")

        let (phoneOutput, phoneResult) = try await charge(directory, "12.34", device: "phone")
        #expect(phoneResult["outcome"] as? String == "approved", "\(phoneOutput.stdout) \(phoneOutput.stderr)")
        #expect(phoneResult["responseCode"] as? String == "00" && phoneResult["deviceKind"] as? String == "phone")
        #expect(phoneResult["maskedPan"] as? String == "476173******0119" && phoneResult["stan"] as? String == "000001")
        let (watchOutput, watchResult) = try await charge(directory, "4.50", device: "watch")
        #expect(watchResult["outcome"] as? String == "approved", "\(watchOutput.stdout) \(watchOutput.stderr)")
        #expect(
            watchResult["deviceKind"] as? String == "watch" && watchResult["maskedPan"] as? String == "476173******0127"
        )
        // The human form, and the journal.
        let text = try await orchard([
            "terminal", "charge", "--data-dir", directory.path, "--amount", "1", "--device", "phone",
        ])
        #expect(text.stdout.hasPrefix("approved 00 1.00 USD visa 476173******0119"), "\(text.stdout) \(text.stderr)")
        let journal = try await orchard(["terminal", "journal", "--data-dir", directory.path])
        #expect(journal.status == 0 && journal.stdout.contains("\"approved\"") && journal.stdout.contains("000003"))

        #expect(await acquirer.acquirer.decisions == 3)
        let requests = await acquirer.acquirer.requests
        #expect(requests.map(\.applicationTransactionCounter) == [1, 1, 2])
        #expect(requests.map(\.amount.minorUnits) == [1234, 450, 100])
        // The DPAN crossed to the acquirer (it needs it) and nowhere else on the terminal's side.
        #expect(acquirer.bodies.contains { Array($0).containsSequence(Array(TestIssuer.visaDPAN.utf8)) })
        let events = phone.stop()
        #expect(events.contains(#""event":"field-on""#) && events.contains(#""event":"authenticated""#))
        #expect(events.contains(phoneCard) && !events.contains(TestIssuer.visaDPAN))
        watch.stop()
        try expectNoCardNumbers(
            directory, outputs: [phoneOutput, watchOutput, text, journal], dpans: [TestIssuer.visaDPAN, Self.watchDPAN])
        await acquirer.shutdown()
    }

    @Test("The user authenticates through the control API while the reader waits; without it no cryptogram leaves")
    func controlAPIAuthentication() async throws {
        let directory = try TemporaryDirectory()
        let acquirer = try AcquirerService(TestAcquirer(), directory: directory.path)
        try await setUpTerminal(directory, acquirer: acquirer)
        try await createDevice(directory, "phone", kind: "phone", biometry: "face")
        let phone = try await DeviceProcessHandle(directory.deployment, name: "phone")
        _ = try await phone.provision(dpan: TestIssuer.visaDPAN, network: "visa", suffix: "4242")

        let (_, unauthenticated) = try await charge(directory, "3.00", device: "phone", extra: ["--wait", "1"])
        #expect(
            unauthenticated["outcome"] as? String == "declined" && unauthenticated["responseCode"] as? String == "Z1")
        let reason = unauthenticated["reason"] as? String ?? ""
        #expect(reason.contains("no cryptogram") && reason.contains("6985"), "\(reason)")
        #expect(await acquirer.acquirer.requests.isEmpty)

        // Now the user looks at the phone while it is held to the reader.
        let pending = Task { try await charge(directory, "3.00", device: "phone", extra: ["--wait", "20"]).0 }
        var inField = false
        for _ in 0..<2400 where !inField {
            try await Task.sleep(for: .milliseconds(25))
            inField = try await phone.send(GetDeviceStatus()).contactless == "in-field"
        }
        #expect(inField)
        let answer = try await phone.send(Authenticate(AuthenticationEvidenceBody(method: "face-id", success: true)))
        #expect(answer.outcome == "authorized")
        let paid = try await pending.value.json()
        #expect(paid["outcome"] as? String == "approved", "\(paid)")
        #expect(await acquirer.acquirer.decisions == 1)
        phone.stop()
        await acquirer.shutdown()
    }

    @Test("N2: A replayed APDU transcript meets a new unpredictable number: its old cryptogram fails (88)")
    func replayedTranscript() async throws {
        let directory = try TemporaryDirectory()
        let acquirer = try AcquirerService(TestAcquirer(), directory: directory.path)
        try await setUpTerminal(directory, acquirer: acquirer)
        try await createDevice(directory, "phone", kind: "phone", biometry: "face")
        let phone = try await DeviceProcessHandle(directory.deployment, name: "phone", autoAuth: "face-id")
        _ = try await phone.provision(dpan: TestIssuer.visaDPAN, network: "visa", suffix: "4242")

        // An attacker's relay records a genuine tap.
        let relay = RelayTarget(upstream: phone.antenna)
        let relayAntenna = try antenna(directory, "relay", relay)
        let (_, genuine) = try await charge(directory, "12.34", device: "relay")
        relayAntenna.stop()
        #expect(genuine["outcome"] as? String == "approved", "\(genuine)")
        let recorded = await relay.exchanges
        #expect(recorded.count >= 3)

        // It replays the device's answers to the terminal.
        let replay = try antenna(directory, "replay", ReplayTarget(responses: recorded.map(\.response)))
        let (_, replayed) = try await charge(directory, "12.34", device: "replay")
        replay.stop()
        #expect(
            replayed["outcome"] as? String == "declined" && replayed["responseCode"] as? String == "88", "\(replayed)")
        #expect(replayed["reason"] as? String == "cryptogramMismatch")
        let requests = await acquirer.acquirer.requests
        try #require(requests.count == 2, "\(requests.count) requests reached the acquirer")
        #expect(requests[0].cryptogram == requests[1].cryptogram)
        #expect(requests[0].chipData != requests[1].chipData)  // the terminal's new UN is in the chip data
        phone.stop()
        await acquirer.shutdown()
    }

    @Test("N3: An amount changed on its way to the device: the cryptogram covers another amount (88)")
    func amountChangedInFlight() async throws {
        let directory = try TemporaryDirectory()
        let acquirer = try AcquirerService(TestAcquirer(), directory: directory.path)
        try await setUpTerminal(directory, acquirer: acquirer)
        try await createDevice(directory, "phone", kind: "phone", biometry: "face")
        let phone = try await DeviceProcessHandle(directory.deployment, name: "phone", autoAuth: "face-id")
        _ = try await phone.provision(dpan: TestIssuer.visaDPAN, network: "visa", suffix: "4242")

        // GET PROCESSING OPTIONS carries the PDOL data: TTQ (4 bytes), then the amount (6): make it 1.00.
        let tamper = RelayTarget(upstream: phone.antenna) { command in
            guard command.count > 17, command[0] == 0x80, command[1] == 0xA8 else { return command }
            var changed = command
            changed.replaceSubrange(11..<17, with: [0, 0, 0, 0, 0x01, 0x00])
            return changed
        }
        let mitm = try antenna(directory, "mitm", tamper)
        let (_, result) = try await charge(directory, "12.34", device: "mitm")
        mitm.stop()
        #expect(result["outcome"] as? String == "declined" && result["responseCode"] as? String == "88", "\(result)")
        #expect(result["reason"] as? String == "cryptogramMismatch")
        // The device did release a cryptogram: for the amount it was shown.
        let gpo = await tamper.exchanges.first { $0.command.count > 1 && $0.command[1] == 0xA8 }
        #expect(gpo?.response.suffix(2) == [0x90, 0x00])
        phone.stop()
        await acquirer.shutdown()
    }

    @Test("A locked watch presents nothing; a Mac and an iPad have no antenna: the terminal declines before any APDU")
    func lockedWatchAndDevicesWithoutNFC() async throws {
        let directory = try TemporaryDirectory()
        let acquirer = try AcquirerService(TestAcquirer(), directory: directory.path)
        try await setUpTerminal(directory, acquirer: acquirer)
        try await createDevice(directory, "watch", kind: "watch", biometry: "none")
        try await createDevice(directory, "tablet", kind: "ipad", biometry: "touch")
        try await createDevice(directory, "laptop", kind: "mac", biometry: "touch")
        let watch = try await DeviceProcessHandle(directory.deployment, name: "watch", autoAuth: "double-click")
        _ = try await watch.provision(dpan: Self.watchDPAN, network: "visa", suffix: "4242")

        let (_, offWrist) = try await charge(directory, "2.00", device: "watch")
        #expect(offWrist["responseCode"] as? String == "Z1" && (offWrist["reason"] as? String ?? "").contains("locked"))
        try await watch.send(SetWrist(on: true))  // on the wrist, not unlocked yet
        let (_, locked) = try await charge(directory, "2.00", device: "watch")
        #expect(locked["responseCode"] as? String == "Z1" && (locked["reason"] as? String ?? "").contains("locked"))
        let events = watch.stop()
        #expect(events.contains(#""detail":"deviceLocked""#) && !events.contains(#""event":"field-on""#))

        for name in ["tablet", "laptop"] {
            let device = try await DeviceProcessHandle(directory.deployment, name: name, expectAntenna: false)
            #expect(!NFCAntenna.isListening(at: device.antenna))
            let (_, result) = try await charge(directory, "2.00", device: name)
            #expect(
                result["responseCode"] as? String == "Z1" && result["reason"] as? String == "no device in the field")
            device.stop()
        }
        #expect(await acquirer.acquirer.requests.isEmpty)
        await acquirer.shutdown()
    }

    @Test("Automatic selection off: the default card is offered even when the terminal asks for another card")
    func automaticSelection() async throws {
        let directory = try TemporaryDirectory()
        let acquirer = try AcquirerService(TestAcquirer(), directory: directory.path)
        try await setUpTerminal(directory, acquirer: acquirer, extra: ["--network", "masterCard", "--network", "visa"])
        try await createDevice(directory, "phone", kind: "phone", biometry: "face")
        let phone = try await DeviceProcessHandle(directory.deployment, name: "phone", autoAuth: "face-id")
        _ = try await phone.provision(dpan: TestIssuer.visaDPAN, network: "visa", suffix: "4242")
        let mastercard = try await phone.provision(
            dpan: TestIssuer.mastercardDPAN, network: "masterCard", suffix: "5454")

        let (_, first) = try await charge(directory, "8.00", device: "phone")
        #expect(first["outcome"] as? String == "approved" && first["scheme"] as? String == "visa", "\(first)")
        try await phone.send(SetAutomaticSelection(card: mastercard, enabled: true))
        let (_, second) = try await charge(directory, "8.00", device: "phone")
        #expect(second["outcome"] as? String == "approved" && second["scheme"] as? String == "mastercard", "\(second)")
        #expect(second["maskedPan"] as? String == "520474******0014")
        let events = phone.stop()
        #expect(events.contains(#""detail":"default""#) && events.contains(#""detail":"automatic""#))

        // A double-click of the side button presents the default card, whatever the automatic selection;
        // Face ID then authorizes it.
        let clicked = try await DeviceProcessHandle(
            directory.deployment, name: "phone", autoAuth: "double-click,face-id")
        let (_, third) = try await charge(directory, "8.00", device: "phone")
        #expect(third["outcome"] as? String == "approved" && third["scheme"] as? String == "visa", "\(third)")
        #expect(clicked.stop().contains(#""detail":"double-click,face-id""#))
        try expectNoCardNumbers(directory, outputs: [], dpans: [TestIssuer.visaDPAN, TestIssuer.mastercardDPAN])
        await acquirer.shutdown()
    }

    @Test("U5: --auto-auth passcode pays with the passcode from stdin or a 0600 file; `ps` shows no passcode")
    func passcodeAutoAuthenticationOffTheCommandLine() async throws {
        let directory = try TemporaryDirectory()
        let acquirer = try AcquirerService(TestAcquirer(), directory: directory.path)
        try await setUpTerminal(directory, acquirer: acquirer)
        try await createDevice(directory, "phone", kind: "phone", biometry: "face")
        // Biometrics off for payments: the phone offers its passcode only.
        let settings = try await orchard([
            "device", "settings", "--data-dir", directory.path, "--name", "phone", "--biometrics", "off",
        ])
        #expect(settings.status == 0, "\(settings.stderr)")
        let file = directory.path + "-passcode"
        defer { try? FileManager.default.removeItem(atPath: file) }
        #expect(
            FileManager.default.createFile(
                atPath: file, contents: Data("8642\n".utf8), attributes: [.posixPermissions: 0o600]))
        for (stdin, options) in [("8642\n", [String]()), (nil, ["--passcode-file", file])] {
            let phone = try await DeviceProcessHandle(
                directory.deployment, name: "phone", autoAuth: "passcode", stdin: stdin, options: options)
            // What every user's `ps` shows: /proc/PID/cmdline, the arguments NUL-separated.
            let cmdline = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(phone.pid)/cmdline"))
            let arguments = cmdline.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            #expect(arguments.contains("--auto-auth") && arguments.contains("passcode"), "\(arguments)")
            #expect(!arguments.joined(separator: " ").contains("8642"), "\(arguments)")
            if stdin != nil {
                _ = try await phone.provision(dpan: TestIssuer.visaDPAN, network: "visa", suffix: "4242")
            }
            let (output, result) = try await charge(directory, "3.00", device: "phone")
            let events = phone.stop()
            #expect(result["outcome"] as? String == "approved", "\(output.stdout) \(output.stderr) \(events)")
            #expect(!phone.standardError.contains("8642") && !events.contains("8642"))
        }
        await acquirer.shutdown()
    }

    @Test("No answer from the acquirer: the retry reuses the STAN and the issuer decides once; then a reversal")
    func timeoutsAcrossProcesses() async throws {
        let directory = try TemporaryDirectory()
        let scripted = TestAcquirer(
            script: [.slow(.seconds(3)), .answer] + Array(repeating: .slow(.seconds(3)), count: 2))
        let acquirer = try AcquirerService(scripted, directory: directory.path)
        try await setUpTerminal(directory, acquirer: acquirer)
        try await createDevice(directory, "phone", kind: "phone", biometry: "face")
        let phone = try await DeviceProcessHandle(directory.deployment, name: "phone", autoAuth: "face-id")
        _ = try await phone.provision(dpan: TestIssuer.visaDPAN, network: "visa", suffix: "4242")

        let (_, retried) = try await charge(directory, "6.00", device: "phone", extra: ["--timeout", "1"])
        #expect(retried["outcome"] as? String == "approved" && retried["attempts"] as? Int == 2, "\(retried)")
        #expect(await scripted.authorizationKeys == ["terminal-T-E2E-000001", "terminal-T-E2E-000001"])
        #expect(await scripted.decisions == 1)

        let (_, reversed) = try await charge(
            directory, "6.00", device: "phone", extra: ["--timeout", "1", "--attempts", "2"])
        #expect(reversed["responseCode"] as? String == "Z3" && reversed["reversed"] as? Bool == true, "\(reversed)")
        #expect(await scripted.reversals.map(\.systemTraceAuditNumber) == ["000002"])
        let journal = try await orchard(["terminal", "journal", "--data-dir", directory.path, "--limit", "1"])
        #expect(journal.stdout.contains("\"reversed\""))
        phone.stop()
        await acquirer.shutdown()
    }

    // MARK: Helpers

    /// An antenna in this process at `DIR/devices/<name>/nfc.sock` (an attacker's device).
    func antenna(_ directory: TemporaryDirectory, _ name: String, _ target: any NFCTarget) throws -> NFCAntenna {
        let path = NFCAntenna.path(forDevice: name, in: directory.deployment)
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        return try NFCAntenna(path: path, kind: .phone, target: target)
    }

    /// Scans the terminal's store (with its WAL), its log and the commands' output for the DPANs, as ASCII
    /// digits and packed BCD; the masked form must be there instead.
    func expectNoCardNumbers(_ directory: TemporaryDirectory, outputs: [CommandOutput], dpans: [String]) throws {
        let deployment = directory.deployment
        var files = [deployment.databasePath(for: .terminal), deployment.logPath(for: .terminal)]
        files += ["-wal", "-shm"].map { deployment.databasePath(for: .terminal) + $0 }
        var scanned = 0
        for path in files where FileManager.default.fileExists(atPath: path) {
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: path)))
            scanned += bytes.count
            for dpan in dpans {
                for form in cardNumberForms(dpan) { #expect(!bytes.containsSequence(form), "\(dpan) in \(path)") }
            }
        }
        #expect(scanned > 0)
        let log = try String(contentsOfFile: deployment.logPath(for: .terminal), encoding: .utf8)
        #expect(log.contains("******"))
        for output in outputs {
            for dpan in dpans { #expect(!output.stdout.contains(dpan) && !output.stderr.contains(dpan)) }
        }
    }
}

/// The device side of the link in this process: an iPad has no antenna and refuses a field; a phone
/// without a card stays out of it.
@Suite("NFC field session")
struct FieldSessionTests {
    @Test("An iPad or a Mac gets no antenna and refuses a field; a phone without a card refuses with noCard")
    func refusals() async throws {
        let directory = try TemporaryDirectory()
        let deployment = directory.deployment
        let polling = try NFCPolling(applicationIdentifiers: [PaymentScheme.visa.aid], networks: ["visa"])
        for (name, kind) in [("tablet", DeviceKind.ipad), ("laptop", .mac)] {
            _ = try Device.create(
                in: deployment, name: name, profile: try DeviceProfile(kind: kind, biometry: .touch, account: "a"))
            let device = try await Device.open(in: deployment, name: name)
            #expect(try NFCFieldSession.startAntenna(device: device, deployment: deployment) == nil)
            #expect(!FileManager.default.fileExists(atPath: NFCAntenna.path(forDevice: name, in: deployment)))
            let answer = await NFCFieldSession(device: device).fieldOn(polling)
            #expect(answer == .refuse(NFCRefusal(code: "unsupported", message: "a \(kind) does not join an NFC field")))
        }
        _ = try Device.create(
            in: deployment, name: "phone", profile: try DeviceProfile(kind: .phone, biometry: .face, account: "a"))
        let phone = try await Device.open(in: deployment, name: "phone")
        let events = EventLog()
        let session = NFCFieldSession(device: phone, events: { events.append($0) })
        guard case .refuse(let refusal) = await session.fieldOn(polling) else {
            Issue.record("a phone without a card joined")
            return
        }
        #expect(refusal.code == "noCard")
        #expect(events.all.map(\.event) == ["refused"])
        #expect(throws: DeviceError.self) { try AutoAuthentication(parsing: "retina") }
        // The passcode is never part of the value (argv is visible to `ps`): the caller gives it.
        #expect(throws: DeviceError.self) { try AutoAuthentication(parsing: "passcode:1234") }
        #expect(throws: DeviceError.self) { try AutoAuthentication(parsing: "passcode") }
        #expect(AutoAuthentication.needsPasscode("double-click,passcode"))
        #expect(!AutoAuthentication.needsPasscode("double-click,face-id"))
        let automatic = try AutoAuthentication(
            parsing: "double-click,passcode", passcode: SecureBytes(Array("1234".utf8)))
        #expect("\(automatic)".contains("1234") == false)
    }
}

final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [NFCFieldEvent] = []
    func append(_ event: NFCFieldEvent) { lock.withLock { stored.append(event) } }
    var all: [NFCFieldEvent] { lock.withLock { stored } }
}
