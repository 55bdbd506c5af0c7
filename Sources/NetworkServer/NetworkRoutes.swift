import AccessPolicy
public import Acquirer
import AcquirerAPI
public import CardBasics
import Foundation
public import Issuer
public import NetworkAuthorizationAPI
import OrchardCrypto
public import OrchardHTTP
import TokenRequestorAPI
public import TokenService

/// How the network recognizes, in a client certificate, the roles its routes' declared policies name
/// (`TokenRequestorAPI.Declared`, `AcquirerAPI.Declared`). A caller's lifecycle role comes from the group it was
/// let into, and an acquiring caller's terminal or merchant from its certificate, never from the request body.
public struct NetworkAccess: Sendable {
    /// The token requestor (the Pay server): provisioning and the cardholder's lifecycle actions.
    public var tokenRequestor: ClientCertificateRequirement
    /// Terminals and merchant servers: authorizations through the acquirer. Its identity (the certificate's
    /// terminal or merchant) is what the acquiring routes bind the body to; `.none` waives that (in-process
    /// wiring without certificates only).
    public var acquiring: ClientCertificateRequirement
    /// The issuer: its lifecycle actions on tokens.
    public var issuer: ClientCertificateRequirement
    /// The token requestor ID a caller of the token requestor's routes acts for, from its client certificate
    /// (nil: none, and the call is refused). The routes act only on that requestor's sessions, tokens and
    /// notifications, whatever the body says.
    public var tokenRequestorID: @Sendable (ClientCertificate?) -> String?

    /// `tokenRequestorID` defaults to the certificate's common name: `orchard init` issues the token requestor's
    /// certificate with its requestor ID as CN.
    public init(
        tokenRequestor: ClientCertificateRequirement, acquiring: ClientCertificateRequirement,
        issuer: ClientCertificateRequirement,
        tokenRequestorID: @escaping @Sendable (ClientCertificate?) -> String? = { $0?.commonName }
    ) {
        self.tokenRequestor = tokenRequestor
        self.acquiring = acquiring
        self.issuer = issuer
        self.tokenRequestorID = tokenRequestorID
    }

