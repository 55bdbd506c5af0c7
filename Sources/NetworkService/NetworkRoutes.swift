public import Acquirer
import AcquirerAPI
import Foundation
public import Issuer
import OrchardCrypto
public import OrchardHTTP
public import TokenService

/// Who may call which group of the network's routes. The groups map to callers, and a caller's lifecycle
/// role comes from the group it was let into, never from the request body.
public struct NetworkAccess: Sendable {
    /// The token requestor (the Pay server): provisioning and the cardholder's lifecycle actions.
    public var tokenRequestor: ClientCertificateRequirement
    /// Terminals and merchant servers: authorizations through the acquirer.
    public var acquiring: ClientCertificateRequirement
    /// The issuer: its lifecycle actions on tokens.
    public var issuer: ClientCertificateRequirement

    public init(
        tokenRequestor: ClientCertificateRequirement, acquiring: ClientCertificateRequirement,
        issuer: ClientCertificateRequirement
    ) {
        self.tokenRequestor = tokenRequestor
        self.acquiring = acquiring
        self.issuer = issuer
    }
}

/// Body of `POST /v1/provisioning/one-time-code`.
public struct OneTimeCodeBody: Codable, Sendable {
    public let sessionID: String
    public let deviceID: String
    public let code: String

    public init(sessionID: String, deviceID: String, code: String) {
        self.sessionID = sessionID
        self.deviceID = deviceID
        self.code = code
    }
}

/// Body of the token requestor's lifecycle routes: which of its roles acts.
public struct LifecycleBody: Codable, Sendable {
    /// `cardholder` (lost mode, erase, removing a card) or `tokenRequestor`.
    public let actor: LifecycleActor

    public init(actor: LifecycleActor) { self.actor = actor }
}

/// Body of `POST /v1/acquirer/authorizations`: a terminal sends `terminalID` and `stan`, a merchant server
/// its `idempotencyKey`. The network's reading of `AcquirerAPI.AuthorizationRequest` (the callers' side of the
/// same JSON), into its own validated types.
public struct AuthorizationBody: Codable, Sendable {
    public let merchantID: String
    public let terminalID: String?
    public let stan: String?
    public let idempotencyKey: String?
    public let pan: PrimaryAccountNumber
    public let expiry: CardExpiry?
    public let amount: Money
    public let channel: PaymentChannel
    public let cryptogram: CryptogramSubmission?

    public init(
        merchantID: String, terminalID: String? = nil, stan: String? = nil, idempotencyKey: String? = nil,
        pan: PrimaryAccountNumber, expiry: CardExpiry?, amount: Money, channel: PaymentChannel,
        cryptogram: CryptogramSubmission?
    ) {
        self.merchantID = merchantID
        self.terminalID = terminalID
        self.stan = stan
        self.idempotencyKey = idempotencyKey
        self.pan = pan
        self.expiry = expiry
        self.amount = amount
        self.channel = channel
        self.cryptogram = cryptogram
    }

    func request() throws(AcquirerError) -> AcquirerAuthorizationRequest {
        AcquirerAuthorizationRequest(
            origin: try .from(terminalID: terminalID, stan: stan, idempotencyKey: idempotencyKey),
            merchantID: merchantID, pan: pan, expiry: expiry, amount: amount, channel: channel,
            cryptogram: cryptogram)
    }
}

extension AcquirerAuthorizationRequest.Origin {
    /// Who sent an acquiring request, from its body: a terminal sends `terminalID` and `stan`, a merchant server
    /// its `idempotencyKey`, and nothing else is accepted.
    static func from(
        terminalID: String?, stan: String?, idempotencyKey: String?
    ) throws(AcquirerError) -> AcquirerAuthorizationRequest.Origin {
        switch (terminalID, stan, idempotencyKey) {
        case (let terminal?, let stan?, nil): return .terminal(terminalID: terminal, systemTraceAuditNumber: stan)
        case (nil, nil, let key?): return .merchantServer(idempotencyKey: key)
        default: throw AcquirerError(.invalidRequest, "send either terminalID and stan, or idempotencyKey")
        }
    }
}

