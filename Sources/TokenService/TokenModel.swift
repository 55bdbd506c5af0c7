public import CardBasics
public import Foundation
public import Issuer
public import OrchardCrypto

/// A token BIN range: the DPANs of one issuer and network are drawn from it, and its issuer master keys
/// (proximity and remote) derive every token's card keys. Its prefix must never overlap a BIN the issuer
/// uses for real cards, so a DPAN can never equal a real card number.
public struct TokenRange: Hashable, Sendable, Codable {
    public let rangeID: String
    public let issuerID: String
    public let network: CardNetwork
    /// The token BIN prefix, 6 to 12 digits; every DPAN of the range starts with it.
    public let prefix: String
    /// DPAN length, 13 to 19 digits.
    public let panLength: Int
    /// The issuer master key for proximity cryptograms (usage ``HSMKeyUsage/proximityIssuerMasterKey``).
    public let proximityKey: KeyHandle
    /// The issuer master key for remote cryptograms (usage ``HSMKeyUsage/remoteIssuerMasterKey``).
    public let remoteKey: KeyHandle

    public init(
        rangeID: String, issuerID: String, network: CardNetwork, prefix: String, panLength: Int = 16,
        proximityKey: KeyHandle, remoteKey: KeyHandle
    ) throws(TokenServiceError) {
        let digits = Array(prefix.utf8)
        guard (6...12).contains(digits.count), digits.allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw TokenServiceError(.configuration, "a token range prefix is 6 to 12 digits")
        }
        guard (13...19).contains(panLength), panLength - digits.count >= 4 else {
            throw TokenServiceError(.configuration, "a token range needs a DPAN length of 13–19 with 4 free digits")
        }
        guard proximityKey.usage == .proximityIssuerMasterKey, remoteKey.usage == .remoteIssuerMasterKey else {
            throw TokenServiceError(
                .keyUsageViolation, "a token range needs a proximity and a remote issuer master key")
        }
        self.rangeID = rangeID
        self.issuerID = issuerID
        self.network = network
        self.prefix = prefix
        self.panLength = panLength
        self.proximityKey = proximityKey
        self.remoteKey = remoteKey
    }

    /// A Luhn-valid DPAN from this range, its free digits drawn uniformly from `random`.
    public func drawDPAN(using random: any RandomSource) -> PrimaryAccountNumber? {
        let free = panLength - prefix.utf8.count - 1
        var digits = prefix.utf8.map { Int($0 - 0x30) }
        while digits.count < prefix.utf8.count + free {
            // Bytes of 250 and above are dropped so every digit is equally likely.
            for byte in random.bytes(free) where byte < 250 && digits.count < prefix.utf8.count + free {
                digits.append(Int(byte) % 10)
            }
        }
        digits.append(Luhn.checkDigit(for: digits))
        // try?: nil for a range whose numbers cannot be card numbers (a length outside 12–19).
        return try? PrimaryAccountNumber(String(decoding: digits.map { UInt8($0) + 0x30 }, as: UTF8.self))
    }

    /// Whether a PAN belongs to this range.
    public func contains(_ pan: PrimaryAccountNumber) -> Bool {
        pan.digits.utf8.count == panLength && pan.digits.hasPrefix(prefix)
    }
}

/// A token requestor registered with the token service (EMVCo: a wallet such as Orchard Pay).
public struct TokenRequestor: Hashable, Sendable, Codable {
    /// The 11-digit token requestor ID.
    public let id: String
    public let name: String
    /// The domains its tokens may be used in.
    public let allowedDomains: DomainControls

    public init(id: String, name: String, allowedDomains: DomainControls) {
        self.id = id
        self.name = name
        self.allowedDomains = allowedDomains
    }

    /// Orchard Pay, the wallet of the Orchard devices.
    public static let orchardPay = TokenRequestor(id: "40010075001", name: "Orchard Pay", allowedDomains: .all)
}

