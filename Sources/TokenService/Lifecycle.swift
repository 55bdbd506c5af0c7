public import CardBasics
public import Foundation
public import Issuer
import OrchardCrypto

/// What happened to a token.
public enum TokenEvent: String, Hashable, Sendable, Codable {
    case provisioned, suspended, resumed, deleted
    /// The card behind the token was re-issued (new number or expiry); the DPAN is unchanged.
    case cardUpdated
    /// The token's domain controls changed.
    case domainControlsChanged
}

/// A token-status notification for the token requestor (the Pay server), which updates the wallet's pass.
/// Carries the token reference, never the DPAN.
public struct TokenStatusNotification: Hashable, Sendable, Codable {
    public let tokenReference: String
    public let tokenRequestorID: String
    public let deviceID: String
    public let event: TokenEvent
    public let state: TokenState
    /// Who currently suspends the token.
    public let suspendedBy: [LifecycleActor]
    /// The last four digits of the card number now behind the token (changes on re-issue).
    public let cardSuffix: String?
    public let occurredAt: Date
}

/// Delivers token-status notifications. The network service sends them to the Pay server; tests collect them.
public protocol TokenStatusNotifier: Sendable {
    func tokenStatusChanged(_ notification: TokenStatusNotification) async
}

/// A ``TokenStatusNotifier`` that keeps every notification in memory (tests, the embedded demo's outbox).
public final class InMemoryNotificationOutbox: TokenStatusNotifier, @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var items: [TokenStatusNotification] = []

    public init() {}

    public func tokenStatusChanged(_ notification: TokenStatusNotification) async {
        lock.withLock { items.append(notification) }
    }

    /// Every notification so far, oldest first.
    public var notifications: [TokenStatusNotification] { lock.withLock { items } }
}

/// A token's state as the lifecycle API reports it.
public struct TokenStatus: Hashable, Sendable {
    public let tokenReference: String
    public let deviceID: String
    public let state: TokenState
    public let suspendedBy: [LifecycleActor]
    public let domainControls: DomainControls
    public let tokenExpiry: CardExpiry
    public let dpanSuffix: String
}

extension TokenService {
    /// Suspends a token on behalf of `actor`. Suspending twice is harmless.
    @discardableResult
    public func suspend(tokenReference: String, by actor: LifecycleActor) async throws -> TokenStatus {
        try await change(tokenReference) { token throws(TokenServiceError) -> TokenEvent? in
            guard !token.deleted else { throw TokenServiceError(.lifecycleNotPermitted, "the token is deleted") }
            return token.suspendedBy.insert(actor).inserted ? .suspended : nil
        }
    }

    /// Lifts `actor`'s suspension. Only the actor that suspended may resume: the issuer alone resumes what
    /// the issuer suspended, and the cardholder lifts lost mode. The token is active again once no actor
    /// suspends it.
    @discardableResult
    public func resume(tokenReference: String, by actor: LifecycleActor) async throws -> TokenStatus {
        try await change(tokenReference) { token throws(TokenServiceError) -> TokenEvent? in
            guard !token.deleted else {
                throw TokenServiceError(.lifecycleNotPermitted, "a deleted token stays deleted")
            }
            guard token.suspendedBy.contains(actor) else {
                if token.suspendedBy.isEmpty { return nil }
                throw TokenServiceError(
                    .lifecycleNotPermitted,
                    "the token was suspended by \(token.suspendedBy.map(\.rawValue).sorted().joined(separator: ", ")); "
                        + "\(actor.rawValue) cannot lift that")
            }
            token.suspendedBy.remove(actor)
            return .resumed
        }
    }

    /// Deletes a token for good: it is declined forever and cannot be resumed.
    @discardableResult
    public func delete(tokenReference: String, by actor: LifecycleActor) async throws -> TokenStatus {
        try await change(tokenReference) { token throws(TokenServiceError) -> TokenEvent? in
            if token.deleted { return nil }
            token.deleted = true
            return .deleted
        }
    }

