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
    public init(credential: String, paymentMethod: PaymentMethodDisplay?) {
        self.credential = credential
        self.paymentMethod = paymentMethod
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
