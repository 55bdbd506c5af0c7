import Foundation
import OrchardHTTP
import OrchardLogging
import OrchardRuntime
import OrchardServices
import OrchardWeb
import WebMerchantAPI

/// The demo merchant's website, `https://store.orchard.test` (config.json `names`), on its own listener
/// (`merchant.sitePort`, no client certificates): the demo store's pages (`web/store/`), and the
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
        router.add(.get, "/") { _ in try Self.page("index.html") }
        router.add(.get, "/confirmation") { _ in try Self.page("confirmation.html") }
        // The conformance page of orchard-pay.js, every version's checks (docs/web.md, "The API by version").
        router.add(.get, "/conformance") { _ in try Self.page("conformance.html") }
        router.add(.get, "/assets/:name") { request in
            let name = try request.parameter("name")
            guard !name.hasSuffix(".html"), let file = WebAssets.file("store", name) else {
                throw HTTPError(.notFound, "no asset \(name)")
            }
            return HTTPResponse(
                status: .ok,
                headers: [
                    "Content-Type": WebAssets.contentType(of: name), "X-Content-Type-Options": "nosniff",
                    "Cache-Control": "no-cache",
                ], body: file)
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

    /// A page of the demo store (`web/store/`), loading `orchard-pay.js` at its pinned version with its SRI hash.
    static func page(_ name: String) throws -> HTTPResponse {
        guard let template = WebAssets.file("store", name) else { throw HTTPError(.notFound, "no page \(name)") }
        let page = String(decoding: template, as: UTF8.self)
            .replacingOccurrences(of: "{{ORCHARD_PAY_PATH}}", with: WebAssets.pinnedScriptPath)
            .replacingOccurrences(
                of: "{{ORCHARD_PAY_INTEGRITY}}", with: WebAssets.integrity(of: WebAssets.orchardPayScript))
        return HTTPResponse(
            status: .ok,
            headers: [
                "Content-Type": "text/html; charset=utf-8", "Cache-Control": "no-cache",
                "Content-Security-Policy":
                    "default-src 'self'; script-src 'self' https://pay.orchard.test; "
                    + "frame-src https://agent.orchard.test; connect-src 'self'; frame-ancestors 'none'",
                "Permissions-Policy": "payment=(self \"https://agent.orchard.test\")",
            ], body: Data(page.utf8))
    }
}
