internal import COpenSSL
import Foundation
public import OrchardCrypto

/// A throwaway TLS identity made in memory: a self-signed P-256 certificate for `localhost` and
/// `127.0.0.1`. For local tools (the benchmark, a development echo server); a client must trust
/// exactly this certificate (it is its own root), so nothing else accepts it.
public struct EphemeralCertificate: Sendable {
    public let certificatePEM: String
    public let privateKeyPEM: SecureBytes

    /// Generates a key and a certificate valid from an hour ago for `days` days.
    public init(commonName: String = "localhost", days: Int = 30) throws(HTTPError) {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
            throw TLSErrors.make(.internalFailure, "EVP_PKEY_CTX_new_from_name failed")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_CTX_set_group_name(context, "P-256") == 1,
            EVP_PKEY_generate(context, &key) == 1, let key
        else { throw TLSErrors.make(.internalFailure, "P-256 key generation failed") }
        defer { EVP_PKEY_free(key) }

        guard let x509 = X509_new() else { throw TLSErrors.make(.internalFailure, "X509_new failed") }
        defer { X509_free(x509) }
        let serial = SystemRandom().bytes(8)
        let serialNumber = serial.reduce(0) { ($0 << 8) | Int($1) } & Int.max
        guard X509_set_version(x509, 2) == 1,
            ASN1_INTEGER_set(X509_get_serialNumber(x509), serialNumber | 1) == 1,
            X509_gmtime_adj(X509_getm_notBefore(x509), -3600) != nil,
            X509_gmtime_adj(X509_getm_notAfter(x509), days * 86_400) != nil,
            X509_set_pubkey(x509, key) == 1,
            let name = X509_get_subject_name(x509),
            X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, commonName, -1, -1, 0) == 1,
            X509_set_issuer_name(x509, name) == 1
        else { throw TLSErrors.make(.internalFailure, "building the certificate failed") }
        for (nid, value) in [
            (NID_basic_constraints, "critical,CA:FALSE"), (NID_key_usage, "critical,digitalSignature"),
            (NID_ext_key_usage, "serverAuth,clientAuth"), (NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1"),
        ] {
            guard let extensionObject = X509V3_EXT_conf_nid(nil, nil, nid, value) else {
                throw TLSErrors.make(.internalFailure, "building a certificate extension failed")
            }
            defer { X509_EXTENSION_free(extensionObject) }
            guard X509_add_ext(x509, extensionObject, -1) == 1 else {
                throw TLSErrors.make(.internalFailure, "adding a certificate extension failed")
            }
        }
        guard X509_sign(x509, key, EVP_sha256()) > 0 else {
            throw TLSErrors.make(.internalFailure, "signing the certificate failed")
        }

        let certificateBIO: MemoryBIO
        let keyBIO: MemoryBIO
        do {
            certificateBIO = try MemoryBIO()
            keyBIO = try MemoryBIO()
        } catch {
            throw HTTPError(.internalFailure, "BIO_new failed")
        }
        guard PEM_write_bio_X509(certificateBIO.pointer, x509) == 1,
            PEM_write_bio_PrivateKey(keyBIO.pointer, key, nil, nil, 0, nil, nil) == 1
        else { throw TLSErrors.make(.internalFailure, "writing PEM failed") }
        certificatePEM = String(decoding: certificateBIO.contents(), as: UTF8.self)
        var keyBytes = keyBIO.contents()
        privateKeyPEM = SecureBytes(keyBytes)
        for index in keyBytes.indices { keyBytes[index] = 0 }
    }
}
