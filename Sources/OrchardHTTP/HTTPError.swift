import Foundation

/// An HTTP status: the code and its reason phrase. Equality compares the code only.
public struct HTTPStatus: Hashable, Sendable, CustomStringConvertible {
    public let code: Int
    public let reason: String

    public init(code: Int, reason: String) {
        self.code = code
        self.reason = reason
    }

    public static let ok = HTTPStatus(code: 200, reason: "OK")
    public static let created = HTTPStatus(code: 201, reason: "Created")
    public static let accepted = HTTPStatus(code: 202, reason: "Accepted")
    public static let noContent = HTTPStatus(code: 204, reason: "No Content")
    public static let badRequest = HTTPStatus(code: 400, reason: "Bad Request")
    public static let unauthorized = HTTPStatus(code: 401, reason: "Unauthorized")
    public static let forbidden = HTTPStatus(code: 403, reason: "Forbidden")
    public static let notFound = HTTPStatus(code: 404, reason: "Not Found")
    public static let methodNotAllowed = HTTPStatus(code: 405, reason: "Method Not Allowed")
    public static let misdirectedRequest = HTTPStatus(code: 421, reason: "Misdirected Request")
    public static let conflict = HTTPStatus(code: 409, reason: "Conflict")
    public static let gone = HTTPStatus(code: 410, reason: "Gone")
    public static let payloadTooLarge = HTTPStatus(code: 413, reason: "Payload Too Large")
    public static let unsupportedMediaType = HTTPStatus(code: 415, reason: "Unsupported Media Type")
    public static let unprocessableContent = HTTPStatus(code: 422, reason: "Unprocessable Content")
    public static let tooManyRequests = HTTPStatus(code: 429, reason: "Too Many Requests")
    public static let internalServerError = HTTPStatus(code: 500, reason: "Internal Server Error")
    public static let badGateway = HTTPStatus(code: 502, reason: "Bad Gateway")
    public static let serviceUnavailable = HTTPStatus(code: 503, reason: "Service Unavailable")
    public static let gatewayTimeout = HTTPStatus(code: 504, reason: "Gateway Timeout")

    /// 2xx.
    public var isSuccess: Bool { (200..<300).contains(code) }
    public var description: String { "\(code) \(reason)" }

    public static func == (lhs: HTTPStatus, rhs: HTTPStatus) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}

/// An error that knows its HTTP answer. Domain errors conform (in the service module that serves them,
/// so domain modules never import HTTP), and the server turns them into `status` and
/// `{"error":{"code":…,"message":…}}` in one place. Any other error becomes an opaque 500.
public protocol HTTPResponseError: Error {
    /// The status to answer with. A 5xx is also logged with the request id.
    var httpStatus: HTTPStatus { get }
    /// A stable machine-readable code, e.g. `"unknown_merchant"`.
    var httpErrorCode: String { get }
    /// A message for the caller: what went wrong and what to do, never a secret or a card number.
    var httpErrorMessage: String { get }
}

/// An error that, when it reaches the server, means the service cannot serve writes for a while rather than that
/// the request was wrong: a store that stopped writing after a disk error. The server answers
/// `503 Service Unavailable` with `Retry-After` (``retryAfterSeconds``) and logs the error at error level;
/// errors of the same type that return nil are mapped as usual. Conformances live where both modules are seen
/// (OrchardServices for the store's error), so the HTTP runtime needs no SQL.
public protocol HTTPUnavailableError: Error {
    /// Seconds after which a retry may succeed, when this error means the service is unavailable; nil otherwise.
    var retryAfterSeconds: Int? { get }
}

