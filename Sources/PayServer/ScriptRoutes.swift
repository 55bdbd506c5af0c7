import AccessPolicy
import Foundation
import OrchardHTTP
import OrchardWeb
import WebMerchantAPI

extension PayServer {
    /// `orchard-pay.js` at `https://pay.orchard.test` (as Apple's hosted SDK at `applepay.cdn-apple.com`): the
    /// auto-updating `/jsapi/1.latest/orchard-pay.js` and the pinned `/jsapi/v<version>/orchard-pay.js`, for any page
    /// (CORS, so a page can load it with `integrity` and `crossorigin`). No client certificate is read.
    func installScriptRoutes(into router: inout Router) {
        for route in WebMerchantAPI.Script.declared {
            let pinned = route.pattern == WebMerchantAPI.Script.pinned
            router.add(route) { _ in
                HTTPResponse(
                    status: .ok,
                    headers: [
                        "Content-Type": "text/javascript; charset=utf-8", "Access-Control-Allow-Origin": "*",
                        "Cross-Origin-Resource-Policy": "cross-origin", "X-Content-Type-Options": "nosniff",
                        "Cache-Control": pinned ? "public, max-age=31536000, immutable" : "public, max-age=300",
                    ], body: WebAssets.orchardPayScript)
            }
        }
    }
}