    /// Changes a token's domain controls (the issuer's or the token requestor's decision), within what the
    /// token requestor may use.
    @discardableResult
    public func setDomainControls(_ controls: DomainControls, tokenReference: String) async throws -> TokenStatus {
        try await change(tokenReference) { token throws(TokenServiceError) -> TokenEvent? in
            guard !token.deleted else { throw TokenServiceError(.lifecycleNotPermitted, "the token is deleted") }
            let allowed = requestors[token.tokenRequestorID]?.allowedDomains ?? []
            let granted = controls.intersection(allowed)
            guard !granted.isEmpty else { throw TokenServiceError(.invalidRequest, "no domain would remain") }
            if granted == token.domainControls { return nil }
            token.domainControls = granted
            return .domainControlsChanged
        }
    }

    /// Suspends every token of a device (lost mode), even while the device is offline; with `tokenRequestorID`,
    /// only that requestor's tokens on it.
    @discardableResult
    public func suspendDevice(
        _ deviceID: String, by actor: LifecycleActor, tokenRequestorID: String? = nil
    ) async throws -> [TokenStatus] {
        try await forDevice(deviceID, tokenRequestorID) { reference in
            try await suspend(tokenReference: reference, by: actor)
        }
    }

    /// Lifts `actor`'s suspension of every token of a device (leaving lost mode); with `tokenRequestorID`, only
    /// that requestor's tokens on it.
    @discardableResult
    public func resumeDevice(
        _ deviceID: String, by actor: LifecycleActor, tokenRequestorID: String? = nil
    ) async throws -> [TokenStatus] {
        try await forDevice(deviceID, tokenRequestorID) { reference in
            try await resume(tokenReference: reference, by: actor)
        }
    }

    /// Deletes every token of a device (erase); with `tokenRequestorID`, only that requestor's tokens on it.
    @discardableResult
    public func deleteDevice(
        _ deviceID: String, by actor: LifecycleActor, tokenRequestorID: String? = nil
    ) async throws -> [TokenStatus] {
        try await forDevice(deviceID, tokenRequestorID) { reference in
            try await delete(tokenReference: reference, by: actor)
        }
    }

    /// The token's current state.
    public func status(tokenReference: String) async throws -> TokenStatus {
        guard let token = try await vault.token(reference: tokenReference) else {
            throw TokenServiceError(.notFound, "no such token")
        }
        return Self.status(of: token)
    }

    /// Returns when the token `tokenReference` belongs to `tokenRequestorID`. Throws
    /// ``TokenServiceError/Code/notFound`` otherwise, the same answer as for no such token: a requestor does not
    /// learn that another's token exists.
    public func requireToken(_ tokenReference: String, ownedBy tokenRequestorID: String) async throws {
        guard let token = try await vault.token(reference: tokenReference), token.tokenRequestorID == tokenRequestorID
        else { throw TokenServiceError(.notFound, "no such token") }
    }

    /// Returns when the provisioning session `sessionID` belongs to `tokenRequestorID`; throws
    /// ``TokenServiceError/Code/notFound`` otherwise, as for no such session.
    public func requireSession(_ sessionID: String, ownedBy tokenRequestorID: String) async throws {
        guard let session = try await vault.session(id: sessionID), session.tokenRequestorID == tokenRequestorID
        else { throw TokenServiceError(.notFound, "no such provisioning session") }
    }

    // MARK: - Internals

    private func forDevice(
        _ deviceID: String, _ tokenRequestorID: String?, _ body: (String) async throws -> TokenStatus
    ) async throws
        -> [TokenStatus]
    {
        var out: [TokenStatus] = []
        for token in try await vault.tokens(deviceID: deviceID)
        where !token.deleted && (tokenRequestorID == nil || token.tokenRequestorID == tokenRequestorID) {
            out.append(try await body(token.tokenReference))
        }
        return out
    }

    /// Loads a token under its lock, lets `body` change it, saves and notifies when `body` names an event.
    func change(
        _ tokenReference: String, _ body: (inout TokenRecord) throws(TokenServiceError) -> TokenEvent?
    )
        async throws -> TokenStatus
    {
        guard let current = try await vault.token(reference: tokenReference) else {
            throw TokenServiceError(.notFound, "no such token")
        }
        await serializer.acquire("token:" + current.dpan.digits)
        defer { serializer.release("token:" + current.dpan.digits) }
        guard var token = try await vault.token(reference: tokenReference) else {
            throw TokenServiceError(.notFound, "no such token")
        }
        guard let event = try body(&token) else { return Self.status(of: token) }
        token.updatedAt = clock.now()
        try await vault.saveToken(token)
        await notify(token, event: event)
        return Self.status(of: token)
    }