/// The one error type of `OrchardHTTP`, for both the server and the client.
///
/// A struct with an extensible code (see `CryptoError`); equality compares the code only. Request
/// errors (bad JSON, unknown route, missing client certificate) carry their HTTP answer; the others
/// (configuration, TLS setup, transport) answer an opaque 500 if a handler lets them escape.
public struct HTTPError: Error, Hashable, Sendable, CustomStringConvertible, HTTPResponseError {
    /// What went wrong, as a value a caller can branch on.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        fileprivate enum Base: String, Hashable, Sendable {
            case invalidJSON = "invalid_json"
            case duplicateKey = "duplicate_key"
            case invalidRequest = "invalid_request"
            case notFound = "not_found"
            case methodNotAllowed = "method_not_allowed"
            case misdirectedRequest = "misdirected_request"
            case clientCertificateRequired = "client_certificate_required"
            case clientCertificateNotAllowed = "client_certificate_not_allowed"
            case clientCertificateRevoked = "client_certificate_revoked"
            case callerMismatch = "caller_mismatch"
            case payloadTooLarge = "payload_too_large"
            case invalidConfiguration = "invalid_configuration"
            case tlsFailure = "tls_failure"
            case bindFailed = "bind_failed"
            case notRunning = "not_running"
            case invalidURL = "invalid_url"
            case connectionFailed = "connection_failed"
            case timedOut = "timed_out"
            case responseTooLarge = "response_too_large"
            case transportFailure = "transport_failure"
            case cancelled = "cancelled"
            case internalFailure = "internal_failure"
            case idempotencyKeyInUse = "idempotency_key_in_use"
            case idempotencyKeyReused = "idempotency_key_reused"
        }
        fileprivate let base: Base
        private init(_ base: Base) { self.base = base }

        /// The request body is not the JSON the route expects (400).
        public static let invalidJSON = Code(.invalidJSON)
        /// The request body names one key twice in one JSON object, which decoders resolve differently (400).
        public static let duplicateKey = Code(.duplicateKey)
        /// The request is malformed in another way: a bad path parameter or query (400).
        public static let invalidRequest = Code(.invalidRequest)
        /// No route matches the path (404).
        public static let notFound = Code(.notFound)
        /// A route matches the path but not the method (405).
        public static let methodNotAllowed = Code(.methodNotAllowed)
        /// The route exists on this server but not under the request's `Host` (virtual hosts, 421).
        public static let misdirectedRequest = Code(.misdirectedRequest)
        /// The route needs a verified client certificate and the connection has none (401).
        public static let clientCertificateRequired = Code(.clientCertificateRequired)
        /// The client certificate is verified but the route does not accept it (403).
        public static let clientCertificateNotAllowed = Code(.clientCertificateNotAllowed)
        /// The client certificate was revoked by the server's operator (403): on every route, whatever its role.
        public static let clientCertificateRevoked = Code(.clientCertificateRevoked)
        /// The client certificate names one caller and the request another (a body's terminal or merchant, a
        /// path's device), or sends a field that caller may not (403).
        public static let callerMismatch = Code(.callerMismatch)
        /// The body is larger than the route accepts (413).
        public static let payloadTooLarge = Code(.payloadTooLarge)
        /// A server or client configuration is unusable (bad PEM, missing trust roots, bad limits).
        public static let invalidConfiguration = Code(.invalidConfiguration)
        /// OpenSSL refused a TLS setting, certificate or key.
        public static let tlsFailure = Code(.tlsFailure)
        /// A listening socket could not be created or bound.
        public static let bindFailed = Code(.bindFailed)
        /// The server or client is not running (not started yet, or shut down).
        public static let notRunning = Code(.notRunning)
        /// A client URL is malformed or not http(s).
        public static let invalidURL = Code(.invalidURL)
        /// The client could not connect, or the TLS handshake failed (including a refused certificate), on every
        /// attempt: no attempt of the request reached a server, so it cannot have been acted on.
        public static let connectionFailed = Code(.connectionFailed)
        /// The client's request did not complete in time.
        public static let timedOut = Code(.timedOut)
        /// The response body is larger than the client accepts.
        public static let responseTooLarge = Code(.responseTooLarge)
        /// The connection failed after it was established (reset, closed early, malformed response).
        public static let transportFailure = Code(.transportFailure)
        /// The caller's task was cancelled, or the client shut down, before the response arrived.
        public static let cancelled = Code(.cancelled)
        /// An internal failure (allocation, libevent or libcurl refusing a call).
        public static let internalFailure = Code(.internalFailure)
        /// A request with the same Idempotency-Key is still running: retry later (409).
        public static let idempotencyKeyInUse = Code(.idempotencyKeyInUse)
        /// The Idempotency-Key was used for another request (another body, method or path) (422).
        public static let idempotencyKeyReused = Code(.idempotencyKeyReused)

        public var description: String { base.rawValue }
    }

    public let code: Code
    /// What happened, for the caller or the log. Never contains a secret or a card number.
    public let message: String

    /// Whether the request of a client call may have reached a server (libcurl was about to send it on some
    /// connection): a party may have acted on it even though the call failed.
    var requestMayHaveArrived = false

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }

    public static func == (lhs: HTTPError, rhs: HTTPError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public var httpStatus: HTTPStatus {
        switch code.base {
        case .invalidJSON, .duplicateKey, .invalidRequest: .badRequest
        case .notFound: .notFound
        case .methodNotAllowed: .methodNotAllowed
        case .misdirectedRequest: .misdirectedRequest
        case .clientCertificateRequired: .unauthorized
        case .clientCertificateNotAllowed, .clientCertificateRevoked, .callerMismatch: .forbidden
        case .payloadTooLarge: .payloadTooLarge
        case .idempotencyKeyInUse: .conflict
        case .idempotencyKeyReused: .unprocessableContent
        default: .internalServerError
        }
    }

    public var httpErrorCode: String { httpStatus.code >= 500 ? "internal_error" : code.description }
    public var httpErrorMessage: String { httpStatus.code >= 500 ? "internal error" : message }
}

extension HTTPError {
    /// The error to report for the last of several attempts, `mayHaveArrived` saying whether any of them may have
    /// reached a server: then never "could not connect", which callers read as "nothing was sent".
    func afterAttemptThat(mayHaveArrived: Bool) -> HTTPError {
        guard mayHaveArrived else { return self }
        var error =
            code == .connectionFailed
            ? HTTPError(.transportFailure, "an earlier attempt may have reached the server; the last one: \(message)")
            : self
        error.requestMayHaveArrived = true
        return error
    }
}
