internal import COpenSSL
public import Foundation

/// HKDF (RFC 5869) with SHA-256, through OpenSSL's `EVP_KDF` "HKDF".
public enum HKDF {
    nonisolated(unsafe) private static let keyDigest = CString.make("digest")
    nonisolated(unsafe) private static let keyKey = CString.make("key")
    nonisolated(unsafe) private static let keySalt = CString.make("salt")
    nonisolated(unsafe) private static let keyInfo = CString.make("info")
    nonisolated(unsafe) private static let sha256Name = CString.make("SHA256")

    /// Extract-then-expand. `outputByteCount` may be at most 255 × 32.
    public static func deriveKey(
        inputKeyMaterial: SymmetricKey, salt: some DataProtocol, info: some DataProtocol, outputByteCount: Int
    ) throws(CryptoError) -> SymmetricKey {
        guard outputByteCount > 0, outputByteCount <= 255 * 32 else {
            throw CryptoError(.invalidParameter, "HKDF-SHA256 output must be 1 to 8160 bytes, not \(outputByteCount)")
        }
        let saltBytes = Array(salt)
        let infoBytes = Array(info)
        guard let ctx = EVP_KDF_CTX_new(Fetched.hkdf) else { throw CryptoError(.internalFailure, "EVP_KDF_CTX_new failed") }
        defer { EVP_KDF_CTX_free(ctx) }
        let out = try SecureBytes(count: outputByteCount) { (buffer) throws(CryptoError) in
            let rc = inputKeyMaterial.withUnsafeBytes { ikm in
                saltBytes.withUnsafeBytes { s in
                    infoBytes.withUnsafeBytes { i in
                        var params = [
                            OSSL_PARAM_construct_utf8_string(keyDigest, sha256Name, 0),
                            OSSL_PARAM_construct_octet_string(
                                keyKey, UnsafeMutableRawPointer(mutating: ikm.bytePointer), ikm.count),
                            OSSL_PARAM_construct_octet_string(
                                keySalt, UnsafeMutableRawPointer(mutating: s.bytePointer), s.count),
                            OSSL_PARAM_construct_octet_string(
                                keyInfo, UnsafeMutableRawPointer(mutating: i.bytePointer), i.count),
                            OSSL_PARAM_construct_end(),
                        ]
                        return EVP_KDF_derive(
                            ctx, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), outputByteCount, &params)
                    }
                }
            }
            try check(rc, .internalFailure, "HKDF derivation failed")
        }
        return SymmetricKey(out)
    }
}

/// The single-step key derivation of NIST SP 800-56A rev. 3 §5.8.1 (the "concatenation KDF") with SHA-256:
/// `K = H(counter ‖ Z ‖ OtherInfo)` for counter = 1, 2, … Apple's EC_v1 token key is one round of it.
public enum SingleStepKDF {
    /// Derives `outputByteCount` bytes from the shared secret `sharedSecret` and `otherInfo`.
    public static func deriveKey(
        sharedSecret: SecureBytes, otherInfo: some DataProtocol, outputByteCount: Int
    ) throws(CryptoError) -> SymmetricKey {
        guard outputByteCount > 0, outputByteCount <= 1 << 16 else {
            throw CryptoError(.invalidParameter, "single-step KDF output must be 1 to 65536 bytes")
        }
        let info = Array(otherInfo)
        let out = try SecureBytes(count: outputByteCount) { (buffer) throws(CryptoError) in
            var offset = 0
            var counter: UInt32 = 1
            guard let ctx = EVP_MD_CTX_new() else { throw CryptoError(.internalFailure, "EVP_MD_CTX_new failed") }
            defer { EVP_MD_CTX_free(ctx) }
            var block = [UInt8](repeating: 0, count: 32)
            defer { OPENSSL_cleanse(&block, block.count) }
            while offset < outputByteCount {
                var be = counter.bigEndian
                var ok = EVP_DigestInit_ex2(ctx, Fetched.sha256, nil)
                ok &= EVP_DigestUpdate(ctx, &be, 4)
                sharedSecret.withUnsafeBytes { z in ok &= EVP_DigestUpdate(ctx, z.baseAddress, z.count) }
                ok &= info.withUnsafeBytes { EVP_DigestUpdate(ctx, $0.baseAddress, $0.count) }
                var length: UInt32 = 0
                ok &= EVP_DigestFinal_ex(ctx, &block, &length)
                try check(ok, .internalFailure, "SHA-256 failed in the single-step KDF")
                let n = min(32, outputByteCount - offset)
                for j in 0..<n { buffer[offset + j] = block[j] }
                offset += n
                counter += 1
            }
        }
        return SymmetricKey(out)
    }
}
