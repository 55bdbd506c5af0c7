public import AccessPolicy
import Foundation
import OrchardRuntime

/// What a route asks of the connection's client certificate, on top of the listener's policy; as a server's
/// recognizer of a role (``Router/roles``), also who the certificate names.
public struct ClientCertificateRequirement: Sendable {
    let check: (@Sendable (ClientCertificate) -> Bool)?
    let identify: (@Sendable (ClientCertificate) -> CallerIdentity?)?
    let required: Bool

    /// Anyone the listener lets in. As a role's recognizer, it also waives the policy's identity bindings: for
    /// in-process wiring without certificates only.
    public static let none = ClientCertificateRequirement(check: nil, identify: nil, required: false)
    /// A client certificate the listener verified (401 without one).
    public static let required = ClientCertificateRequirement(check: nil, identify: nil, required: true)
    /// A verified client certificate that `predicate` accepts (401 without one, 403 if refused).
    public static func required(where predicate: @escaping @Sendable (ClientCertificate) -> Bool) -> Self {
        ClientCertificateRequirement(check: predicate, identify: nil, required: true)
    }
    /// A verified client certificate that `predicate` accepts, whose holder `identity` reads (nil: it names
    /// nobody, and routes that bind an identity refuse it with 403).
    public static func required(
        where predicate: @escaping @Sendable (ClientCertificate) -> Bool,
        identity: @escaping @Sendable (ClientCertificate) -> CallerIdentity?
    ) -> Self {
        ClientCertificateRequirement(check: predicate, identify: identity, required: true)
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
        /// The pattern as added, normalized (`/a/:id`), and `METHOD pattern`: what the idempotency exemptions,
        /// virtual hosts and route classes are keyed by, built once rather than at every request.
        let pattern: String
        let key: String
        let requirement: ClientCertificateRequirement
        /// The declared policy; nil for a route added with a bare requirement.
        let policy: AccessPolicy?
        let handler: Handler
        /// Literal segments count: more specific routes are tried first.
        var specificity: Int {
            segments.reduce(0) { count, segment in if case .literal = segment { count + 1 } else { count } }
        }
    }

    private(set) var routes: [Route] = []
    var exemptions: [IdempotencyExemption] = []

    /// Where state-changing routes keep their `Idempotency-Key` answers (see ``IdempotencyRecords``); nil: the
    /// header is ignored, as before the server had a store for it.
    public var idempotency: (any IdempotencyRecords)?

    /// How this server recognizes each role that declared policies name, in the client certificate. A role
    /// without an entry admits nobody (403).
    public var roles: [String: ClientCertificateRequirement] = [:]

    /// The server's record of revoked client certificates, consulted for every request that presents one, on
    /// every route (`/health` included) and before any handler or idempotent replay: a revoked certificate gets
    /// 403 `client_certificate_revoked`. A failing lookup fails the request (500), never admits it.
    public var revocations: (any ClientCertificateRevocations)?
    /// Bounds on work in flight per route class and rate limits on open routes (see ``AdmissionControl``); nil:
    /// every request is admitted.
    public var admission: AdmissionControl?
    /// Route classes by `METHOD pattern` (``classify(_:as:)``).
    var routeClasses: [String: RouteClass] = [:]
    /// Virtual hosts (``serve(_:onlyAt:)``): the host of each route served under one host only, by
    /// `METHOD pattern`, and the set of such hosts.
    var routeHosts: [String: String] = [:]
    var virtualHostNames: Set<String> = []

    public init() {}

    /// A registered route: what the matrix of callers is run against.
    public struct RegisteredRoute: Sendable, Hashable, CustomStringConvertible {
        public let method: String
        public let pattern: String
        /// The policy the route was registered with; nil for a bare requirement (no declared policy).
        public let policy: AccessPolicy?

        public var description: String {
            "\(method) \(pattern): \(policy.map(String.init(describing:)) ?? "no policy")"
        }
    }

    /// Every route, in match order.
    public var registeredRoutes: [RegisteredRoute] {
        routes.map { route in
            RegisteredRoute(method: route.method.rawValue, pattern: route.pattern, policy: route.policy)
        }
    }

    /// Adds a route as its contract declares it; the router enforces `declared.policy` before `handler` runs.
    public mutating func add(_ declared: DeclaredRoute, _ handler: @escaping Handler) {
        insert(HTTPMethod(declared.method), declared.pattern, requirement: .none, policy: declared.policy, handler)
    }

    /// JSON in, JSON out, as ``post(_:requirement:status:json:)``, for a declared route.
    public mutating func add<Input: Decodable & Sendable, Output: Encodable & Sendable>(
        _ declared: DeclaredRoute, status: HTTPStatus = .ok,
        json handler: @escaping @Sendable (Input, HTTPRequest) async throws -> Output
    ) {
        add(declared) { request in
            let input = try request.decodeJSON(Input.self)
            return try HTTPResponse.json(try await handler(input, request), status: status)
        }
    }

