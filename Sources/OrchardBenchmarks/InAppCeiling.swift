internal import Foundation
public import OrchardCrypto
import PaymentCredential
public import PaymentToken

/// The crypto ceiling of the Pay server's credential exchange: the same cryptographic work per credential
/// without HTTP, TLS, JSON parsing or SQLite — open the sealed credential (ECDH, HKDF, AES-GCM), verify the
/// Secure Element's ECDSA signature, check the nonce binding, take the nonce's keyed hash, build the 3DSecure
/// payment data and encrypt and sign it (an ephemeral key, ECDH, the Apple KDF, AES-GCM, a CMS signature).
public enum InAppCeiling {
    /// What one exchange needs, prepared outside the timed phase.
    public struct Inputs: Sendable {
        public let sealedCredential: [UInt8]
        public let credentialKey: P256.KeyAgreement.PrivateKey
        public let secureElementKey: P256.Signing.PublicKey
        public let recipient: MerchantProcessingPublicKey
        public let encoder: PaymentTokenEncoder

        public init(
            sealedCredential: [UInt8], credentialKey: P256.KeyAgreement.PrivateKey,
            secureElementKey: P256.Signing.PublicKey, recipient: MerchantProcessingPublicKey,
            encoder: PaymentTokenEncoder
        ) {
            self.sealedCredential = sealedCredential
            self.credentialKey = credentialKey
            self.secureElementKey = secureElementKey
            self.recipient = recipient
            self.encoder = encoder
        }
    }

    /// One exchange's cryptography; throws when a step fails (so a broken input is never timed).
    public static func exchangeOnce(_ inputs: Inputs, nonceHashKey: SymmetricKey) throws {
        let opened = try SealedPaymentCredential.open(inputs.sealedCredential, with: inputs.credentialKey)
        guard opened.isSigned(by: inputs.secureElementKey) else {
            throw BenchmarkError(.mismatch, "the benchmark credential's signature does not verify")
        }
        let credential = opened.credential
        guard credential.cryptogram.isBound(toNonce: credential.nonce) else {
            throw BenchmarkError(.mismatch, "the benchmark credential's cryptogram is not bound to its nonce")
        }
        _ = HMAC<SHA256>.authenticationCode(for: credential.nonce, using: nonceHashKey)
        let payment = JSONValue.object([
            ("applicationPrimaryAccountNumber", .string(credential.dpanString)),
            ("applicationExpirationDate", .string(credential.expiry)),
            ("currencyCode", .string(String(credential.currency))),
            ("transactionAmount", .number(String(credential.amount))),
            ("deviceManufacturerIdentifier", .string("4F5243484152")),
            ("paymentDataType", .string("3DSecure")),
            (
                "paymentData",
                .object([
                    ("onlinePaymentCryptogram", .string(StrictEncoding.base64Encode(credential.cryptogram.bytes))),
                    ("eciIndicator", .string(credential.eci)),
                ])
            ),
        ])
        _ = try inputs.encoder.makePaymentData(
            payment: payment, recipient: inputs.recipient, applicationDataHash: credential.applicationDataHash)
    }

    /// Exchanges per second on `threads` threads for about `seconds`, all threads running at once.
    public static func measure(_ inputs: Inputs, threads: Int, seconds: Double) throws -> Double {
        let key = SymmetricKey(bitCount: 256)
        try exchangeOnce(inputs, nonceHashKey: key)
        let deadline = Date().addingTimeInterval(seconds)
        let counts = LockedCounts(threads)
        let group = DispatchGroup()
        let start = Date()
        for index in 0..<threads {
            group.enter()
            let thread = Thread {
                var done = 0
                var failed = false
                while Date() < deadline {
                    do { try exchangeOnce(inputs, nonceHashKey: key) } catch { failed = true }
                    done += 1
                }
                counts.set(index, done, failed: failed)
                group.leave()
            }
            thread.start()
        }
        group.wait()
        let elapsed = Date().timeIntervalSince(start)
        guard !counts.failed else {
            throw BenchmarkError(.operationFailed, "an exchange failed during the ceiling run")
        }
        return Double(counts.total) / elapsed
    }

    private final class LockedCounts: @unchecked Sendable {
        // @unchecked: every access holds `lock`.
        private let lock = NSLock()
        private var values: [Int]
        private var anyFailed = false
        init(_ count: Int) { values = Array(repeating: 0, count: count) }
        func set(_ index: Int, _ value: Int, failed: Bool) {
            lock.withLock {
                values[index] = value
                anyFailed = anyFailed || failed
            }
        }
        var total: Int { lock.withLock { values.reduce(0, +) } }
        var failed: Bool { lock.withLock { anyFailed } }
    }
}