    func notify(_ token: TokenRecord, event: TokenEvent) async {
        // try?: the notification goes out without the suffix rather than not at all.
        let suffix = try? await vault.card(id: token.cardID)?.profile.suffix
        await notifier.tokenStatusChanged(
            TokenStatusNotification(
                tokenReference: token.tokenReference, tokenRequestorID: token.tokenRequestorID,
                deviceID: token.deviceID, event: event, state: token.state,
                suspendedBy: token.suspendedBy.sorted { $0.rawValue < $1.rawValue }, cardSuffix: suffix ?? nil,
                occurredAt: clock.now()))
    }

    static func status(of token: TokenRecord) -> TokenStatus {
        TokenStatus(
            tokenReference: token.tokenReference, deviceID: token.deviceID, state: token.state,
            suspendedBy: token.suspendedBy.sorted { $0.rawValue < $1.rawValue }, domainControls: token.domainControls,
            tokenExpiry: token.tokenExpiry, dpanSuffix: token.dpan.suffix)
    }
}

extension TokenService: IssuerNetworkLink {
    /// The FPAN update path: the card record now holds the new number and expiry; every token keeps its DPAN.
    public func cardReplaced(
        issuerID: String, oldPAN: PrimaryAccountNumber, newPAN: PrimaryAccountNumber, newExpiry: CardExpiry
    ) async throws -> Int {
        let oldLookup = try panLookup(oldPAN)
        let newLookup = try panLookup(newPAN)
        await serializer.acquire("card:" + oldLookup)
        defer { serializer.release("card:" + oldLookup) }
        guard var card = try await vault.card(panLookup: oldLookup), card.issuerID == issuerID else {
            return 0
        }
        if newLookup != oldLookup, try await vault.card(panLookup: newLookup) != nil {
            throw TokenServiceError(.invalidRequest, "the new card number already has tokens of its own")
        }
        card.panLookup = newLookup
        card.encryptedCard = try sealCard(pan: newPAN, expiry: newExpiry, context: "card:" + card.cardID)
        card.profile = CardProfile(
            network: card.profile.network, type: card.profile.type, suffix: newPAN.suffix,
            issuerName: card.profile.issuerName, productName: card.profile.productName)
        card.updatedAt = clock.now()
        try await vault.saveCard(card)
        let tokens = try await vault.tokens(cardID: card.cardID).filter { !$0.deleted }
        for token in tokens { await notify(token, event: .cardUpdated) }
        return tokens.count
    }

    /// Suspends, resumes or deletes every token of a card as the issuer.
    public func applyIssuerAction(
        _ action: TokenLifecycleAction, issuerID: String, pan: PrimaryAccountNumber
    )
        async throws -> Int
    {
        guard let card = try await vault.card(panLookup: try panLookup(pan)), card.issuerID == issuerID else {
            return 0
        }
        var changed = 0
        for token in try await vault.tokens(cardID: card.cardID) where !token.deleted {
            let before = token.state
            let after: TokenStatus
            switch action {
            case .suspend: after = try await suspend(tokenReference: token.tokenReference, by: .issuer)
            case .resume:
                guard token.suspendedBy.contains(.issuer) else { continue }
                after = try await resume(tokenReference: token.tokenReference, by: .issuer)
            case .delete: after = try await delete(tokenReference: token.tokenReference, by: .issuer)
            }
            if after.state != before || action == .resume { changed += 1 }
        }
        return changed
    }

    /// One token, as its issuer: suspend, resume or delete.
    @discardableResult
    public func applyIssuerAction(
        _ action: TokenLifecycleAction, issuerID: String, tokenReference: String
    )
        async throws -> TokenStatus
    {
        guard let token = try await vault.token(reference: tokenReference), token.issuerID == issuerID else {
            throw TokenServiceError(.notFound, "no such token for this issuer")
        }
        switch action {
        case .suspend: return try await suspend(tokenReference: tokenReference, by: .issuer)
        case .resume: return try await resume(tokenReference: tokenReference, by: .issuer)
        case .delete: return try await delete(tokenReference: tokenReference, by: .issuer)
        }
    }
}