    /// Throws the 401 or 403 `request` deserves on `route`, if any: the route's bare requirement, or its
    /// declared policy with the role recognized by ``roles`` and the identity bindings checked against the
    /// certificate's holder.
    func authorize(_ route: Route, _ request: HTTPRequest) throws(HTTPError) {
        guard let policy = route.policy else { return try route.requirement.verify(request.clientCertificate) }
        guard let role = policy.role else { return }
        guard let recognizer = roles[role] else {
            throw HTTPError(.clientCertificateNotAllowed, "this server admits no \(role) caller")
        }
        try recognizer.verify(request.clientCertificate)
        guard case .identified = policy.caller, recognizer.required else { return }
        guard let certificate = request.clientCertificate, let identity = recognizer.identify?(certificate),
            let binding = policy.binding(for: identity.kind)
        else {
            throw HTTPError(
                .clientCertificateNotAllowed, "this client certificate names no caller this endpoint accepts")
        }
        try Self.check(binding, of: identity, request)
    }

    /// The request names `identity` and nobody else, as `binding` says.
    static func check(
        _ binding: IdentityBinding, of identity: CallerIdentity, _ request: HTTPRequest
    )
        throws(HTTPError)
    {
        for name in binding.pathParameters where request.pathParameters[name] != identity.identifier {
            throw HTTPError(.callerMismatch, "the path names another \(identity.kind) than the client certificate")
        }
        guard !binding.bodyFields.isEmpty || !binding.ownerBodyFields.isEmpty || !binding.absentBodyFields.isEmpty
        else { return }
        // A body that repeats a key is refused here already (as `decodeJSON` refuses it), so no reader can take
        // another value than the one checked; the rest is read with the decoder the handler's `decodeJSON` uses.
        if let duplicate = DuplicateJSONKeys.first(in: request.body) {
            throw HTTPError(.duplicateKey, "field '\(duplicate)' appears twice in one object; send each field once")
        }
        let fields: [String: BodyField]
        do {
            fields = try JSONCoding.decoder.decode([String: BodyField].self, from: request.body)
        } catch {
            throw HTTPError(.invalidJSON, "the request body is not a JSON object")
        }
        for field in binding.bodyFields where fields[field] != .string(identity.identifier) {
            throw HTTPError(.callerMismatch, "\(field) names another \(identity.kind) than the client certificate")
        }
        for field in binding.ownerBodyFields where identity.owner.map(BodyField.string) != fields[field] {
            throw HTTPError(
                .callerMismatch, "\(field) names another party than the client certificate's \(identity.kind)")
        }
        for field in binding.absentBodyFields where !(fields[field] == nil || fields[field] == .null) {
            throw HTTPError(.callerMismatch, "a \(identity.kind) does not send \(field)")
        }
    }

    /// A top-level body field as far as a binding cares: a string, null, or anything else.
    enum BodyField: Decodable, Equatable {
        case string(String)
        case null
        case other

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let string = try? container.decode(String.self) {
                self = .string(string)
            } else {
                self = .other
            }
        }
    }

    /// Adds a route. `pattern` starts with `/`; `:name` segments are parameters.
    public mutating func add(
        _ method: HTTPMethod, _ pattern: String, requirement: ClientCertificateRequirement = .none,
        _ handler: @escaping Handler
    ) {
        insert(method, pattern, requirement: requirement, policy: nil, handler)
    }

    private mutating func insert(
        _ method: HTTPMethod, _ pattern: String, requirement: ClientCertificateRequirement, policy: AccessPolicy?,
        _ handler: @escaping Handler
    ) {
        precondition(pattern.hasPrefix("/"), "route patterns start with /: \(pattern)")
        let parts = Self.split(pattern)
        let segments = parts.map { part -> Route.Segment in
            part.hasPrefix(":") && part.count > 1 ? .parameter(String(part.dropFirst())) : .literal(String(part))
        }
        let normalized = "/" + parts.joined(separator: "/")
        let route = Route(
            method: method, segments: segments, pattern: normalized, key: method.rawValue + " " + normalized,
            requirement: requirement, policy: policy, handler: handler)
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
        // By index: `for route in routes` would copy every route it looks at (a retain and a release of each of
        // its fields, for each of the server's routes, at every request).
        for index in routes.indices where routes[index].segments.count == parts.count {
            var parameters: [String: String] = [:]
            var matches = true
            for (segment, part) in zip(routes[index].segments, parts) {
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
            let routeMethod = routes[index].method
            if routeMethod == method || (method == .head && routeMethod == .get) {
                return .found(routes[index], parameters)
            }
            if !allowed.contains(routeMethod) { allowed.append(routeMethod) }
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed)
    }

    /// `/a/b/` → `["a", "b"]`; `/` → `[]`. Empty segments in the middle are kept (they match nothing).
    static func split(_ path: String) -> [Substring] {
        var parts = path.split(separator: "/", omittingEmptySubsequences: false)
        if parts.first == "" { parts.removeFirst() }
        if parts.last == "" { parts.removeLast() }
        return parts
    }
}

/// Where a server looks up whether a client certificate it issued has been revoked (the Pay server: the
/// `revoked_at` that `orchard merchant certs --revoke` records).
public protocol ClientCertificateRevocations: Sendable {
    /// Whether `certificate` is revoked now.
    func isRevoked(_ certificate: ClientCertificate) async throws -> Bool
}
