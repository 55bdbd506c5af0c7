internal import COpenSSL
internal import CShims
import Foundation

/// A public key that checks certificate and CMS signatures: EC (P-256, P-384) or RSA (2048 bits or more),
/// imported from its raw parts without OpenSSL 3.0's decoder framework (`d2i_PUBKEY` costs about 250 µs;
/// these imports cost a few µs). The point goes through `EC_POINT_oct2point`'s checks (on the curve, coordinates
/// below p); an RSA modulus must be odd and at least 2048 bits, the exponent odd and above 1.
package struct SignatureVerificationKey: @unchecked Sendable {
    /// The key's family: which signature algorithms it can check.
    package enum Family: Sendable, Equatable {
        case p256, p384, rsa
    }

    /// The digest of a signature algorithm.
    package enum Digest: Sendable {
        case sha256, sha384, sha512

        var md: OpaquePointer {
            switch self {
            case .sha256: Fetched.sha256
            case .sha384: Fetched.sha384
            case .sha512: verificationSHA512
            }
        }
    }

    package let key: EVPKey
    package let family: Family

    package init(key: EVPKey, family: Family) {
        self.key = key
        self.family = family
    }

    /// An uncompressed point (04 ‖ X ‖ Y) on P-256 or P-384.
    package init(ecPoint: [UInt8], family: Family) throws(CryptoError) {
        switch family {
        case .p256:
            key = try P256PublicKeyImpl(x963: ecPoint).key
        case .p384:
            guard ecPoint.count == 97, ecPoint[0] == 0x04, let template = p384Parameters.pointer else {
                throw CryptoError(.invalidKey, "a P-384 public key is a 97-byte uncompressed point (04 ‖ X ‖ Y)")
            }
            key = try ecPublicKey(point: ecPoint, groupOf: template, curve: "P-384")
        case .rsa:
            throw CryptoError(.invalidKey, "an RSA key is not a point")
        }
        self.family = family
    }

    /// An RSA key from the contents of its modulus and public exponent INTEGERs (big-endian, as DER has them).
    package init(rsaModulus: some Collection<UInt8>, exponent: some Collection<UInt8>) throws(CryptoError) {
        let n = Array(rsaModulus.drop { $0 == 0 })
        let e = Array(exponent.drop { $0 == 0 })
        guard let top = n.first, let last = n.last, last & 1 == 1,
            n.count * 8 - top.leadingZeroBitCount >= RSA.minimumKeySize, n.count <= 2048
        else {
            throw CryptoError(.invalidKey, "RSA keys must have an odd modulus of at least 2048 bits")
        }
        guard let eLast = e.last, eLast & 1 == 1, e.count <= 8, e != [1] else {
            throw CryptoError(.invalidKey, "the RSA public exponent must be odd and greater than 1")
        }
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "RSA", nil) else {
            throw CryptoError(.internalFailure, "EVP_PKEY_CTX_new_from_name failed")
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        try check(EVP_PKEY_fromdata_init(ctx), .internalFailure, "EVP_PKEY_fromdata_init failed")
        // OSSL_PARAM unsigned integers are in native byte order.
        var nativeN = Array(n.reversed())
        var nativeE = Array(e.reversed())
        var pkey: OpaquePointer?
        let rc = nativeN.withUnsafeMutableBytes { np in
            nativeE.withUnsafeMutableBytes { ep in
                var params = [
                    OSSL_PARAM_construct_BN(
                        paramRSAModulus, np.baseAddress?.assumingMemoryBound(to: UInt8.self), np.count),
                    OSSL_PARAM_construct_BN(
                        paramRSAExponent, ep.baseAddress?.assumingMemoryBound(to: UInt8.self), ep.count),
                    OSSL_PARAM_construct_end(),
                ]
                // EVP_PKEY_PUBLIC_KEY is a composite macro Swift cannot import: parameters | public key (0x86).
                return EVP_PKEY_fromdata(ctx, &pkey, 0x86, &params)
            }
        }
        guard rc == 1, let pkey else {
            _ = drainOpenSSLErrors()
            throw CryptoError(.invalidKey, "OpenSSL refused the RSA public key")
        }
        key = EVPKey(owning: pkey)
        family = .rsa
    }

    /// Whether `signature` (a DER ECDSA-Sig-Value for EC keys, PKCS#1 v1.5 for RSA keys) over `message` verifies
    /// under this key with `digest`: `true` or `false`, or `nil` when OpenSSL could not decide (no memory, or a
    /// signature too malformed to check), which callers must not remember as a verdict.
    package func isValidSignature(
        _ signature: UnsafeRawBufferPointer, message: UnsafeRawBufferPointer, digest: Digest
    ) -> Bool? {
        guard let ctx = EVP_MD_CTX_new() else { return nil }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestVerifyInit(ctx, nil, digest.md, nil, key.pointer) == 1 else {
            _ = drainOpenSSLErrors()
            return nil
        }
        let rc = EVP_DigestVerify(ctx, signature.bytePointer, signature.count, message.bytePointer, message.count)
        if rc != 1 { _ = drainOpenSSLErrors() }
        return rc == 1 ? true : rc == 0 ? false : nil
    }
}

nonisolated(unsafe) private let paramRSAModulus = CString.make("n")
nonisolated(unsafe) private let paramRSAExponent = CString.make("e")
nonisolated(unsafe) private let paramGroupName = CString.make("group")
nonisolated(unsafe) private let secp384r1 = CString.make("secp384r1")
nonisolated(unsafe) private let verificationSHA512 = EVP_MD_fetch(nil, "SHA512", nil)!

private struct P384Template: @unchecked Sendable {
    let pointer: OpaquePointer?
}

/// The P-384 group as a parameters-only key, made once: the template every imported P-384 key copies.
private let p384Parameters: P384Template = {
    guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { return P384Template(pointer: nil) }
    defer { EVP_PKEY_CTX_free(ctx) }
    guard EVP_PKEY_fromdata_init(ctx) == 1 else { return P384Template(pointer: nil) }
    var pkey: OpaquePointer?
    var params = [OSSL_PARAM_construct_utf8_string(paramGroupName, secp384r1, 0), OSSL_PARAM_construct_end()]
    // OSSL_KEYMGMT_SELECT_ALL_PARAMETERS (EVP_PKEY_KEY_PARAMETERS does not import).
    guard EVP_PKEY_fromdata(ctx, &pkey, 0x84, &params) == 1 else { return P384Template(pointer: nil) }
    return P384Template(pointer: pkey)
}()
