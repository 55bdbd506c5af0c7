import CommandTestSupport
import Foundation
import OrchardCrypto
import OrchardLogging
import OrchardX509
import Testing

@testable import OrchardHTTP

/// The TLS contexts read their certificates and keys through OrchardX509's and OrchardCrypto's owners of OpenSSL
/// objects, and the ephemeral identity is issued by OrchardX509: certificates issued here, at run time, must be
/// served, verified and refused exactly as the checked-in test PKI is.
@Suite("TLS objects")
struct TLSObjectTests {
    /// A P-256 CA issued at run time, and the leaves it signs.
    struct Authority {
        let key: CertificatePrivateKey
        let certificate: Certificate

        init(_ name: String, parent: Authority? = nil) throws {
            key = CertificatePrivateKey(try P256.Signing.PrivateKey())
            let now = Date()
            certificate = try Certificate.issue(
                subject: DistinguishedName([.commonName(name), .organization("Orchard Test")]),
                publicKey: key.publicKey,
                issuer: parent.map { .certificate($0.certificate, key: $0.key) } ?? .selfSigned(key),
                notValidBefore: now - 3600, notValidAfter: now + 86_400,
                extensions: [
                    .basicConstraints(isCA: true, pathLength: parent == nil ? 1 : 0), .keyUsage([.keyCertSign]),
                ])
        }

        /// A leaf for `commonName`: (certificate PEM, private key PEM).
        func issue(_ commonName: String, server: Bool) throws -> (String, SecureBytes) {
            let key = CertificatePrivateKey(try P256.Signing.PrivateKey())
            let now = Date()
            var extensions: [Certificate.Extension] = [
                .basicConstraints(isCA: false), .keyUsage(.digitalSignature),
                .extendedKeyUsage([server ? .serverAuth : .clientAuth]),
            ]
            if server {
                extensions.append(
                    try .subjectAlternativeNames(dnsNames: ["localhost"], ipAddresses: [[127, 0, 0, 1]]))
            }
            let leaf = try Certificate.issue(
                subject: DistinguishedName([.commonName(commonName)]), publicKey: key.publicKey,
                issuer: .certificate(certificate, key: self.key), notValidBefore: now - 60,
                notValidAfter: now + 3600, extensions: extensions)
            return (leaf.pemRepresentation, try key.pkcs8PEM)
        }
    }

    static func whoRoutes() -> Router {
        var router = Router()
        router.get("/who") { request in .text(request.clientCertificate?.commonName ?? "anonymous") }
        return router
    }

    static func client(trusting root: Certificate, identity: (String, SecureBytes)? = nil) throws -> HTTPClient {
        var configuration = HTTPClientConfiguration(trustedRootsPEM: root.pemRepresentation, maxAttempts: 1)
        configuration.clientCertificateChainPEM = identity?.0
        configuration.clientPrivateKeyPEM = identity?.1
        return try HTTPClient(configuration: configuration)
    }

    @Test func aChainWithAnIntermediateIsServedAndClientsOfTheRightCAOnlyGetIn() async throws {
        let root = try Authority("Run-time Root CA")
        let intermediate = try Authority("Run-time Issuing CA", parent: root)
        let (leafPEM, leafKey) = try intermediate.issue("localhost", server: true)
        let clients = try Authority("Run-time Client CA")
        let foreign = try Authority("Foreign Client CA")
        let server = try HTTPServer(
            configuration: HTTPServerConfiguration(
                listeners: [
                    .init(
                        port: 0,
                        tls: TLSServerConfiguration(
                            certificateChainPEM: leafPEM + intermediate.certificate.pemRepresentation,
                            privateKeyPEM: leafKey, clientCertificatePolicy: .required,
                            trustedClientRootsPEM: clients.certificate.pemRepresentation))
                ], threads: 1),
            router: Self.whoRoutes(), logger: .disabled)
        try server.start()
        let url = "https://127.0.0.1:\(server.port)/who"
        do {
            // The client trusts only the root: the handshake needs the intermediate the server sends.
            let member = try Self.client(
                trusting: root.certificate, identity: try clients.issue("member", server: false))
            #expect(try await member.get(url).text == "member")
            let stranger = try Self.client(
                trusting: root.certificate, identity: try foreign.issue("stranger", server: false))
            await #expect(throws: HTTPError.self) { _ = try await stranger.get(url) }
            let anonymous = try Self.client(trusting: root.certificate)
            await #expect(throws: HTTPError.self) { _ = try await anonymous.get(url) }
            // A client trusting another root refuses the server.
            let doubter = try Self.client(
                trusting: foreign.certificate, identity: try clients.issue("doubter", server: false))
            await #expect(throws: HTTPError.self) { _ = try await doubter.get(url) }
        } catch {
            await server.shutdown()
            throw error
        }
        await server.shutdown()
    }

