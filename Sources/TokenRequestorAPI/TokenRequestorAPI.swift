public import AccessPolicy
public import Foundation

/// The wire format of the network's token-requestor routes (JSON over HTTPS, the caller presenting a client
/// certificate with role `token-requestor`, i.e. the Orchard Pay server) and of the issuer's lifecycle routes.
///
/// Both sides import this module and nothing of each other: the Pay server writes these requests and reads these
/// answers; the network reads the same types and converts them to and from its token service's own in one place.
/// Every key is explicit (a choice is an `outcome` string next to its fields, never a synthesized `_0`); byte
/// strings travel as standard base64; enumerations are their case names. A refusal is ``ErrorAnswer``.
///
/// No type here holds a card number: card data travels sealed (``CheckCardRequest/encryptedCardData``) and a
/// device account number only inside the sealed personalisation (``ProvisionedToken/personalisation``).
public enum TokenRequestorAPI {
    /// The routes. Parameterised ones are built by functions, which the network also calls with `:name`
    /// placeholders to install its patterns.
    public enum Route {
        /// `GET` → ``ProvisioningKey``.
        public static let provisioningKey = "/v1/provisioning/key"
        /// `POST`: ``CheckCardRequest`` → ``CheckCardAnswer``.
        public static let checkCard = "/v1/provisioning/check-card"
        /// `POST`: ``OneTimeCodeRequest`` → ``CheckCardAnswer``.
        public static let oneTimeCode = "/v1/provisioning/one-time-code"
        /// `POST`: ``LinkRequest`` → ``LinkAnswer``.
        public static let link = "/v1/provisioning/link"
        /// `GET /v1/notifications?after=N` → ``NotificationFeed`` (the path without the query).
        public static let notifications = "/v1/notifications"

        /// `GET` → ``TokenStatus``.
        public static func token(_ reference: String) -> String { "/v1/tokens/" + segment(reference) }

        /// `POST`: ``LifecycleRequest`` → ``TokenStatus``: the token requestor acts on one token.
        public static func token(_ reference: String, _ action: LifecycleAction) -> String {
            token(reference) + "/" + action.rawValue
        }

        /// `POST`: ``LifecycleRequest`` → ``DeviceLifecycleAnswer``: the token requestor acts on every token of a
        /// device (lost mode, erase).
        public static func device(_ deviceID: String, _ action: LifecycleAction) -> String {
            "/v1/devices/" + segment(deviceID) + "/" + action.rawValue
        }

        /// `POST` (no body) → ``TokenStatus``: the issuer acts on one of its tokens (issuer certificate only).
        public static func issuerToken(_ reference: String, _ action: LifecycleAction) -> String {
            "/v1/issuer/tokens/" + segment(reference) + "/" + action.rawValue
        }

        /// ``notifications`` with its query: the notifications after sequence number `after`.
        public static func notifications(after: Int64) -> String { notifications + "?after=\(after)" }

        /// A path segment, percent-encoded so an identifier cannot add segments (`:` is left as is, so
        /// `:reference` stays a route pattern).
        static func segment(_ value: String) -> String {
            var allowed = CharacterSet.urlPathAllowed
            allowed.remove("/")
            return value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value
        }
    }

    /// The routes with their policy, as the network registers them: the token requestor's need a client
    /// certificate with role `token-requestor`, the issuer's one with role `issuer`.
    public enum Declared {
        static let tokenRequestor = AccessPolicy.role(CallerRoles.tokenRequestor)

        public static let provisioningKey = DeclaredRoute("GET", Route.provisioningKey, tokenRequestor)
        public static let notifications = DeclaredRoute("GET", Route.notifications, tokenRequestor)
        public static let checkCard = DeclaredRoute("POST", Route.checkCard, tokenRequestor)
        public static let oneTimeCode = DeclaredRoute("POST", Route.oneTimeCode, tokenRequestor)
        public static let link = DeclaredRoute("POST", Route.link, tokenRequestor)
        public static let token = DeclaredRoute("GET", Route.token(":reference"), tokenRequestor)
        public static func token(_ action: LifecycleAction) -> DeclaredRoute {
            DeclaredRoute("POST", Route.token(":reference", action), tokenRequestor)
        }
        public static func device(_ action: LifecycleAction) -> DeclaredRoute {
            DeclaredRoute("POST", Route.device(":id", action), tokenRequestor)
        }
        public static func issuerToken(_ action: LifecycleAction) -> DeclaredRoute {
            DeclaredRoute("POST", Route.issuerToken(":reference", action), .role(CallerRoles.issuer))
        }

