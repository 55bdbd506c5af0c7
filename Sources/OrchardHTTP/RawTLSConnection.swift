internal import CHTTPShims
internal import COpenSSL
import Foundation
package import OrchardCrypto
import OrchardX509

/// A blocking TLS client socket that sends exactly the bytes it is given: for tests that must
/// misbehave on purpose (stall in the headers, hold connections open, present odd certificates).
/// Not for production use: every call blocks its thread, so call it from ``BlockingThreadPool``.
package final class RawTLSConnection: @unchecked Sendable {  // used by one thread at a time
    private let context: OpaquePointer
    private let ssl: OpaquePointer
    private let fd: Int32
    private var closed = false

    /// Connects to `host:port` and completes the handshake, verifying the server against
    /// `trustedRootPEM` and presenting the client certificate if given. Every later read waits at most
    /// `timeout`.
    package init(
        host: String = "127.0.0.1", port: Int, trustedRootPEM: String, certificatePEM: String? = nil,
        privateKeyPEM: SecureBytes? = nil, timeout: Duration = .seconds(10)
    ) throws(HTTPError) {
        // Everything is parsed before the SSL_CTX exists, so a bad PEM cannot leak it.
        let roots = try PEMObjects.certificates(trustedRootPEM, what: "trusted root")
        var identity: (certificate: OpenSSLCertificate, key: EVPKey)?
        if let certificatePEM, let privateKeyPEM {
            guard let certificate = try PEMObjects.certificates(certificatePEM, what: "client certificate").first
            else { throw HTTPError(.invalidConfiguration, "no client certificate") }
            identity = (certificate, try PEMObjects.privateKey(privateKeyPEM))
        }
        guard let context = SSL_CTX_new(TLS_client_method()) else {
            throw TLSErrors.make(.tlsFailure, "SSL_CTX_new failed")
        }
        self.context = context
        let store = SSL_CTX_get_cert_store(context)
        for root in roots where X509_STORE_add_cert(store, root.pointer) != 1 {
            SSL_CTX_free(context)
            throw TLSErrors.make(.tlsFailure, "a trusted root was refused")
        }
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        if let identity {
            guard SSL_CTX_use_certificate(context, identity.certificate.pointer) == 1,
                SSL_CTX_use_PrivateKey(context, identity.key.pointer) == 1
            else {
                SSL_CTX_free(context)
                throw TLSErrors.make(.tlsFailure, "the client certificate or key was refused")
            }
        }

        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.fd = fd
        guard fd >= 0 else {
            SSL_CTX_free(context)
            throw HTTPError(.connectionFailed, "socket() failed")
        }
        let (seconds, attoseconds) = timeout.components
        var limit = timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0, let ssl = SSL_new(context) else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            SSL_CTX_free(context)
            throw HTTPError(.connectionFailed, "cannot connect to \(host):\(port): \(reason)")
        }
        self.ssl = ssl
        let named = "localhost".withCString { name in  // OpenSSL copies the name
            SSL_ctrl(
                ssl, SSL_CTRL_SET_TLSEXT_HOSTNAME, Int(TLSEXT_NAMETYPE_host_name),
                UnsafeMutableRawPointer(mutating: name))
        }
        guard SSL_set_fd(ssl, fd) == 1, named == 1 else {
            let error = TLSErrors.make(.tlsFailure, "the TLS connection could not be set up")
            close()
            throw error
        }
        guard SSL_connect(ssl) == 1 else {
            let error = TLSErrors.make(.connectionFailed, "the TLS handshake failed")
            close()  // every property is set, so deinit will run too; close() frees only once
            throw error
        }
    }

    deinit { close() }

    /// Writes all of `bytes`.
    package func write(_ bytes: [UInt8]) throws(HTTPError) {
        guard !bytes.isEmpty else { return }
        let written = bytes.withUnsafeBytes { SSL_write(ssl, $0.baseAddress, Int32($0.count)) }
        guard written == Int32(bytes.count) else {
            throw TLSErrors.make(.transportFailure, "the write failed (the server may have closed the connection)")
        }
    }

    /// Reads what is available (blocking until something is). An empty result means the server closed
    /// the connection (cleanly or with a reset); waiting longer than the timeout throws `timedOut`.
    package func read(maxBytes: Int = 65536) throws(HTTPError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: maxBytes)
        let count = buffer.withUnsafeMutableBytes { SSL_read(ssl, $0.baseAddress, Int32($0.count)) }
        if count > 0 { return Array(buffer.prefix(Int(count))) }
        let reason = SSL_get_error(ssl, count)
        let savedErrno = errno
        _ = drainOpenSSLErrors()
        if reason == SSL_ERROR_ZERO_RETURN { return [] }
        if reason == SSL_ERROR_SYSCALL && (savedErrno == EAGAIN || savedErrno == EWOULDBLOCK) {
            throw HTTPError(.timedOut, "nothing arrived before the read timeout")
        }
        if reason == SSL_ERROR_WANT_READ { throw HTTPError(.timedOut, "nothing arrived before the read timeout") }
        return []  // EOF without close_notify, reset, or a TLS alert: the connection is gone
    }

    /// Reads one HTTP response (headers, then a `Content-Length` body) and returns its status and body.
    package func readResponse() throws(HTTPError) -> (status: Int, body: [UInt8]) {
        var data: [UInt8] = []
        let separator: [UInt8] = [13, 10, 13, 10]
        while true {
            if let end = Self.find(separator, in: data) {
                let head = String(decoding: data[..<end], as: UTF8.self)
                let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
                let length =
                    head.split(separator: "\r\n").compactMap { line -> Int? in
                        let parts = line.split(separator: ":", maxSplits: 1)
                        guard parts.count == 2, parts[0].lowercased() == "content-length" else { return nil }
                        return Int(parts[1].trimmingCharacters(in: .whitespaces))
                    }.first ?? 0
                while data.count < end + 4 + length {
                    let more = try read()
                    if more.isEmpty { throw HTTPError(.transportFailure, "the response ended early") }
                    data += more
                }
                return (status, Array(data[(end + 4)..<(end + 4 + length)]))
            }
            let more = try read()
            if more.isEmpty { throw HTTPError(.transportFailure, "the connection closed before a response") }
            data += more
        }
    }

    package func close() {
        guard !closed else { return }
        closed = true
        SSL_free(ssl)
        Glibc.close(fd)
        SSL_CTX_free(context)
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count)
        where haystack[start..<(start + needle.count)].elementsEqual(needle) {
            return start
        }
        return nil
    }
}
