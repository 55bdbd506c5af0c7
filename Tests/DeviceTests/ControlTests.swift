import Device
import EMV
import Foundation
import OrchardCrypto
import SecureElement
import Testing

@Suite("Device control API")
struct ControlTests {
    struct Client {
        let control: DeviceControl

        @discardableResult
        func call(
            _ method: String, _ path: String, _ body: [String: Any]? = nil, expect status: Int = 200,
            sourceLocation: SourceLocation = #_sourceLocation
        ) async throws -> [String: Any] {
            let data = try body.map { try JSONSerialization.data(withJSONObject: $0) } ?? Data()
            let response = await control.handle(ControlRequest(method: method, path: path, body: data))
            let text = String(decoding: response.body, as: UTF8.self)
            #expect(response.status == status, "\(method) \(path): \(text)", sourceLocation: sourceLocation)
            return (try? JSONSerialization.jsonObject(with: response.body) as? [String: Any]) ?? ["array": text]
        }

        func errorCode(
            _ method: String, _ path: String, _ body: [String: Any]? = nil, expect status: Int,
            sourceLocation: SourceLocation = #_sourceLocation
        ) async throws -> String? {
            let json = try await call(method, path, body, expect: status, sourceLocation: sourceLocation)
            return (json["error"] as? [String: Any])?["code"] as? String
        }
    }

    /// The terminal talking to the device through `POST /field/apdu`.
    struct ControlLink: CardTransport {
        let control: DeviceControl
        func transmit(_ command: CommandAPDU) async throws -> ResponseAPDU {
            let hex = try command.encoded().map { String(format: "%02X", $0) }.joined()
            let response = await control.handle(
                ControlRequest(
                    method: "POST", path: "/field/apdu",
                    body: try JSONSerialization.data(withJSONObject: ["command": hex])))
            guard response.status == 200,
                let json = try JSONSerialization.jsonObject(with: response.body) as? [String: String],
                let answer = json["response"]
            else { throw EMVError(.transportFailure, String(decoding: response.body, as: UTF8.self)) }
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

    @Test("A phone through the control API: add a card, fail and pass Face ID, pay at a terminal")
    func phoneFlow() async throws {
        let directory = try TemporaryDirectory()
        let (device, identity) = try await makeDevice(directory)
        let control = DeviceControl(device: device)
        let client = Client(control: control)
        let envelope = try TestCards.envelope(for: identity, dpan: TestCards.visaDPAN)
        let card = try await client.call(
            "POST", "/cards",
            [
                "envelope": Data(envelope).base64EncodedString(), "type": "debit", "suffix": "1881",
                "displayName": "Debit",
            ],
            expect: 201)
        let id = try #require(card["id"] as? String)
        #expect(card["deviceAccountSuffix"] as? String == "0119")
        let status = try await client.call("GET", "/status")
        #expect(status["defaultCard"] as? String == id)
        let cards = try await client.call("GET", "/cards")
        #expect((cards["array"] as? String)?.contains(TestCards.visaDPAN) == false)

        let failed = try await client.call("POST", "/authenticate", ["method": "face-id", "success": false])
        #expect(failed["outcome"] as? String == "rejected" && failed["offered"] as? [String] == ["face-id"])
        #expect(
            try await client.errorCode("POST", "/authenticate", ["method": "touch-id", "success": true], expect: 422)
                == "methodUnavailable")
        #expect(
            try await client.errorCode(
                "POST", "/authenticate", ["method": "passcode", "passcode": "0000"], expect: 409)
                == "methodNotOffered")
        let passed = try await client.call("POST", "/authenticate", ["method": "face-id", "success": true])
        #expect(passed["outcome"] as? String == "authorized")

        try await client.call("POST", "/field/on", ["networks": ["visa"]])
        let kernel = TerminalKernel(configuration: TerminalConfiguration(countryCode: 840, currencyCode: 840))
        let outcome = try await kernel.run(
            TransactionParameters(amount: 1999, date: try TransactionDate(yymmdd: "250615")),
            card: ControlLink(control: control))
        try await client.call("POST", "/field/off")
        #expect(outcome.status == .onlineRequest)
        #expect(outcome.card?.pan == TestCards.visaDPAN)
        // A second tap without authentication releases nothing.
        try await client.call("POST", "/field/on")
        let again = try await kernel.run(
            TransactionParameters(amount: 1999, date: try TransactionDate(yymmdd: "250615")),
            card: ControlLink(control: control))
        try await client.call("POST", "/field/off")
        #expect(again.card == nil)

