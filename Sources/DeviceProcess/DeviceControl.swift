import CardBasics
public import Device
public import DeviceControlAPI
public import Foundation
import OrchardCrypto
import OrchardRuntime
public import PayClient
import SecureElement
import Wallet

/// A request to the device's control API as the socket reads it (tests may hand it to ``DeviceControl`` directly).
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

/// The answer: an HTTP status and a JSON body (``DeviceControlErrorBody`` for failures).
public struct ControlResponse: Sendable {
    public let status: Int
    public let body: Data

    public init(status: Int, body: Data) {
        self.status = status
        self.body = body
    }

    /// `value` as JSON with `status`, or a 500 when it cannot be encoded.
    static func json(_ value: some Encodable, status: Int = 200) -> ControlResponse {
        guard let body = try? DeviceControlJSON.encoder().encode(value) else {
            return error(500, "internalFailure", "the answer could not be encoded")
        }
        return ControlResponse(status: status, body: body)
    }

    /// The error body `{"error": {"code", "message"}}` with `status`.
    static func error(_ status: Int, _ code: String, _ message: String) -> ControlResponse {
        let body = (try? DeviceControlJSON.encoder().encode(DeviceControlErrorBody(code: code, message: message)))
        return ControlResponse(status: status, body: body ?? Data())
    }
}

/// The router of the device's control API (the routes and bodies of `DeviceControlAPI`): what a user does with the
/// device (authenticate, choose a card, lock, put on the watch, hold it to a terminal) and, with a
/// ``PaymentSheetService``, the in-app payment sheet.
///
/// Errors map to statuses in one place (``status(for:)``): 400 malformed, 403 refused by a security
/// check, 404 unknown, 409 not in this state, 422 the device cannot, 429 passcode delay, 500 store.
public struct DeviceControl: Sendable {
    public let device: Device
    /// The payment sheet's routes; without it they are unknown (404).
    public let sheets: PaymentSheetService?
    /// The relay alerts the process's sync has shown; without it `GET /relay/alerts` answers none.
    public let relayAlerts: RelayJoinAlerts?
    /// The process's radio (proximity) and Handoff; without them the device hears no one and discovers nothing.
    let handoff: Handoff?

    public init(device: Device, sheets: PaymentSheetService? = nil, relayAlerts: RelayJoinAlerts? = nil) {
        self.init(device: device, sheets: sheets, relayAlerts: relayAlerts, handoff: nil)
    }

    init(device: Device, sheets: PaymentSheetService?, relayAlerts: RelayJoinAlerts?, handoff: Handoff?) {
        self.device = device
        self.sheets = sheets
        self.relayAlerts = relayAlerts
        self.handoff = handoff
    }

    /// Handles one request; never throws: every failure is a JSON error response.
    public func handle(_ request: ControlRequest) async -> ControlResponse {
        guard let route = DeviceControlRoute(method: request.method, path: request.path),
            !route.isPaymentSheet || sheets != nil
        else {
            let path = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? request.path
            return ControlResponse.error(404, "notFound", "no route \(request.method) \(path)")
        }
        if route.isPaymentSheet, let sheets { return await sheets.handle(route, body: request.body) }
        do {
            return try await handle(route, body: request.body)
        } catch {
            let (status, code, message) = Self.status(for: error)
            return ControlResponse.error(status, code, message)
        }
    }

    /// Handles the typed `request` in this process (for a client when no device process runs).
    public func send<Request: DeviceControlRequest>(
        _ request: Request
    ) async -> Result<Request.Answer, DeviceProcessError> {
        let raw: ControlRequest
        switch Result(catching: { () throws(DeviceProcessError) in try ControlRequest(request) }) {
        case .success(let encoded): raw = encoded
        case .failure(let error): return .failure(error)
        }
        return await handle(raw).answer(to: request)
    }

