internal import COpenSSL
internal import CShims
package import Foundation

// Internal wrappers over OpenSSL objects. Each owned C object lives in a final class that frees it in
// `deinit`; raw pointers are lent only inside `with…` closures. `package` so OrchardX509 and the
// benchmarks can use them; nothing here is public.

/// An owned `EVP_PKEY`. OpenSSL 3 keys are safe to share read-only between threads.
package final class EVPKey: @unchecked Sendable {
    package let pointer: OpaquePointer

    package init(owning pointer: OpaquePointer) { self.pointer = pointer }

    /// Takes a reference on a key OpenSSL still owns (e.g. inside a certificate).
    package init(retaining pointer: OpaquePointer) {
        EVP_PKEY_up_ref(pointer)
        self.pointer = pointer
    }

    deinit { EVP_PKEY_free(pointer) }

    package var bits: Int { Int(EVP_PKEY_get_bits(pointer)) }
    package func isA(_ name: String) -> Bool { EVP_PKEY_is_a(pointer, name) == 1 }
}

/// An owned `BIO` over memory.
package final class MemoryBIO {
    package let pointer: OpaquePointer
    private var retained: UnsafeMutableRawBufferPointer?

    /// A BIO to write into.
    package init() throws(CryptoError) {
        pointer = try nonNull(BIO_new(BIO_s_mem()), .internalFailure, "BIO_new failed")
    }

    /// A read-only BIO over a private copy of `bytes` (`BIO_new_mem_buf` does not copy).
    package init(copying bytes: some DataProtocol) throws(CryptoError) {
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 1)
        _ = bytes.copyBytes(to: copy)
        retained = copy
        guard let bio = BIO_new_mem_buf(copy.baseAddress, Int32(bytes.count)) else {
            copy.deallocate()
            throw CryptoError(.internalFailure, "BIO_new_mem_buf failed")
        }
        pointer = bio
    }

    deinit {
        BIO_free(pointer)
        if let retained {
            OPENSSL_cleanse(retained.baseAddress, retained.count)
            retained.deallocate()
        }
    }

    /// What was written so far.
    package func contents() -> [UInt8] {
        var data: UnsafePointer<UInt8>?
        let n = orchard_BIO_get_mem_data(pointer, &data)
        guard n > 0, let data else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: n))
    }
}

/// Reads the first private key in `pem`, skipping blocks that hold none (such as the `EC PARAMETERS` block
/// `openssl ecparam -genkey` writes first). An encrypted key fails instead of prompting: OpenSSL's default
/// password callback would read a passphrase from the terminal, which a server or a CLI with a closed stdin
/// must never do. Returns nil when no unencrypted private key is found, with OpenSSL's reasons left queued
/// for the caller's ``CryptoError``.
package func readPrivateKeyPEM(_ pem: String) throws(CryptoError) -> EVPKey? {
    readPrivateKey(try MemoryBIO(copying: Array(pem.utf8)))
}

/// The same for a PEM held in ``SecureBytes`` (a server's key file), read without a `String` copy of the key.
package func readPrivateKeyPEM(_ pem: SecureBytes) throws(CryptoError) -> EVPKey? {
    readPrivateKey(try pem.withUnsafeBytes { bytes throws(CryptoError) in try MemoryBIO(copying: bytes) })
}

private func readPrivateKey(_ bio: MemoryBIO) -> EVPKey? {
    PEM_read_bio_PrivateKey(bio.pointer, nil, { _, _, _, _ in 0 }, nil).map { EVPKey(owning: $0) }
}

/// C strings that must outlive a call (OSSL_PARAM keeps the pointers it is given). Allocated once, never freed.
package enum CString {
    package static func make(_ s: String) -> UnsafeMutablePointer<CChar> { strdup(s)! }
}

/// Algorithms fetched once: implicit fetches (`EVP_sha256()`) cost about 20 % per small operation.
package enum Fetched {
    nonisolated(unsafe) package static let sha1 = EVP_MD_fetch(nil, "SHA1", nil)!
    nonisolated(unsafe) package static let sha256 = EVP_MD_fetch(nil, "SHA256", nil)!
    nonisolated(unsafe) package static let sha384 = EVP_MD_fetch(nil, "SHA384", nil)!
    nonisolated(unsafe) package static let aes128GCM = EVP_CIPHER_fetch(nil, "AES-128-GCM", nil)!
    nonisolated(unsafe) package static let aes192GCM = EVP_CIPHER_fetch(nil, "AES-192-GCM", nil)!
    nonisolated(unsafe) package static let aes256GCM = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil)!
    nonisolated(unsafe) package static let desEDE3ECB = EVP_CIPHER_fetch(nil, "DES-EDE3-ECB", nil)!
    nonisolated(unsafe) package static let desEDE3CBC = EVP_CIPHER_fetch(nil, "DES-EDE3-CBC", nil)!
    nonisolated(unsafe) package static let hmac = EVP_MAC_fetch(nil, "HMAC", nil)!
    nonisolated(unsafe) package static let hkdf = EVP_KDF_fetch(nil, "HKDF", nil)!
}

/// OSSL_PARAM keys and values that must stay valid while OpenSSL reads them.
package enum ParamName {
    nonisolated(unsafe) package static let digest = CString.make("digest")
    nonisolated(unsafe) package static let key = CString.make("key")
    nonisolated(unsafe) package static let salt = CString.make("salt")
    nonisolated(unsafe) package static let info = CString.make("info")
    nonisolated(unsafe) package static let oaepLabel = CString.make("oaep-label")
    nonisolated(unsafe) package static let sha1 = CString.make("SHA1")
    nonisolated(unsafe) package static let sha256 = CString.make("SHA256")
    nonisolated(unsafe) package static let sha384 = CString.make("SHA384")
}

extension UnsafeRawBufferPointer {
    /// A non-null byte pointer even for empty buffers (OpenSSL rejects NULL with length 0 in places).
    @inline(__always)
    package var bytePointer: UnsafePointer<UInt8> {
        if let base = baseAddress { return base.assumingMemoryBound(to: UInt8.self) }
        return UnsafePointer(emptyByte)
    }
}

nonisolated(unsafe) private let emptyByte = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
