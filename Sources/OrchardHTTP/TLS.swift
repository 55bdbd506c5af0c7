internal import CHTTPShims
internal import COpenSSL
import Foundation
public import OrchardCrypto
import OrchardX509

/// Whether a listener asks for client certificates.
public enum ClientCertificatePolicy: String, Sendable, CaseIterable {
    /// No certificate is requested.
    case none
    /// A certificate is requested; a connection without one is accepted, one with a certificate that
    /// does not verify against the trusted roots is refused during the handshake.
    case optional
    /// A verified certificate is needed; the handshake fails without one (with TLS 1.3 the client
    /// sees the failure on its first read).
    case required
}

/// The lowest TLS version a side accepts.
public enum TLSVersion: Sendable {
    case tls12
    case tls13

    var openSSLValue: Int { self == .tls12 ? Int(TLS1_2_VERSION) : Int(TLS1_3_VERSION) }
}

/// A listener's TLS identity and client-certificate policy.
public struct TLSServerConfiguration: Sendable {
    /// The server certificate, then any intermediates, as PEM.
    public var certificateChainPEM: String
    /// The server's private key as PEM (PKCS#8 or traditional).
    public var privateKeyPEM: SecureBytes
    public var clientCertificatePolicy: ClientCertificatePolicy
    /// The roots client certificates must chain to; required unless the policy is `.none`.
    public var trustedClientRootsPEM: String?
    public var minimumVersion: TLSVersion
    /// Serve TLS 1.1 and nothing newer (at OpenSSL security level 0, which TLS 1.1 needs): only for tests that
    /// show a client refusing an outdated site.
    package var legacyTLS11Only = false

    public init(
        certificateChainPEM: String, privateKeyPEM: SecureBytes,
        clientCertificatePolicy: ClientCertificatePolicy = .none,
        trustedClientRootsPEM: String? = nil, minimumVersion: TLSVersion = .tls12
    ) {
        self.certificateChainPEM = certificateChainPEM
        self.privateKeyPEM = privateKeyPEM
        self.clientCertificatePolicy = clientCertificatePolicy
        self.trustedClientRootsPEM = trustedClientRootsPEM
        self.minimumVersion = minimumVersion
    }
}

/// A client certificate the server verified, as a handler sees it.
public struct ClientCertificate: Sendable, Hashable, CustomStringConvertible {
    /// The certificate's DER encoding.
    public let derRepresentation: [UInt8]
    /// The subject as an RFC 2253 string, e.g. `CN=merchant.test,OU=Payments,O=Orchard Test Merchant`.
    public let subject: String
    /// The issuer as an RFC 2253 string.
    public let issuer: String
    /// The subject's commonName (the last one, if several), UTF-8.
    public let commonName: String?
    /// The subject's organizationName.
    public let organization: String?
    /// The subject's organizationalUnitName.
    public let organizationalUnit: String?
    /// The serial number in upper-case hex.
    public let serialNumber: String

    /// SHA-256 of the DER, the usual way to pin or identify a certificate.
    public var sha256Fingerprint: [UInt8] { SHA256.hash(derRepresentation) }
    public var description: String { "ClientCertificate(\(subject))" }
}

/// An owned `SSL_CTX` configured for a listener.
final class ServerTLSContext: @unchecked Sendable {
    // Read-only once built; OpenSSL 3 allows SSL_new from several threads on one SSL_CTX.
    let pointer: OpaquePointer
    let policy: ClientCertificatePolicy