    private func handle(_ route: DeviceControlRoute, body: Data) async throws -> ControlResponse {
        switch route {
        case .status:
            return .json(Self.answer(await device.status()))
        case .cards:
            return .json(await device.wallet.allCards.map(Self.answer))
        case .addCard:
            let request = try decode(AddCard.self, body)
            guard let type = CardType(rawValue: request.type) else {
                throw DeviceError(.invalidArgument, "type is credit, debit or prepaid")
            }
            let card = try await device.installCard(
                envelope: Array(request.envelope),
                display: CardDisplayInput(type: type, suffix: request.suffix, displayName: request.displayName))
            return .json(Self.answer(card), status: 201)
        case .removeCard(let id):
            try await device.removeCard(id)
        case .chooseCard(let id):
            try await device.chooseCard(id)
        case .setDefaultCard(let id):
            try await device.wallet.setDefault(id)
        case .setAutomaticSelection(let id):
            try await device.wallet.setAutomaticSelection(decode(SetAutomaticSelection.Body.self, body).enabled, id: id)
        case .tokenStatus(let reference):
            let request = try decode(ApplyTokenStatus.Body.self, body)
            guard let change = Device.TokenStatusChange(rawValue: request.state) else {
                throw DeviceError(.invalidArgument, "state is active, suspended or deleted")
            }
            guard let card = try await device.applyTokenStatus(tokenReference: reference, change) else {
                throw DeviceError(.notFound, "no card here has token \(reference)")
            }
            return .json(Self.answer(card))
        case .lostMode:
            try device.setLostMode(try decode(ApplyLostMode.self, body).lostMode)
            return .json(Self.answer(await device.status()))
        case .authenticate:
            let request = try decode(Authenticate.self, body)
            let evidence = try Self.evidence(request.evidence)
            let type = try request.type.map { (name) throws -> TransactionType in
                guard let type = TransactionType(name: name) else {
                    throw DeviceError(.invalidArgument, "type is contactless, in-app or web")
                }
                return type
            }
            let amount = try request.amount.map {
                try PaymentAmount(minorUnits: $0.minorUnits, currency: $0.currency)
            }
            let outcome = try await device.authenticate(
                evidence, for: type ?? .contactless, card: request.card, amount: amount)
            return .json(Self.answer(outcome))
        case .lock:
            await device.lock()
            return .json(AuthenticationOutcomeAnswer(outcome: "locked"))
        case .unlock:
            let evidence = try Self.evidence(decode(AuthenticationEvidenceBody.self, body))
            switch try await device.unlock(evidence) {
            case .unlocked: return .json(AuthenticationOutcomeAnswer(outcome: "unlocked"))
            case .rejected(let offered):
                return .json(AuthenticationOutcomeAnswer(outcome: "rejected", offered: offered.map(\.name)))
            }
        case .wrist:
            if try decode(SetWrist.self, body).on {
                try await device.secureEnclave.putOnWrist()
            } else {
                try await device.secureEnclave.takeOffWrist()
            }
        case .doubleClick:
            guard let outcome = try await device.doubleClick() else {
                return .json(AuthenticationOutcomeAnswer(outcome: "presented"))
            }
            return .json(Self.answer(outcome))
        case .fieldOn:
            let request = body.isEmpty ? FieldOn() : try decode(FieldOn.self, body)
            try await device.fieldOn(requestedNetworks: request.networks ?? [])
        case .fieldOff:
            try await device.fieldOff()
        case .fieldAPDU:
            guard let command = Hex.decode(try decode(SendAPDU.self, body).command), !command.isEmpty
            else { throw DeviceError(.invalidArgument, "command is a hex APDU") }
            return .json(APDUAnswer(response: Hex.encode(try await device.transceive(command))))
        case .setPasscode:
            let request = try decode(SetPasscode.self, body)
            try await device.secureEnclave.setPasscode(
                SecureBytes(Array(request.passcode.utf8)), current: request.current.map { SecureBytes(Array($0.utf8)) })
        case .attestPasscode:
            let request = try decode(AttestPasscode.self, body)
            let signature = try await device.secureEnclave.attestPasscode(
                SecureBytes(Array(request.passcode.utf8)), challenge: Array(request.challenge))
            return .json(PasscodeAttestationAnswer(signature: Data(signature.derRepresentation)))
        case .removePasscode:
            let current = try decode(RemovePasscode.self, body).current
            let terminated = try await device.removePasscode(current: SecureBytes(Array(current.utf8)))
            return .json(TerminatedCardsAnswer(terminated: terminated.map(\.hex)))
        case .reset:
            guard
                let reason = AuthorizationRandomResetReason(
                    rawValue: try decode(ResetAuthorizationRandom.self, body).reason)
            else {
                let names = AuthorizationRandomResetReason.allCases.map(\.rawValue).joined(separator: ", ")
                throw DeviceError(.invalidArgument, "reason is one of \(names)")
            }
            let terminated = try await device.resetAuthorizationRandom(reason: reason)
            return .json(TerminatedCardsAnswer(terminated: terminated.map(\.hex)))
        case .relayKeys:
            let keys = try await device.secureEnclave.relayPublicKeys()
            return .json(
                RelayKeysAnswer(
                    encryptionKey: Data(keys.encryption.x963Representation),
                    signingKey: Data(keys.signing.x963Representation)))
        case .relayAlerts:
            return .json(RelayAlertsAnswer(alerts: relayAlerts?.shownAlerts ?? []))
        case .relayVouch:
            let request = try decode(VouchRelayDevice.self, body)
            guard let encryption = try? P256.KeyAgreement.PublicKey(x963Representation: request.encryptionKey),
                let signing = try? P256.Signing.PublicKey(x963Representation: request.signingKey)
            else { throw DeviceError(.invalidArgument, "encryptionKey and signingKey are P-256 public keys (X9.63)") }
            let signature = try await device.secureEnclave.vouchForRelayDevice(
                RelayPeer(
                    deviceID: request.device, keys: RelayPublicKeys(encryption: encryption, signing: signing)),
                voucherID: device.name, passcode: SecureBytes(Array(request.passcode.utf8)))
            return .json(RelayVouchAnswer(signature: Data(signature.derRepresentation)))
        case .settings:
            return .json(await currentSettings())
        case .proximity:
            if let handoff { return .json(await handoff.radio.answer()) }
            return .json(ProximityAnswer(room: await device.wallet.currentSettings.room, listening: false, nearby: []))
        case .handoffDevices:
            // Discovery is the running process's radio: without it there is nothing to hear, which is a failure,
            // not an empty answer.
            guard let handoff else { return .error(409, "notRunning", Handoff.notRunning) }
            return .json(await handoff.discover())
        case .handoffPayment:
            let request = try decode(HandoffPayment.self, body)
            guard let handoff else {
                return .json(HandoffPaymentAnswer(outcome: "refused", payment: nil, failure: Handoff.notRunning))
            }
            return .json(await handoff.pay(request))
        case .updateSettings:
            let change = try decode(DeviceSettingsBody.self, body)
            var settings = await device.wallet.currentSettings
            if let value = change.allowWebsiteQueries { settings.allowWebsiteQueries = value }
            if let value = change.doubleClickPresentsCards { settings.doubleClickPresentsCards = value }
            if let room = change.room {
                guard WalletSettings.isRoomName(room) else {
                    throw DeviceError(.invalidArgument, "a room is 1 to 32 lowercase letters, digits and hyphens")
                }
                settings.room = room
            }
            if let value = change.allowPaymentsOnMac { settings.allowPaymentsOnMac = value }
            try await device.wallet.update(settings)
            if let value = change.biometricsForPayments {
                try await device.secureEnclave.setBiometricsForPayments(value)
            }
            return .json(await currentSettings())
        case .presentSheet, .canMakePayments, .sheet, .sheetEvents, .sheetAnswer, .sheetAction:
            throw DeviceError(.notFound, "no route \(route.method) \(route.path)")
        }
        return .json(Acknowledgement())
    }

