import Foundation
import OrchardHTTP
import OrchardLogging
import OrchardRuntime
import OrchardServices
import WebMerchantAPI

/// The demo merchant's website, `https://store.orchard.test` (config.json `names`), on its own listener
/// (`merchant.sitePort`, no client certificates): a placeholder page until the browser issue, and the
/// domain-association file at WebMerchantAPI's well-known path, read from `DIR/merchant-site/` (written by
/// `init`, or replaced with `orchard merchant association-file --out`).
final class MerchantSite: Sendable {
    /// The folder under the deployment that holds the site's files.
    static let folder = "merchant-site"
    /// The association file's name in ``folder`` (the well-known path's last segment, no extension).
    static let associationFileName = "apple-developer-merchantid-domain-association"

    let server: HTTPServer

    /// Builds the site's server without binding: TLS from `pki/merchant-tls` (whose certificate names
    /// `store.orchard.test`), the association file as it is now.
    init(
        configuration: Configuration, directory: DeploymentDirectory, logger: Logger,
        webRoutes: (inout Router) -> Void = { _ in }
    ) throws {
        let identity = try TLSIdentity.load(named: PKIFiles.tlsServer(.merchant), from: directory)
        let file = FileManager.default.contents(atPath: Self.associationFilePath(in: directory))
        var router = Router()
        router.add(.get, "/") { _ in
            HTTPResponse(
                status: .ok, headers: ["Content-Type": "text/html; charset=utf-8"],
                body: Data(Self.placeholderPage.utf8))
        }
        router.add(WebMerchantAPI.Site.associationFile) { _ in
            guard let file else {
                throw HTTPError(.notFound, "this site hosts no association file yet")
            }
            return HTTPResponse(status: .ok, headers: ["Content-Type": "text/plain"], body: file)
        }
        webRoutes(&router)
        let listener = HTTPServerConfiguration.Listener(
            host: configuration[ServiceSettings.host(.merchant)], port: configuration[MerchantService.sitePort],
            tls: TLSServerConfiguration(
                certificateChainPEM: identity.certificateChainPEM, privateKeyPEM: identity.privateKeyPEM))
        server = try HTTPServer(
            configuration: HTTPServerConfiguration(listeners: [listener], threads: 1), router: router, logger: logger)
    }

    /// `DIR/merchant-site/apple-developer-merchantid-domain-association`.
    static func associationFilePath(in directory: DeploymentDirectory) -> String {
        directory.path + "/" + folder + "/" + associationFileName
    }

    /// Writes the association file the site serves.
    static func writeAssociationFile(_ contents: String, in directory: DeploymentDirectory) throws {
        let folder = directory.path + "/" + Self.folder
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Data(contents.utf8).write(
            to: URL(fileURLWithPath: associationFilePath(in: directory)), options: .atomic)
    }

    static let placeholderPage = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>Orchard Demo Store</title></head>
        <body><h1>Orchard Demo Store</h1>
        <p>The demo merchant's website. Apple Pay on the web comes with the browser issue.</p></body></html>

        """
}
