internal import COpenSSL
public import Foundation

/// HKDF (RFC 5869) with SHA-256, through OpenSSL's `EVP_KDF` "HKDF".
public enum HKDF {
    /// The most `info` OpenSSL 3.0's HKDF accepts (its `HKDF_MAXBUF`).
    public static let maximumInfoByteCount = 1024

    /// Extract-then-expand. `outputByteCount` may be at most 255 × 32; `info` at most 1024 bytes.
    @inlinable
    public static func deriveKey(
        inputKeyMaterial: SymmetricKey, salt: some DataProtocol, info: some DataProtocol, outputByteCount: Int
    ) throws(CryptoError) -> SymmetricKey {
        try withContiguousBytes(salt) { (s) throws(CryptoError) -> SymmetricKey in
            try withContiguousBytes(info) { (i) throws(CryptoError) -> SymmetricKey in
                try deriveKey(inputKeyMaterial: inputKeyMaterial, salt: s, info: i, outputByteCount: outputByteCount)
            }
        }
    }

    @usableFromInline
    package static func deriveKey(
        inputKeyMaterial: SymmetricKey, salt: UnsafeRawBufferPointer, info: UnsafeRawBufferPointer,
        outputByteCount: Int
    ) throws(CryptoError) -> SymmetricKey {
        guard outputByteCount > 0, outputByteCount <= 255 * 32 else {
            throw CryptoError(.invalidParameter, "HKDF-SHA256 output must be 1 to 8160 bytes, not \(outputByteCount)")
        }
        guard info.count <= maximumInfoByteCount else {
            throw CryptoError(.invalidParameter, "HKDF info must be at most 1024 bytes, not \(info.count)")
        }
        guard let ctx = EVP_KDF_CTX_new(Fetched.hkdf) else {
            throw CryptoError(.internalFailure, "EVP_KDF_CTX_new failed")
        }
        defer { EVP_KDF_CTX_free(ctx) }
        let out = try SecureBytes(count: outputByteCount) { (buffer) throws(CryptoError) in
            let rc = inputKeyMaterial.withUnsafeBytes { ikm in
                // OSSL_PARAM takes mutable pointers but the KDF only reads (and copies) them.
                var params = [
                    OSSL_PARAM_construct_utf8_string(ParamName.digest, ParamName.sha256, 0),
                    OSSL_PARAM_construct_octet_string(
                        ParamName.key, UnsafeMutableRawPointer(mutating: ikm.bytePointer), ikm.count),
                    OSSL_PARAM_construct_octet_string(
                        ParamName.salt, UnsafeMutableRawPointer(mutating: salt.bytePointer), salt.count),
                    OSSL_PARAM_construct_octet_string(
                        ParamName.info, UnsafeMutableRawPointer(mutating: info.bytePointer), info.count),
                    OSSL_PARAM_construct_end(),
                ]
                return EVP_KDF_derive(ctx, buffer.bindMemory(to: UInt8.self).baseAddress, outputByteCount, &params)
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
    // Inlinable so the DataProtocol generic specializes in the caller (Apple's EC_v1 key derives once per token).
    @inlinable
    public static func deriveKey(
        sharedSecret: SecureBytes, otherInfo: some DataProtocol, outputByteCount: Int
    ) throws(CryptoError) -> SymmetricKey {
        try withContiguousBytes(otherInfo) { (info) throws(CryptoError) -> SymmetricKey in
            try deriveKey(sharedSecret: sharedSecret, otherInfo: info, outputByteCount: outputByteCount)
        }
    }

    @usableFromInline
    package static func deriveKey(
        sharedSecret: SecureBytes, otherInfo info: UnsafeRawBufferPointer, outputByteCount: Int
    ) throws(CryptoError) -> SymmetricKey {
        guard outputByteCount > 0, outputByteCount <= 1 << 16 else {
            throw CryptoError(.invalidParameter, "single-step KDF output must be 1 to 65536 bytes")
        }
        let out = try SecureBytes(count: outputByteCount) { (buffer) throws(CryptoError) in
            guard let ctx = EVP_MD_CTX_new() else {
                throw CryptoError(.internalFailure, "EVP_MD_CTX_new failed")
            }
            defer { EVP_MD_CTX_free(ctx) }
            // Whole blocks are written straight into the key; a partial last block goes through a
            // stack buffer that is wiped.
            try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 32) { (block) throws(CryptoError) in
                defer { OPENSSL_cleanse(block.baseAddress, 32) }
                var offset = 0
                var counter: UInt32 = 1
                while offset < outputByteCount {
                    let n = min(32, outputByteCount - offset)
                    let target = n == 32 ? buffer.baseAddress! + offset : UnsafeMutableRawPointer(block.baseAddress!)
                    var be = counter.bigEndian
                    var ok = EVP_DigestInit_ex2(ctx, Fetched.sha256, nil)
                    ok &= EVP_DigestUpdate(ctx, &be, 4)
                    sharedSecret.withUnsafeBytes { z in ok &= EVP_DigestUpdate(ctx, z.baseAddress, z.count) }
                    ok &= EVP_DigestUpdate(ctx, info.baseAddress, info.count)
                    var length: UInt32 = 0
                    ok &= EVP_DigestFinal_ex(ctx, target.assumingMemoryBound(to: UInt8.self), &length)
                    try check(ok, .internalFailure, "SHA-256 failed in the single-step KDF")
                    if n < 32 {
                        (buffer.baseAddress! + offset).copyMemory(from: block.baseAddress!, byteCount: n)
                    }
                    offset += n
                    counter += 1
                }
            }
        }
        return SymmetricKey(out)
    }
}
