public import Foundation
import OrchardCrypto
import SecureElement
import Wallet

/// A request to the device's control API, independent of the transport (HTTP/1.1 on the device's Unix
/// socket in `orchard device run`, direct calls in tests).
public struct ControlRequest: Sendable {
    public let method: String
    public let path: String
    public let body: Data

    public init(method: String, path: String, body: Data = Data()) {
        self.method = method
        self.path = path
        self.body = body
    }
}

/// The answer: an HTTP status and a JSON body (`{"error": {"code", "message"}}` for failures).
public struct ControlResponse: Sendable {
    public let status: Int
    public let body: Data

    public init(status: Int, body: Data) {
        self.status = status
        self.body = body
    }
}

/// The device's control API: what a user does with the device (authenticate, choose a card, lock, put on
/// the watch, hold it to a terminal), as JSON in and out.
///
/// Routes (JSON bodies; `{id}` is a card identifier):
///
/// - `GET /status`: device, enclave and wallet state. `GET /cards`: the wallet's cards (display data).
/// - `POST /cards` `{"envelope": base64, "type", "suffix", "displayName"}`: installs a card (201).
///   `DELETE /cards/{id}`; `POST /cards/{id}/choose`; `POST /cards/{id}/default`;
///   `POST /cards/{id}/automatic-selection` `{"enabled": bool}`.
/// - `POST /authenticate` `{"method": "face-id|touch-id|passcode|double-click", "success"?, "passcode"?,
///   "type"?: "contactless|in-app|web", "card"?, "amount"?: {"minorUnits", "currency"}}` →
///   `{"outcome": "authorized|rejected", "offered"?: [methods]}`.
/// - `POST /lock`; `POST /unlock` `{"method", "success"?, "passcode"?}` → `{"outcome", "offered"?}`.
/// - `POST /wrist` `{"on": bool}` (watches); `POST /double-click` → an outcome, or `"presented"`.
/// - `POST /field/on` `{"networks"?: [..]}`; `POST /field/off`; `POST /field/apdu` `{"command": hex}` →
///   `{"response": hex}`.
/// - `POST /passcode` `{"passcode", "current"?}`; `POST /passcode/remove` `{"current"}` and
///   `POST /reset` `{"reason"}` → `{"terminated": [ids]}`.
/// - `GET /settings`, `PUT /settings` `{"allowWebsiteQueries"?, "doubleClickPresentsCards"?,
///   "biometricsForPayments"?}`.
///
/// The device process adds the in-app payment sheet's routes (`/payment-sheets...`, `DeviceProcess`'s
/// `PaymentSheetService`, documented in docs/in-app.md): they need the Pay server, which this type does not reach.
///
/// Errors map to statuses in one place (``status(for:)``): 400 malformed, 403 refused by a security
/// check, 404 unknown, 409 not in this state, 422 the device cannot, 429 passcode delay, 500 store.
public struct DeviceControl: Sendable {
    public let device: Device

    public init(device: Device) { self.device = device }

    /// Handles one request; never throws: every failure is a JSON error response.
    public func handle(_ request: ControlRequest) async -> ControlResponse {
        do {
            return try await route(request)
        } catch {
            let (status, code, message) = Self.status(for: error)
            return Self.error(status, code, message)
        }
    }

