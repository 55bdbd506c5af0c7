internal import COpenSSL
public import Foundation

/// AES namespace (CryptoKit style).
public enum AES {}

extension AES {
    /// AES in Galois/Counter Mode with 128-, 192- or 256-bit keys, IVs of 1 to 128 bytes (Apple's EC_v1 and
    /// RSA_v1 use 16 zero bytes) and a 16-byte tag.
    public enum GCM {
        /// Ciphertext and tag. Stored as `ciphertext ‖ tag`, the form Apple's `data` field has, so sealing
        /// makes one allocation and ``init(combined:)`` none beyond the caller's bytes.
        public struct SealedBox: Sendable, Equatable {
            /// `ciphertext ‖ tag`.
            public let combined: [UInt8]
            /// The tag's length: 16 unless a caller built the box from a tag of another length, which
            /// ``AES/GCM/open(_:using:iv:authenticating:)`` then refuses.
            @usableFromInline let tagCount: Int

            public init(ciphertext: [UInt8], tag: [UInt8]) {
                combined = ciphertext + tag
                tagCount = tag.count
            }

            /// Takes `ciphertext ‖ tag` (16-byte tag).
            @inlinable
            public init(combined: some DataProtocol) throws(CryptoError) {
                guard combined.count >= GCM.tagByteCount else {
                    throw CryptoError(.invalidParameter, "AES-GCM data is shorter than its 16-byte tag")
                }
                self.init(uncheckedCombined: Array(combined), tagCount: GCM.tagByteCount)
            }

            @usableFromInline
            package init(uncheckedCombined: [UInt8], tagCount: Int) {
                combined = uncheckedCombined
                self.tagCount = tagCount
            }

            /// The ciphertext (a copy of the front of ``combined``).
            public var ciphertext: [UInt8] { Array(combined[..<(combined.count - tagCount)]) }
            /// The tag (a copy of the end of ``combined``).
            public var tag: [UInt8] { Array(combined[(combined.count - tagCount)...]) }
        }

        public static let tagByteCount = 16
        /// The longest IV OpenSSL 3.0's GCM accepts (its `GCM_IV_MAX_SIZE`).
        public static let maximumIVByteCount = 128

        /// Encrypts and authenticates `plaintext` and authenticates `aad`. The IV must be 1 to 128 bytes and
        /// must never repeat under one key.
        // Inlinable so the DataProtocol generics specialize in the caller; the work is in `seal(bytes:…)`.
        @inlinable
        public static func seal(
            _ plaintext: some DataProtocol, using key: SymmetricKey, iv: some DataProtocol,
            authenticating aad: some DataProtocol = [UInt8]()
        ) throws(CryptoError) -> SealedBox {
            try withContiguousBytes(plaintext) { (p) throws(CryptoError) -> SealedBox in
                try withContiguousBytes(iv) { (i) throws(CryptoError) -> SealedBox in
                    try withContiguousBytes(aad) { (a) throws(CryptoError) -> SealedBox in
                        try seal(bytes: p, key: key, iv: i, aad: a)
                    }
                }
            }
        }

        /// Checks the tag and decrypts. Throws ``CryptoError/Code/authenticationFailure`` when the
        /// ciphertext, tag, IV, AAD or key is wrong, and returns no plaintext then.
        @inlinable
        public static func open(
            _ box: SealedBox, using key: SymmetricKey, iv: some DataProtocol,
            authenticating aad: some DataProtocol = [UInt8]()
        ) throws(CryptoError) -> [UInt8] {
            try withContiguousBytes(iv) { (i) throws(CryptoError) -> [UInt8] in
                try withContiguousBytes(aad) { (a) throws(CryptoError) -> [UInt8] in
                    try open(box: box, key: key, iv: i, aad: a)
                }
            }
        }

        @usableFromInline
        package static func seal(
            bytes p: UnsafeRawBufferPointer, key: SymmetricKey, iv: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer
        ) throws(CryptoError) -> SealedBox {
            let ctx = try context(key: key, iv: iv, aad: aad, count: p.count, encrypt: true)
            defer { EVP_CIPHER_CTX_free(ctx) }
            // Ciphertext and tag go straight into one array (GCM's output is exactly as long as its input).
            var rc: Int32 = 1
            let combined = [UInt8](unsafeUninitializedCapacity: p.count + tagByteCount) { out, count in
                var length: Int32 = 0
                if p.count > 0 {
                    rc = EVP_EncryptUpdate(ctx, out.baseAddress, &length, p.bytePointer, Int32(p.count))
                    guard rc == 1 else { return }
                }
                var tail: Int32 = 0
                rc = EVP_EncryptFinal_ex(ctx, out.baseAddress! + Int(length), &tail)
                guard rc == 1, Int(length + tail) == p.count else {
                    rc = 0
                    return
                }
                rc = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, Int32(tagByteCount), out.baseAddress! + p.count)
                count = rc == 1 ? p.count + tagByteCount : 0
            }
            try check(rc, .internalFailure, "AES-GCM encryption failed")
            return SealedBox(uncheckedCombined: combined, tagCount: tagByteCount)
        }

