import AppPayments
import CardBasics
import Device
import DeviceControlAPI
import DeviceProcess
import DeviceTestSupport
import Foundation
import OrchardCrypto
import SecureElement
import Testing
import Wallet

/// The clients' side of the control socket (`DeviceControlAPI`, which the CLI, apps and tests import) against the
/// device process's router: every typed request sent through a real socket is read (its effect is seen on the
/// device), every answer decodes with the contract's types, the wire keys are pinned, and malformed input is a
/// typed error that changes nothing.
@Suite("Device control wire format: clients and the device process agree")
struct DeviceControlAPIContractTests {
    /// A phone and a watch, each served on its own control socket; the phone's sheets cannot reach a Pay server.
    final class Devices: @unchecked Sendable {
        let directory: TemporaryDirectory
        let phone: Device
        let phoneIdentity: DeviceIdentity
        let watch: Device
        let phoneSocket: String
        let watchSocket: String
        private let servers: [ControlSocketServer]

        init() async throws {
            directory = try TemporaryDirectory()
            (phone, phoneIdentity) = try await makeDevice(in: directory.deployment)
            (watch, _) = try await makeDevice(
                in: directory.deployment, name: "alice-watch", kind: .watch, biometry: .none)
            let sheets = PaymentSheetService(
                device: phone, connect: { throw DeviceError(.unsupported, "no Pay server in this test") })
            phoneSocket = directory.path + "/phone.sock"
            watchSocket = directory.path + "/watch.sock"
            servers = [
                try ControlSocketServer(path: phoneSocket, control: DeviceControl(device: phone, sheets: sheets)),
                try ControlSocketServer(path: watchSocket, control: DeviceControl(device: watch)),
            ]
        }

        deinit { for server in servers { server.stop() } }

        /// Sends `request` to the phone (or the watch) through its socket; the typed answer or the refusal.
        func send<Request: DeviceControlRequest>(
            _ request: Request, watch: Bool = false
        ) async -> Result<Request.Answer, DeviceProcessError> {
            await ControlSocketClient.send(request, to: watch ? watchSocket : phoneSocket)
        }

        /// Raw bytes on a route, for malformed input: the status and the typed error body.
        func raw(_ method: String, _ path: String, _ body: String) async throws -> (Int, DeviceControlErrorBody) {
            let response = try await ControlSocketClient.send(
                ControlRequest(method: method, path: path, body: Data(body.utf8)), to: phoneSocket
            ).get()
            return (
                response.status,
                try DeviceControlJSON.decoder().decode(DeviceControlErrorBody.self, from: response.body)
            )
        }
    }

    static let face = AuthenticationEvidenceBody(method: "face-id", success: true)
    static let selectPPSE = SendAPDU(command: "00A404000E325041592E5359532E444446303100")