    private func currentSettings() async -> DeviceSettingsBody {
        let wallet = await device.wallet.currentSettings
        return DeviceSettingsBody(
            allowWebsiteQueries: wallet.allowWebsiteQueries, doubleClickPresentsCards: wallet.doubleClickPresentsCards,
            biometricsForPayments: await device.secureEnclave.status.biometricsForPayments, room: wallet.room,
            allowPaymentsOnMac: wallet.allowPaymentsOnMac)
    }

    // MARK: Requests and answers

    private func decode<T: Decodable>(_ type: T.Type, _ body: Data) throws -> T {
        if let duplicate = DuplicateJSONKeys.first(in: body) {
            throw DeviceError(.invalidArgument, "field '\(duplicate)' appears twice; send each field once")
        }
        do {
            return try DeviceControlJSON.decoder().decode(T.self, from: body)
        } catch {
            throw DeviceError(.invalidArgument, "the body is not the JSON this route takes")
        }
    }

    /// The evidence `body` names; a biometric needs `success`, the passcode `passcode`.
    static func evidence(_ body: AuthenticationEvidenceBody) throws(DeviceError) -> AuthenticationEvidence {
        guard let method = AuthenticationMethod(name: body.method) else {
            throw DeviceError(.invalidArgument, "method is face-id, touch-id, passcode or double-click")
        }
        switch method {
        case .faceID, .touchID:
            guard let success = body.success else { throw DeviceError(.invalidArgument, "a biometric needs success") }
            return method == .faceID ? .faceID(matched: success) : .touchID(matched: success)
        case .passcode:
            guard let passcode = body.passcode else { throw DeviceError(.invalidArgument, "the passcode is missing") }
            return .passcode(SecureBytes(Array(passcode.utf8)))
        case .doubleClick:
            return .doubleClick
        }
    }

