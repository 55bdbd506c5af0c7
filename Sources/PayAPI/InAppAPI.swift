import Foundation

extension PayAPI.Route {
    /// `GET`: the certificate of the Pay server's device-to-server credential key (``CredentialCertificateResponse``).
    public static let credentialCertificate = "/v1/payments/credential-certificate"
    /// `POST {}`: a single-use nonce for one payment credential (``PaymentNonceResponse``).
    public static let paymentNonce = "/v1/payments/nonce"
    /// `POST` ``PaymentCredentialExchange``: the sealed credential; answers the PKPaymentToken JSON.
    public static let paymentCredential = "/v1/payments/credential"
}

extension PayAPI {
    /// The Pay server's credential certificate: issued directly by the Orchard root, subject
    /// `O=Orchard, CN=Orchard Pay credential`, a P-256 key for key agreement. A Secure Element seals payment
    /// credentials only to the key of such a certificate.
    public enum CredentialCertificate {
        public static let commonName = "Orchard Pay credential"
    }
}

/// The answer of ``PayAPI/Route/credentialCertificate``.
public struct CredentialCertificateResponse: Codable, Sendable, Hashable {
    /// PEM.
    public let certificate: String
    public init(certificate: String) { self.certificate = certificate }
}

/// The answer of ``PayAPI/Route/paymentNonce``.
public struct PaymentNonceResponse: Codable, Sendable, Hashable {
    /// 32 bytes, base64.
    public let nonce: String
    /// How long the nonce is valid (60).
    public let expiresInSeconds: Int
    public init(nonce: String, expiresInSeconds: Int) {
        self.nonce = nonce
        self.expiresInSeconds = expiresInSeconds
    }
}

/// The body of ``PayAPI/Route/paymentCredential``.
public struct PaymentCredentialExchange: Codable, Sendable, Hashable {
    /// The sealed credential (`PaymentCredential.SealedPaymentCredential`), base64.
    public let credential: String
    /// What the token's `paymentMethod` shows (the wallet's display data), if anything.
    public let paymentMethod: PaymentMethodDisplay?
    /// A recurring, automatic reload or deferred payment's request for a merchant token (absent otherwise).
    public let merchantToken: MerchantTokenRequest?
    public init(
        credential: String, paymentMethod: PaymentMethodDisplay?, merchantToken: MerchantTokenRequest? = nil
    ) {
        self.credential = credential
        self.paymentMethod = paymentMethod
        self.merchantToken = merchantToken
    }
}

/// A merchant token asked for with a payment (Apple Pay JS version 14's `recurringPaymentRequest`,
/// `automaticReloadPaymentRequest` and `deferredPaymentRequest`, PassKit's equivalents): the Pay server puts a
/// merchant token in the token's payment data (`merchantTokenIdentifier`, `merchantTokenMetadata`), minted once for
/// the merchant and the device account the user pays with (``tokenReference``, a card of the calling device), and
/// the same for that merchant and card every time after.
///
/// JSON: `{"kind": "recurring", "tokenReference": "tok_…"}`.
public struct MerchantTokenRequest: Codable, Sendable, Hashable {
    /// The payment types that carry a merchant token (several merchants' tokens carry authentication responses).
    public enum Kind: String, Codable, Sendable, CaseIterable {
        case recurring, automaticReload, deferred
    }
    public let kind: Kind
    /// The token (device account) of the card the user pays with, as the token service named it at provisioning.
    public let tokenReference: String
    public init(kind: Kind, tokenReference: String) {
        self.kind = kind
        self.tokenReference = tokenReference
    }
}

/// A token's `paymentMethod`: display name (e.g. "Visa 1234"), network and type (credit, debit, prepaid).
public struct PaymentMethodDisplay: Codable, Sendable, Hashable {
    public let displayName: String
    public let network: String
    public let type: String
    public init(displayName: String, network: String, type: String) {
        self.displayName = displayName
        self.network = network
        self.type = type
    }
}