    @Test func everyDeviceRequestIsReadByTheRouter() async throws {
        let devices = try await Devices()
        let phone = devices.phone
        let envelope = try TestCards.envelope(for: devices.phoneIdentity, dpan: TestCards.visaDPAN)
        let added = try await devices.send(
            AddCard(envelope: Data(envelope), type: "debit", suffix: "1881", displayName: "Debit")
        ).get()
        let stored = try #require(await phone.wallet.allCards.first)
        #expect(stored.id == added.id && stored.type == .debit && stored.suffix == "1881")
        #expect(try await devices.send(ListCards()).get() == [added])

        _ = try await devices.send(SetAutomaticSelection(card: added.id, enabled: true)).get()
        #expect(await phone.wallet.allCards.first?.automaticSelection == true)
        _ = try await devices.send(ChooseCard(card: added.id)).get()
        #expect(await phone.wallet.cardForField()?.reason == .chosen)
        _ = try await devices.send(SetDefaultCard(card: added.id)).get()
        #expect(await phone.status().defaultCard == added.id)

        #expect(try await devices.send(Authenticate(Self.face, type: "contactless")).get().outcome == "authorized")
        #expect(await phone.status().contactless == "armed")
        _ = try await devices.send(FieldOn(networks: ["visa"])).get()
        #expect(await phone.status().contactless == "in-field")
        let selected = try await devices.send(Self.selectPPSE).get()
        #expect(selected.bytes?.suffix(2) == [0x90, 0x00])
        _ = try await devices.send(FieldOff()).get()
        #expect(await phone.status().contactless != "in-field")
        #expect(try await devices.send(DoubleClick()).get().outcome == "presented")

        let settings = try await devices.send(
            UpdateSettings(DeviceSettingsBody(doubleClickPresentsCards: false, biometricsForPayments: false))
        ).get()
        #expect(await phone.wallet.currentSettings.doubleClickPresentsCards == false)
        #expect(await phone.secureEnclave.status.biometricsForPayments == false)
        #expect(try await devices.send(GetSettings()).get() == settings)

        _ = try await devices.send(SetPasscode(passcode: "135790", current: TestCards.passcode)).get()
        #expect(try await devices.send(Lock()).get().outcome == "locked")
        #expect(await phone.secureEnclave.status.lock == .locked)
        let unlock = Unlock(AuthenticationEvidenceBody(method: "passcode", passcode: "135790"))
        #expect(try await devices.send(unlock).get().outcome == "unlocked")
        #expect(await phone.secureEnclave.status.lock == .unlocked)

        let suspended = await devices.send(ApplyTokenStatus(tokenReference: "tok_01010119", state: "suspended"))
        #expect(try suspended.get().state == "suspended")
        #expect(await phone.wallet.allCards.first?.state == .suspended)
        #expect(try await devices.send(ApplyLostMode(lostMode: true)).get().lostMode)
        #expect(phone.isInLostMode)
        #expect(try await devices.send(GetDeviceStatus()).get().lostMode)
        #expect(try await devices.send(ApplyLostMode(lostMode: false)).get().lostMode == false)
        #expect(!phone.isInLostMode)
        #expect(try await devices.send(ResetAuthorizationRandom(reason: "sign-out")).get().terminated == [added.id])
        #expect(await phone.wallet.allCards.first?.state == .terminated)
        #expect(try await devices.send(RemovePasscode(current: "135790")).get().terminated == [])
        #expect(await phone.secureEnclave.status.hasPasscode == false)
        _ = try await devices.send(RemoveCard(card: added.id)).get()
        #expect(await phone.wallet.allCards.isEmpty)

        // The watch: the wrist and its double-click.
        _ = try await devices.send(SetWrist(on: true), watch: true).get()
        #expect(await devices.watch.secureEnclave.status.lock == .locked)
        let status = try await devices.send(GetDeviceStatus(), watch: true).get()
        #expect(status.name == "alice-watch" && status.profile.kind == "watch" && status.enclave.lock == "locked")
        #expect(status.enclave.paymentMethods == [])
    }

