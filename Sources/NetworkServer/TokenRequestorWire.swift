import CardBasics
import Foundation
import Issuer
import OrchardHTTP
import PaymentCredential
import TokenRequestorAPI
import TokenService

// The one place the network converts between the token-requestor wire (TokenRequestorAPI) and the token
// service's domain types. A request that does not convert is the caller's fault: `invalidRequest`, nothing done.

extension HTTPRequest {
    /// The body as the route's contract request; anything that does not decode is a 400 `invalidRequest`.
    func tokenRequestorBody<Body: Decodable>(_ type: Body.Type) throws(TokenServiceError) -> Body {
        do {
            return try decodeJSON(Body.self)
        } catch {
            throw TokenServiceError(.invalidRequest, error.message)
        }
    }
}

/// Standard base64 of a byte string field, or `invalidRequest` naming the field.
private func base64Bytes(_ text: String, field: String) throws(TokenServiceError) -> [UInt8] {
    guard let data = Data(base64Encoded: text) else {
        throw TokenServiceError(.invalidRequest, "\(field) is standard base64")
    }
    return Array(data)
}

extension TokenRequestorAPI.CheckCardRequest {
    var domain: CheckCardRequest {
        get throws(TokenServiceError) {
            CheckCardRequest(
                idempotencyKey: idempotencyKey, tokenRequestorID: tokenRequestorID, deviceID: deviceID,
                deviceKind: deviceKind,
                encryptedCardData: try EncryptedEnvelope(
                    serialized: try base64Bytes(encryptedCardData, field: "encryptedCardData")))
        }
    }
}

extension TokenRequestorAPI.LinkRequest {
    var domain: LinkAndProvisionRequest {
        get throws(TokenServiceError) {
            var chain: [[UInt8]] = []
            for certificate in secureElementCertificateChain {
                chain.append(try base64Bytes(certificate, field: "secureElementCertificateChain"))
            }
            return LinkAndProvisionRequest(
                idempotencyKey: idempotencyKey, sessionID: sessionID, deviceID: deviceID,
                secureElementCertificateChain: chain, termsAccepted: termsAccepted)
        }
    }
}

extension TokenRequestorAPI.RequestorRole {
    /// A token requestor acts as the cardholder or as itself; the wire has no other choice.
    var domain: LifecycleActor {
        switch self {
        case .cardholder: return .cardholder
        case .tokenRequestor: return .tokenRequestor
        }
    }
}

extension TokenRequestorAPI.LifecycleAction {
    var domain: TokenLifecycleAction {
        switch self {
        case .suspend: return .suspend
        case .resume: return .resume
        case .delete: return .delete
        }
    }
}

extension TokenRequestorAPI.CheckCardAnswer {
    init(_ response: CheckCardResponse) {
        let decision: TokenRequestorAPI.CardDecision
        switch response.decision {
        case .approve(let profile): decision = .approve(profile: .init(profile))
        case .stepUp(let challenge, let profile):
            // The issuer's challenge reference stays at the network: the code is checked by session.
            decision = .stepUp(
                challenge: .init(method: challenge.method, destinationHint: challenge.destinationHint),
                profile: .init(profile))
        case .decline(let reason): decision = .decline(reason: reason.rawValue)
        }
        self.init(sessionID: response.sessionID, decision: decision, termsID: response.termsID)
    }
}

extension TokenRequestorAPI.CardProfile {
    init(_ profile: CardProfile) {
        self.init(
            network: profile.network.name, type: profile.type.rawValue, suffix: profile.suffix,
            issuerName: profile.issuerName, productName: profile.productName)
    }
}

extension TokenRequestorAPI.LinkAnswer {
    init(_ response: LinkAndProvisionResponse) {
        switch response {
        case .provisioned(let token):
            self = .provisioned(
                token: TokenRequestorAPI.ProvisionedToken(
                    tokenReference: token.tokenReference, dpanSuffix: token.dpanSuffix,
                    tokenExpiry: .init(token.tokenExpiry), domains: .init(token.domainControls),
                    profile: .init(token.profile),
                    personalisation: Data(token.personalisation.serialized).base64EncodedString()))
        case .declined(let reason): self = .declined(reason: reason.rawValue)
        }
    }
}

extension TokenRequestorAPI.Expiry {
    init(_ expiry: CardExpiry) { self.init(year: expiry.year, month: expiry.month) }
}

extension [TokenRequestorAPI.Domain] {
    init(_ controls: DomainControls) {
        let known: [(DomainControls, TokenRequestorAPI.Domain)] = [
            (.contactless, .contactless), (.inApp, .inApp), (.web, .web),
        ]
        self = known.filter { controls.contains($0.0) }.map(\.1)
    }
}

extension TokenRequestorAPI.Actor {
    init(_ actor: LifecycleActor) {
        switch actor {
        case .issuer: self = .issuer
        case .cardholder: self = .cardholder
        case .tokenRequestor: self = .tokenRequestor
        case .network: self = .network
        }
    }
}

extension TokenRequestorAPI.TokenState {
    init(_ state: TokenState) {
        switch state {
        case .active: self = .active
        case .suspended: self = .suspended
        case .deleted: self = .deleted
        }
    }
}

extension TokenRequestorAPI.TokenEvent {
    init(_ event: TokenEvent) {
        switch event {
        case .provisioned: self = .provisioned
        case .suspended: self = .suspended
        case .resumed: self = .resumed
        case .deleted: self = .deleted
        case .cardUpdated: self = .cardUpdated
        case .domainControlsChanged: self = .domainControlsChanged
        }
    }
}

extension TokenRequestorAPI.TokenStatus {
    init(_ status: TokenStatus) {
        self.init(
            tokenReference: status.tokenReference, deviceID: status.deviceID, state: .init(status.state),
            suspendedBy: status.suspendedBy.map(TokenRequestorAPI.Actor.init), domains: .init(status.domainControls),
            tokenExpiry: .init(status.tokenExpiry), dpanSuffix: status.dpanSuffix)
    }
}

extension TokenRequestorAPI.TokenNotification {
    init(_ item: SequencedNotification) {
        let note = item.notification
        self.init(
            sequence: item.sequence, tokenReference: note.tokenReference, tokenRequestorID: note.tokenRequestorID,
            deviceID: note.deviceID, event: .init(note.event), state: .init(note.state),
            suspendedBy: note.suspendedBy.map(TokenRequestorAPI.Actor.init), cardSuffix: note.cardSuffix,
            occurredAt: note.occurredAt)
    }
}
