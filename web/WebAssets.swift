public import Foundation
import OrchardCrypto

/// The browser's files (docs/web.md, "Apple Pay in a browser"): `orchard-pay.js`, which the Pay server serves at
/// `/jsapi/1.latest/orchard-pay.js` and at its pinned version; the browser agent's invisible frame and payment
/// sheet, which `orchard device run` serves at `https://agent.orchard.test`; and the demo store's pages, which the
/// merchant server's site serves. They are this target's resources (the `web/` directory of the package), found
/// next to the executable from any working directory.
public enum WebAssets {
    /// The version `orchard-pay.js` is pinned at (`/jsapi/v<version>/orchard-pay.js`).
    public static let orchardPayVersion = "1.2.0"
    /// The auto-updating path, as Apple's `jsapi/1.latest/apple-pay-sdk.js`.
    public static let latestScriptPath = "/jsapi/1.latest/orchard-pay.js"
    /// The pinned path.
    public static let pinnedScriptPath = "/jsapi/v\(orchardPayVersion)/orchard-pay.js"

    /// The bytes of `web/<folder>/<name>`, or nil when there is no such file.
    public static func file(_ folder: String, _ name: String) -> Data? {
        guard name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "." }), !name.hasPrefix("."),
            let url = Bundle.module.url(forResource: name, withExtension: nil, subdirectory: folder)
        else { return nil }
        return try? Data(contentsOf: url)
    }

    /// `orchard-pay.js`.
    public static var orchardPayScript: Data { file("jsapi", "orchard-pay.js") ?? Data() }

    /// The Subresource Integrity value of `bytes`: `sha384-<base64 of SHA-384>`.
    public static func integrity(of bytes: Data) -> String {
        "sha384-" + Data(SHA384.hash(Array(bytes))).base64EncodedString()
    }

    /// The content type of a file by its extension.
    public static func contentType(of name: String) -> String {
        if name.hasSuffix(".js") { return "text/javascript; charset=utf-8" }
        if name.hasSuffix(".css") { return "text/css; charset=utf-8" }
        if name.hasSuffix(".html") { return "text/html; charset=utf-8" }
        if name.hasSuffix(".svg") { return "image/svg+xml" }
        return "application/octet-stream"
    }
}