    init(_ configuration: TLSServerConfiguration) throws(HTTPError) {
        guard let ctx = SSL_CTX_new(TLS_server_method()) else {
            throw TLSErrors.make(.tlsFailure, "SSL_CTX_new failed")
        }
        pointer = ctx
        policy = configuration.clientCertificatePolicy
        try TLSErrors.check(
            SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, configuration.minimumVersion.openSSLValue, nil),
            "the minimum TLS version was refused")
        SSL_CTX_set_options(ctx, orchard_ssl_op_no_renegotiation())
        if configuration.legacyTLS11Only {
            try TLSErrors.check(
                SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, Int(TLS1_1_VERSION), nil),
                "the minimum TLS version was refused")
            try TLSErrors.check(
                SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MAX_PROTO_VERSION, Int(TLS1_1_VERSION), nil),
                "the maximum TLS version was refused")
            try TLSErrors.check(
                SSL_CTX_set_cipher_list(ctx, "DEFAULT:@SECLEVEL=0"), "the TLS 1.1 cipher list was refused")
        }

        let chain = try PEMObjects.certificates(configuration.certificateChainPEM, what: "server certificate chain")
        guard let leaf = chain.first else {
            throw HTTPError(.invalidConfiguration, "the server certificate chain holds no CERTIFICATE block")
        }
        try TLSErrors.check(SSL_CTX_use_certificate(ctx, leaf.pointer), "the server certificate was refused")
        for intermediate in chain.dropFirst() {
            // SSL_CTX_add1_chain_cert is a macro over SSL_CTX_ctrl; add1 takes its own reference.
            try TLSErrors.check(
                SSL_CTX_ctrl(ctx, SSL_CTRL_CHAIN_CERT, 1, UnsafeMutableRawPointer(intermediate.pointer)),
                "an intermediate certificate was refused")
        }
        let key = try PEMObjects.privateKey(configuration.privateKeyPEM)
        try TLSErrors.check(SSL_CTX_use_PrivateKey(ctx, key.pointer), "the server private key was refused")
        try TLSErrors.check(SSL_CTX_check_private_key(ctx), "the server private key does not match its certificate")

        // Sessions resumed with tickets keep the client's verified certificate; the id context is
        // required for that when clients are verified.
        let context = Array("orchard-http".utf8)
        try TLSErrors.check(
            SSL_CTX_set_session_id_context(ctx, context, UInt32(context.count)), "the session id context was refused")

        switch configuration.clientCertificatePolicy {
        case .none:
            SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nil)
        case .optional, .required:
            guard let rootsPEM = configuration.trustedClientRootsPEM else {
                throw HTTPError(
                    .invalidConfiguration,
                    "client certificate policy \(configuration.clientCertificatePolicy) needs trusted client roots")
            }
            let roots = try PEMObjects.certificates(rootsPEM, what: "trusted client roots")
            guard !roots.isEmpty else {
                throw HTTPError(.invalidConfiguration, "the trusted client roots hold no CERTIFICATE block")
            }
            guard let store = X509_STORE_new() else { throw TLSErrors.make(.tlsFailure, "X509_STORE_new failed") }
            for root in roots {
                guard X509_STORE_add_cert(store, root.pointer) == 1 else {
                    X509_STORE_free(store)
                    throw TLSErrors.make(.tlsFailure, "a trusted client root was refused")
                }
                // Tells clients which roots we accept (the certificate_authorities list).
                guard SSL_CTX_add_client_CA(ctx, root.pointer) == 1 else {
                    X509_STORE_free(store)
                    throw TLSErrors.make(.tlsFailure, "a trusted client root could not be announced")
                }
            }
            SSL_CTX_set_cert_store(ctx, store)  // the context now owns the store
            var mode = SSL_VERIFY_PEER
            if configuration.clientCertificatePolicy == .required { mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT }
            SSL_CTX_set_verify(ctx, mode, nil)
        }
        _ = drainOpenSSLErrors()
    }

    deinit { SSL_CTX_free(pointer) }
}

/// Certificates and keys parsed from PEM into the crypto modules' owners of OpenSSL objects
/// (OrchardX509's `OpenSSLCertificate`, OrchardCrypto's `EVPKey`), so this module frees nothing itself.
enum PEMObjects {
    /// Every CERTIFICATE block of `pem`, in order.
    static func certificates(_ pem: String, what: String) throws(HTTPError) -> [OpenSSLCertificate] {
        let blocks: [(label: String, der: [UInt8])]
        do {
            blocks = try pemBlocks(pem)
        } catch {
            throw HTTPError(.invalidConfiguration, "the \(what) is not valid PEM: \(error.message)")
        }
        var out: [OpenSSLCertificate] = []
        for block in blocks where block.label == "CERTIFICATE" {
            do {
                out.append(try OpenSSLCertificate(der: block.der))
            } catch {
                throw HTTPError(
                    .invalidConfiguration, "a certificate in the \(what) is not valid DER: \(error.message)")
            }
        }
        return out
    }