    static func answer(_ outcome: AuthenticationOutcome) -> AuthenticationOutcomeAnswer {
        switch outcome {
        case .authorized: AuthenticationOutcomeAnswer(outcome: "authorized")
        case .rejected(let offered): AuthenticationOutcomeAnswer(outcome: "rejected", offered: offered.map(\.name))
        }
    }

    static func answer(_ card: WalletCard) -> WalletCardAnswer {
        WalletCardAnswer(
            id: card.id, network: card.network, type: card.type.rawValue, suffix: card.suffix,
            deviceAccountSuffix: card.deviceAccountSuffix, displayName: card.displayName, state: card.state.rawValue,
            automaticSelection: card.automaticSelection, addedAt: card.addedAt)
    }

    static func answer(_ profile: DeviceProfile) -> DeviceProfileAnswer {
        DeviceProfileAnswer(kind: profile.kind.rawValue, biometry: profile.biometry.rawValue, account: profile.account)
    }

    static func answer(_ status: DeviceStatus) -> DeviceStatusAnswer {
        let enclave = status.enclave
        return DeviceStatusAnswer(
            name: status.name, profile: answer(status.profile),
            enclave: SecureEnclaveStatusAnswer(
                profile: answer(enclave.profile), lock: enclave.lock.rawValue, hasPasscode: enclave.hasPasscode,
                hasAuthorizationRandom: enclave.hasAuthorizationRandom,
                biometricsForPayments: enclave.biometricsForPayments,
                failedBiometricAttempts: enclave.failedBiometricAttempts,
                failedPasscodeAttempts: enclave.failedPasscodeAttempts,
                paymentMethods: enclave.paymentMethods.map(\.name)),
            cards: status.cards.map(answer), defaultCard: status.defaultCard, contactless: status.contactless,
            lostMode: status.lostMode)
    }

    // MARK: Errors

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
