internal import COpenSSL
public import Foundation

/// Triple DES (EDE), as EMV uses it: two-key (K1 ‖ K2, 16 bytes) or three-key (24 bytes), ECB and CBC
/// without padding. Weak by today's standards; it exists because payment cards still run on it.
public enum TripleDES {
    /// Encrypts whole 8-byte blocks in ECB mode.
    public static func encryptECB(_ data: some DataProtocol, key: SymmetricKey) throws(CryptoError) -> [UInt8] {
        try run(Fetched.desEDE3ECB, key: key, iv: nil, data: Array(data), encrypt: true)
    }

    /// Decrypts whole 8-byte blocks in ECB mode.
    public static func decryptECB(_ data: some DataProtocol, key: SymmetricKey) throws(CryptoError) -> [UInt8] {
        try run(Fetched.desEDE3ECB, key: key, iv: nil, data: Array(data), encrypt: false)
    }

    /// Encrypts whole 8-byte blocks in CBC mode (IV 8 zero bytes unless given).
    public static func encryptCBC(
        _ data: some DataProtocol, key: SymmetricKey, iv: [UInt8] = [UInt8](repeating: 0, count: 8)
    ) throws(CryptoError) -> [UInt8] {
        try run(Fetched.desEDE3CBC, key: key, iv: iv, data: Array(data), encrypt: true)
    }

    /// Decrypts whole 8-byte blocks in CBC mode.
    public static func decryptCBC(
        _ data: some DataProtocol, key: SymmetricKey, iv: [UInt8] = [UInt8](repeating: 0, count: 8)
    ) throws(CryptoError) -> [UInt8] {
        try run(Fetched.desEDE3CBC, key: key, iv: iv, data: Array(data), encrypt: false)
    }

    /// The key check value: the first `length` bytes of the encryption of eight zero bytes.
    public static func keyCheckValue(_ key: SymmetricKey, length: Int = 3) throws(CryptoError) -> [UInt8] {
        Array(try encryptECB([UInt8](repeating: 0, count: 8), key: key).prefix(length))
    }

    /// Expands a 8-, 16- or 24-byte key to the 24 bytes DES-EDE3 takes (K → K‖K‖K, K1‖K2 → K1‖K2‖K1).
    static func expandedKey(_ key: SymmetricKey) throws(CryptoError) -> SecureBytes {
        try key.withUnsafeBytes { (k) throws(CryptoError) -> SecureBytes in
            switch k.count {
            case 8: return SecureBytes(Array(k) + Array(k) + Array(k))
            case 16: return SecureBytes(Array(k) + Array(k[0..<8]))
            case 24: return SecureBytes(Array(k))
            default: throw CryptoError(.invalidParameter, "DES keys are 8, 16 or 24 bytes, not \(k.count)")
            }
        }
    }

    static func run(
        _ cipher: OpaquePointer, key: SymmetricKey, iv: [UInt8]?, data: [UInt8], encrypt: Bool
    ) throws(CryptoError) -> [UInt8] {
        guard data.count % 8 == 0 else {
            throw CryptoError(.invalidParameter, "DES works on whole 8-byte blocks; pad the data first")
        }
        if let iv, iv.count != 8 { throw CryptoError(.invalidParameter, "the DES IV is 8 bytes") }
        let full = try expandedKey(key)
        guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError(.internalFailure, "EVP_CIPHER_CTX_new failed") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: data.count + 8)
        var length: Int32 = 0
        try full.withUnsafeBytes { (k) throws(CryptoError) in
            try check(
                EVP_CipherInit_ex2(ctx, cipher, k.bytePointer, iv, encrypt ? 1 : 0, nil), .internalFailure,
                "DES key setup failed")
        }
        try check(EVP_CIPHER_CTX_set_padding(ctx, 0), .internalFailure, "DES padding setup failed")
        if !data.isEmpty {
            try check(EVP_CipherUpdate(ctx, &out, &length, data, Int32(data.count)), .internalFailure, "DES failed")
        }
        var tail: Int32 = 0
        try out.withUnsafeMutableBufferPointer { (o) throws(CryptoError) in
            try check(EVP_CipherFinal_ex(ctx, o.baseAddress! + Int(length), &tail), .internalFailure, "DES failed")
        }
        return Array(out[..<Int(length + tail)])
    }
}

/// Single DES, computed as DES-EDE3 with K‖K‖K (OpenSSL 3 keeps plain DES in the legacy provider,
/// which Orchard does not load). Needed only inside EMV's MAC algorithm 3 and for known answers.
public enum InsecureSingleDES {
    public static func encryptECB(_ data: some DataProtocol, key: SymmetricKey) throws(CryptoError) -> [UInt8] {
        guard key.byteCount == 8 else { throw CryptoError(.invalidParameter, "a single-DES key is 8 bytes") }
        return try TripleDES.encryptECB(data, key: key)
    }

    public static func decryptECB(_ data: some DataProtocol, key: SymmetricKey) throws(CryptoError) -> [UInt8] {
        guard key.byteCount == 8 else { throw CryptoError(.invalidParameter, "a single-DES key is 8 bytes") }
        return try TripleDES.decryptECB(data, key: key)
    }
}

/// ISO/IEC 9797-1 MAC algorithm 3 (the "retail MAC") with a two-key TDES key K1 ‖ K2: CBC single DES
/// under K1 over all blocks, then the last block is decrypted under K2 and encrypted under K1.
public enum RetailMAC {
    /// ISO/IEC 9797-1 padding methods.
    public enum Padding: Sendable {
        /// Method 1: zero bytes to a whole block (none if already whole; empty data becomes one block).
        case method1
        /// Method 2: 0x80 then zero bytes to a whole block (always adds at least one byte).
        case method2
    }

    public static func pad(_ data: [UInt8], _ padding: Padding) -> [UInt8] {
        var out = data
        switch padding {
        case .method1:
            if out.isEmpty { out = [UInt8](repeating: 0, count: 8) }
            while out.count % 8 != 0 { out.append(0) }
        case .method2:
            out.append(0x80)
            while out.count % 8 != 0 { out.append(0) }
        }
        return out
    }

    /// The 8-byte MAC of `data` (callers truncate if their format says so).
    public static func mac(_ data: some DataProtocol, key: SymmetricKey, padding: Padding) throws(CryptoError) -> [UInt8] {
        guard key.byteCount == 16 else { throw CryptoError(.invalidParameter, "MAC algorithm 3 takes a 16-byte key") }
        let (k1, k2) = key.withUnsafeBytes { k in (SymmetricKey(data: k[0..<8]), SymmetricKey(data: k[8..<16])) }
        let padded = pad(Array(data), padding)
        let cbc = try TripleDES.encryptCBC(padded, key: k1)
        let last = Array(cbc.suffix(8))
        let decrypted = try InsecureSingleDES.decryptECB(last, key: k2)
        return try InsecureSingleDES.encryptECB(decrypted, key: k1)
    }
}
