import CommandTestSupport
import Foundation
import OrchardCrypto
import OrchardServices
import OrchardX509
import Testing

/// A fresh directory under the system's temporary directory, removed when the value is dropped; the parties'
/// logs in it are scanned first (V2).
final class TemporaryDirectory: @unchecked Sendable {
    let path: String

    init() throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent(
            "orchard-services-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true)
        path = base.path
    }

    /// A path inside it (not created).
    func child(_ name: String) -> String { path + "/" + name }

    deinit {
        LogScan.expectCleanLogs(of: path)
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// A TLS client identity issued by `authority` (clientAuth) for subject UID `uid`, written nowhere.
func issueClientIdentity(from authority: CertificateAuthority, uid: String) throws -> TLSIdentity {
    let key = try P256.Signing.PrivateKey()
    let certificate = try Certificate.issue(
        subject: DistinguishedName([.userID(uid), .commonName("client")]),
        publicKey: CertificatePublicKey(key.publicKey), issuer: authority.issuer,
        notValidBefore: Date().addingTimeInterval(-60), notValidAfter: Date().addingTimeInterval(3600),
        extensions: [.basicConstraints(isCA: false), .extendedKeyUsage([.clientAuth])])
    return TLSIdentity(
        certificateChainPEM: certificate.pemRepresentation + authority.certificate.pemRepresentation,
        privateKeyPEM: SecureBytes(Array(try key.pemRepresentation.utf8)))
}
