public import Foundation
import OrchardHTTP
public import OrchardX509
public import PayAPI

extension PayServerClient {
    /// The merchant IDs `applicationIdentifier` may pay for.
    public func entitlements(of applicationIdentifier: String) async throws(PayClientError) -> AppEntitlements {
        try await get(PayAPI.Route.appEntitlements(applicationIdentifier))
    }

    /// The Pay server's credential certificate (not yet checked: see ``PayCredentialKey``).
    public func credentialCertificate() async throws(PayClientError) -> Certificate {
        let body: CredentialCertificateResponse = try await get(PayAPI.Route.credentialCertificate)
        guard let certificate = try? Certificate(pemEncoded: body.certificate) else {
            throw PayClientError(.protocolViolation, "the credential certificate is not a PEM certificate")
        }
        return certificate
    }

    /// A single-use nonce issued to this device (32 bytes).
    public func paymentNonce() async throws(PayClientError) -> [UInt8] {
        let body: PaymentNonceResponse = try await post(PayAPI.Route.paymentNonce, [String: String]())
        guard let nonce = Data(base64Encoded: body.nonce), nonce.count == 32 else {
            throw PayClientError(.protocolViolation, "the nonce is not 32 bytes of base64")
        }
        return Array(nonce)
    }

    /// Exchanges a sealed payment credential for the PKPaymentToken JSON, exactly as the Pay server made it.
    public func exchange(_ body: PaymentCredentialExchange) async throws(PayClientError) -> Data {
        try await postRaw(PayAPI.Route.paymentCredential, body)
    }
}