/// Body of `GET /v1/provisioning/key`.
public struct ProvisioningKeyBody: Codable, Sendable {
    /// The token service's P-256 key wallets seal card data to: DER SubjectPublicKeyInfo, base64.
    public let publicKey: String
    /// The certificate the Orchard root issued for that key (DER, base64), which wallets check before they
    /// seal; nil for a token service without one.
    public let certificate: String?
}

/// The network service's HTTP routes over the three parties.
///
/// | route | caller | |
/// |---|---|---|
/// | `GET /v1/provisioning/key` | token requestor | the key card data is sealed to |
/// | `POST /v1/provisioning/check-card` | token requestor | ``CheckCardRequest`` → ``CheckCardResponse`` |
/// | `POST /v1/provisioning/one-time-code` | token requestor | ``OneTimeCodeBody`` → ``CheckCardResponse`` |
/// | `POST /v1/provisioning/link` | token requestor | ``LinkAndProvisionRequest`` → ``LinkAndProvisionResponse`` |
/// | `GET /v1/tokens/:reference` | token requestor | ``TokenStatus`` |
/// | `POST /v1/tokens/:reference/{suspend,resume,delete}` | token requestor | ``LifecycleBody`` → ``TokenStatus`` |
/// | `POST /v1/devices/:id/{suspend,resume,delete}` | token requestor | ``LifecycleBody`` → `[TokenStatus]` |
/// | `POST /v1/issuer/tokens/:reference/{suspend,resume,delete}` | issuer | ``TokenStatus`` |
/// | `GET /v1/notifications?after=N` | token requestor | ``NotificationFeed`` (with an outbox) |
/// | `POST /v1/acquirer/authorizations` | terminals, merchants | ``AuthorizationBody`` → result |
/// | `POST /v1/acquirer/reversals` | terminals, merchants | ``ReversalBody`` → ``AcquirerReversalResult`` |
public enum NetworkRoutes {
    /// Adds the routes to `router`. `provisioningCertificate` (DER) is the root's certificate for the
    /// provisioning key; `outbox` serves the token-status notifications.
    public static func install(
        into router: inout Router, tokenService: TokenService, acquirer: Acquirer, issuerID: String,
        access: NetworkAccess, provisioningCertificate: [UInt8]? = nil, outbox: SQLiteNotificationOutbox? = nil
    ) {
        router.get("/v1/provisioning/key", requirement: access.tokenRequestor) { _ in
            try HTTPResponse.json(
                ProvisioningKeyBody(
                    publicKey: Data(tokenService.provisioningPublicKey.derRepresentation).base64EncodedString(),
                    certificate: provisioningCertificate.map { Data($0).base64EncodedString() }))
        }
        if let outbox {
            router.get("/v1/notifications", requirement: access.tokenRequestor) { request in
                guard let after = Int64(request.queryValue("after") ?? "0"), after >= 0 else {
                    throw TokenServiceError(.invalidRequest, "after is a sequence number (0 or more)")
                }
                return try HTTPResponse.json(
                    NotificationFeed(notifications: try await outbox.notifications(after: after)))
            }
        }
        router.post("/v1/provisioning/check-card", requirement: access.tokenRequestor) {
            (body: CheckCardRequest, _) in try await tokenService.checkCard(body)
        }
        router.post("/v1/provisioning/one-time-code", requirement: access.tokenRequestor) {
            (body: OneTimeCodeBody, _) in
            try await tokenService.submitOneTimeCode(
                sessionID: body.sessionID, deviceID: body.deviceID, code: body.code)
        }
        router.post("/v1/provisioning/link", requirement: access.tokenRequestor) {
            (body: LinkAndProvisionRequest, _) in try await tokenService.linkAndProvision(body)
        }
        router.get("/v1/tokens/:reference", requirement: access.tokenRequestor) { request in
            try HTTPResponse.json(try await tokenService.status(tokenReference: try request.parameter("reference")))
        }
        for action in TokenLifecycleAction.allCases {
            router.post("/v1/tokens/:reference/\(action.rawValue)", requirement: access.tokenRequestor) {
                (body: LifecycleBody, request) in
                let actor = try requestorActor(body.actor)
                let reference = try request.parameter("reference")
                switch action {
                case .suspend: return try await tokenService.suspend(tokenReference: reference, by: actor)
                case .resume: return try await tokenService.resume(tokenReference: reference, by: actor)
                case .delete: return try await tokenService.delete(tokenReference: reference, by: actor)
                }
            }
            router.post("/v1/devices/:id/\(action.rawValue)", requirement: access.tokenRequestor) {
                (body: LifecycleBody, request) in
                let actor = try requestorActor(body.actor)
                let device = try request.parameter("id")
                switch action {
                case .suspend: return try await tokenService.suspendDevice(device, by: actor)
                case .resume: return try await tokenService.resumeDevice(device, by: actor)
                case .delete: return try await tokenService.deleteDevice(device, by: actor)
                }
            }
            router.post("/v1/issuer/tokens/:reference/\(action.rawValue)", requirement: access.issuer) { request in
                try HTTPResponse.json(
                    try await tokenService.applyIssuerAction(
                        action, issuerID: issuerID, tokenReference: try request.parameter("reference")))
            }
        }
        router.post(AcquirerAPI.Route.authorizations, requirement: access.acquiring) {
            (body: AuthorizationBody, _) in try await acquirer.authorize(try body.request())
        }
        installReversals(into: &router, acquirer: acquirer, access: access)
    }