        /// Every route of the contract.
        public static var all: [DeclaredRoute] {
            [provisioningKey, notifications, checkCard, oneTimeCode, link, token]
                + LifecycleAction.allCases.flatMap { [token($0), device($0), issuerToken($0)] }
        }
    }

    /// A lifecycle change, the last segment of the lifecycle routes.
    public enum LifecycleAction: String, Codable, Sendable, CaseIterable {
        /// Suspends on behalf of the actor; a token stays suspended while any actor suspends it.
        case suspend
        /// Lifts the actor's own suspension (only the actor that suspended may lift it).
        case resume
        /// Deletes for good; a deleted token stays deleted.
        case delete
    }

    /// Whom the token requestor acts for on its lifecycle routes. The issuer and the network are not choices:
    /// their roles come from their own routes and certificates, so a body cannot claim them.
    public enum RequestorRole: String, Codable, Sendable, CaseIterable {
        /// The device's owner (lost mode, erase, removing a card).
        case cardholder
        /// The token requestor on its own account (e.g. a device that left the account).
        case tokenRequestor
    }

    /// Who placed a suspension, as a token's status reports it.
    public enum Actor: String, Codable, Sendable, CaseIterable {
        case issuer, cardholder, tokenRequestor, network
    }

    /// A token's lifecycle state.
    public enum TokenState: String, Codable, Sendable, CaseIterable {
        case active, suspended, deleted
    }

    /// Where a token may be used (EMVCo domain restriction controls).
    public enum Domain: String, Codable, Sendable, CaseIterable {
        case contactless, inApp, web
    }

    /// A card's or token's expiry: valid through the last day of `month` (UTC).
    public struct Expiry: Codable, Sendable, Hashable {
        /// Four digits.
        public let year: Int
        /// 1 to 12.
        public let month: Int

        public init(year: Int, month: Int) {
            self.year = year
            self.month = month
        }
    }

    /// `GET /v1/provisioning/key`: the token service's key wallets seal card data to.
    public struct ProvisioningKey: Codable, Sendable, Hashable {
        /// The P-256 key: DER SubjectPublicKeyInfo, base64.
        public let publicKey: String
        /// The certificate the Orchard root issued for that key (DER, base64), which wallets check before they
        /// seal; absent for a token service without one.
        public let certificate: String?

        public init(publicKey: String, certificate: String?) {
            self.publicKey = publicKey
            self.certificate = certificate
        }
    }

    /// `POST /v1/provisioning/check-card`: the card data the wallet sealed to the provisioning key, which only the
    /// token service can open. A retry with the same idempotency key and the same bytes gets the first answer; the
    /// same key with other bytes is refused (`idempotencyConflict`).
    public struct CheckCardRequest: Codable, Sendable, Hashable {
        public let idempotencyKey: String
        /// The EMVCo token requestor ID (11 digits).
        public let tokenRequestorID: String
        public let deviceID: String
        /// `phone`, `watch`, `ipad` or `mac`.
        public let deviceKind: String
        /// The sealed card data (an envelope: version, ephemeral key, ciphertext, tag), base64.
        public let encryptedCardData: String

        public init(
            idempotencyKey: String, tokenRequestorID: String, deviceID: String, deviceKind: String,
            encryptedCardData: String
        ) {
            self.idempotencyKey = idempotencyKey
            self.tokenRequestorID = tokenRequestorID
            self.deviceID = deviceID
            self.deviceKind = deviceKind
            self.encryptedCardData = encryptedCardData
        }
    }

    /// `POST /v1/provisioning/one-time-code`: the code the user typed for a step-up. Its descriptions and mirror
    /// never show the code.
    public struct OneTimeCodeRequest: Codable, Sendable, Hashable, CustomStringConvertible,
        CustomDebugStringConvertible, CustomReflectable
    {
        public let sessionID: String
        public let deviceID: String
        public let code: String

        public init(sessionID: String, deviceID: String, code: String) {
            self.sessionID = sessionID
            self.deviceID = deviceID
            self.code = code
        }

        public var description: String { "one-time code for session \(sessionID) on \(deviceID)" }
        public var debugDescription: String { description }
        public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
    }

    /// What a card looks like to a wallet: enough to display it, nothing that identifies the account.
    public struct CardProfile: Codable, Sendable, Hashable {
        /// As Apple Pay's `supportedNetworks` spells it (`visa`, `masterCard`, …).
        public let network: String
        /// `credit`, `debit` or `prepaid`.
        public let type: String
        /// The last four digits of the card number.
        public let suffix: String
        public let issuerName: String
        public let productName: String