    private func route(_ request: ControlRequest) async throws -> ControlResponse {
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        switch (request.method, parts) {
        case ("GET", ["status"]):
            return try Self.json(await device.status())
        case ("GET", ["cards"]):
            return try Self.json(await device.wallet.allCards)
        case ("POST", ["cards"]):
            let body: InstallBody = try decode(request)
            guard let envelope = Data(base64Encoded: body.envelope) else {
                throw DeviceError(.invalidArgument, "envelope is not base64")
            }
            let card = try await device.installCard(
                envelope: Array(envelope),
                display: CardDisplayInput(type: body.type, suffix: body.suffix, displayName: body.displayName))
            return try Self.json(card, status: 201)
        case ("DELETE", let path) where path.count == 2 && path[0] == "cards":
            try await device.removeCard(path[1])
            return try Self.json(Empty())
        case ("POST", let path) where path.count == 3 && path[0] == "cards":
            switch path[2] {
            case "choose": try await device.chooseCard(path[1])
            case "default": try await device.wallet.setDefault(path[1])
            case "automatic-selection":
                let body: EnabledBody = try decode(request)
                try await device.wallet.setAutomaticSelection(body.enabled, id: path[1])
            default: throw DeviceError(.notFound, "no route \(request.method) \(request.path)")
            }
            return try Self.json(Empty())
        case ("POST", let path) where path.count == 3 && path[0] == "tokens" && path[2] == "status":
            let body: TokenStatusBody = try decode(request)
            guard let change = Device.TokenStatusChange(rawValue: body.state) else {
                throw DeviceError(.invalidArgument, "state is active, suspended or deleted")
            }
            guard let card = try await device.applyTokenStatus(tokenReference: path[1], change) else {
                throw DeviceError(.notFound, "no card here has token \(path[1])")
            }
            return try Self.json(card)
        case ("POST", ["authenticate"]):
            let body: AuthenticateBody = try decode(request)
            let evidence = try body.evidence()
            let type = try body.type.map { (name) throws -> TransactionType in
                guard let type = TransactionType(name: name) else {
                    throw DeviceError(.invalidArgument, "type is contactless, in-app or web")
                }
                return type
            }
            let amount = try body.amount.map { try PaymentAmount(minorUnits: $0.minorUnits, currency: $0.currency) }
            let outcome = try await device.authenticate(
                evidence, for: type ?? .contactless, card: body.card, amount: amount)
            return try Self.json(OutcomeBody(outcome))
        case ("POST", ["lock"]):
            await device.lock()
            return try Self.json(OutcomeBody(outcome: "locked", offered: nil))
        case ("POST", ["unlock"]):
            let body: EvidenceBody = try decode(request)
            switch try await device.unlock(try body.evidence()) {
            case .unlocked: return try Self.json(OutcomeBody(outcome: "unlocked", offered: nil))
            case .rejected(let offered): return try Self.json(OutcomeBody(outcome: "rejected", offered: offered))
            }
        case ("POST", ["wrist"]):
            let body: OnBody = try decode(request)
            if body.on {
                try await device.secureEnclave.putOnWrist()
            } else {
                try await device.secureEnclave.takeOffWrist()
            }
            return try Self.json(Empty())
        case ("POST", ["double-click"]):
            guard let outcome = try await device.doubleClick() else {
                return try Self.json(OutcomeBody(outcome: "presented", offered: nil))
            }
            return try Self.json(OutcomeBody(outcome))
        case ("POST", ["field", "on"]):
            let body: FieldBody = request.body.isEmpty ? FieldBody(networks: nil) : try decode(request)
            try await device.fieldOn(requestedNetworks: body.networks ?? [])
            return try Self.json(Empty())
        case ("POST", ["field", "off"]):
            try await device.fieldOff()
            return try Self.json(Empty())
        case ("POST", ["field", "apdu"]):
            let body: APDUBody = try decode(request)
            guard let command = Self.hex(body.command), !command.isEmpty else {
                throw DeviceError(.invalidArgument, "command is a hex APDU")
            }
            let response = try await device.transceive(command)
            return try Self.json(["response": response.map { String(format: "%02X", $0) }.joined()])
        case ("POST", ["passcode"]):
            let body: PasscodeBody = try decode(request)
            try await device.secureEnclave.setPasscode(
                SecureBytes(Array(body.passcode.utf8)), current: body.current.map { SecureBytes(Array($0.utf8)) })
            return try Self.json(Empty())
        case ("POST", ["passcode", "remove"]):
            let body: RemovePasscodeBody = try decode(request)
            let terminated = try await device.removePasscode(current: SecureBytes(Array(body.current.utf8)))
            return try Self.json(["terminated": terminated.map(\.hex)])
        case ("POST", ["reset"]):
            let body: ResetBody = try decode(request)
            guard let reason = AuthorizationRandomResetReason(rawValue: body.reason) else {
                let names = AuthorizationRandomResetReason.allCases.map(\.rawValue).joined(separator: ", ")
                throw DeviceError(.invalidArgument, "reason is one of \(names)")
            }
            let terminated = try await device.resetAuthorizationRandom(reason: reason)
            return try Self.json(["terminated": terminated.map(\.hex)])
        case ("GET", ["settings"]):
            return try Self.json(await currentSettings())
        case ("PUT", ["settings"]):
            let body: SettingsBody = try decode(request)
            var settings = await device.wallet.currentSettings
            if let value = body.allowWebsiteQueries { settings.allowWebsiteQueries = value }
            if let value = body.doubleClickPresentsCards { settings.doubleClickPresentsCards = value }
            try await device.wallet.update(settings)
            if let value = body.biometricsForPayments { try await device.secureEnclave.setBiometricsForPayments(value) }
            return try Self.json(await currentSettings())
        default:
            throw DeviceError(.notFound, "no route \(request.method) \(request.path)")
        }
    }

    private func currentSettings() async -> SettingsBody {
        let wallet = await device.wallet.currentSettings
        return SettingsBody(
            allowWebsiteQueries: wallet.allowWebsiteQueries, doubleClickPresentsCards: wallet.doubleClickPresentsCards,
            biometricsForPayments: await device.secureEnclave.status.biometricsForPayments)
    }

    // MARK: Bodies

