public import CardBasics
public import Foundation

// The messages between the card network (token service) and an issuer. They live in the Issuer module
// because the issuer is the bottom of the dependency chain: TokenService and Acquirer import them.

/// How a card or token was presented.
public enum PaymentChannel: String, Hashable, Sendable, Codable, CaseIterable {
    /// NFC at a terminal, EMV mode (POS entry mode 07).
    case contactless
    /// Inside an app, with a remote cryptogram.
    case inApp
    /// On a website, with a remote cryptogram.
    case web
    /// Magnetic stripe read (POS entry mode 90): never allowed for a device token.
    case magneticStripe
    /// Key-entered card number (POS entry mode 01): never allowed for a device token.
    case manualEntry
}

/// The merchant as the acquirer describes it in an authorization.
public struct MerchantInfo: Hashable, Sendable, Codable {
    /// The acquirer's identifier for the merchant (ISO 8583 DE 42).
    public let merchantID: String
    /// Name as printed on the statement (DE 43).
    public let name: String
    /// ISO 18245 merchant category code, four digits (DE 18).
    public let categoryCode: String
    /// ISO 3166-1 numeric country code, three digits.
    public let countryCode: String

    public init(merchantID: String, name: String, categoryCode: String, countryCode: String) {
        self.merchantID = merchantID
        self.name = name
        self.categoryCode = categoryCode
        self.countryCode = countryCode
    }
}

/// What a card looks like to a wallet: enough to display it, nothing that identifies the account.
public struct CardProfile: Hashable, Sendable, Codable {
    public let network: CardNetwork
    public let type: CardType
    /// Last four digits of the card number.
    public let suffix: String
    public let issuerName: String
    public let productName: String

    public init(network: CardNetwork, type: CardType, suffix: String, issuerName: String, productName: String) {
        self.network = network
        self.type = type
        self.suffix = suffix
        self.issuerName = issuerName
        self.productName = productName
    }
}

/// Why a provisioning check was declined, as a value a wallet can explain. Extensible.
public struct CardCheckDeclineReason: Hashable, Sendable, Codable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The issuer has no such card.
    public static let unknownCard = CardCheckDeclineReason(rawValue: "unknownCard")
    /// The expiry or the card verification value does not match the card.
    public static let verificationFailed = CardCheckDeclineReason(rawValue: "verificationFailed")
    /// The card has expired.
    public static let cardExpired = CardCheckDeclineReason(rawValue: "cardExpired")
    /// The issuer does not allow this card in a wallet (policy, risk, card status).
    public static let notEligible = CardCheckDeclineReason(rawValue: "notEligible")
    /// Too many wrong one-time codes.
    public static let tooManyAttempts = CardCheckDeclineReason(rawValue: "tooManyAttempts")
    /// The step-up challenge has expired or was already used.
    public static let challengeExpired = CardCheckDeclineReason(rawValue: "challengeExpired")
    /// The user did not accept the terms and conditions (decided by the token service).
    public static let termsNotAccepted = CardCheckDeclineReason(rawValue: "termsNotAccepted")

    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
    public var description: String { rawValue }
}

/// A step-up challenge: the user must enter the one-time code the issuer sent.
public struct StepUpChallenge: Hashable, Sendable, Codable {
    /// The issuer's reference for this challenge; the code is checked against it.
    public let reference: String
    /// How the code was sent (`sms`, `email`, `app`).
    public let method: String
    /// Where it was sent, masked (`•••• 0142`).
    public let destinationHint: String

    public init(reference: String, method: String, destinationHint: String) {
        self.reference = reference
        self.method = method
        self.destinationHint = destinationHint
    }
}

/// The issuer's answer to a provisioning check (the "green / yellow / red" decision).
public enum CardCheckDecision: Hashable, Sendable, Codable {
    /// Green: the card may be tokenised.
    case approve(CardProfile)
    /// Yellow: the card may be tokenised once the user has passed the challenge.
    case stepUp(StepUpChallenge, CardProfile)
    /// Red: the card must not be tokenised.
    case decline(CardCheckDeclineReason)

    /// The card's display data, when the issuer identified the card.
    public var profile: CardProfile? {
        switch self {
        case .approve(let profile), .stepUp(_, let profile): return profile
        case .decline: return nil
        }
    }
}

/// A provisioning check as the token service forwards it to the issuer, after decrypting the card data.
///
/// Not `Codable`: it carries the card verification value, which must never be written anywhere.
public struct CardCheckRequest: Sendable {
    public let pan: PrimaryAccountNumber
    public let expiry: CardExpiry
    public let cardVerificationValue: CardVerificationValue
    public let cardholderName: String
    /// The wallet that asks (EMVCo token requestor ID).
    public let tokenRequestorID: String
    /// The kind of device the token is for (`phone`, `watch`, `ipad`, `mac`).
    public let deviceKind: String