        try await client.call("POST", "/cards/\(id)/automatic-selection", ["enabled": true])
        try await client.call("POST", "/cards/\(id)/choose")
        try await client.call("POST", "/cards/\(id)/default")
        #expect(
            try await client.errorCode("POST", "/cards/\(String(repeating: "0", count: 32))/default", expect: 404)
                == "cardNotFound")
        let settings = try await client.call("PUT", "/settings", ["allowWebsiteQueries": false])
        #expect(settings["allowWebsiteQueries"] as? Bool == false && settings["biometricsForPayments"] as? Bool == true)
        let reset = try await client.call("POST", "/reset", ["reason": "sign-out"])
        #expect(reset["terminated"] as? [String] == [id])
        let after = try await client.call("GET", "/status")
        #expect((after["cards"] as? [[String: Any]])?.first?["state"] as? String == "terminated")
    }

    @Test("A watch through the control API: wrist, unlock, double-click")
    func watchFlow() async throws {
        let directory = try TemporaryDirectory()
        let (device, identity) = try await makeDevice(directory, name: "alice-watch", kind: .watch, biometry: .none)
        let client = Client(control: DeviceControl(device: device))
        _ = try await device.installCard(
            envelope: try TestCards.envelope(for: identity, dpan: TestCards.visaDPAN), display: TestCards.display)
        #expect(try await client.errorCode("POST", "/double-click", expect: 403) == "deviceLocked")
        #expect(
            try await client.errorCode(
                "POST", "/unlock", ["method": "passcode", "passcode": TestCards.passcode], expect: 403)
                == "notOnWrist")
        try await client.call("POST", "/wrist", ["on": true])
        #expect(try await client.errorCode("POST", "/wrist", ["on": true], expect: 409) == "illegalTransition")
        let wrong = try await client.call("POST", "/unlock", ["method": "passcode", "passcode": "1111"])
        #expect(wrong["outcome"] as? String == "rejected")
        let unlocked = try await client.call("POST", "/unlock", ["method": "passcode", "passcode": TestCards.passcode])
        #expect(unlocked["outcome"] as? String == "unlocked")
        let clicked = try await client.call("POST", "/double-click")
        #expect(clicked["outcome"] as? String == "authorized")
        try await client.call("POST", "/wrist", ["on": false])
        #expect(try await client.errorCode("POST", "/double-click", expect: 403) == "deviceLocked")
    }

    @Test("Malformed requests and unknown routes are JSON errors")
    func errors() async throws {
        let directory = try TemporaryDirectory()
        let (device, _) = try await makeDevice(directory)
        let client = Client(control: DeviceControl(device: device))
        #expect(try await client.errorCode("GET", "/nothing", expect: 404) == "notFound")
        #expect(try await client.errorCode("DELETE", "/status", expect: 404) == "notFound")
        #expect(
            try await client.errorCode("POST", "/authenticate", ["method": "retina"], expect: 400) == "invalidArgument")
        #expect(
            try await client.errorCode("POST", "/authenticate", ["method": "face-id"], expect: 400) == "invalidArgument"
        )
        #expect(try await client.errorCode("POST", "/field/apdu", ["command": "zz"], expect: 400) == "invalidArgument")
        #expect(try await client.errorCode("POST", "/field/apdu", ["command": "00A4"], expect: 409) == "fieldNotActive")
        #expect(try await client.errorCode("POST", "/reset", ["reason": "boredom"], expect: 400) == "invalidArgument")
        #expect(
            try await client.errorCode(
                "POST", "/cards", ["envelope": "AAAA", "type": "credit", "suffix": "1234", "displayName": "x"],
                expect: 403)
                == "invalidEnvelope")
        let raw = await DeviceControl(device: device).handle(
            ControlRequest(method: "POST", path: "/unlock", body: Data("{".utf8)))
        #expect(raw.status == 400)
        // Five wrong passcodes: the sixth attempt waits.
        for _ in 0..<5 {
            _ = try await client.call("POST", "/unlock", ["method": "passcode", "passcode": "0000"])
        }
        #expect(
            try await client.errorCode(
                "POST", "/unlock", ["method": "passcode", "passcode": TestCards.passcode], expect: 429)
                == "lockedOut")
    }
}