        public init(network: String, type: String, suffix: String, issuerName: String, productName: String) {
            self.network = network
            self.type = type
            self.suffix = suffix
            self.issuerName = issuerName
            self.productName = productName
        }
    }

    /// A step-up challenge as the wallet shows it: how the issuer sent the code and where (masked).
    public struct StepUpChallenge: Codable, Sendable, Hashable {
        /// `sms`, `email` or `app`.
        public let method: String
        /// Where the code was sent, masked (`•••• 0142`).
        public let destinationHint: String

        public init(method: String, destinationHint: String) {
            self.method = method
            self.destinationHint = destinationHint
        }
    }

    /// The issuer's decision on a card: `{"outcome":"approve","profile":{…}}`,
    /// `{"outcome":"stepUp","challenge":{…},"profile":{…}}` or `{"outcome":"decline","reason":"…"}`. Any other
    /// outcome, or a missing field of the one named, does not decode.
    public enum CardDecision: Codable, Sendable, Hashable {
        /// The card may be tokenised.
        case approve(profile: CardProfile)
        /// The card may be tokenised once the user has passed the challenge.
        case stepUp(challenge: StepUpChallenge, profile: CardProfile)
        /// The card must not be tokenised; `reason` is a code a wallet can explain (`unknownCard`,
        /// `verificationFailed`, `cardExpired`, `notEligible`, `tooManyAttempts`, `challengeExpired`, …).
        case decline(reason: String)