/// Where a token may be used (EMVCo token domain restriction controls).
public struct DomainControls: OptionSet, Hashable, Sendable, Codable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// NFC at a terminal.
    public static let contactless = DomainControls(rawValue: 1 << 0)
    /// In an app.
    public static let inApp = DomainControls(rawValue: 1 << 1)
    /// On a website.
    public static let web = DomainControls(rawValue: 1 << 2)
    public static let all: DomainControls = [.contactless, .inApp, .web]

    /// Whether a transaction in `channel` is allowed. Magnetic stripe and key entry never are.
    public func allows(_ channel: PaymentChannel) -> Bool {
        switch channel {
        case .contactless: return contains(.contactless)
        case .inApp: return contains(.inApp)
        case .web: return contains(.web)
        case .magneticStripe, .manualEntry: return false
        }
    }
}

/// A token's lifecycle state.
public enum TokenState: String, Hashable, Sendable, Codable {
    case active, suspended, deleted
}

/// Who asked for a lifecycle change. A suspension is lifted only by the actor that placed it: the issuer
/// alone resumes what the issuer suspended; the cardholder (through the wallet: lost mode) lifts lost mode.
public enum LifecycleActor: String, Hashable, Sendable, Codable, CaseIterable {
    case issuer
    /// The owner of the device, through the token requestor (lost mode, erase, removing a card).
    case cardholder
    /// The token requestor on its own account (e.g. a device that left the account).
    case tokenRequestor
    /// The network (fraud).
    case network
}

/// The sliding window of application transaction counters a token has used.
///
/// It remembers the highest ATC seen and which of the `lookBehind` counters below it were used, so a
/// cryptogram that arrives slightly out of order is still accepted once, a replayed one never, one below
/// the window never (stale), and one too far above the highest never (a cloned or tampered counter).
public struct ATCWindow: Hashable, Sendable, Codable {
    public enum Decision: Hashable, Sendable {
        case fresh, replayed, stale, tooFarAhead
    }

    /// The highest ATC accepted so far, nil before the first transaction.
    public private(set) var highest: UInt16?
    /// Bit `i` set: ATC `highest - i` was used.
    public private(set) var used: UInt64

    public init() {
        highest = nil
        used = 0
    }

    public func check(_ atc: UInt16, policy: ATCPolicy) -> Decision {
        guard let highest else { return Int(atc) > policy.maxForwardJump ? .tooFarAhead : .fresh }
        if atc > highest { return Int(atc - highest) > policy.maxForwardJump ? .tooFarAhead : .fresh }
        let distance = Int(highest - atc)
        if distance >= policy.lookBehind { return .stale }
        return used & (1 << UInt64(distance)) != 0 ? .replayed : .fresh
    }

    /// Marks `atc` used. Call only after ``check(_:policy:)`` said `.fresh` and the cryptogram verified.
    public mutating func record(_ atc: UInt16) {
        guard let current = highest else {
            highest = atc
            used = 1
            return
        }
        if atc > current {
            let shift = Int(atc - current)
            used = shift >= 64 ? 1 : (used << UInt64(shift)) | 1
            highest = atc
        } else {
            let distance = Int(current - atc)
            if distance < 64 { used |= 1 << UInt64(distance) }
        }
    }
}

/// How far the ATC may move.
public struct ATCPolicy: Hashable, Sendable {
    /// Counters below the highest that are still accepted once (out-of-order arrival), 1 to 64.
    public let lookBehind: Int
    /// The largest jump above the highest counter accepted.
    public let maxForwardJump: Int

    public init(lookBehind: Int = 32, maxForwardJump: Int = 1000) {
        self.lookBehind = min(max(lookBehind, 1), 64)
        self.maxForwardJump = max(maxForwardJump, 1)
    }
}