    /// The first unencrypted private key in `pem` (an encrypted one is refused, never prompted for).
    static func privateKey(_ pem: SecureBytes) throws(HTTPError) -> EVPKey {
        let key: EVPKey?
        do {
            key = try readPrivateKeyPEM(pem)
        } catch {
            throw HTTPError(.internalFailure, "could not buffer the private key: \(error.message)")
        }
        guard let key else {
            throw TLSErrors.make(.invalidConfiguration, "the private key is not a valid unencrypted PEM key")
        }
        return key
    }
}

/// Maps OpenSSL failures to `HTTPError`, emptying OpenSSL's error queue into the message.
enum TLSErrors {
    static func make(_ code: HTTPError.Code, _ message: String) -> HTTPError {
        let details = drainOpenSSLErrors()
        return HTTPError(code, details.isEmpty ? message : "\(message) (\(details.joined(separator: "; ")))")
    }

    static func check(_ rc: Int32, _ message: @autoclosure () -> String) throws(HTTPError) {
        if rc != 1 { throw make(.tlsFailure, message()) }
    }

    static func check(_ rc: Int, _ message: @autoclosure () -> String) throws(HTTPError) {
        if rc != 1 { throw make(.tlsFailure, message()) }
    }
}

/// Reads what a handler needs from a verified peer certificate.
enum PeerCertificate {
    /// The peer certificate of `ssl`, if the peer sent one and it verified.
    static func verified(_ ssl: OpaquePointer) -> ClientCertificate? {
        guard let x509 = SSL_get0_peer_certificate(ssl), SSL_get_verify_result(ssl) == X509_V_OK else { return nil }
        return describe(x509)
    }

    static func describe(_ x509: OpaquePointer) -> ClientCertificate? {
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509(x509, &out)
        guard length > 0, let out else { return nil }
        let der = Array(UnsafeBufferPointer(start: out, count: Int(length)))
        orchard_http_openssl_free(out)
        let subjectName = X509_get_subject_name(x509)
        let serial: String = {
            guard let bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(x509), nil) else { return "" }
            defer { BN_free(bn) }
            guard let hex = BN_bn2hex(bn) else { return "" }
            defer { orchard_http_openssl_free(hex) }
            return String(cString: hex)
        }()
        return ClientCertificate(
            derRepresentation: der, subject: rfc2253(subjectName), issuer: rfc2253(X509_get_issuer_name(x509)),
            commonName: entry(subjectName, NID_commonName), organization: entry(subjectName, NID_organizationName),
            organizationalUnit: entry(subjectName, NID_organizationalUnitName), serialNumber: serial)
    }

    static func rfc2253(_ name: OpaquePointer?) -> String {
        guard let name, let bio = try? MemoryBIO() else {
            _ = drainOpenSSLErrors()
            return ""
        }
        guard X509_NAME_print_ex(bio.pointer, name, 0, orchard_xn_flag_rfc2253()) >= 0 else {
            _ = drainOpenSSLErrors()
            return ""
        }
        return String(decoding: bio.contents(), as: UTF8.self)
    }

    /// The last entry of `nid` in `name`, as UTF-8.
    static func entry(_ name: OpaquePointer?, _ nid: Int32) -> String? {
        guard let name else { return nil }
        var index: Int32 = -1
        var found: Int32 = -1
        while true {
            index = X509_NAME_get_index_by_NID(name, nid, index)
            if index < 0 { break }
            found = index
        }
        guard found >= 0, let entry = X509_NAME_get_entry(name, found), let data = X509_NAME_ENTRY_get_data(entry)
        else { return nil }
        var utf8: UnsafeMutablePointer<UInt8>?
        let length = ASN1_STRING_to_UTF8(&utf8, data)
        guard length >= 0, let utf8 else { return nil }
        defer { orchard_http_openssl_free(utf8) }
        return String(decoding: UnsafeBufferPointer(start: utf8, count: Int(length)), as: UTF8.self)
    }
}