    @Test func ephemeralCertificateIsASelfSignedLocalhostLeaf() throws {
        let identity = try EphemeralCertificate(commonName: "dev.local", days: 2)
        let certificate = try Certificate(pemEncoded: identity.certificatePEM)
        #expect(certificate.subject == DistinguishedName([.commonName("dev.local")]))
        #expect(certificate.issuer == certificate.subject)
        #expect(try certificate.basicConstraints?.isCA == false)
        #expect(try certificate.extendedKeyUsage == [ASN1ObjectIdentifier.serverAuth, .clientAuth])
        #expect(
            try certificate.subjectAlternativeNames
                == SubjectAlternativeNames(dnsNames: ["localhost"], ipAddresses: [[127, 0, 0, 1]]))
        let lifetime = certificate.notValidAfter.timeIntervalSince(certificate.notValidBefore)
        #expect(abs(lifetime - (2 * 86_400 + 3600)) <= 2)
        // The key is the certificate's: a server accepts the pair (SSL_CTX_check_private_key).
        _ = try HTTPServer(
            configuration: HTTPServerConfiguration(
                listeners: [
                    .init(
                        port: 0,
                        tls: TLSServerConfiguration(
                            certificateChainPEM: identity.certificatePEM, privateKeyPEM: identity.privateKeyPEM))
                ]),
            router: Router(), logger: .disabled)
        #expect(try EphemeralCertificate().certificatePEM != identity.certificatePEM)
        for days in [0, -1, 3651] {
            #expect(throws: HTTPError(.invalidConfiguration, "")) { _ = try EphemeralCertificate(days: days) }
        }
    }

    @Test func anEncryptedKeyOrTrailingBytesAfterACertificateAreRefusedAtInit() throws {
        let good = try PKI.serverTLS(policy: .none)
        func make(_ tls: TLSServerConfiguration) throws(HTTPError) {
            _ = try HTTPServer(
                configuration: HTTPServerConfiguration(listeners: [.init(port: 0, tls: tls)]), router: Router(),
                logger: .disabled)
        }
        // An encrypted key fails at once, without OpenSSL asking for a passphrase on the terminal.
        var encrypted = good
        encrypted.privateKeyPEM = SecureBytes(Array(try Self.encryptedServerKey().utf8))
        #expect(throws: HTTPError(.invalidConfiguration, "")) { try make(encrypted) }
        // A CERTIFICATE block holding more than one certificate's DER is malformed, not silently cut short.
        let der = try Certificate(pemEncoded: good.certificateChainPEM).derRepresentation
        var trailing = good
        trailing.certificateChainPEM = pemEncode(der + [0x05, 0x00], label: "CERTIFICATE")
        #expect(throws: HTTPError(.invalidConfiguration, "")) { try make(trailing) }
        try make(good)
    }

    /// The test server key in encrypted PKCS#8 (made by the `openssl` tool, as an operator would).
    static func encryptedServerKey() throws -> String {
        let process = try ChildProcess(
            "/usr/bin/openssl",
            [
                "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", try PKI.file("server.key"), "-passout",
                "pass:orchard",
            ], stdout: .capture)
        #expect(process.waitUntilExit() == .exited(0))
        let pem = process.stdout
        #expect(pem.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----"))
        return pem
    }
}