    public init(
        pan: PrimaryAccountNumber, expiry: CardExpiry, cardVerificationValue: CardVerificationValue,
        cardholderName: String, tokenRequestorID: String, deviceKind: String
    ) {
        self.pan = pan
        self.expiry = expiry
        self.cardVerificationValue = cardVerificationValue
        self.cardholderName = cardholderName
        self.tokenRequestorID = tokenRequestorID
        self.deviceKind = deviceKind
    }
}

/// Token data the network adds to an authorization it detokenised (EMVCo: token, TR ID, PAR, assurance).
public struct TokenContext: Hashable, Sendable, Codable {
    public let tokenRequestorID: String
    /// The payment account reference shared by every token of the card.
    public let paymentAccountReference: String
    /// Last four digits of the DPAN.
    public let tokenSuffix: String
    public let tokenExpiry: CardExpiry

    public init(tokenRequestorID: String, paymentAccountReference: String, tokenSuffix: String, tokenExpiry: CardExpiry)
    {
        self.tokenRequestorID = tokenRequestorID
        self.paymentAccountReference = paymentAccountReference
        self.tokenSuffix = tokenSuffix
        self.tokenExpiry = tokenExpiry
    }
}

/// An authorization request as the issuer receives it (the FPAN in place of the token).
public struct IssuerAuthorizationRequest: Hashable, Sendable, Codable {
    /// Unique per transaction; a retry carries the same value and gets the first answer.
    public let networkTransactionID: String
    public let pan: PrimaryAccountNumber
    /// The card's expiry when known (the network takes it from the vault).
    public let expiry: CardExpiry?
    public let amount: Money
    public let channel: PaymentChannel
    public let merchant: MerchantInfo
    /// Present when the network detokenised a DPAN.
    public let token: TokenContext?
    /// Whether the network verified the transaction's cryptogram on the issuer's behalf.
    public let cryptogramVerified: Bool
    public let transmittedAt: Date

    public init(
        networkTransactionID: String, pan: PrimaryAccountNumber, expiry: CardExpiry?, amount: Money,
        channel: PaymentChannel, merchant: MerchantInfo, token: TokenContext?, cryptogramVerified: Bool,
        transmittedAt: Date
    ) {
        self.networkTransactionID = networkTransactionID
        self.pan = pan
        self.expiry = expiry
        self.amount = amount
        self.channel = channel
        self.merchant = merchant
        self.token = token
        self.cryptogramVerified = cryptogramVerified
        self.transmittedAt = transmittedAt
    }
}

/// The issuer's answer to an authorization.
public struct IssuerAuthorizationResponse: Hashable, Sendable, Codable {
    public let networkTransactionID: String
    public let responseCode: ResponseCode
    /// Six characters, present when approved (ISO 8583 DE 38).
    public let approvalCode: String?
    /// A short, card-number-free explanation for logs and tests.
    public let reason: String

    public init(networkTransactionID: String, responseCode: ResponseCode, approvalCode: String?, reason: String) {
        self.networkTransactionID = networkTransactionID
        self.responseCode = responseCode
        self.approvalCode = approvalCode
        self.reason = reason
    }
}

/// What the network asks of an issuer. ``Issuer`` implements it in process; a remote issuer would be
/// reached through a client that implements it over HTTPS.
public protocol IssuerHost: Sendable {
    /// The issuer's identifier in the network's routing table.
    var issuerID: String { get }
    /// Decides whether a card may be tokenised. The CVV is checked and forgotten.
    func checkCard(_ request: CardCheckRequest) async throws -> CardCheckDecision
    /// Checks the one-time code of a step-up challenge: approve on the right code, another step-up while
    /// attempts remain, decline after too many.
    func verifyOneTimeCode(reference: String, code: String) async throws -> CardCheckDecision
    /// Decides an authorization. A retry with the same ``IssuerAuthorizationRequest/networkTransactionID``
    /// returns the first answer and moves no money twice.
    func authorize(_ request: IssuerAuthorizationRequest) async throws -> IssuerAuthorizationResponse
    /// Cancels the authorization a ``IssuerReversalRequest`` names, exactly once (see ``ReversalOutcome``).
    /// Hosts that cannot reverse inherit a default that throws.
    func reverse(_ request: IssuerReversalRequest) async throws -> IssuerReversalResponse
}

/// A lifecycle action on tokens.
public enum TokenLifecycleAction: String, Hashable, Sendable, Codable, CaseIterable {
    case suspend, resume, delete
}

/// What an issuer asks of the network: the FPAN update path and card-level token lifecycle.
/// The token service implements it.
public protocol IssuerNetworkLink: Sendable {
    /// A card was re-issued (new number or new expiry): every token of the old card keeps its DPAN and
    /// now maps to the new card. Returns how many tokens were updated.
    func cardReplaced(
        issuerID: String, oldPAN: PrimaryAccountNumber, newPAN: PrimaryAccountNumber, newExpiry: CardExpiry
    ) async throws -> Int
    /// Suspends, resumes or deletes every token of a card, as the issuer. Returns how many tokens changed.
    func applyIssuerAction(
        _ action: TokenLifecycleAction, issuerID: String, pan: PrimaryAccountNumber
    )
        async throws -> Int
}
