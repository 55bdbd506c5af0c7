import Foundation

/// What a route asks of the connection's client certificate, on top of the listener's policy.
public struct ClientCertificateRequirement: Sendable {
    let check: (@Sendable (ClientCertificate) -> Bool)?
    let required: Bool

    /// Anyone the listener lets in.
    public static let none = ClientCertificateRequirement(check: nil, required: false)
    /// A client certificate the listener verified (401 without one).
    public static let required = ClientCertificateRequirement(check: nil, required: true)
    /// A verified client certificate that `predicate` accepts (401 without one, 403 if refused).
    public static func required(where predicate: @escaping @Sendable (ClientCertificate) -> Bool) -> Self {
        ClientCertificateRequirement(check: predicate, required: true)
    }

    /// Throws the 401 or 403 the request deserves, if any.
    func verify(_ certificate: ClientCertificate?) throws(HTTPError) {
        guard required else { return }
        guard let certificate else {
            throw HTTPError(
                .clientCertificateRequired, "this endpoint needs a client certificate; connect with mutual TLS")
        }
        if let check, !check(certificate) {
            throw HTTPError(.clientCertificateNotAllowed, "this client certificate is not allowed to use this endpoint")
        }
    }
}

/// Maps method and path to a handler. Paths are patterns whose `:name` segments match any one
/// segment and become path parameters: `/merchants/:id/sessions`. Literal segments win over
/// parameters when both match; otherwise the first route added wins.
public struct Router: Sendable {
    public typealias Handler = @Sendable (HTTPRequest) async throws -> HTTPResponse

    struct Route: Sendable {
        enum Segment: Sendable, Equatable {
            case literal(String)
            case parameter(String)
        }
        let method: HTTPMethod
        let segments: [Segment]
        let requirement: ClientCertificateRequirement
        let handler: Handler
        /// Literal segments count: more specific routes are tried first.
        var specificity: Int {
            segments.reduce(0) { count, segment in if case .literal = segment { count + 1 } else { count } }
        }
    }

    private(set) var routes: [Route] = []

    public init() {}

    /// Adds a route. `pattern` starts with `/`; `:name` segments are parameters.
    public mutating func add(
        _ method: HTTPMethod, _ pattern: String, requirement: ClientCertificateRequirement = .none,
        _ handler: @escaping Handler
    ) {
        precondition(pattern.hasPrefix("/"), "route patterns start with /: \(pattern)")
        let segments = Self.split(pattern).map { part -> Route.Segment in
            part.hasPrefix(":") && part.count > 1 ? .parameter(String(part.dropFirst())) : .literal(part)
        }
        let route = Route(method: method, segments: segments, requirement: requirement, handler: handler)
        // Stable insertion by specificity, so literals beat parameters whatever the order of calls.
        let index = routes.firstIndex { $0.segments.count == segments.count && $0.specificity < route.specificity }
        routes.insert(route, at: index ?? routes.endIndex)
    }

    public mutating func get(
        _ pattern: String, requirement: ClientCertificateRequirement = .none, _ handler: @escaping Handler
    ) { add(.get, pattern, requirement: requirement, handler) }

    public mutating func post(
        _ pattern: String, requirement: ClientCertificateRequirement = .none, _ handler: @escaping Handler
    ) { add(.post, pattern, requirement: requirement, handler) }

    public mutating func put(
        _ pattern: String, requirement: ClientCertificateRequirement = .none, _ handler: @escaping Handler
    ) { add(.put, pattern, requirement: requirement, handler) }

    public mutating func patch(
        _ pattern: String, requirement: ClientCertificateRequirement = .none, _ handler: @escaping Handler
    ) { add(.patch, pattern, requirement: requirement, handler) }

    public mutating func delete(
        _ pattern: String, requirement: ClientCertificateRequirement = .none, _ handler: @escaping Handler
    ) { add(.delete, pattern, requirement: requirement, handler) }

    /// JSON in, JSON out: decodes the body as `Input` (400 with a clear message when it is not),
    /// encodes the result with sorted keys.
    public mutating func post<Input: Decodable & Sendable, Output: Encodable & Sendable>(
        _ pattern: String, requirement: ClientCertificateRequirement = .none, status: HTTPStatus = .ok,
        json handler: @escaping @Sendable (Input, HTTPRequest) async throws -> Output
    ) {
        add(.post, pattern, requirement: requirement) { request in
            let input = try request.decodeJSON(Input.self)
            return try HTTPResponse.json(try await handler(input, request), status: status)
        }
    }

    /// What a lookup found.
    enum Match {
        case found(Route, [String: String])
        case methodNotAllowed([HTTPMethod])
        case notFound
    }

    func match(_ method: HTTPMethod, path: String) -> Match {
        let parts = Self.split(path)
        var allowed: [HTTPMethod] = []
        for route in routes where route.segments.count == parts.count {
            var parameters: [String: String] = [:]
            var matches = true
            for (segment, part) in zip(route.segments, parts) {
                switch segment {
                case .literal(let literal):
                    if literal != part { matches = false }
                case .parameter(let name):
                    guard let decoded = part.removingPercentEncoding, !decoded.isEmpty else {
                        matches = false
                        break
                    }
                    parameters[name] = decoded
                }
                if !matches { break }
            }
            guard matches else { continue }
            if route.method == method || (method == .head && route.method == .get) {
                return .found(route, parameters)
            }
            if !allowed.contains(route.method) { allowed.append(route.method) }
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed)
    }

    /// `/a/b/` → `["a", "b"]`; `/` → `[]`. Empty segments in the middle are kept (they match nothing).
    static func split(_ path: String) -> [String] {
        var parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        if parts.first == "" { parts.removeFirst() }
        if parts.last == "" { parts.removeLast() }
        return parts
    }
}