    /// The token requestor acts as the cardholder or as itself, never as the issuer or the network.
    static func requestorActor(_ actor: LifecycleActor) throws(TokenServiceError) -> LifecycleActor {
        guard actor == .cardholder || actor == .tokenRequestor else {
            throw TokenServiceError(.lifecycleNotPermitted, "a token requestor acts as cardholder or tokenRequestor")
        }
        return actor
    }
}

extension TokenServiceError: HTTPResponseError {
    public var httpStatus: HTTPStatus {
        switch code {
        case .invalidRequest, .envelopeRejected: return .badRequest
        case .notFound: return .notFound
        case .lifecycleNotPermitted, .deviceNotTrusted: return .forbidden
        case .sessionState: return .conflict
        case .idempotencyConflict: return .unprocessableContent
        case .issuerUnavailable: return .badGateway
        default: return .internalServerError
        }
    }
    public var httpErrorCode: String { code.description }
    public var httpErrorMessage: String { httpStatus.code >= 500 ? "the token service failed" : message }
}

extension AcquirerError: HTTPResponseError {
    public var httpStatus: HTTPStatus {
        switch code {
        case .invalidRequest: return .badRequest
        case .unknownMerchant, .unknownTerminal: return .notFound
        case .merchantNotActive: return .forbidden
        case .idempotencyConflict: return .unprocessableContent
        case .duplicate: return .conflict
        case .networkUnavailable: return .badGateway
        default: return .internalServerError
        }
    }
    public var httpErrorCode: String { code.description }
    public var httpErrorMessage: String { httpStatus.code >= 500 ? "the acquirer failed" : message }
}

extension IssuerError: HTTPResponseError {
    public var httpStatus: HTTPStatus {
        switch code {
        case .invalidInput: return .badRequest
        case .notFound: return .notFound
        case .duplicate: return .conflict
        case .notPermitted: return .forbidden
        default: return .internalServerError
        }
    }
    public var httpErrorCode: String { code.description }
    public var httpErrorMessage: String { httpStatus.code >= 500 ? "the issuer failed" : message }
}
