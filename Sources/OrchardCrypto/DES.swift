internal import COpenSSL
public import Foundation

/// Triple DES (EDE), as EMV uses it: two-key (K1 ‖ K2, 16 bytes) or three-key (24 bytes), ECB and CBC
/// without padding. Weak by today's standards; it exists because payment cards still run on it. An 8-byte
/// key is refused here: single DES is only reachable through the loudly named ``InsecureSingleDES``.
public enum TripleDES {
    /// The DES block size in bytes.
    public static let blockByteCount = 8

    /// Encrypts whole 8-byte blocks in ECB mode.
    public static func encryptECB(_ data: some DataProtocol, key: SymmetricKey) throws(CryptoError) -> [UInt8] {
        try DESCore.run(Fetched.desEDE3ECB, key: tripleKey(key), iv: nil, data: data, encrypt: true)
    }

    /// Decrypts whole 8-byte blocks in ECB mode.
    public static func decryptECB(_ data: some DataProtocol, key: SymmetricKey) throws(CryptoError) -> [UInt8] {
        try DESCore.run(Fetched.desEDE3ECB, key: tripleKey(key), iv: nil, data: data, encrypt: false)
    }

    /// Encrypts whole 8-byte blocks in CBC mode (IV 8 zero bytes unless given).
    public static func encryptCBC(
        _ data: some DataProtocol, key: SymmetricKey, iv: [UInt8] = [UInt8](repeating: 0, count: 8)
    ) throws(CryptoError) -> [UInt8] {
        try DESCore.run(Fetched.desEDE3CBC, key: tripleKey(key), iv: iv, data: data, encrypt: true)
    }

    /// Decrypts whole 8-byte blocks in CBC mode.
    public static func decryptCBC(
        _ data: some DataProtocol, key: SymmetricKey, iv: [UInt8] = [UInt8](repeating: 0, count: 8)
    ) throws(CryptoError) -> [UInt8] {
        try DESCore.run(Fetched.desEDE3CBC, key: tripleKey(key), iv: iv, data: data, encrypt: false)
    }

    /// The key check value: the first `length` (1 to 8, usually 3) bytes of the encryption of eight zero bytes.
    public static func keyCheckValue(_ key: SymmetricKey, length: Int = 3) throws(CryptoError) -> [UInt8] {
        guard (1...8).contains(length) else {
            throw CryptoError(.invalidParameter, "a key check value is 1 to 8 bytes, not \(length)")
        }
        return Array(try encryptECB([UInt8](repeating: 0, count: 8), key: key).prefix(length))
    }

    /// The 24 bytes DES-EDE3 takes: K1‖K2 → K1‖K2‖K1 for two-key TDES, the key itself for three-key.
    static func tripleKey(_ key: SymmetricKey) throws(CryptoError) -> SecureBytes {
        try key.withUnsafeBytes { (k) throws(CryptoError) -> SecureBytes in
            switch k.count {
            case 16: return DESCore.concatenate(k, UnsafeRawBufferPointer(rebasing: k[0..<8]))
            case 24: return key.bytes
            default:
                throw CryptoError(
                    .invalidParameter, "Triple DES keys are 16 (two-key) or 24 (three-key) bytes, not \(k.count)")
            }
        }
    }
}

/// Single DES, computed as DES-EDE3 with K‖K‖K (OpenSSL 3 keeps plain DES in the legacy provider,
/// which Orchard does not load). Needed only inside EMV's MAC algorithm 3 and for known answers.
public enum InsecureSingleDES {
    /// Encrypts whole 8-byte blocks in ECB mode under an 8-byte key.
    public static func encryptECB(_ data: some DataProtocol, key: SymmetricKey) throws(CryptoError) -> [UInt8] {
        try DESCore.run(Fetched.desEDE3ECB, key: singleKey(key), iv: nil, data: data, encrypt: true)
    }

    /// Decrypts whole 8-byte blocks in ECB mode under an 8-byte key.
    public static func decryptECB(_ data: some DataProtocol, key: SymmetricKey) throws(CryptoError) -> [UInt8] {
        try DESCore.run(Fetched.desEDE3ECB, key: singleKey(key), iv: nil, data: data, encrypt: false)
    }

