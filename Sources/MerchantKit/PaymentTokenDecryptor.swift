import Foundation
import OrchardCrypto
import OrchardX509
import PaymentToken

/// Verifies and decrypts Apple Pay payment tokens (EC_v1 and RSA_v1), following Apple's reference
/// exactly: signature and chain first, then freshness, then the key by `publicKeyHash`, then decryption,
/// then the replay guard. Safe to share between threads; keep one per process so verified chains stay cached.
///
/// ```swift
/// let identity = try MerchantIdentity(certificatePEM: certPEM, privateKeyPEM: keyPEM)
/// let decryptor = try PaymentTokenDecryptor(identities: [identity])
/// let token = try PaymentToken(jsonBytes: requestBody)
/// let result = try decryptor.decrypt(token, order: ExpectedOrder(applicationData: orderData, amount: 1999, currencyCode: "840"))
/// charge(dpan: result.payment.applicationPrimaryAccountNumber, credential: result.payment.credential)
/// ```
public final class PaymentTokenDecryptor: Sendable {
    /// When the signer's chain is validated and what the signing time is compared with.
    public enum Evaluation: Sendable {
        /// Now, from the injected clock: the chain at the signing time, the signing time within the window of now.
        case clock
        /// At the token's own signing time, with no freshness check: only for replaying old tokens
        /// (Apple's published ones have expired leaves). Never use it for live payments.
        case insecureAtSigningTime
    }

    public let identities: [MerchantIdentity]
    public let freshnessWindow: TimeInterval
    private let clock: any WallClock
    private let verifier: CMSVerifier
    private let replayGuard: (any TransactionReplayGuard)?
    private let evaluation: Evaluation

    /// - Parameters:
    ///   - identities: the merchant's processing identities (several during a key rotation).
    ///   - trustRoots: default Apple Root CA - G3.
    ///   - freshnessWindow: how far the CMS signing time may lie from now, either way (default 5 minutes).
    ///   - replayGuard: refuses a transactionId seen before (Step 5 of Apple's reference).
    public init(
        identities: [MerchantIdentity], trustRoots: [Certificate] = [AppleRootCertificates.rootCAG3],
        freshnessWindow: TimeInterval = 300, clock: any WallClock = SystemClock(),
        replayGuard: (any TransactionReplayGuard)? = nil, evaluation: Evaluation = .clock
    ) throws(MerchantKitError) {
        guard !identities.isEmpty else {
            throw MerchantKitError(.invalidConfiguration, "configure at least one merchant processing identity")
        }
        self.identities = identities
        self.freshnessWindow = freshnessWindow
        self.clock = clock
        self.replayGuard = replayGuard
        self.evaluation = evaluation
        do {
            let chains = try CertificateChainVerifier(
                trustRoots: trustRoots, policy: .applePaymentTokenSigning, clock: clock)
            verifier = CMSVerifier(
                chainVerifier: chains, embeddedCertificatesPolicy: .applePaymentTokenEmbeddedCertificates, clock: clock)
        } catch {
            throw MerchantKitError(.invalidConfiguration, "the trust roots are unusable", underlying: error)
        }
    }

    /// Who signed a token and when.
    public struct SignatureInfo: Sendable {
        public let signingTime: Date
        /// Leaf first, root last.
        public let chain: [Certificate]
        public var signer: Certificate { chain[0] }
    }

    /// A verified and decrypted token.
    public struct Result: Sendable {
        public let payment: DecryptedPaymentData
        public let signature: SignatureInfo
        /// `header.transactionId`, lower-case hex.
        public let transactionId: String
        public let version: PaymentData.Version
    }

    /// Checks the signature, the chain (at the signing time), Apple's markers and the freshness window,
    /// without decrypting. The outcome is a value: `.success` or the reason as a ``MerchantKitError``.
    public func verifySignature(_ token: PaymentToken) -> Swift.Result<SignatureInfo, MerchantKitError> {
        let paymentData = token.paymentData
        let outcome: CMSVerificationResult
        do {
            outcome = try verifier.verifyDetachedSignature(
                paymentData.signature, content: paymentData.signedBytes, at: .signingTime)
        } catch {
            return .failure(MerchantKitError(.signatureInvalid, "the signature is not a well-formed CMS SignedData", underlying: error))
        }
        switch outcome {
        case .invalid(let failure):
            return .failure(Self.map(failure))
        case .valid(_, let chain, let signingTime):
            guard let signingTime else {
                return .failure(MerchantKitError(.signatureInvalid, "the signature has no signingTime attribute"))
            }
            if case .clock = evaluation {
                let now = clock.now()
                if signingTime < now - freshnessWindow {
                    return .failure(MerchantKitError(
                        .signingTimeTooOld,
                        "signed \(Int(now.timeIntervalSince(signingTime))) s ago, beyond the \(Int(freshnessWindow)) s window: a stale or replayed token"))
                }
                if signingTime > now + freshnessWindow {
                    return .failure(MerchantKitError(
                        .signingTimeTooNew,
                        "signed \(Int(signingTime.timeIntervalSince(now))) s in the future, beyond the \(Int(freshnessWindow)) s window: check this server's clock"))
                }
            }
            return .success(SignatureInfo(signingTime: signingTime, chain: chain))
        }
    }

    /// Verifies, decrypts and (with `order`) checks a token against the merchant's own order.
    public func decrypt(_ token: PaymentToken, order: ExpectedOrder? = nil) throws(MerchantKitError) -> Result {
        let signature = try verifySignature(token).get()
        let output = try PayloadDecryption(identities: identities).decrypt(token.paymentData)
        let payment: DecryptedPaymentData
        do {
            payment = try DecryptedPaymentData(plaintext: output.plaintext)
        } catch {
            throw MerchantKitError(.malformedPaymentData, "the decrypted payment data is not Apple's object", underlying: error)
        }
        if let order { try order.check(header: token.paymentData.header, payment: payment) }
        if let replayGuard,
            !replayGuard.recordFirstUse(of: token.paymentData.header.transactionId, signedAt: signature.signingTime)
        {
            throw MerchantKitError(.replayed, "this transactionId was already processed")
        }
        return Result(
            payment: payment, signature: signature, transactionId: token.paymentData.header.transactionIdHex,
            version: token.paymentData.version)
    }

    private static func map(_ failure: VerificationFailure) -> MerchantKitError {
        switch failure.code {
        case .policyViolation:
            MerchantKitError(.markerMissing, failure.message)
        case .untrustedChain, .certificateExpired, .certificateNotYetValid, .invalidCertificateSignature,
            .invalidChain:
            MerchantKitError(.chainUntrusted, failure.message)
        default:
            MerchantKitError(.signatureInvalid, failure.message)
        }
    }
}
