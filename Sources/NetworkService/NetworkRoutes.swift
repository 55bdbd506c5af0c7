public import Acquirer
import AcquirerAPI
public import CardBasics
import Foundation
public import Issuer
import OrchardCrypto
public import OrchardHTTP
import TokenRequestorAPI
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

/// The network service's HTTP routes over the three parties.
///
/// The token-requestor and issuer routes speak `TokenRequestorAPI` (paths, bodies, errors; converted to and from the
/// token service's types in TokenRequestorWire.swift); the acquiring routes read `AcquirerAPI`'s JSON.
///
/// | route | caller | |
/// |---|---|---|
/// | `GET /v1/provisioning/key` | token requestor | → `ProvisioningKey` |
/// | `POST /v1/provisioning/check-card` | token requestor | `CheckCardRequest` → `CheckCardAnswer` |
/// | `POST /v1/provisioning/one-time-code` | token requestor | `OneTimeCodeRequest` → `CheckCardAnswer` |
/// | `POST /v1/provisioning/link` | token requestor | `LinkRequest` → `LinkAnswer` |
/// | `GET /v1/tokens/:reference` | token requestor | → `TokenStatus` |
/// | `POST /v1/tokens/:reference/{suspend,resume,delete}` | token requestor | `LifecycleRequest` → `TokenStatus` |
/// | `POST /v1/devices/:id/{suspend,resume,delete}` | token requestor | `LifecycleRequest` → `DeviceLifecycleAnswer` |
/// | `POST /v1/issuer/tokens/:reference/{suspend,resume,delete}` | issuer | → `TokenStatus` |
/// | `GET /v1/notifications?after=N` | token requestor | → `NotificationFeed` (with an outbox) |
/// | `POST /v1/acquirer/authorizations` | terminals, merchants | ``AuthorizationBody`` → result |
/// | `POST /v1/acquirer/reversals` | terminals, merchants | ``ReversalBody`` → ``AcquirerReversalResult`` |
public enum NetworkRoutes {
    /// Adds the routes to `router`. `provisioningCertificate` (DER) is the root's certificate for the
    /// provisioning key; `outbox` serves the token-status notifications.
    public static func install(
        into router: inout Router, tokenService: TokenService, acquirer: Acquirer, issuerID: String,
        access: NetworkAccess, provisioningCertificate: [UInt8]? = nil, outbox: SQLiteNotificationOutbox? = nil
    ) {
        typealias API = TokenRequestorAPI
        router.get(API.Route.provisioningKey, requirement: access.tokenRequestor) { _ in
            try HTTPResponse.json(
                API.ProvisioningKey(
                    publicKey: Data(tokenService.provisioningPublicKey.derRepresentation).base64EncodedString(),
                    certificate: provisioningCertificate.map { Data($0).base64EncodedString() }))
        }
        if let outbox {
            router.get(API.Route.notifications, requirement: access.tokenRequestor) { request in
                guard let after = Int64(request.queryValue("after") ?? "0"), after >= 0 else {
                    throw TokenServiceError(.invalidRequest, "after is a sequence number (0 or more)")
                }
                let items = try await outbox.notifications(after: after)
                return try HTTPResponse.json(API.NotificationFeed(notifications: items.map(API.TokenNotification.init)))
            }
        }
        router.post(API.Route.checkCard, requirement: access.tokenRequestor) { request in
            let body = try request.tokenRequestorBody(API.CheckCardRequest.self)
            return try HTTPResponse.json(API.CheckCardAnswer(try await tokenService.checkCard(try body.domain)))
        }
        router.post(API.Route.oneTimeCode, requirement: access.tokenRequestor) { request in
            let body = try request.tokenRequestorBody(API.OneTimeCodeRequest.self)
            return try HTTPResponse.json(
                API.CheckCardAnswer(
                    try await tokenService.submitOneTimeCode(
                        sessionID: body.sessionID, deviceID: body.deviceID, code: body.code)))
        }
        router.post(API.Route.link, requirement: access.tokenRequestor) { request in
            let body = try request.tokenRequestorBody(API.LinkRequest.self)
            return try HTTPResponse.json(API.LinkAnswer(try await tokenService.linkAndProvision(try body.domain)))
        }
        router.get(API.Route.token(":reference"), requirement: access.tokenRequestor) { request in
            try HTTPResponse.json(
                API.TokenStatus(try await tokenService.status(tokenReference: try request.parameter("reference"))))
        }
        for action in API.LifecycleAction.allCases {
            router.post(API.Route.token(":reference", action), requirement: access.tokenRequestor) { request in
                let actor = try request.tokenRequestorBody(API.LifecycleRequest.self).actor.domain
                let reference = try request.parameter("reference")
                let status: TokenStatus
                switch action {
                case .suspend: status = try await tokenService.suspend(tokenReference: reference, by: actor)
                case .resume: status = try await tokenService.resume(tokenReference: reference, by: actor)
                case .delete: status = try await tokenService.delete(tokenReference: reference, by: actor)
                }
                return try HTTPResponse.json(API.TokenStatus(status))
            }
            router.post(API.Route.device(":id", action), requirement: access.tokenRequestor) { request in
                let actor = try request.tokenRequestorBody(API.LifecycleRequest.self).actor.domain
                let device = try request.parameter("id")
                let statuses: [TokenStatus]
                switch action {
                case .suspend: statuses = try await tokenService.suspendDevice(device, by: actor)
                case .resume: statuses = try await tokenService.resumeDevice(device, by: actor)
                case .delete: statuses = try await tokenService.deleteDevice(device, by: actor)
                }
                return try HTTPResponse.json(API.DeviceLifecycleAnswer(tokens: statuses.map(API.TokenStatus.init)))
            }
            router.post(API.Route.issuerToken(":reference", action), requirement: access.issuer) { request in
                try HTTPResponse.json(
                    API.TokenStatus(
                        try await tokenService.applyIssuerAction(
                            action.domain, issuerID: issuerID, tokenReference: try request.parameter("reference"))))
            }
        }
        router.post(AcquirerAPI.Route.authorizations, requirement: access.acquiring) {
            (body: AuthorizationBody, _) in try await acquirer.authorize(try body.request())
        }
        installReversals(into: &router, acquirer: acquirer, access: access)
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
