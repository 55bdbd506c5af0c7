import Device
import DeviceControlAPI
import DeviceProcess
import DeviceTestSupport
import EMV
import Foundation
import SecureElement
import Testing

@Suite("Device control API")
struct DeviceControlTests {
    /// The router in this process, with the contract's typed requests and answers.
    struct Client {
        let control: DeviceControl

        @discardableResult
        func send<Request: DeviceControlRequest>(
            _ request: Request, sourceLocation: SourceLocation = #_sourceLocation
        ) async throws -> Request.Answer {
            let result = await control.send(request)
            if case .failure(let error) = result {
                Issue.record("\(request.route.path): \(error)", sourceLocation: sourceLocation)
            }
            return try result.get()
        }

        /// The refusal's status and code.
        func refusal<Request: DeviceControlRequest>(
            _ request: Request, sourceLocation: SourceLocation = #_sourceLocation
        ) async -> (Int?, String?) {
            switch await control.send(request) {
            case .success:
                Issue.record("\(request.route.path) was accepted", sourceLocation: sourceLocation)
                return (nil, nil)
            case .failure(let error):
                return (error.status, error.refusal?.code)
            }
        }
    }

    /// The terminal talking to the device through `POST /field/apdu`.
    struct ControlLink: CardTransport {
        let control: DeviceControl
        func transmit(_ command: CommandAPDU) async throws -> ResponseAPDU {
            let answer = try await control.send(SendAPDU(bytes: try command.encoded())).get()
            guard let bytes = answer.bytes else { throw EMVError(.transportFailure, "the answer is not hex") }
            return try ResponseAPDU(bytes: bytes)
        }
    }

    static let face = AuthenticationEvidenceBody(method: "face-id", success: true)

    @Test("A phone through the control API: add a card, fail and pass Face ID, pay at a terminal")
    func phoneFlow() async throws {
        let directory = try TemporaryDirectory()
        let (device, identity) = try await makeDevice(in: directory.deployment)
        let control = DeviceControl(device: device)
        let client = Client(control: control)
        let envelope = try TestCards.envelope(for: identity, dpan: TestCards.visaDPAN)
        let add = AddCard(envelope: Data(envelope), type: "debit", suffix: "1881", displayName: "Debit")
        let raw = await control.handle(try ControlRequest(add))
        #expect(raw.status == 201)
        let card = try raw.answer(to: add).get()
        let id = card.id
        #expect(card.deviceAccountSuffix == "0119" && card.type == "debit" && card.state == "active")
        #expect(try await client.send(GetDeviceStatus()).defaultCard == id)
        let cards = await control.handle(try ControlRequest(ListCards()))
        #expect(!String(decoding: cards.body, as: UTF8.self).contains(TestCards.visaDPAN))

        let failed = try await client.send(Authenticate(AuthenticationEvidenceBody(method: "face-id", success: false)))
        #expect(failed == AuthenticationOutcomeAnswer(outcome: "rejected", offered: ["face-id"]))
        let touch = await client.refusal(Authenticate(AuthenticationEvidenceBody(method: "touch-id", success: true)))
        #expect(touch == (422, "methodUnavailable"))
        let passcode = await client.refusal(
            Authenticate(AuthenticationEvidenceBody(method: "passcode", passcode: "0000")))
        #expect(passcode == (409, "methodNotOffered"))
        #expect(try await client.send(Authenticate(Self.face)).outcome == "authorized")

        try await client.send(FieldOn(networks: ["visa"]))
        let kernel = TerminalKernel(configuration: TerminalConfiguration(countryCode: 840, currencyCode: 840))
        let outcome = try await kernel.run(
            TransactionParameters(amount: 1999, date: try TransactionDate(yymmdd: "250615")),
            card: ControlLink(control: control))
        try await client.send(FieldOff())
        #expect(outcome.status == .onlineRequest)
        #expect(outcome.card?.pan == TestCards.visaDPAN)
        // A second tap without authentication releases nothing.
        try await client.send(FieldOn())
        let again = try await kernel.run(
            TransactionParameters(amount: 1999, date: try TransactionDate(yymmdd: "250615")),
            card: ControlLink(control: control))
        try await client.send(FieldOff())
        #expect(again.card == nil)

        try await client.send(SetAutomaticSelection(card: id, enabled: true))
        try await client.send(ChooseCard(card: id))
        try await client.send(SetDefaultCard(card: id))
        #expect(try await client.send(ListCards()).first?.automaticSelection == true)
        let missing = await client.refusal(SetDefaultCard(card: String(repeating: "0", count: 32)))
        #expect(missing == (404, "cardNotFound"))
        let settings = try await client.send(UpdateSettings(DeviceSettingsBody(allowWebsiteQueries: false)))
        #expect(settings.allowWebsiteQueries == false && settings.biometricsForPayments == true)
        #expect(try await client.send(GetSettings()) == settings)
        #expect(try await client.send(ResetAuthorizationRandom(reason: "sign-out")).terminated == [id])
        #expect(try await client.send(GetDeviceStatus()).cards.first?.state == "terminated")
    }