        @usableFromInline
        package static func open(
            box: SealedBox, key: SymmetricKey, iv: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer
        ) throws(CryptoError) -> [UInt8] {
            guard box.tagCount == tagByteCount else {
                throw CryptoError(.authenticationFailure, "AES-GCM tag must be 16 bytes, not \(box.tagCount)")
            }
            let ciphertextCount = box.combined.count - tagByteCount
            let ctx = try context(key: key, iv: iv, aad: aad, count: ciphertextCount, encrypt: false)
            defer { EVP_CIPHER_CTX_free(ctx) }
            var rc: Int32 = 1
            var authentic: Int32 = 0
            let plaintext = box.combined.withUnsafeBufferPointer { c in
                [UInt8](unsafeUninitializedCapacity: max(ciphertextCount, 1)) { out, count in
                    var length: Int32 = 0
                    if ciphertextCount > 0 {
                        rc = EVP_DecryptUpdate(ctx, out.baseAddress, &length, c.baseAddress, Int32(ciphertextCount))
                        guard rc == 1 else { return }
                    }
                    // SET_TAG only reads the 16 bytes.
                    rc = EVP_CIPHER_CTX_ctrl(
                        ctx, EVP_CTRL_GCM_SET_TAG, Int32(tagByteCount),
                        UnsafeMutableRawPointer(mutating: c.baseAddress! + ciphertextCount))
                    guard rc == 1 else { return }
                    var tail: Int32 = 0
                    authentic = EVP_DecryptFinal_ex(ctx, out.baseAddress! + Int(length), &tail)
                    if authentic == 1 {
                        count = Int(length + tail)
                    } else {
                        // Unauthenticated plaintext never leaves: wipe what was decrypted.
                        OPENSSL_cleanse(out.baseAddress, out.count)
                    }
                }
            }
            try check(rc, .internalFailure, "AES-GCM decryption failed")
            guard authentic == 1 else {
                _ = drainOpenSSLErrors()
                throw CryptoError(
                    .authenticationFailure, "AES-GCM tag mismatch: the data was altered, or the key, IV or AAD is wrong"
                )
            }
            return plaintext
        }

        /// A context with cipher, IV length, key and IV set and the AAD absorbed: the call sequence both
        /// directions share (and the C baseline of `orchard bench crypto` repeats).
        private static func context(
            key: SymmetricKey, iv: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer, count: Int, encrypt: Bool
        ) throws(CryptoError) -> OpaquePointer {
            let cipher = try self.cipher(for: key)
            guard iv.count > 0, iv.count <= maximumIVByteCount else {
                throw CryptoError(.invalidParameter, "AES-GCM takes an IV of 1 to 128 bytes, not \(iv.count)")
            }
            guard count < Int(Int32.max) - tagByteCount, aad.count < Int(Int32.max) else {
                throw CryptoError(.invalidParameter, "AES-GCM input is too long for one call")
            }
            guard let ctx = EVP_CIPHER_CTX_new() else {
                throw CryptoError(.internalFailure, "EVP_CIPHER_CTX_new failed")
            }
            do {
                let direction: Int32 = encrypt ? 1 : 0
                try check(
                    EVP_CipherInit_ex2(ctx, cipher, nil, nil, direction, nil), .internalFailure, "AES-GCM init failed")
                try check(
                    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, Int32(iv.count), nil), .invalidParameter,
                    "AES-GCM rejected an IV of \(iv.count) bytes")
                try key.withUnsafeBytes { (k) throws(CryptoError) in
                    try check(
                        EVP_CipherInit_ex2(ctx, nil, k.bytePointer, iv.bytePointer, direction, nil), .internalFailure,
                        "AES-GCM key setup failed")
                }
                if aad.count > 0 {
                    var length: Int32 = 0
                    try check(
                        EVP_CipherUpdate(ctx, nil, &length, aad.bytePointer, Int32(aad.count)), .internalFailure,
                        "AES-GCM AAD failed")
                }
            } catch {
                EVP_CIPHER_CTX_free(ctx)
                throw error
            }
            return ctx
        }

        private static func cipher(for key: SymmetricKey) throws(CryptoError) -> OpaquePointer {
            switch key.byteCount {
            case 16: return Fetched.aes128GCM
            case 24: return Fetched.aes192GCM
            case 32: return Fetched.aes256GCM
            default: throw CryptoError(.invalidParameter, "AES keys are 128, 192 or 256 bits, not \(key.bitCount)")
            }
        }
    }
}
