internal import COpenSSL
public import Foundation

/// AES namespace (CryptoKit style).
public enum AES {}

extension AES {
    /// AES in Galois/Counter Mode with 128-, 192- or 256-bit keys, any non-empty IV (Apple's EC_v1 and
    /// RSA_v1 use 16 zero bytes) and a separate 16-byte tag.
    public enum GCM {
        /// Ciphertext and tag, kept apart (Apple appends the tag to `data`; split it with ``init(combined:)``).
        public struct SealedBox: Sendable, Equatable {
            public let ciphertext: [UInt8]
            public let tag: [UInt8]

            public init(ciphertext: [UInt8], tag: [UInt8]) {
                self.ciphertext = ciphertext
                self.tag = tag
            }

            /// Splits `ciphertext ‖ tag` (16-byte tag).
            public init(combined: some DataProtocol) throws(CryptoError) {
                let bytes = Array(combined)
                guard bytes.count >= 16 else {
                    throw CryptoError(.invalidParameter, "AES-GCM data is shorter than its 16-byte tag")
                }
                ciphertext = Array(bytes[..<(bytes.count - 16)])
                tag = Array(bytes[(bytes.count - 16)...])
            }

            /// `ciphertext ‖ tag`.
            public var combined: [UInt8] { ciphertext + tag }
        }

        public static let tagByteCount = 16

        /// Encrypts and authenticates `plaintext` and authenticates `aad`.
        public static func seal(
            _ plaintext: some DataProtocol, using key: SymmetricKey, iv: some DataProtocol,
            authenticating aad: some DataProtocol = [UInt8]()
        ) throws(CryptoError) -> SealedBox {
            let cipher = try self.cipher(for: key)
            let ivBytes = Array(iv)
            guard !ivBytes.isEmpty else { throw CryptoError(.invalidParameter, "AES-GCM needs a non-empty IV") }
            guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError(.internalFailure, "EVP_CIPHER_CTX_new failed") }
            defer { EVP_CIPHER_CTX_free(ctx) }
            return try withContiguousBytes(plaintext) { (p) throws(CryptoError) -> SealedBox in
                try withContiguousBytes(aad) { (a) throws(CryptoError) -> SealedBox in
                    try key.withUnsafeBytes { (k) throws(CryptoError) -> SealedBox in
                        try check(EVP_EncryptInit_ex2(ctx, cipher, nil, nil, nil), .internalFailure, "AES-GCM init failed")
                        try check(
                            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, Int32(ivBytes.count), nil),
                            .invalidParameter, "AES-GCM rejected an IV of \(ivBytes.count) bytes")
                        try check(
                            EVP_EncryptInit_ex2(ctx, nil, k.bytePointer, ivBytes, nil), .internalFailure,
                            "AES-GCM key setup failed")
                        var length: Int32 = 0
                        if a.count > 0 {
                            try check(
                                EVP_EncryptUpdate(ctx, nil, &length, a.bytePointer, Int32(a.count)), .internalFailure,
                                "AES-GCM AAD failed")
                        }
                        var out = [UInt8](repeating: 0, count: p.count + 16)
                        var total: Int32 = 0
                        if p.count > 0 {
                            try check(
                                EVP_EncryptUpdate(ctx, &out, &length, p.bytePointer, Int32(p.count)), .internalFailure,
                                "AES-GCM encryption failed")
                            total = length
                        }
                        try out.withUnsafeMutableBufferPointer { (o) throws(CryptoError) in
                            try check(
                                EVP_EncryptFinal_ex(ctx, o.baseAddress! + Int(total), &length), .internalFailure,
                                "AES-GCM finalisation failed")
                        }
                        total += length
                        var tag = [UInt8](repeating: 0, count: 16)
                        try check(
                            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, &tag), .internalFailure,
                            "AES-GCM tag retrieval failed")
                        return SealedBox(ciphertext: Array(out[..<Int(total)]), tag: tag)
                    }
                }
            }
        }

        /// Checks the tag and decrypts. Throws ``CryptoError/Code/authenticationFailure`` when the
        /// ciphertext, tag, IV, AAD or key is wrong, and returns no plaintext then.
        public static func open(
            _ box: SealedBox, using key: SymmetricKey, iv: some DataProtocol,
            authenticating aad: some DataProtocol = [UInt8]()
        ) throws(CryptoError) -> [UInt8] {
            let cipher = try self.cipher(for: key)
            let ivBytes = Array(iv)
            guard !ivBytes.isEmpty else { throw CryptoError(.invalidParameter, "AES-GCM needs a non-empty IV") }
            guard box.tag.count == tagByteCount else {
                throw CryptoError(.authenticationFailure, "AES-GCM tag must be 16 bytes, not \(box.tag.count)")
            }
            guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError(.internalFailure, "EVP_CIPHER_CTX_new failed") }
            defer { EVP_CIPHER_CTX_free(ctx) }
            return try withContiguousBytes(aad) { (a) throws(CryptoError) -> [UInt8] in
                try key.withUnsafeBytes { (k) throws(CryptoError) -> [UInt8] in
                    try check(EVP_DecryptInit_ex2(ctx, cipher, nil, nil, nil), .internalFailure, "AES-GCM init failed")
                    try check(
                        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, Int32(ivBytes.count), nil),
                        .invalidParameter, "AES-GCM rejected an IV of \(ivBytes.count) bytes")
                    try check(
                        EVP_DecryptInit_ex2(ctx, nil, k.bytePointer, ivBytes, nil), .internalFailure,
                        "AES-GCM key setup failed")
                    var length: Int32 = 0
                    if a.count > 0 {
                        try check(
                            EVP_DecryptUpdate(ctx, nil, &length, a.bytePointer, Int32(a.count)), .internalFailure,
                            "AES-GCM AAD failed")
                    }
                    var out = [UInt8](repeating: 0, count: box.ciphertext.count + 16)
                    var total: Int32 = 0
                    if !box.ciphertext.isEmpty {
                        try check(
                            EVP_DecryptUpdate(ctx, &out, &length, box.ciphertext, Int32(box.ciphertext.count)),
                            .internalFailure, "AES-GCM decryption failed")
                        total = length
                    }
                    var tag = box.tag
                    try check(
                        EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, &tag), .internalFailure,
                        "AES-GCM tag setup failed")
                    let rc = out.withUnsafeMutableBufferPointer { o in
                        EVP_DecryptFinal_ex(ctx, o.baseAddress! + Int(total), &length)
                    }
                    guard rc == 1 else {
                        OPENSSL_cleanse(&out, out.count)
                        _ = drainOpenSSLErrors()
                        throw CryptoError(
                            .authenticationFailure,
                            "AES-GCM tag mismatch: the data was altered, or the key, IV or AAD is wrong")
                    }
                    total += length
                    out.removeSubrange(Int(total)...)
                    return out
                }
            }
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
