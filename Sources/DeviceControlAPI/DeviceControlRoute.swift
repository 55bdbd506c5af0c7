/// Every route of the control socket, with the identifiers its path carries: the one place paths are written
/// (``path``) and read (``init(method:path:)``).
public enum DeviceControlRoute: Hashable, Sendable {
    /// `GET /status`.
    case status
    /// `GET /cards`.
    case cards
    /// `POST /cards`.
    case addCard
    /// `DELETE /cards/{id}`.
    case removeCard(String)
    /// `POST /cards/{id}/choose`.
    case chooseCard(String)
    /// `POST /cards/{id}/default`.
    case setDefaultCard(String)
    /// `POST /cards/{id}/automatic-selection`.
    case setAutomaticSelection(String)
    /// `POST /tokens/{tokenReference}/status`.
    case tokenStatus(String)
    /// `POST /lost-mode`.
    case lostMode
    /// `POST /authenticate`.
    case authenticate
    /// `POST /lock`.
    case lock
    /// `POST /unlock`.
    case unlock
    /// `POST /wrist`.
    case wrist
    /// `POST /double-click`.
    case doubleClick
    /// `POST /field/on`.
    case fieldOn
    /// `POST /field/off`.
    case fieldOff
    /// `POST /field/apdu`.
    case fieldAPDU
    /// `POST /passcode`.
    case setPasscode
    /// `POST /passcode/remove`.
    case removePasscode
    /// `POST /passcode/attest`.
    case attestPasscode
    /// `POST /reset`.
    case reset
    /// `GET /relay/keys`.
    case relayKeys
    /// `POST /relay/vouch`.
    case relayVouch
    /// `GET /relay/alerts`.
    case relayAlerts
    /// `GET /settings`.
    case settings
    /// `GET /proximity`.
    case proximity
    /// `GET /handoff/devices`.
    case handoffDevices
    /// `POST /handoff/payments`.
    case handoffPayment
    /// `PUT /settings`.
    case updateSettings
    /// `POST /payment-sheets`.
    case presentSheet
    /// `POST /payment-sheets/can-make-payments`.
    case canMakePayments
    /// `GET /payment-sheets/{id}` (`current` for the device's latest sheet).
    case sheet(String)
    /// `GET /payment-sheets/{id}/events?wait=SECONDS`.
    case sheetEvents(String, wait: Int?)
    /// `POST /payment-sheets/{id}/answers`.
    case sheetAnswer(String)
    /// `POST /payment-sheets/{id}/{action}`: the user at the sheet.
    case sheetAction(String, PaymentSheetActionName)

    /// The HTTP method.
    public var method: String {
        switch self {
        case .status, .cards, .settings, .sheet, .sheetEvents, .relayKeys, .relayAlerts, .proximity, .handoffDevices:
            "GET"
        case .removeCard: "DELETE"
        case .updateSettings: "PUT"
        default: "POST"
        }
    }

    /// The path, with the query where the route has one.
    public var path: String {
        switch self {
        case .status: "/status"
        case .cards, .addCard: "/cards"
        case .removeCard(let id): "/cards/\(id)"
        case .chooseCard(let id): "/cards/\(id)/choose"
        case .setDefaultCard(let id): "/cards/\(id)/default"
        case .setAutomaticSelection(let id): "/cards/\(id)/automatic-selection"
        case .tokenStatus(let reference): "/tokens/\(reference)/status"
        case .lostMode: "/lost-mode"
        case .authenticate: "/authenticate"
        case .lock: "/lock"
        case .unlock: "/unlock"
        case .wrist: "/wrist"
        case .doubleClick: "/double-click"
        case .fieldOn: "/field/on"
        case .fieldOff: "/field/off"
        case .fieldAPDU: "/field/apdu"
        case .setPasscode: "/passcode"
        case .removePasscode: "/passcode/remove"
        case .attestPasscode: "/passcode/attest"
        case .reset: "/reset"
        case .relayKeys: "/relay/keys"
        case .relayVouch: "/relay/vouch"
        case .relayAlerts: "/relay/alerts"
        case .settings, .updateSettings: "/settings"
        case .proximity: "/proximity"
        case .handoffDevices: "/handoff/devices"
        case .handoffPayment: "/handoff/payments"
        case .presentSheet: "/payment-sheets"
        case .canMakePayments: "/payment-sheets/can-make-payments"
        case .sheet(let id): "/payment-sheets/\(id)"
        case .sheetEvents(let id, let wait): "/payment-sheets/\(id)/events" + (wait.map { "?wait=\($0)" } ?? "")
        case .sheetAnswer(let id): "/payment-sheets/\(id)/answers"
        case .sheetAction(let id, let action): "/payment-sheets/\(id)/\(action.rawValue)"
        }
    }