    /// The calling token requestor, or `requestorNotPermitted` (403) when its certificate names none.
    func tokenRequestor(of request: HTTPRequest) throws(TokenServiceError) -> String {
        guard let requestor = tokenRequestorID(request.clientCertificate), !requestor.isEmpty else {
            throw TokenServiceError(.requestorNotPermitted, "the client certificate names no token requestor")
        }
        return requestor
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
    /// From merchant servers: the Apple merchant ID the payment is for.
    public let appleMerchantID: String?

    public init(
        merchantID: String, terminalID: String? = nil, stan: String? = nil, idempotencyKey: String? = nil,
        pan: PrimaryAccountNumber, expiry: CardExpiry?, amount: Money, channel: PaymentChannel,
        cryptogram: CryptogramSubmission?, appleMerchantID: String? = nil
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
        self.appleMerchantID = appleMerchantID
    }

    func request() throws(AcquirerError) -> AcquirerAuthorizationRequest {
        AcquirerAuthorizationRequest(
            origin: try .from(terminalID: terminalID, stan: stan, idempotencyKey: idempotencyKey),
            merchantID: merchantID, pan: pan, expiry: expiry, amount: amount, channel: channel,
            cryptogram: cryptogram, appleMerchantID: appleMerchantID)
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
/// A token requestor acts only as itself (``NetworkAccess/tokenRequestorID``): a Check Card naming another
/// requestor is refused (403), another requestor's session or token answers 404 as if it did not exist, device
/// actions reach only its own tokens on the device, and it reads only its own notifications.
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
        router.roles[CallerRoles.tokenRequestor] = access.tokenRequestor
        router.roles[CallerRoles.acquiring] = access.acquiring
        router.roles[CallerRoles.issuer] = access.issuer
        router.add(API.Declared.provisioningKey) { _ in
            try HTTPResponse.json(
                API.ProvisioningKey(
                    publicKey: Data(tokenService.provisioningPublicKey.derRepresentation).base64EncodedString(),
                    certificate: provisioningCertificate.map { Data($0).base64EncodedString() }))
        }
        if let outbox {
            router.add(API.Declared.notifications) { request in
                guard let after = Int64(request.queryValue("after") ?? "0"), after >= 0 else {
                    throw TokenServiceError(.invalidRequest, "after is a sequence number (0 or more)")
                }
                let items = try await outbox.notifications(for: try access.tokenRequestor(of: request), after: after)
                return try HTTPResponse.json(API.NotificationFeed(notifications: items.map(API.TokenNotification.init)))
            }
        }
        router.add(API.Declared.checkCard) { request in
            let body = try request.tokenRequestorBody(API.CheckCardRequest.self)
            guard body.tokenRequestorID == (try access.tokenRequestor(of: request)) else {
                throw TokenServiceError(.requestorNotPermitted, "the body names another token requestor")
            }
            return try HTTPResponse.json(API.CheckCardAnswer(try await tokenService.checkCard(try body.domain)))
        }
        router.add(API.Declared.oneTimeCode) { request in
            let body = try request.tokenRequestorBody(API.OneTimeCodeRequest.self)
            try await tokenService.requireSession(body.sessionID, ownedBy: try access.tokenRequestor(of: request))
            return try HTTPResponse.json(
                API.CheckCardAnswer(
                    try await tokenService.submitOneTimeCode(
                        sessionID: body.sessionID, deviceID: body.deviceID, code: body.code)))
        }
        router.add(API.Declared.link) { request in
            let body = try request.tokenRequestorBody(API.LinkRequest.self)
            try await tokenService.requireSession(body.sessionID, ownedBy: try access.tokenRequestor(of: request))
            return try HTTPResponse.json(API.LinkAnswer(try await tokenService.linkAndProvision(try body.domain)))
        }
        router.add(API.Declared.token) { request in
            let reference = try request.parameter("reference")
            try await tokenService.requireToken(reference, ownedBy: try access.tokenRequestor(of: request))
            return try HTTPResponse.json(API.TokenStatus(try await tokenService.status(tokenReference: reference)))
        }
        for action in API.LifecycleAction.allCases {
            router.add(API.Declared.token(action)) { request in
                let actor = try request.tokenRequestorBody(API.LifecycleRequest.self).actor.domain
                let reference = try request.parameter("reference")
                try await tokenService.requireToken(reference, ownedBy: try access.tokenRequestor(of: request))
                let status: TokenStatus
                switch action {
                case .suspend: status = try await tokenService.suspend(tokenReference: reference, by: actor)
                case .resume: status = try await tokenService.resume(tokenReference: reference, by: actor)
                case .delete: status = try await tokenService.delete(tokenReference: reference, by: actor)
                }
                return try HTTPResponse.json(API.TokenStatus(status))
            }
            router.add(API.Declared.device(action)) { request in
                let actor = try request.tokenRequestorBody(API.LifecycleRequest.self).actor.domain
                let device = try request.parameter("id")
                let requestor = try access.tokenRequestor(of: request)
                let statuses: [TokenStatus]
                switch action {
                case .suspend:
                    statuses = try await tokenService.suspendDevice(device, by: actor, tokenRequestorID: requestor)
                case .resume:
                    statuses = try await tokenService.resumeDevice(device, by: actor, tokenRequestorID: requestor)
                case .delete:
                    statuses = try await tokenService.deleteDevice(device, by: actor, tokenRequestorID: requestor)
                }
                return try HTTPResponse.json(API.DeviceLifecycleAnswer(tokens: statuses.map(API.TokenStatus.init)))
            }
            router.add(API.Declared.issuerToken(action)) { request in
                try HTTPResponse.json(
                    API.TokenStatus(
                        try await tokenService.applyIssuerAction(
                            action.domain, issuerID: issuerID, tokenReference: try request.parameter("reference"))))
            }
        }
        router.classify(AcquirerAPI.Declared.authorizations, as: .payment)
        router.add(AcquirerAPI.Declared.authorizations) { (body: AuthorizationBody, _) in
            try await acquirer.authorize(try body.request())
        }
        installReversals(into: &router, acquirer: acquirer)
    }
}

extension TokenServiceError: HTTPResponseError {
    public var httpStatus: HTTPStatus {
        switch code {
        case .invalidRequest, .envelopeRejected: return .badRequest
        case .notFound: return .notFound
        case .lifecycleNotPermitted, .deviceNotTrusted, .requestorNotPermitted: return .forbidden
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
        case .merchantNotActive, .merchantIDNotAllowed: return .forbidden
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
