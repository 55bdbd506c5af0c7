public import AccessPolicy
public import Foundation

import let OrchardLogging.cardNumberShapedKeyMessage
import func OrchardLogging.containsCardNumberShape

/// Where a server keeps the answers to requests that carried an `Idempotency-Key` header (IETF draft "The
/// Idempotency-Key HTTP Header Field"), so that the router can honour the header for every state-changing route
/// in one place.
///
/// An implementation guarantees, per `(scope, key)` for as long as it keeps the key (at least 24 hours):
/// - the first request runs `handler` and its answer is kept (unless `handler` throws or answers 5xx: then the
///   key is released, so a retry runs again);
/// - a repeat with the same method, path and body gets the kept status, headers and body without running
///   `handler`;
/// - a repeat with another method, path or body throws ``HTTPError/Code/idempotencyKeyReused`` (422);
/// - a repeat while the first still runs throws ``HTTPError/Code/idempotencyKeyInUse`` (409) at once.
public protocol IdempotencyRecords: Sendable {
    func run(
        scope: String, key: String, method: String, path: String, body: Data,
        _ handler: @escaping @Sendable () async throws -> HTTPResponse
    ) async throws -> HTTPResponse
}

/// The `Idempotency-Key` header as the router reads it, and the caller scope its key lives in.
public enum IdempotencyKeyHeader {
    /// The header's name.
    public static let name = "Idempotency-Key"
    /// The longest key accepted.
    public static let maximumLength = 255

    /// The key of `headers`: nil without the header. The draft's form is a structured-field string (`"…"`); a
    /// bare token is read as the same key. Throws ``HTTPError/Code/invalidRequest`` (400) for a repeated header,
    /// an empty or overlong key, a character outside printable ASCII (or `"` and `\` inside), or a key of a
    /// card number's shape (keys are stored in clear).
    public static func key(in headers: HTTPHeaders) throws(HTTPError) -> String? {
        let values = headers.values(name)
        guard let raw = values.first else { return nil }
        guard values.count == 1 else { throw HTTPError(.invalidRequest, "send one Idempotency-Key header") }
        var key = Substring(raw)
        if key.count >= 2, key.hasPrefix("\""), key.hasSuffix("\"") { key = key.dropFirst().dropLast() }
        guard (1...maximumLength).contains(key.utf8.count),
            key.utf8.allSatisfy({ (0x21...0x7E).contains($0) && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") })
        else {
            throw HTTPError(
                .invalidRequest,
                "an Idempotency-Key is 1 to \(maximumLength) printable ASCII characters without spaces, \" or \\")
        }
        guard !containsCardNumberShape(String(key)) else {
            throw HTTPError(.invalidRequest, cardNumberShapedKeyMessage)
        }
        return String(key)
    }
}

/// A state-changing route that does not honour `Idempotency-Key`, registered with
/// ``Router/exemptFromIdempotency(_:because:)``.
struct IdempotencyExemption: Sendable, Hashable {
    let method: HTTPMethod
    let pattern: String
}

extension Router {
    /// Methods that change state: the router honours `Idempotency-Key` on them (GET and HEAD are idempotent by
    /// definition and ignore it).
    static let stateChanging: Set<HTTPMethod> = [.post, .put, .patch, .delete]

    /// Declares that `declared` does not honour `Idempotency-Key`, and why (for instance, it is naturally
    /// idempotent). The header is then ignored on it. The reason, which must not be empty, is for the reader of
    /// the route's code.
    public mutating func exemptFromIdempotency(_ declared: DeclaredRoute, because reason: String) {
        precondition(!reason.isEmpty, "an exemption from Idempotency-Key states its reason")
        exemptions.append(
            IdempotencyExemption(
                method: HTTPMethod(declared.method), pattern: "/" + Self.split(declared.pattern).joined(separator: "/"))
        )
    }

    /// The handler to run for `request` on `route`, after ``authorize(_:_:)``: the route's own, or, for a
    /// state-changing route that is not exempt and a request with `Idempotency-Key`, the route's under
    /// ``idempotency`` in the caller's scope. Throws 400 for a malformed key.
    func handler(for route: Route, _ request: HTTPRequest) throws(HTTPError) -> Handler {
        let handler = route.handler
        guard let records = idempotency, Self.stateChanging.contains(route.method),
            !exemptions.contains(where: { $0.method == route.method && $0.pattern == route.pattern }),
            let key = try IdempotencyKeyHeader.key(in: request.headers)
        else { return handler }
        let scope = idempotencyScope(route, request)
        return { request in
            try await records.run(
                scope: scope, key: key, method: request.method.rawValue, path: request.path, body: request.body
            ) { try await handler(request) }
        }
    }

    /// Who owns a key, and on which route: the identity the route's role recognizes in the client certificate
    /// (its subject UID, such as `merchant:M1`), else the certificate itself (its SHA-256), else the role when
    /// the server recognizes it without certificates (in-process wiring); then the route (`POST /v1/…/:id`). A
    /// caller without a certificate on a route open to anyone shares the `anonymous` scope: nothing identifies
    /// it, so such clients must send random keys (UUIDs), and since the body is part of the check a stranger
    /// can only replay a request it already knows whole. Keys are per route because the parties' clients send an
    /// authorization's key again on its reversal, which names the authorization by it.
    func idempotencyScope(_ route: Route, _ request: HTTPRequest) -> String {
        let role = route.policy?.role
        let caller: String
        if let certificate = request.clientCertificate {
            if let role, let identity = roles[role]?.identify?(certificate) {
                caller = role + "/" + identity.subjectUserID
            } else {
                caller = (role ?? "any") + "/certificate:" + Data(certificate.sha256Fingerprint).base64EncodedString()
            }
        } else {
            caller = role ?? "anonymous"
        }
        return caller + " " + route.key
    }
}
