internal import COpenSSL
internal import CShims
import Foundation
import OrchardCrypto

/// An owned OpenSSL `X509`, decoded with `d2i_X509`. Used for chain verification with
/// `X509_verify_cert`, and as the baseline the benchmarks compare the Swift parser with.
/// OpenSSL 3 certificates are safe to share read-only between threads.
package final class OpenSSLCertificate: @unchecked Sendable {
    package let pointer: OpaquePointer

    /// Decodes `der` with `d2i_X509`; all bytes must be consumed.
    package init(der: [UInt8]) throws(X509Error) {
        var consumed = 0
        let x509 = der.withUnsafeBufferPointer { b -> OpaquePointer? in
            var p: UnsafePointer<UInt8>? = b.baseAddress
            let result = d2i_X509(nil, &p, b.count)
            if let p, let base = b.baseAddress { consumed = p - base }
            return result
        }
        guard let x509 else {
            throw X509Error(
                .invalidValue, "OpenSSL cannot decode the certificate (\(drainOpenSSLErrors().joined(separator: "; ")))"
            )
        }
        guard consumed == der.count else {
            X509_free(x509)
            throw X509Error(.trailingData, "OpenSSL decoded a certificate shorter than the input")
        }
        pointer = x509
    }

    deinit { X509_free(pointer) }

    /// `i2d_X509`.
    package var der: [UInt8] { Self.encode(pointer) }

    static func encode(_ x509: OpaquePointer) -> [UInt8] {
        var out: UnsafeMutablePointer<UInt8>?
        let n = i2d_X509(x509, &out)
        defer { orchard_OPENSSL_free(out) }
        guard n > 0, let out else { return [] }
        return Array(UnsafeBufferPointer(start: out, count: Int(n)))
    }
}

/// What `X509_verify_cert` decided: the chain it built (leaf first, as DER) or why it refused.
enum OpenSSLChainOutcome {
    case built([[UInt8]])
    case rejected(VerificationFailure)
}

/// An owned `X509_STORE` holding trust anchors, with purpose ANY (not S/MIME or TLS).
final class OpenSSLTrustStore: @unchecked Sendable {
    let pointer: OpaquePointer
    // The store holds its own references; these keep the Swift side's objects for the lifetime too.
    private let roots: [OpenSSLCertificate]

    init(roots: [Certificate]) throws(X509Error) {
        var handles: [OpenSSLCertificate] = []
        for root in roots { handles.append(try OpenSSLCertificate(der: root.derRepresentation)) }
        guard let store = X509_STORE_new() else { throw X509Error(.cryptoFailure, "X509_STORE_new failed") }
        for handle in handles where X509_STORE_add_cert(store, handle.pointer) != 1 {
            X509_STORE_free(store)
            throw X509Error(
                .cryptoFailure, "X509_STORE_add_cert failed (\(drainOpenSSLErrors().joined(separator: "; ")))")
        }
        guard X509_STORE_set_purpose(store, X509_PURPOSE_ANY) == 1 else {
            X509_STORE_free(store)
            throw X509Error(
                .cryptoFailure, "X509_STORE_set_purpose failed (\(drainOpenSSLErrors().joined(separator: "; ")))")
        }
        pointer = store
        self.roots = handles
    }

    deinit { X509_STORE_free(pointer) }

    /// `X509_verify_cert` at `time`: the chain OpenSSL built (leaf first, as DER) or the failure.
    func verify(leaf: OpenSSLCertificate, intermediates: [OpenSSLCertificate], at time: Date) -> OpenSSLChainOutcome {
        guard let ctx = X509_STORE_CTX_new() else {
            return .rejected(VerificationFailure(.invalidChain, "X509_STORE_CTX_new failed"))
        }
        defer { X509_STORE_CTX_free(ctx) }
        guard let untrusted = orchard_sk_X509_new_null() else {
            return .rejected(VerificationFailure(.invalidChain, "cannot allocate a certificate stack"))
        }
        // The stack borrows the X509 objects, which `intermediates` keeps alive.
        defer { orchard_sk_X509_free(untrusted) }
        for cert in intermediates where orchard_sk_X509_push(untrusted, cert.pointer) <= 0 {
            return .rejected(VerificationFailure(.invalidChain, "cannot build the certificate stack"))
        }
        return withExtendedLifetime((leaf, intermediates)) {
            guard X509_STORE_CTX_init(ctx, pointer, leaf.pointer, untrusted) == 1 else {
                _ = drainOpenSSLErrors()
                return .rejected(VerificationFailure(.invalidChain, "X509_STORE_CTX_init failed"))
            }
            _ = X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_ANY)
            // Setting the time also sets X509_V_FLAG_USE_CHECK_TIME.
            X509_VERIFY_PARAM_set_time(
                X509_STORE_CTX_get0_param(ctx), openSSLTime(time))
            let rc = X509_verify_cert(ctx)
            _ = drainOpenSSLErrors()
            guard rc == 1 else {
                let error = X509_STORE_CTX_get_error(ctx)
                let depth = X509_STORE_CTX_get_error_depth(ctx)
                let text = String(cString: X509_verify_cert_error_string(Int(error)))
                return .rejected(
                    VerificationFailure(Self.code(for: error), "\(text) (certificate \(depth) of the chain)"))
            }
            guard let chain = X509_STORE_CTX_get1_chain(ctx) else {
                return .rejected(VerificationFailure(.invalidChain, "OpenSSL returned no chain"))
            }
            defer { orchard_sk_X509_pop_free(chain) }
            var out: [[UInt8]] = []
            for i in 0..<orchard_sk_X509_num(chain) {
                guard let cert = orchard_sk_X509_value(chain, i) else { continue }
                out.append(OpenSSLCertificate.encode(cert))
            }
            return .built(out)
        }
    }

    private static func code(for error: Int32) -> VerificationFailure.Code {
        switch error {
        case X509_V_ERR_CERT_HAS_EXPIRED: .certificateExpired
        case X509_V_ERR_CERT_NOT_YET_VALID: .certificateNotYetValid
        case X509_V_ERR_CERT_SIGNATURE_FAILURE: .invalidCertificateSignature
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT, X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT,
            X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN, X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
            X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
            .untrustedChain
        default: .invalidChain
        }
    }
}

/// `date` as OpenSSL's `time_t`, clamped to the years 1–9999 that certificates can express (a
/// conversion of an out-of-range `Double` would trap).
func openSSLTime(_ date: Date) -> time_t {
    let t = date.timeIntervalSince1970.rounded(.down)
    guard !t.isNaN else { return 0 }
    return time_t(min(max(t, -62_135_596_800), 253_402_300_799))
}