    private struct Empty: Codable {}
    private struct InstallBody: Decodable {
        let envelope: String
        let type: CardType
        let suffix: String
        let displayName: String
    }
    private struct EnabledBody: Decodable { let enabled: Bool }
    private struct TokenStatusBody: Decodable { let state: String }
    private struct OnBody: Decodable { let on: Bool }
    private struct FieldBody: Decodable { let networks: [String]? }
    private struct APDUBody: Decodable { let command: String }
    private struct PasscodeBody: Decodable {
        let passcode: String
        let current: String?
    }
    private struct RemovePasscodeBody: Decodable { let current: String }
    private struct ResetBody: Decodable { let reason: String }
    private struct SettingsBody: Codable {
        var allowWebsiteQueries: Bool?
        var doubleClickPresentsCards: Bool?
        var biometricsForPayments: Bool?
    }
    private struct AmountBody: Decodable {
        let minorUnits: Int64
        let currency: UInt16
    }

    /// How the user authenticates: `{"method": "face-id"|"touch-id"|"passcode"|"double-click", "success": bool,
    /// "passcode": "..."}`.
    private struct EvidenceBody: Decodable {
        let method: String
        let success: Bool?
        let passcode: String?

        func evidence() throws -> AuthenticationEvidence {
            guard let method = AuthenticationMethod(name: method) else {
                throw DeviceError(.invalidArgument, "method is face-id, touch-id, passcode or double-click")
            }
            switch method {
            case .faceID, .touchID:
                guard let success else { throw DeviceError(.invalidArgument, "a biometric needs success") }
                return method == .faceID ? .faceID(matched: success) : .touchID(matched: success)
            case .passcode:
                guard let passcode else { throw DeviceError(.invalidArgument, "the passcode is missing") }
                return .passcode(SecureBytes(Array(passcode.utf8)))
            case .doubleClick:
                return .doubleClick
            }
        }
    }

    private struct AuthenticateBody: Decodable {
        let method: String
        let success: Bool?
        let passcode: String?
        let type: String?
        let card: String?
        let amount: AmountBody?

        func evidence() throws -> AuthenticationEvidence {
            try EvidenceBody(method: method, success: success, passcode: passcode).evidence()
        }
    }

    private struct OutcomeBody: Encodable {
        let outcome: String
        let offered: [String]?

        init(outcome: String, offered: [AuthenticationMethod]?) {
            self.outcome = outcome
            self.offered = offered?.map(\.name)
        }

        init(_ outcome: AuthenticationOutcome) {
            switch outcome {
            case .authorized: self.init(outcome: "authorized", offered: nil)
            case .rejected(let offered): self.init(outcome: "rejected", offered: offered)
            }
        }
    }

    // MARK: Encoding and errors

    private func decode<T: Decodable>(_ request: ControlRequest) throws -> T {
        do {
            return try JSONDecoder().decode(T.self, from: request.body)
        } catch {
            throw DeviceError(.invalidArgument, "the body is not the JSON this route takes")
        }
    }

    private static func json(_ value: some Encodable, status: Int = 200) throws -> ControlResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return ControlResponse(status: status, body: try encoder.encode(value))
    }

    private static func error(_ status: Int, _ code: String, _ message: String) -> ControlResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let body = (try? encoder.encode(["error": ["code": code, "message": message]])) ?? Data()
        return ControlResponse(status: status, body: body)
    }

    private static func hex(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        var index = 0
        while index < chars.count {
            guard let byte = UInt8(String(decoding: chars[index..<index + 2], as: UTF8.self), radix: 16) else {
                return nil
            }
            out.append(byte)
            index += 2
        }
        return out
    }

    /// The HTTP status, code and message of an error from the device's components.
    public static func status(for error: any Error) -> (status: Int, code: String, message: String) {
        if let error = error as? SecureElementError {
            let status: Int
            switch error.code {
            case .invalidArgument: status = 400
            case .cardNotFound: status = 404
            case .deviceLocked, .notOnWrist, .notFromField, .passcodeIncorrect, .invalidAuthorization,
                .authorizationReplayed, .authorizationExpired, .invalidEnvelope:
                status = 403
            case .unsupportedDevice, .methodUnavailable, .unsupportedNetwork: status = 422
            case .lockedOut: status = 429
            case .storageFailure, .corruptState, .internalFailure: status = 500
            default: status = 409
            }
            return (status, error.code.description, error.message)
        }
        if let error = error as? WalletError {
            let status: Int
            switch error.code {
            case .invalidArgument: status = 400
            case .cardNotFound: status = 404
            case .cardNotActive, .duplicateCard: status = 409
            default: status = 500
            }
            return (status, error.code.description, error.message)
        }
        if let error = error as? DeviceError {
            let status: Int
            switch error.code {
            case .invalidArgument: status = 400
            case .notFound: status = 404
            case .alreadyExists: status = 409
            case .unsupported: status = 422
            default: status = 500
            }
            return (status, error.code.description, error.message)
        }
        return (500, "internalFailure", "the device failed unexpectedly")
    }
}