    /// CBC encryption with a zero IV, for MAC algorithm 3.
    static func encryptCBC(_ data: [UInt8], key: SymmetricKey) throws(CryptoError) -> [UInt8] {
        try DESCore.run(
            Fetched.desEDE3CBC, key: singleKey(key), iv: [UInt8](repeating: 0, count: 8), data: data, encrypt: true)
    }

    static func singleKey(_ key: SymmetricKey) throws(CryptoError) -> SecureBytes {
        try key.withUnsafeBytes { (k) throws(CryptoError) -> SecureBytes in
            guard k.count == 8 else {
                throw CryptoError(.invalidParameter, "a single-DES key is 8 bytes, not \(k.count)")
            }
            return DESCore.concatenate(k, k, k)
        }
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

    /// `data` padded to a positive multiple of 8 bytes.
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

    /// The 8-byte MAC of `data` under a 16-byte key (callers truncate if their format says so).
    public static func mac(
        _ data: some DataProtocol, key: SymmetricKey, padding: Padding
    ) throws(CryptoError) -> [UInt8] {
        guard key.byteCount == 16 else {
            throw CryptoError(.invalidParameter, "MAC algorithm 3 takes a 16-byte key, not \(key.byteCount)")
        }
        let (k1, k2) = key.withUnsafeBytes { k in (SymmetricKey(data: k[0..<8]), SymmetricKey(data: k[8..<16])) }
        let cbc = try InsecureSingleDES.encryptCBC(pad(Array(data), padding), key: k1)
        let decrypted = try InsecureSingleDES.decryptECB(cbc.suffix(8), key: k2)
        return try InsecureSingleDES.encryptECB(decrypted, key: k1)
    }
}

/// The one place DES-EDE3 runs.
private enum DESCore {
    /// Concatenates key parts straight into secure storage (no intermediate array holds the key).
    static func concatenate(_ parts: UnsafeRawBufferPointer...) -> SecureBytes {
        let total = parts.reduce(0) { $0 + $1.count }
        // Cannot throw: the body only copies.
        return try! SecureBytes(count: total) { (out) throws(CryptoError) in
            var offset = 0
            for part in parts {
                UnsafeMutableRawBufferPointer(rebasing: out[offset..<offset + part.count]).copyMemory(from: part)
                offset += part.count
            }
        }
    }

    static func run(
        _ cipher: OpaquePointer, key: SecureBytes, iv: [UInt8]?, data: some DataProtocol, encrypt: Bool
    ) throws(CryptoError) -> [UInt8] {
        guard data.count % 8 == 0 else {
            throw CryptoError(.invalidParameter, "DES works on whole 8-byte blocks, not \(data.count) bytes; pad first")
        }
        if let iv, iv.count != 8 { throw CryptoError(.invalidParameter, "the DES IV is 8 bytes, not \(iv.count)") }
        guard key.count == 24 else { throw CryptoError(.internalFailure, "DES-EDE3 needs a 24-byte key") }
        guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError(.internalFailure, "EVP_CIPHER_CTX_new failed") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        try key.withUnsafeBytes { (k) throws(CryptoError) in
            try check(
                EVP_CipherInit_ex2(ctx, cipher, k.bytePointer, iv, encrypt ? 1 : 0, nil), .internalFailure,
                "DES key setup failed")
        }
        try check(EVP_CIPHER_CTX_set_padding(ctx, 0), .internalFailure, "DES padding setup failed")
        return try withContiguousBytes(data) { (d) throws(CryptoError) -> [UInt8] in
            // No padding: the output is exactly as long as the input.
            var out = [UInt8](repeating: 0, count: d.count + 8)
            var length: Int32 = 0
            if d.count > 0 {
                try check(
                    EVP_CipherUpdate(ctx, &out, &length, d.bytePointer, Int32(d.count)), .internalFailure, "DES failed")
            }
            var tail: Int32 = 0
            try out.withUnsafeMutableBufferPointer { (o) throws(CryptoError) in
                try check(EVP_CipherFinal_ex(ctx, o.baseAddress! + Int(length), &tail), .internalFailure, "DES failed")
            }
            out.removeSubrange(Int(length + tail)...)
            return out
        }
    }
}
