public import AccessPolicy

extension WebMerchantAPI {
    /// `orchard-pay.js` at the Pay server's public side (`https://pay.orchard.test`), as Apple's hosted SDK: for any
    /// page, without a client certificate (docs/web.md, "orchard-pay.js"). The file is `OrchardWeb`'s resource.
    public enum Script {
        /// The auto-updating path.
        public static let latest = "/jsapi/1.latest/orchard-pay.js"
        /// The pinned version's path (loaded with its SRI hash).
        public static let pinned = "/jsapi/v1.2.0/orchard-pay.js"
        /// The routes: anyone may load the script.
        public static let declared = [DeclaredRoute("GET", latest, .anyone), DeclaredRoute("GET", pinned, .anyone)]
    }
}
