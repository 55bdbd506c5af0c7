public import AccessPolicy

extension Router {
    /// Serves `routes` under the `Host` `host` only, as a virtual host of its own: a request for one of them under
    /// another host (or none) is refused with 421 `misdirected_request`, and a request under `host` for any other
    /// route of this router is refused the same way, before authorization or any handler. Host names compare
    /// without case, port or trailing dot. Routes never named here are served under every other host.
    public mutating func serve(_ routes: [DeclaredRoute], onlyAt host: String) {
        let name = Self.hostName(host) ?? host
        virtualHostNames.insert(name)
        for route in routes { routeHosts[route.method + " " + route.pattern] = name }
    }

    /// Throws the 421 a request for `route` deserves under its `Host`, if any.
    func checkHost(_ route: Route, _ request: HTTPRequest) throws(HTTPError) {
        guard !virtualHostNames.isEmpty else { return }
        let host = Self.hostName(request.headers["Host"])
        if let required = routeHosts[route.key] {
            guard host == required else {
                throw HTTPError(
                    .misdirectedRequest, "this endpoint is served at https://\(required) only; send Host: \(required)")
            }
        } else if let host, virtualHostNames.contains(host) {
            throw HTTPError(.misdirectedRequest, "\(host) does not serve this endpoint")
        }
    }

    /// The host name of a `Host` header: lower-case, without port or trailing dot (`[::1]` keeps its brackets);
    /// nil for an empty or missing one.
    static func hostName(_ header: String?) -> String? {
        guard var text = header.map({ Substring($0.lowercased()) }) else { return nil }
        if text.hasPrefix("[") {
            if let end = text.firstIndex(of: "]") { text = text[...end] }
        } else if let colon = text.firstIndex(of: ":") {
            text = text[..<colon]
        }
        while text.hasSuffix(".") { text = text.dropLast() }
        return text.isEmpty ? nil : String(text)
    }
}
