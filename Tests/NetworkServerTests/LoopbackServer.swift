import OrchardCrypto
import OrchardHTTP
import OrchardLogging

/// `router` served over HTTPS on loopback with an ephemeral server certificate, client certificates optional and
/// checked against `clientRootsPEM` (by default the server's own certificate, which no client holds).
struct LoopbackServer {
    let server: HTTPServer
    let certificate: EphemeralCertificate

    init(router: Router, clientRootsPEM: String? = nil) throws {
        certificate = try EphemeralCertificate()
        server = try HTTPServer(
            configuration: HTTPServerConfiguration(
                listeners: [
                    .init(
                        port: 0,
                        tls: TLSServerConfiguration(
                            certificateChainPEM: certificate.certificatePEM, privateKeyPEM: certificate.privateKeyPEM,
                            clientCertificatePolicy: .optional,
                            trustedClientRootsPEM: clientRootsPEM ?? certificate.certificatePEM))
                ], threads: 1),
            router: router, logger: Logger(label: "test", level: .warning, sink: NullLogSink()))
        try server.start()
    }

    var base: String { "https://localhost:\(server.port)" }

    /// A client trusting this server, presenting `certificateChainPEM` and `privateKeyPEM` when given.
    func client(certificateChainPEM: String? = nil, privateKeyPEM: SecureBytes? = nil) throws -> HTTPClient {
        try HTTPClient(
            configuration: HTTPClientConfiguration(
                trustedRootsPEM: certificate.certificatePEM, clientCertificateChainPEM: certificateChainPEM,
                clientPrivateKeyPEM: privateKeyPEM))
    }
}