    @Test func thePaymentSheetsRequestsAreReadByTheRouter() async throws {
        let devices = try await Devices()
        let envelope = try TestCards.envelope(for: devices.phoneIdentity, dpan: TestCards.visaDPAN)
        _ = try await devices.phone.installCard(envelope: envelope, display: TestCards.display)
        let credit = await devices.send(CanMakePayments(networks: ["visa"], capabilities: ["supportsCredit"]))
        #expect(try credit.get().canMakePayments)
        let debit = await devices.send(CanMakePayments(networks: ["visa"], capabilities: ["supportsDebit"]))
        #expect(try !debit.get().canMakePayments)
        #expect(try await devices.send(CanMakePayments()).get().canMakePayments)
        // Before any presentation, every sheet route answers 404 notFound.
        let noSheet: [DeviceProcessError] = [
            try await devices.send(GetPaymentSheet()).failure(),
            try await devices.send(NextPaymentSheetEvent(sheet: "current", wait: 0)).failure(),
            try await devices.send(AnswerPaymentSheetEvent(sheet: "current", .init(sequence: 1))).failure(),
            try await devices.send(ChoosePaymentSheetCard(card: "x")).failure(),
            try await devices.send(GivePaymentSheetContact(role: .billing, contact: PaymentContact(name: "A")))
                .failure(),
            try await devices.send(ChoosePaymentSheetShippingMethod(identifier: "standard")).failure(),
            try await devices.send(AuthenticatePaymentSheet(Self.face)).failure(),
            try await devices.send(CancelPaymentSheet()).failure(),
        ]
        for error in noSheet { #expect(error.status == 404 && error.refusal?.code == "notFound", "\(error)") }
        // A valid presentation is read, claimed and refused only for want of a Pay server; a malformed one is 400.
        let request = PaymentRequest(
            merchantIdentifier: "merchant.dev.orchard.demo", countryCode: "US", currencyCode: "USD",
            supportedNetworks: [.visa], merchantCapabilities: [.threeDSecure, .credit],
            paymentSummaryItems: [PaymentSummaryItem(label: "Orchard", amount: "1.00")])
        let present = PresentPaymentSheet(
            applicationIdentifier: "dev.orchard.demo-app", request: PaymentSheetRequestBody(request))
        let refusal = try await devices.send(present).failure()
        #expect(refusal.status == 503 && refusal.refusal?.code == "payServerUnavailable")
        // The device kept the refused sheet as its latest: it read the application and the request.
        let latest = try await devices.send(GetPaymentSheet()).get()
        #expect(latest.applicationIdentifier == "dev.orchard.demo-app" && latest.sheet == nil)
    }

    @Test func theRoutersAnswersDecodeWithTheContractsTypesLosingNothing() async throws {
        let devices = try await Devices()
        let envelope = try TestCards.envelope(for: devices.phoneIdentity, dpan: TestCards.visaDPAN)
        _ = try await devices.phone.installCard(envelope: envelope, display: TestCards.display)
        // Decoded and encoded again with sorted keys, each answer is the router's own bytes: no field is unread.
        func roundTrip<Request: DeviceControlRequest>(_ request: Request) async throws -> Bool
        where Request.Answer: Equatable {
            let raw = try await ControlSocketClient.send(try ControlRequest(request), to: devices.phoneSocket).get()
            let answer = try raw.answer(to: request).get()
            return try DeviceControlJSON.encoder().encode(answer) == raw.body
        }
        #expect(try await roundTrip(GetDeviceStatus()))
        #expect(try await roundTrip(ListCards()))
        #expect(try await roundTrip(GetSettings()))
        #expect(try await roundTrip(Authenticate(AuthenticationEvidenceBody(method: "face-id", success: false))))
        #expect(try await roundTrip(CanMakePayments()))
        let refused = try await ControlSocketClient.send(
            try ControlRequest(SetWrist(on: true)), to: devices.phoneSocket
        )
        .get()
        let error = try DeviceControlJSON.decoder().decode(DeviceControlErrorBody.self, from: refused.body)
        #expect(refused.status == 422 && error.error.code == "unsupportedDevice")
        #expect(try DeviceControlJSON.encoder().encode(error) == refused.body)
    }

    @Test func theWireKeysArePinned() throws {
        func json(_ value: some Encodable) throws -> String {
            String(decoding: try DeviceControlJSON.encoder().encode(value), as: UTF8.self)
        }
        #expect(
            try json(AddCard(envelope: Data([1, 2, 3]), type: "credit", suffix: "4242", displayName: "Visa"))
                == #"{"displayName":"Visa","envelope":"AQID","suffix":"4242","type":"credit"}"#)
        let authenticate = Authenticate(
            AuthenticationEvidenceBody(method: "passcode", success: true, passcode: "1234"), type: "in-app",
            card: "c1", amount: AmountBody(minorUnits: 999, currency: 840))
        #expect(
            try json(authenticate)
                == #"{"amount":{"currency":840,"minorUnits":999},"card":"c1","method":"passcode","passcode":"1234","#
                + #""success":true,"type":"in-app"}"#)
        #expect(
            try json(Unlock(AuthenticationEvidenceBody(method: "face-id", success: false)).body)
                == #"{"method":"face-id","success":false}"#)
        #expect(try json(SetAutomaticSelection(card: "c1", enabled: true).body) == #"{"enabled":true}"#)
        #expect(try json(ApplyTokenStatus(tokenReference: "t", state: "deleted").body) == #"{"state":"deleted"}"#)
        #expect(try json(ApplyLostMode(lostMode: true).body) == #"{"lostMode":true}"#)
        #expect(try json(SetWrist(on: false)) == #"{"on":false}"#)
        #expect(try json(FieldOn(networks: ["visa"])) == #"{"networks":["visa"]}"#)
        #expect(try json(SendAPDU(bytes: [0x00, 0xA4, 0xFF])) == #"{"command":"00A4FF"}"#)
        #expect(try json(SetPasscode(passcode: "1", current: "2")) == #"{"current":"2","passcode":"1"}"#)
        #expect(try json(RemovePasscode(current: "2")) == #"{"current":"2"}"#)
        #expect(try json(ResetAuthorizationRandom(reason: "erase")) == #"{"reason":"erase"}"#)
        #expect(
            try json(DeviceSettingsBody(allowWebsiteQueries: true, doubleClickPresentsCards: false))
                == #"{"allowWebsiteQueries":true,"doubleClickPresentsCards":false}"#)
        #expect(try json(ChoosePaymentSheetCard(card: "c1").body) == #"{"card":"c1"}"#)
        #expect(try json(ChoosePaymentSheetShippingMethod(identifier: "s").body) == #"{"identifier":"s"}"#)
        #expect(
            try json(CanMakePayments(networks: ["visa"], capabilities: ["supports3DS"]))
                == #"{"capabilities":["supports3DS"],"networks":["visa"]}"#)
        #expect(
            try json(AnswerPaymentSheetEvent(sheet: "s", .init(sequence: 3)).body) == #"{"sequence":3}"#)
        let card = WalletCardAnswer(
            id: "c1", network: "visa", type: "credit", suffix: "4242", deviceAccountSuffix: "0119",
            displayName: "Visa", state: "active", automaticSelection: false, addedAt: Date(timeIntervalSince1970: 0))
        #expect(
            try json(card)
                == #"{"addedAt":"1970-01-01T00:00:00Z","automaticSelection":false,"deviceAccountSuffix":"0119","#
                + #""displayName":"Visa","id":"c1","network":"visa","state":"active","suffix":"4242","type":"credit"}"#)
        #expect(
            try json(AuthenticationOutcomeAnswer(outcome: "rejected", offered: ["passcode"]))
                == #"{"offered":["passcode"],"outcome":"rejected"}"#)
        #expect(try json(APDUAnswer(response: "9000")) == #"{"response":"9000"}"#)
        #expect(try json(TerminatedCardsAnswer(terminated: ["c1"])) == #"{"terminated":["c1"]}"#)
        #expect(
            try json(RelayKeysAnswer(encryptionKey: Data([4]), signingKey: Data([5])))
                == #"{"encryptionKey":"BA==","signingKey":"BQ=="}"#)
        #expect(try json(RelayVouchAnswer(signature: Data([0x30]))) == #"{"signature":"MA=="}"#)
        #expect(try json(RelayAlertsAnswer(alerts: ["a"])) == #"{"alerts":["a"]}"#)
        #expect(
            try json(VouchRelayDevice(device: "mac", encryptionKey: Data([4]), signingKey: Data([5]), passcode: "1234"))
                == #"{"device":"mac","encryptionKey":"BA==","passcode":"1234","signingKey":"BQ=="}"#)
        #expect(GetRelayKeys().route.path == "/relay/keys" && GetRelayKeys().route.method == "GET")
        #expect(
            !"\(VouchRelayDevice(device: "mac", encryptionKey: Data(), signingKey: Data(), passcode: "1234"))".contains(
                "1234"))
        #expect(try json(PresentedPaymentSheet(id: "s", automatic: false)) == #"{"automatic":false,"id":"s"}"#)
        #expect(
            try json(DeviceControlErrorBody(code: "notFound", message: "no route"))
                == #"{"error":{"code":"notFound","message":"no route"}}"#)
        var event = PaymentSheetAppEvent(sheet: "s", kind: .ended)
        event.outcome = "cancelled"
        #expect(try json(event) == #"{"kind":"ended","outcome":"cancelled","sheet":"s"}"#)
    }

