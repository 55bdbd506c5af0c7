public import Foundation
public import OrchardCrypto
public import OrchardX509
public import PaymentToken

/// Verifies Apple's signature on payment tokens: the CMS signature over the token's signed bytes, the
/// chain to a trusted root at the signing time, Apple's marker extensions, exactly a leaf and an intermediate
/// embedded, and the signing time within the freshness window of the injected clock. Safe to share between
/// threads; keep one per process so verified chains stay cached.
public final class PaymentTokenVerifier: Sendable {
    /// When the signer's chain is validated and what the signing time is compared with.
    public enum Evaluation: Sendable {
        /// Now, from the injected clock: the chain at the signing time, the signing time within the window of now.
        case clock
        /// At the token's own signing time, with no freshness check: only for replaying old tokens
        /// (Apple's published ones have expired leaves). Never use it for live payments.
        case insecureAtSigningTime
    }

    /// How far the CMS signing time may lie from the clock, either way, under `.clock` evaluation.
    public let freshnessWindow: TimeInterval
    private let clock: any WallClock
    private let verifier: CMSVerifier
    private let evaluation: Evaluation

    /// A verifier trusting `trustRoots`; throws `invalidConfiguration` when they are unusable.
    ///
    /// - Parameters:
    ///   - trustRoots: default Apple Root CA - G3.
    ///   - freshnessWindow: how far the CMS signing time may lie from now, either way (default 5 minutes).
    ///   - clock: the time signatures and the freshness window are checked at (the system clock).
    ///   - evaluation: `.clock` for live payments; `.insecureAtSigningTime` only for replaying old tokens.
    ///   - chainCacheCapacity: verified signer chains kept (0 verifies every chain again: only for measuring).
    public init(
        trustRoots: [Certificate] = [AppleRootCertificates.rootCAG3], freshnessWindow: TimeInterval = 300,
        clock: any WallClock = SystemClock(), evaluation: Evaluation = .clock, chainCacheCapacity: Int = 1024
    ) throws(MerchantKitError) {
        self.freshnessWindow = freshnessWindow
        self.clock = clock
        self.evaluation = evaluation
        do {
            let chains = try CertificateChainVerifier(
                trustRoots: trustRoots, policy: .applePaymentTokenSigning, cacheCapacity: chainCacheCapacity,
                clock: clock)
            verifier = CMSVerifier(
                chainVerifier: chains, embeddedCertificatesPolicy: .applePaymentTokenEmbeddedCertificates,
                cacheCapacity: chainCacheCapacity, clock: clock)
        } catch {
            throw MerchantKitError(.invalidConfiguration, "the trust roots are unusable", underlying: error)
        }
    }

    /// Who signed a token and when.
    public struct SignatureInfo: Sendable {
        /// The CMS signing time, checked against the freshness window.
        public let signingTime: Date
        /// Leaf first, root last.
        public let chain: [Certificate]
        /// The leaf certificate that signed the token (the chain's first).
        public var signer: Certificate { chain[0] }
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
            return .failure(
                MerchantKitError(
                    .signatureInvalid, "the signature is not a well-formed CMS SignedData", underlying: error))
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
                    return .failure(
                        MerchantKitError(
                            .signingTimeTooOld,
                            "signed \(Int(now.timeIntervalSince(signingTime))) s ago, beyond the \(Int(freshnessWindow)) s window: a stale or replayed token"
                        ))
                }
                if signingTime > now + freshnessWindow {
                    return .failure(
                        MerchantKitError(
                            .signingTimeTooNew,
                            "signed \(Int(signingTime.timeIntervalSince(now))) s in the future, beyond the \(Int(freshnessWindow)) s window: check this server's clock"
                        ))
                }
            }
            return .success(SignatureInfo(signingTime: signingTime, chain: chain))
        }
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
