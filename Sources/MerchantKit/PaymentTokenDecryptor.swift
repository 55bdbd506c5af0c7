public import Foundation
public import OrchardCrypto
public import OrchardX509
public import PaymentToken

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
    /// How signatures are evaluated: at the current time (live payments) or at the signing time (old fixtures only).
    public typealias Evaluation = PaymentTokenVerifier.Evaluation
    /// Who signed a token and when.
    public typealias SignatureInfo = PaymentTokenVerifier.SignatureInfo

    /// The processing identities tokens may be encrypted to; never empty.
    public let identities: [MerchantIdentity]
    /// The signature check every token passes before decryption.
    public let verifier: PaymentTokenVerifier
    private let replayGuard: (any TransactionReplayGuard)?

    /// A decryptor for tokens encrypted to any of `identities`; throws `invalidConfiguration` for no identity or
    /// unusable trust roots.
    ///
    /// - Parameters:
    ///   - identities: the merchant's processing identities (several during a key rotation).
    ///   - trustRoots: default Apple Root CA - G3.
    ///   - freshnessWindow: how far the CMS signing time may lie from now, either way (default 5 minutes).
    ///   - clock: the time signatures and the freshness window are checked at (the system clock).
    ///   - replayGuard: refuses a transactionId seen before (Step 5 of Apple's reference).
    ///   - evaluation: `.clock` for live payments; `.insecureAtSigningTime` only for replaying old tokens.
    ///   - chainCacheCapacity: verified signer chains kept (0 verifies every chain again: only for measuring).
    public init(
        identities: [MerchantIdentity], trustRoots: [Certificate] = [AppleRootCertificates.rootCAG3],
        freshnessWindow: TimeInterval = 300, clock: any WallClock = SystemClock(),
        replayGuard: (any TransactionReplayGuard)? = nil, evaluation: Evaluation = .clock,
        chainCacheCapacity: Int = 1024
    ) throws(MerchantKitError) {
        guard !identities.isEmpty else {
            throw MerchantKitError(.invalidConfiguration, "configure at least one merchant processing identity")
        }
        self.identities = identities
        self.replayGuard = replayGuard
        verifier = try PaymentTokenVerifier(
            trustRoots: trustRoots, freshnessWindow: freshnessWindow, clock: clock, evaluation: evaluation,
            chainCacheCapacity: chainCacheCapacity)
    }

    /// A verified and decrypted token.
    public struct Result: Sendable {
        /// The decrypted payment data: the DPAN, expiry, amount, currency and cryptogram to send to the processor.
        public let payment: DecryptedPaymentData
        /// Who signed the token and when.
        public let signature: SignatureInfo
        /// The token's version (EC_v1 or RSA_v1).
        public let version: PaymentData.Version
        /// `header.transactionId`'s bytes.
        public let transactionIdBytes: [UInt8]
        /// `header.transactionId`, lower-case hex (made on demand: most callers want the bytes or nothing).
        public var transactionId: String { Hex.encode(transactionIdBytes, lowercase: true) }
    }

    /// Verifies, decrypts and (with `order`) checks a token against the merchant's own order.
    public func decrypt(_ token: PaymentToken, order: ExpectedOrder? = nil) throws(MerchantKitError) -> Result {
        let signature = try verifier.verifySignature(token).get()
        let output = try PayloadDecryption(identities: identities).decrypt(token.paymentData)
        let payment: DecryptedPaymentData
        do {
            payment = try DecryptedPaymentData(plaintext: output.plaintext)
        } catch {
            throw MerchantKitError(
                .malformedPaymentData, "the decrypted payment data is not Apple's object", underlying: error)
        }
        if let order { try order.check(header: token.paymentData.header, payment: payment) }
        if let replayGuard,
            !replayGuard.recordFirstUse(of: token.paymentData.header.transactionId, signedAt: signature.signingTime)
        {
            throw MerchantKitError(.replayed, "this transactionId was already processed")
        }
        return Result(
            payment: payment, signature: signature, version: token.paymentData.version,
            transactionIdBytes: token.paymentData.header.transactionId)
    }

}