    @Test("An app's request over the socket carries the coupon code field and its first code (version 12)")
    func theRequestCarriesCouponCodes() throws {
        var request = PaymentRequest(
            merchantIdentifier: "m", countryCode: "US", currencyCode: "USD", supportedNetworks: [.visa],
            merchantCapabilities: [.threeDSecure], paymentSummaryItems: [PaymentSummaryItem(label: "S", amount: "1.00")]
        )
        let encoder = DeviceControlJSON.encoder()
        func keys(_ body: PaymentSheetRequestBody) throws -> [String] {
            let object = try JSONSerialization.jsonObject(with: try encoder.encode(body)) as? [String: Any]
            return (object ?? [:]).keys.sorted()
        }
        // Without a coupon field, the body is as before (older device processes read it unchanged).
        #expect(
            try !keys(PaymentSheetRequestBody(request)).contains { $0.hasPrefix("coupon") || $0.hasPrefix("supports") })
        #expect(try PaymentSheetRequestBody(request).paymentRequest().get().supportsCouponCode == false)
        request.supportsCouponCode = true
        request.couponCode = "SPRING"
        let body = PaymentSheetRequestBody(request)
        #expect(try keys(body).contains("supportsCouponCode") && keys(body).contains("couponCode"))
        let decoded = try DeviceControlJSON.decoder().decode(
            PaymentSheetRequestBody.self, from: try encoder.encode(body))
        let read = try decoded.paymentRequest().get()
        #expect(read.supportsCouponCode && read.couponCode == "SPRING")
        // A code longer than a sheet takes is refused, as the sheet's own coupon action refuses it.
        request.couponCode = String(repeating: "X", count: 65)
        guard case .failure(let error) = PaymentSheetRequestBody(request).paymentRequest() else {
            Issue.record("a 65-character coupon code was accepted")
            return
        }
        #expect(error.code == .invalidRequest)
    }

    @Test func everyRouteIsWrittenAndReadTheSameWay() {
        let routes: [DeviceControlRoute] =
            [
                .status, .cards, .addCard, .removeCard("c1"), .chooseCard("c1"), .setDefaultCard("c1"),
                .setAutomaticSelection("c1"), .tokenStatus("t1"), .lostMode, .authenticate, .lock, .unlock, .wrist,
                .doubleClick,
                .fieldOn, .fieldOff, .fieldAPDU, .setPasscode, .removePasscode, .reset, .settings, .updateSettings,
                .presentSheet, .canMakePayments, .sheet("current"), .sheetEvents("s1", wait: 5),
                .sheetEvents("s1", wait: nil),
                .sheetAnswer("s1"), .relayKeys, .relayVouch, .relayAlerts, .proximity, .handoffDevices, .handoffPayment,
            ] + PaymentSheetActionName.allCases.map { .sheetAction("current", $0) }
        for route in routes {
            #expect(DeviceControlRoute(method: route.method, path: route.path) == route, "\(route.path)")
        }
        #expect(DeviceControlRoute(method: "GET", path: "/settings")?.method == "GET")
        #expect(DeviceControlRoute(method: "POST", path: "/cards/c1/delete") == nil)
        #expect(DeviceControlRoute(method: "PATCH", path: "/settings") == nil)
        #expect(DeviceControlRoute(method: "POST", path: "/payment-sheets/current/frobnicate") == nil)
        #expect(DeviceControlRoute(method: "GET", path: "status") == nil)
    }

    @Test func malformedInputIsATypedErrorAndChangesNothing() async throws {
        let devices = try await Devices()
        let envelope = try TestCards.envelope(for: devices.phoneIdentity, dpan: TestCards.visaDPAN)
        let card = try await devices.phone.installCard(envelope: envelope, display: TestCards.display)
        let before = try await devices.send(GetDeviceStatus()).get()
        let settings = try await devices.send(GetSettings()).get()
        let cases: [(String, String, String, Int, String)] = [
            ("POST", "/authenticate", "{", 400, "invalidArgument"),
            ("POST", "/authenticate", #"{"method":7}"#, 400, "invalidArgument"),
            ("POST", "/authenticate", #"{"method":"face-id","success":"yes"}"#, 400, "invalidArgument"),
            ("POST", "/cards/\(card.id)/automatic-selection", #"{"enabled":"on"}"#, 400, "invalidArgument"),
            ("PUT", "/settings", #"{"allowWebsiteQueries":"no"}"#, 400, "invalidArgument"),
            ("PUT", "/settings", "[]", 400, "invalidArgument"),
            ("POST", "/passcode", #"{"current":"739146"}"#, 400, "invalidArgument"),
            ("POST", "/reset", #"{"reason":null}"#, 400, "invalidArgument"),
            (
                "POST", "/cards", #"{"envelope":"%%%","type":"credit","suffix":"1","displayName":"x"}"#, 400,
                "invalidArgument"
            ),
            ("POST", "/wrist", "", 400, "invalidArgument"),
            ("POST", "/lost-mode", #"{"lostMode":"yes"}"#, 400, "invalidArgument"),
            ("POST", "/lost-mode", "{}", 400, "invalidArgument"),
            ("POST", "/payment-sheets", #"{"applicationIdentifier":1}"#, 400, "invalidRequest"),
            ("POST", "/payment-sheets/can-make-payments", #"{"networks":"visa"}"#, 400, "invalidRequest"),
            // A key given twice: refused, whichever value would have won.
            ("POST", "/authenticate", #"{"method":"face-id","success":false,"success":true}"#, 400, "invalidArgument"),
            ("PUT", "/settings", #"{"allowWebsiteQueries":true,"allowWebsiteQueries":false}"#, 400, "invalidArgument"),
            (
                "POST", "/payment-sheets/can-make-payments", #"{"networks":[],"networks":["visa"]}"#, 400,
                "invalidRequest"
            ),
            ("GET", "/nothing", "", 404, "notFound"),
            ("POST", "/status", "", 404, "notFound"),
            ("DELETE", "/cards", "", 404, "notFound"),
        ]
        for (method, path, body, status, code) in cases {
            let (answered, error) = try await devices.raw(method, path, body)
            #expect(answered == status && error.error.code == code, "\(method) \(path) \(body): \(error)")
        }
        #expect(try await devices.send(GetDeviceStatus()).get() == before)
        #expect(try await devices.send(GetSettings()).get() == settings)
        #expect(await devices.phone.secureEnclave.status.hasPasscode)
    }

    @Test func answersOutsideTheContractAreProtocolErrorsNotRefusals() async throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/odd.sock"
        let server = try ControlSocketServer(path: path) { request in
            request.path == "/status"
                ? ControlResponse(status: 200, body: Data(#"{"name":"x"}"#.utf8))
                : ControlResponse(status: 500, body: Data("teapot".utf8))
        }
        defer { server.stop() }
        let wrongShape = try await ControlSocketClient.send(GetDeviceStatus(), to: path).failure()
        #expect(wrongShape.code == .protocolError && wrongShape.refusal == nil)
        let noErrorBody = try await ControlSocketClient.send(GetSettings(), to: path).failure()
        #expect(noErrorBody.code == .protocolError && noErrorBody.status == nil)
    }

    @Test func requestsHoldingSecretsPrintWithoutThem() {
        let envelope = Data("sealed-personalisation-4761739001010119".utf8)
        let secrets: [(any Sendable, [String])] = [
            (AddCard(envelope: envelope, type: "credit", suffix: "4242", displayName: "Visa"), ["sealed", "c2VhbGVk"]),
            (Authenticate(AuthenticationEvidenceBody(method: "passcode", passcode: "864209")), ["864209"]),
            (Unlock(AuthenticationEvidenceBody(method: "passcode", passcode: "864209")), ["864209"]),
            (AuthenticatePaymentSheet(AuthenticationEvidenceBody(method: "passcode", passcode: "864209")), ["864209"]),
            (SetPasscode(passcode: "864209", current: "135790"), ["864209", "135790"]),
            (RemovePasscode(current: "135790"), ["135790"]),
        ]
        for (request, hidden) in secrets {
            var dumped = ""
            dump(request, to: &dumped)
            for text in ["\(request)", String(reflecting: request), dumped] {
                for secret in hidden { #expect(!text.contains(secret), "\(type(of: request)): \(text)") }
            }
        }
        #expect("\(AddCard(envelope: envelope, type: "credit", suffix: "4242", displayName: "Visa"))".contains("4242"))
    }
}

extension Result {
    /// The failure; records an issue and throws when it succeeded.
    func failure(sourceLocation: SourceLocation = #_sourceLocation) throws -> Failure {
        switch self {
        case .success(let value):
            Issue.record("expected a refusal, got \(value)", sourceLocation: sourceLocation)
            throw DeviceProcessError(.protocolError, "accepted")
        case .failure(let error):
            return error
        }
    }
}
