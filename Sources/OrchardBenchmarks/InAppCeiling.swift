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

    /// Exchanges per second of thread CPU time on one thread (measured for about `seconds` of CPU time), so
    /// other load on the machine does not change it. The ceiling for N cores is N times this.
    public static func measure(_ inputs: Inputs, seconds: Double) throws -> Double {
        let key = SymmetricKey(bitCount: 256)
        try exchangeOnce(inputs, nonceHashKey: key)
        let start = threadCPUSeconds()
        var done = 0
        while threadCPUSeconds() - start < seconds {
            for _ in 0..<10 { try exchangeOnce(inputs, nonceHashKey: key) }
            done += 10
        }
        return Double(done) / (threadCPUSeconds() - start)
    }

    /// Microseconds of thread CPU time per call of each step (open, signature check, encrypt + sign, the CMS
    /// signature alone), each measured for about `seconds`.
    public static func breakdown(_ inputs: Inputs, seconds: Double) throws -> [String: Double] {
        func time(_ body: () throws -> Void) rethrows -> Double {
            let start = threadCPUSeconds()
            var done = 0
            while threadCPUSeconds() - start < seconds {
                try body()
                done += 1
            }
            return ((threadCPUSeconds() - start) / Double(done) * 1e7).rounded() / 10
        }
        let opened = try SealedPaymentCredential.open(inputs.sealedCredential, with: inputs.credentialKey)
        let payment = JSONValue.object([("transactionAmount", .number("1999"))])
        let signed = [UInt8](repeating: 7, count: 1024)
        return [
            "openCredential": try time {
                _ = try SealedPaymentCredential.open(inputs.sealedCredential, with: inputs.credentialKey)
            },
            "verifySESignature": time { _ = opened.isSigned(by: inputs.secureElementKey) },
            "encryptAndSignToken": try time {
                _ = try inputs.encoder.makePaymentData(payment: payment, recipient: inputs.recipient)
            },
            "cmsSignatureAlone": try time { _ = try inputs.encoder.signer.detachedSignature(over: signed) },
        ]
    }

    /// This thread's CPU time in seconds.
    public static func threadCPUSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// This process's CPU time (user + system, every thread) in seconds.
    public static func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec)
            + Double(usage.ru_stime.tv_usec) / 1e6
    }
}