/// One token in the vault. Holds the DPAN (the token service is the one place allowed to), never the FPAN:
/// the card is referenced by ``cardID``.
public struct TokenRecord: Hashable, Sendable, Codable {
    /// The token unique reference shared with the wallet and the Pay server (no DPAN outside the network).
    public let tokenReference: String
    public let dpan: PrimaryAccountNumber
    public let panSequenceNumber: UInt8
    /// The token's own expiry, independent of the card's.
    public let tokenExpiry: CardExpiry
    public let rangeID: String
    public let issuerID: String
    public var cardID: String
    public let tokenRequestorID: String
    public let deviceID: String
    public let deviceKind: String
    public var domainControls: DomainControls
    /// Who currently suspends the token (empty: not suspended).
    public var suspendedBy: Set<LifecycleActor>
    public var deleted: Bool
    public var atcWindow: ATCWindow
    public let createdAt: Date
    public var updatedAt: Date

    public var state: TokenState {
        if deleted { return .deleted }
        return suspendedBy.isEmpty ? .active : .suspended
    }
}

/// One card in the vault: the FPAN and card expiry encrypted under the vault key, found through a keyed
/// hash of the FPAN.
public struct CardRecord: Hashable, Sendable, Codable {
    public let cardID: String
    public let issuerID: String
    /// HMAC-SHA256 of the FPAN under the vault's lookup key, hex.
    public var panLookup: String
    /// `IV ‖ ciphertext ‖ tag` of the FPAN and card expiry (AES-256-GCM, context: the card ID).
    public var encryptedCard: [UInt8]
    /// The payment account reference: shared by every token of this card, kept across re-issues.
    public let paymentAccountReference: String
    /// Display data (network, type, last four digits of the FPAN).
    public var profile: CardProfile
    public var updatedAt: Date
}

/// A Check Card decision waiting for Link and Provision. The card data is kept encrypted (never the CVV).
public struct ProvisioningSession: Hashable, Sendable, Codable {
    public let sessionID: String
    public let tokenRequestorID: String
    public let deviceID: String
    public let deviceKind: String
    public let issuerID: String
    /// `IV ‖ ciphertext ‖ tag` of the FPAN and card expiry (context: the session ID).
    public let encryptedCard: [UInt8]
    public var decision: CardCheckDecision
    public let expiresAt: Date
    /// Set when Link and Provision created the token (a session provisions once).
    public var tokenReference: String?
    /// Set when the session ended without a token (declined, terms refused).
    public var closed: Bool
}

/// A stored first answer, returned to every retry with the same key.
public struct IdempotencyRecord: Hashable, Sendable, Codable {
    public let scope: String
    public let key: String
    /// SHA-256 of the request, hex: a retry must be the same request.
    public let requestFingerprint: String
    /// The JSON of the first response; empty while ``started`` is set.
    public let response: [UInt8]
    public let createdAt: Date
    /// Set while an authorization has its counter recorded and no final answer yet: what a retry of the same
    /// request needs to resume it (``NetworkAuthorizationAPI/AuthorizationStep/counterRecorded``). Nil for every
    /// answered request.
    public let started: StartedAuthorization?

    public init(
        scope: String, key: String, requestFingerprint: String, response: [UInt8], createdAt: Date,
        started: StartedAuthorization? = nil
    ) {
        self.scope = scope
        self.key = key
        self.requestFingerprint = requestFingerprint
        self.response = response
        self.createdAt = createdAt
        self.started = started
    }
}

/// An authorization whose ATC the token service recorded, waiting for the issuer's answer (held in the
/// transaction's ``IdempotencyRecord`` until the answer replaces it).
public struct StartedAuthorization: Hashable, Sendable, Codable {
    /// The token the counter was recorded on.
    public let tokenReference: String
    /// The counter this transaction used.
    public let applicationTransactionCounter: UInt16

    public init(tokenReference: String, applicationTransactionCounter: UInt16) {
        self.tokenReference = tokenReference
        self.applicationTransactionCounter = applicationTransactionCounter
    }
}