    @Test("A watch through the control API: wrist, unlock, double-click")
    func watchFlow() async throws {
        let directory = try TemporaryDirectory()
        let (device, identity) = try await makeDevice(
            in: directory.deployment, name: "alice-watch", kind: .watch, biometry: .none)
        let client = Client(control: DeviceControl(device: device))
        _ = try await device.installCard(
            envelope: try TestCards.envelope(for: identity, dpan: TestCards.visaDPAN), display: TestCards.display)
        let passcode = AuthenticationEvidenceBody(method: "passcode", passcode: TestCards.passcode)
        #expect(await client.refusal(DoubleClick()) == (403, "deviceLocked"))
        #expect(await client.refusal(Unlock(passcode)) == (403, "notOnWrist"))
        try await client.send(SetWrist(on: true))
        #expect(await client.refusal(SetWrist(on: true)) == (409, "illegalTransition"))
        let wrong = try await client.send(Unlock(AuthenticationEvidenceBody(method: "passcode", passcode: "1111")))
        #expect(wrong.outcome == "rejected")
        #expect(try await client.send(Unlock(passcode)).outcome == "unlocked")
        #expect(try await client.send(GetDeviceStatus()).enclave.lock == "unlocked")
        #expect(try await client.send(DoubleClick()).outcome == "authorized")
        try await client.send(SetWrist(on: false))
        #expect(await client.refusal(DoubleClick()) == (403, "deviceLocked"))
        #expect(try await client.send(Lock()).outcome == "locked")
    }

    @Test("Malformed requests and unknown routes are JSON errors")
    func errors() async throws {
        let directory = try TemporaryDirectory()
        let (device, _) = try await makeDevice(in: directory.deployment)
        let control = DeviceControl(device: device)
        let client = Client(control: control)
        for (method, path) in [("GET", "/nothing"), ("DELETE", "/status"), ("GET", "/payment-sheets/current")] {
            let response = await control.handle(ControlRequest(method: method, path: path))
            let body = try DeviceControlJSON.decoder().decode(DeviceControlErrorBody.self, from: response.body)
            #expect(response.status == 404 && body.error.code == "notFound", "\(method) \(path)")
        }
        #expect(
            await client.refusal(Authenticate(AuthenticationEvidenceBody(method: "retina"))) == (400, "invalidArgument")
        )
        #expect(
            await client.refusal(Authenticate(AuthenticationEvidenceBody(method: "face-id"))) == (
                400, "invalidArgument"
            ))
        #expect(await client.refusal(SendAPDU(command: "zz")) == (400, "invalidArgument"))
        #expect(await client.refusal(SendAPDU(command: "00A4")) == (409, "fieldNotActive"))
        #expect(await client.refusal(ResetAuthorizationRandom(reason: "boredom")) == (400, "invalidArgument"))
        let forged = AddCard(envelope: Data([0, 0, 0]), type: "credit", suffix: "1234", displayName: "x")
        #expect(await client.refusal(forged) == (403, "invalidEnvelope"))
        let raw = await control.handle(ControlRequest(method: "POST", path: "/unlock", body: Data("{".utf8)))
        #expect(raw.status == 400)
        // Five wrong passcodes: the sixth attempt waits.
        for _ in 0..<5 {
            _ = await control.send(Unlock(AuthenticationEvidenceBody(method: "passcode", passcode: "0000")))
        }
        let passcode = AuthenticationEvidenceBody(method: "passcode", passcode: TestCards.passcode)
        #expect(await client.refusal(Unlock(passcode)) == (429, "lockedOut"))
    }
}