        enum Outcome: String, Codable { case approve, stepUp, decline }
        enum CodingKeys: String, CodingKey { case outcome, profile, challenge, reason }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            switch try container.decode(Outcome.self, forKey: .outcome) {
            case .approve: self = .approve(profile: try container.decode(CardProfile.self, forKey: .profile))
            case .stepUp:
                self = .stepUp(
                    challenge: try container.decode(StepUpChallenge.self, forKey: .challenge),
                    profile: try container.decode(CardProfile.self, forKey: .profile))
            case .decline: self = .decline(reason: try container.decode(String.self, forKey: .reason))
            }
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            switch self {
            case .approve(let profile):
                try container.encode(Outcome.approve, forKey: .outcome)
                try container.encode(profile, forKey: .profile)
            case .stepUp(let challenge, let profile):
                try container.encode(Outcome.stepUp, forKey: .outcome)
                try container.encode(challenge, forKey: .challenge)
                try container.encode(profile, forKey: .profile)
            case .decline(let reason):
                try container.encode(Outcome.decline, forKey: .outcome)
                try container.encode(reason, forKey: .reason)
            }
        }
    }

    /// The answer to Check Card and to a one-time code.
    public struct CheckCardAnswer: Codable, Sendable, Hashable {
        /// The provisioning session to continue with; absent when declined.
        public let sessionID: String?
        public let decision: CardDecision
        /// The terms the user must accept before Link and Provision; absent when declined.
        public let termsID: String?

        public init(sessionID: String?, decision: CardDecision, termsID: String?) {
            self.sessionID = sessionID
            self.decision = decision
            self.termsID = termsID
        }
    }

    /// `POST /v1/provisioning/link`: create the token for this device and personalise its Secure Element.
    /// Idempotent like ``CheckCardRequest``.
    public struct LinkRequest: Codable, Sendable, Hashable {
        public let idempotencyKey: String
        public let sessionID: String
        public let deviceID: String
        /// The device certificate chain, leaf first, each DER in base64: the Secure Element's key, certified by
        /// the Orchard device CA for this device.
        public let secureElementCertificateChain: [String]
        public let termsAccepted: Bool

        public init(
            idempotencyKey: String, sessionID: String, deviceID: String, secureElementCertificateChain: [String],
            termsAccepted: Bool
        ) {
            self.idempotencyKey = idempotencyKey
            self.sessionID = sessionID
            self.deviceID = deviceID
            self.secureElementCertificateChain = secureElementCertificateChain
            self.termsAccepted = termsAccepted
        }
    }

    /// A new token as the wallet learns of it. The device account number travels only inside the sealed
    /// personalisation; descriptions show the envelope's size, not its bytes.
    public struct ProvisionedToken: Codable, Sendable, Hashable, CustomStringConvertible {
        public let tokenReference: String
        /// The last four digits of the device account number.
        public let dpanSuffix: String
        public let tokenExpiry: Expiry
        public let domains: [Domain]
        public let profile: CardProfile
        /// The Secure Element's personalisation sealed to the key of the device's certificate (an envelope only
        /// that Secure Element opens), base64.
        public let personalisation: String

        public init(
            tokenReference: String, dpanSuffix: String, tokenExpiry: Expiry, domains: [Domain], profile: CardProfile,
            personalisation: String
        ) {
            self.tokenReference = tokenReference
            self.dpanSuffix = dpanSuffix
            self.tokenExpiry = tokenExpiry
            self.domains = domains
            self.profile = profile
            self.personalisation = personalisation
        }

        public var description: String {
            "token \(tokenReference) …\(dpanSuffix) (\(profile.network) \(profile.type), personalisation "
                + "\(personalisation.utf8.count) base64 characters)"
        }
    }

    /// The answer to Link and Provision: `{"outcome":"provisioned","token":{…}}` or
    /// `{"outcome":"declined","reason":"…"}` (e.g. `termsNotAccepted`).
    public enum LinkAnswer: Codable, Sendable, Hashable {
        case provisioned(token: ProvisionedToken)
        case declined(reason: String)

        enum Outcome: String, Codable { case provisioned, declined }
        enum CodingKeys: String, CodingKey { case outcome, token, reason }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            switch try container.decode(Outcome.self, forKey: .outcome) {
            case .provisioned: self = .provisioned(token: try container.decode(ProvisionedToken.self, forKey: .token))
            case .declined: self = .declined(reason: try container.decode(String.self, forKey: .reason))
            }
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            switch self {
            case .provisioned(let token):
                try container.encode(Outcome.provisioned, forKey: .outcome)
                try container.encode(token, forKey: .token)
            case .declined(let reason):
                try container.encode(Outcome.declined, forKey: .outcome)
                try container.encode(reason, forKey: .reason)
            }
        }
    }

    /// The body of the token requestor's lifecycle routes: whom it acts for.
    public struct LifecycleRequest: Codable, Sendable, Hashable {
        public let actor: RequestorRole

        public init(actor: RequestorRole) { self.actor = actor }
    }

    /// A token's state as the lifecycle routes report it.
    public struct TokenStatus: Codable, Sendable, Hashable {
        public let tokenReference: String
        public let deviceID: String
        public let state: TokenState
        /// Who currently suspends the token; empty unless suspended.
        public let suspendedBy: [Actor]
        public let domains: [Domain]
        public let tokenExpiry: Expiry
        /// The last four digits of the device account number.
        public let dpanSuffix: String

        public init(
            tokenReference: String, deviceID: String, state: TokenState, suspendedBy: [Actor], domains: [Domain],
            tokenExpiry: Expiry, dpanSuffix: String
        ) {
            self.tokenReference = tokenReference
            self.deviceID = deviceID
            self.state = state
            self.suspendedBy = suspendedBy
            self.domains = domains
            self.tokenExpiry = tokenExpiry
            self.dpanSuffix = dpanSuffix
        }
    }

    /// The answer to a device's lifecycle route: every token of the device, after the change.
    public struct DeviceLifecycleAnswer: Codable, Sendable, Hashable {
        public let tokens: [TokenStatus]

        public init(tokens: [TokenStatus]) { self.tokens = tokens }
    }

    /// What happened to a token.
    public enum TokenEvent: String, Codable, Sendable, CaseIterable {
        case provisioned, suspended, resumed, deleted
        /// The card behind the token was re-issued (new number or expiry); the token's number is unchanged.
        case cardUpdated
        case domainControlsChanged
    }

    /// A token-status notification with its place in the network's outbox. Carries the token reference, never
    /// the device account number.
    public struct TokenNotification: Codable, Sendable, Hashable {
        /// Increasing; the token requestor asks for those after the last one it applied.
        public let sequence: Int64
        public let tokenReference: String
        public let tokenRequestorID: String
        public let deviceID: String
        public let event: TokenEvent
        public let state: TokenState
        public let suspendedBy: [Actor]
        /// The last four digits of the card number now behind the token (changes on re-issue).
        public let cardSuffix: String?
        /// When the change happened: ISO 8601 in UTC with milliseconds on the wire.
        public let occurredAt: Date

        public init(
            sequence: Int64, tokenReference: String, tokenRequestorID: String, deviceID: String, event: TokenEvent,
            state: TokenState, suspendedBy: [Actor], cardSuffix: String?, occurredAt: Date
        ) {
            self.sequence = sequence
            self.tokenReference = tokenReference
            self.tokenRequestorID = tokenRequestorID
            self.deviceID = deviceID
            self.event = event
            self.state = state
            self.suspendedBy = suspendedBy
            self.cardSuffix = cardSuffix
            self.occurredAt = occurredAt
        }

        enum CodingKeys: String, CodingKey {
            case sequence, tokenReference, tokenRequestorID, deviceID, event, state, suspendedBy, cardSuffix
            case occurredAt
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            sequence = try container.decode(Int64.self, forKey: .sequence)
            tokenReference = try container.decode(String.self, forKey: .tokenReference)
            tokenRequestorID = try container.decode(String.self, forKey: .tokenRequestorID)
            deviceID = try container.decode(String.self, forKey: .deviceID)
            event = try container.decode(TokenEvent.self, forKey: .event)
            state = try container.decode(TokenState.self, forKey: .state)
            suspendedBy = try container.decode([Actor].self, forKey: .suspendedBy)
            cardSuffix = try container.decodeIfPresent(String.self, forKey: .cardSuffix)
            let text = try container.decode(String.self, forKey: .occurredAt)
            guard let date = Self.timestampFormatter().date(from: text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .occurredAt, in: container, debugDescription: "occurredAt is an ISO 8601 timestamp")
            }
            occurredAt = date
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(sequence, forKey: .sequence)
            try container.encode(tokenReference, forKey: .tokenReference)
            try container.encode(tokenRequestorID, forKey: .tokenRequestorID)
            try container.encode(deviceID, forKey: .deviceID)
            try container.encode(event, forKey: .event)
            try container.encode(state, forKey: .state)
            try container.encode(suspendedBy, forKey: .suspendedBy)
            try container.encodeIfPresent(cardSuffix, forKey: .cardSuffix)
            try container.encode(Self.timestampFormatter().string(from: occurredAt), forKey: .occurredAt)
        }

        // A formatter per call: ISO8601DateFormatter is not Sendable.
        static func timestampFormatter() -> ISO8601DateFormatter {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            return formatter
        }
    }

    /// `GET /v1/notifications?after=N`: up to 100 notifications after `N`, oldest first (empty when none).
    public struct NotificationFeed: Codable, Sendable, Hashable {
        public let notifications: [TokenNotification]

        public init(notifications: [TokenNotification]) { self.notifications = notifications }
    }

    /// A refusal: `{"error":{"code":"…","message":"…"}}` with the HTTP status of ``ErrorCode``. A 5xx says only
    /// which party failed.
    public struct ErrorAnswer: Codable, Sendable, Hashable {
        public struct Detail: Codable, Sendable, Hashable {
            public let code: ErrorCode
            /// For people; never a card number.
            public let message: String

            public init(code: ErrorCode, message: String) {
                self.code = code
                self.message = message
            }
        }

        public let error: Detail

        public init(code: ErrorCode, message: String) { error = Detail(code: code, message: message) }
    }

    /// The codes of ``ErrorAnswer`` on these routes, with the status each comes with. Extensible: a code not
    /// listed here still decodes (the transport's own, such as `client_certificate_required`, and 5xx codes).
    public struct ErrorCode: RawRepresentable, Codable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// 400: a body that does not decode as the route's request (missing field, wrong type, unknown value), or
        /// a field the token service refuses. Nothing was changed.
        public static let invalidRequest = ErrorCode(rawValue: "invalidRequest")
        /// 400: the sealed card data did not open (wrong key, wrong label, altered bytes).
        public static let envelopeRejected = ErrorCode(rawValue: "envelopeRejected")
        /// 404: no such token, device, session or card.
        public static let notFound = ErrorCode(rawValue: "notFound")
        /// 403: the lifecycle change is not allowed (a deleted token; lifting another actor's suspension).
        public static let lifecycleNotPermitted = ErrorCode(rawValue: "lifecycleNotPermitted")
        /// 403: the Secure Element certificate chain did not verify for this device.
        public static let deviceNotTrusted = ErrorCode(rawValue: "deviceNotTrusted")
        /// 409: the provisioning session is in the wrong state (expired, declined, already linked).
        public static let sessionState = ErrorCode(rawValue: "sessionState")
        /// 422: the idempotency key was used for a different request.
        public static let idempotencyConflict = ErrorCode(rawValue: "idempotencyConflict")
        /// 502: the issuer could not be reached.
        public static let issuerUnavailable = ErrorCode(rawValue: "issuerUnavailable")

        public init(from decoder: any Decoder) throws {
            rawValue = try decoder.singleValueContainer().decode(String.self)
        }
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(rawValue)
        }
        public var description: String { rawValue }
    }
}
