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

            /// A box of `ciphertext` followed by `tag`; opening it refuses a tag that is not 16 bytes.
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

        /// The authentication tag's length in bytes: 16, the only length Orchard produces or accepts.
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

        /// Like ``seal(_:using:iv:authenticating:)``, but writes `ciphertext ‖ tag` into caller-owned storage,
        /// reusing its capacity: for hot loops that process many messages (no allocation per message).
        public static func seal(
            _ plaintext: [UInt8], using key: SymmetricKey, iv: [UInt8], authenticating aad: [UInt8] = [],
            into output: inout [UInt8]
        ) throws(CryptoError) {
            resize(&output, to: plaintext.count + tagByteCount)
            var rc: Int32 = 1
            let result: Result<Void, CryptoError> = plaintext.withUnsafeBytes { p in
                iv.withUnsafeBytes { i in
                    aad.withUnsafeBytes { a in
                        Result { () throws(CryptoError) in
                            let cipher = try validate(key: key, iv: i, aad: a, count: p.count)
                            let ctx = try context(cipher, key: key, iv: i, aad: a, encrypt: true)
                            defer { EVP_CIPHER_CTX_free(ctx) }
                            rc = output.withUnsafeMutableBufferPointer { encrypt(ctx, p, into: $0.baseAddress!) }
                        }
                    }
                }
            }
            if case .failure = result { output.removeAll(keepingCapacity: true) }
            try result.get()
            guard rc == 1 else {
                output.removeAll(keepingCapacity: true)
                throw CryptoError(.internalFailure, "AES-GCM encryption failed")
            }
        }

        /// Like ``open(_:using:iv:authenticating:)`` for `combined` = ciphertext ‖ tag, but writes the plaintext
        /// into caller-owned storage, reusing its capacity. On failure `output` is left empty.
        public static func open(
            combined: [UInt8], using key: SymmetricKey, iv: [UInt8], authenticating aad: [UInt8] = [],
            into output: inout [UInt8]
        ) throws(CryptoError) {
            guard combined.count >= tagByteCount else {
                output.removeAll(keepingCapacity: true)
                throw CryptoError(.invalidParameter, "AES-GCM data is shorter than its 16-byte tag")
            }
            let count = combined.count - tagByteCount
            resize(&output, to: count)
            var status: (Int32, Bool) = (0, false)
            let result: Result<Void, CryptoError> = combined.withUnsafeBytes { c in
                iv.withUnsafeBytes { i in
                    aad.withUnsafeBytes { a in
                        Result { () throws(CryptoError) in
                            let cipher = try validate(key: key, iv: i, aad: a, count: count)
                            let ctx = try context(cipher, key: key, iv: i, aad: a, encrypt: false)
                            defer { EVP_CIPHER_CTX_free(ctx) }
                            status = output.withUnsafeMutableBufferPointer {
                                decrypt(ctx, c, count: count, into: $0.baseAddress ?? UnsafeMutablePointer(emptyOutput))
                            }
                        }
                    }
                }
            }
            if case .failure = result { output.removeAll(keepingCapacity: true) }
            try result.get()
            guard status.0 == 1, status.1 else {
                // Unauthenticated plaintext never leaves: wipe what was decrypted.
                output.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) }
                output.removeAll(keepingCapacity: true)
                _ = drainOpenSSLErrors()
                guard status.0 == 1 else { throw CryptoError(.internalFailure, "AES-GCM decryption failed") }
                throw CryptoError(
                    .authenticationFailure, "AES-GCM tag mismatch: the data was altered, or the key, IV or AAD is wrong"
                )
            }
        }

        /// Makes `output` exactly `count` bytes long, keeping its storage: nothing to do when a caller reuses
        /// one buffer for messages of one size (the bytes are overwritten by the cipher, so they need no zeroing).
        private static func resize(_ output: inout [UInt8], to count: Int) {
            if output.count > count {
                output.removeSubrange(count...)
            } else if output.count < count {
                output.append(contentsOf: repeatElement(0, count: count - output.count))
            }
        }

        @usableFromInline
        package static func seal(
            bytes p: UnsafeRawBufferPointer, key: SymmetricKey, iv: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer
        ) throws(CryptoError) -> SealedBox {
            let cipher = try validate(key: key, iv: iv, aad: aad, count: p.count)
            let ctx = try context(cipher, key: key, iv: iv, aad: aad, encrypt: true)
            defer { EVP_CIPHER_CTX_free(ctx) }
            // Ciphertext and tag go straight into one array (GCM's output is exactly as long as its input).
            var rc: Int32 = 0
            let combined = makeBytes(count: p.count + tagByteCount) { out in
                rc = encrypt(ctx, p, into: out.bindMemory(to: UInt8.self).baseAddress!)
                if rc != 1 { out.initializeMemory(as: UInt8.self, repeating: 0) }
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
            let cipher = try validate(key: key, iv: iv, aad: aad, count: ciphertextCount)
            let ctx = try context(cipher, key: key, iv: iv, aad: aad, encrypt: false)
            defer { EVP_CIPHER_CTX_free(ctx) }
            var rc: Int32 = 0
            var authentic = false
            let plaintext = box.combined.withUnsafeBytes { c in
                makeBytes(count: ciphertextCount) { out in
                    (rc, authentic) = decrypt(
                        ctx, c, count: ciphertextCount, into: out.bindMemory(to: UInt8.self).baseAddress!)
                    // Unauthenticated plaintext never leaves: wipe what was decrypted.
                    if !authentic { OPENSSL_cleanse(out.baseAddress, out.count) }
                }
            }
            try check(rc, .internalFailure, "AES-GCM decryption failed")
            guard authentic else {
                _ = drainOpenSSLErrors()
                throw CryptoError(
                    .authenticationFailure, "AES-GCM tag mismatch: the data was altered, or the key, IV or AAD is wrong"
                )
            }
            return plaintext
        }

        /// Encrypts `p` into `out` (`p.count` bytes) and appends the 16-byte tag. Returns 1 on success.
        private static func encrypt(
            _ ctx: OpaquePointer, _ p: UnsafeRawBufferPointer, into out: UnsafeMutablePointer<UInt8>
        )
            -> Int32
        {
            var length: Int32 = 0
            if p.count > 0 {
                guard EVP_EncryptUpdate(ctx, out, &length, p.bytePointer, Int32(p.count)) == 1 else { return 0 }
            }
            var tail: Int32 = 0
            guard EVP_EncryptFinal_ex(ctx, out + Int(length), &tail) == 1, Int(length + tail) == p.count else {
                return 0
            }
            return EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, Int32(tagByteCount), out + p.count)
        }

        /// Decrypts the `count` bytes of `c` into `out` and checks the tag that follows them in `c`. Returns
        /// OpenSSL's status (0 only for failures other than a wrong tag) and whether the data is authentic.
        private static func decrypt(
            _ ctx: OpaquePointer, _ c: UnsafeRawBufferPointer, count: Int, into out: UnsafeMutablePointer<UInt8>
        ) -> (Int32, Bool) {
            var length: Int32 = 0
            if count > 0 {
                guard EVP_DecryptUpdate(ctx, out, &length, c.bytePointer, Int32(count)) == 1 else { return (0, false) }
            }
            // SET_TAG only reads the 16 bytes.
            let tag = UnsafeMutableRawPointer(mutating: c.baseAddress! + count)
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, Int32(tagByteCount), tag) == 1 else {
                return (0, false)
            }
            var tail: Int32 = 0
            return (1, EVP_DecryptFinal_ex(ctx, out + Int(length), &tail) == 1 && Int(length + tail) == count)
        }

        /// Checks the sizes and returns the cipher for the key.
        private static func validate(
            key: SymmetricKey, iv: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer, count: Int
        ) throws(CryptoError) -> OpaquePointer {
            let cipher = try self.cipher(for: key)
            guard iv.count > 0, iv.count <= maximumIVByteCount else {
                throw CryptoError(.invalidParameter, "AES-GCM takes an IV of 1 to 128 bytes, not \(iv.count)")
            }
            guard count < Int(Int32.max) - tagByteCount, aad.count < Int(Int32.max) else {
                throw CryptoError(.invalidParameter, "AES-GCM input is too long for one call")
            }
            return cipher
        }

        /// A context with cipher, IV length, key and IV set and the AAD absorbed: the call sequence both
        /// directions share (and the C baseline of `orchard bench crypto` repeats).
        private static func context(
            _ cipher: OpaquePointer, key: SymmetricKey, iv: UnsafeRawBufferPointer, aad: UnsafeRawBufferPointer,
            encrypt: Bool
        ) throws(CryptoError) -> OpaquePointer {
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

nonisolated(unsafe) private let emptyOutput = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