    /// Whether the route belongs to the payment sheet (`/payment-sheets...`).
    public var isPaymentSheet: Bool {
        switch self {
        case .presentSheet, .canMakePayments, .sheet, .sheetEvents, .sheetAnswer, .sheetAction: true
        default: false
        }
    }

    /// The route of `method` and `path` (a query is read only for the sheet's events), or nil for no route.
    public init?(method: String, path: String) {
        let pieces = path.split(separator: "?", maxSplits: 1).map(String.init)
        guard let rawPath = pieces.first, rawPath.hasPrefix("/") else { return nil }
        let parts = rawPath.split(separator: "/").map(String.init)
        guard let route = Self.route(method, parts, query: pieces.count > 1 ? pieces[1] : "") else { return nil }
        self = route
    }

    private static func route(_ method: String, _ parts: [String], query: String) -> DeviceControlRoute? {
        switch (method, parts) {
        case ("GET", ["status"]): return .status
        case ("GET", ["cards"]): return .cards
        case ("POST", ["cards"]): return .addCard
        case ("DELETE", let p) where p.count == 2 && p[0] == "cards": return .removeCard(p[1])
        case ("POST", let p) where p.count == 3 && p[0] == "cards":
            switch p[2] {
            case "choose": return .chooseCard(p[1])
            case "default": return .setDefaultCard(p[1])
            case "automatic-selection": return .setAutomaticSelection(p[1])
            default: return nil
            }
        case ("POST", let p) where p.count == 3 && p[0] == "tokens" && p[2] == "status": return .tokenStatus(p[1])
        case ("POST", ["lost-mode"]): return .lostMode
        case ("POST", ["authenticate"]): return .authenticate
        case ("POST", ["lock"]): return .lock
        case ("POST", ["unlock"]): return .unlock
        case ("POST", ["wrist"]): return .wrist
        case ("POST", ["double-click"]): return .doubleClick
        case ("POST", ["field", "on"]): return .fieldOn
        case ("POST", ["field", "off"]): return .fieldOff
        case ("POST", ["field", "apdu"]): return .fieldAPDU
        case ("POST", ["passcode"]): return .setPasscode
        case ("POST", ["passcode", "remove"]): return .removePasscode
        case ("POST", ["passcode", "attest"]): return .attestPasscode
        case ("POST", ["reset"]): return .reset
        case ("GET", ["relay", "keys"]): return .relayKeys
        case ("POST", ["relay", "vouch"]): return .relayVouch
        case ("GET", ["relay", "alerts"]): return .relayAlerts
        case ("GET", ["settings"]): return .settings
        case ("PUT", ["settings"]): return .updateSettings
        case ("GET", ["proximity"]): return .proximity
        case ("GET", ["handoff", "devices"]): return .handoffDevices
        case ("POST", ["handoff", "payments"]): return .handoffPayment
        case ("POST", ["payment-sheets"]): return .presentSheet
        case ("POST", ["payment-sheets", "can-make-payments"]): return .canMakePayments
        case ("GET", let p) where p.count == 2 && p[0] == "payment-sheets": return .sheet(p[1])
        case ("GET", let p) where p.count == 3 && p[0] == "payment-sheets" && p[2] == "events":
            return .sheetEvents(p[1], wait: waitSeconds(query))
        case ("POST", let p) where p.count == 3 && p[0] == "payment-sheets" && p[2] == "answers":
            return .sheetAnswer(p[1])
        case ("POST", let p) where p.count == 3 && p[0] == "payment-sheets":
            return PaymentSheetActionName(rawValue: p[2]).map { .sheetAction(p[1], $0) }
        default: return nil
        }
    }

    private static func waitSeconds(_ query: String) -> Int? {
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2, parts[0] == "wait" { return Int(parts[1]) }
        }
        return nil
    }
}

/// What the user does at a payment sheet: the last segment of `POST /payment-sheets/{id}/{action}`.
public enum PaymentSheetActionName: String, Hashable, Sendable, CaseIterable {
    /// Pay with another eligible card.
    case card
    /// Give the shipping contact.
    case shippingContact = "shipping-contact"
    /// Give the billing contact.
    case billingContact = "billing-contact"
    /// Choose a shipping method.
    case shippingMethod = "shipping-method"
    /// Enter or change the coupon code.
    case couponCode = "coupon-code"
    /// Authenticate for the sheet's card and total.
    case authenticate
    /// Dismiss the sheet.
    case cancel
}
