/// An ISO 8583 field 39 (action code) value: two characters, `00` approves, everything else declines.
///
/// The codes Orchard uses, and what each means here:
///
/// | code | meaning | who answers it |
/// |---|---|---|
/// | `00` | approved | issuer |
/// | `03` | invalid merchant (a remote cryptogram made for another merchant than the one charging) | token service |
/// | `05` | do not honour (card or account closed, generic refusal) | issuer |
/// | `14` | invalid card number (no such card, no such token) | issuer, token service |
/// | `51` | insufficient funds (balance or credit line) | issuer |
/// | `54` | expired card or token, or an expiry that does not match | issuer, token service |
/// | `57` | not permitted to cardholder (channel, category, currency, token domain) | issuer, token service |
/// | `61` | exceeds the amount limit per transaction | issuer |
/// | `62` | restricted card (card restricted or frozen; token suspended or deleted) | issuer, token service |
/// | `88` | **cryptographic failure** (see below) | token service (for the issuer), issuer |
/// | `91` | issuer unavailable (the token service could not reach the issuer) | token service |
/// | `96` | system malfunction | any |
///
/// `88` follows Mastercard's DE 39 "cryptographic failure"; it is the documented code for a failed
/// cryptogram: missing, not verified, not bound to the request's amount or currency, or carrying an ATC
/// that is replayed, stale or too far ahead. A struct, not an enum, so codes can be added without breaking callers.
public struct ResponseCode: Hashable, Sendable, Codable, CustomStringConvertible {
    /// The two-character code.
    public let rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    public static let approved = ResponseCode(rawValue: "00")
    /// Invalid merchant: the payment was made for another merchant than the one charging it.
    public static let invalidMerchant = ResponseCode(rawValue: "03")
    public static let doNotHonour = ResponseCode(rawValue: "05")
    public static let invalidCardNumber = ResponseCode(rawValue: "14")
    public static let insufficientFunds = ResponseCode(rawValue: "51")
    public static let expiredCard = ResponseCode(rawValue: "54")
    public static let notPermittedToCardholder = ResponseCode(rawValue: "57")
    public static let exceedsAmountLimit = ResponseCode(rawValue: "61")
    public static let restrictedCard = ResponseCode(rawValue: "62")
    /// A cryptogram failed: the documented code for every cryptogram and ATC failure.
    public static let cryptographicFailure = ResponseCode(rawValue: "88")
    public static let issuerUnavailable = ResponseCode(rawValue: "91")
    public static let systemMalfunction = ResponseCode(rawValue: "96")

    /// Whether this code approves the transaction.
    public var isApproved: Bool { self == .approved }

    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }
}
