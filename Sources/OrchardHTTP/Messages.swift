public import Foundation
public import OrchardLogging
import OrchardRuntime

/// An HTTP request method.
public struct HTTPMethod: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }

    public static let get = HTTPMethod("GET")
    public static let head = HTTPMethod("HEAD")
    public static let post = HTTPMethod("POST")
    public static let put = HTTPMethod("PUT")
    public static let patch = HTTPMethod("PATCH")
    public static let delete = HTTPMethod("DELETE")
    public static let options = HTTPMethod("OPTIONS")

    /// RFC 9110 §9.2.2: repeating the request has the same effect as sending it once.
    public var isIdempotent: Bool { [.get, .head, .put, .delete, .options].contains(self) }
    public var description: String { rawValue }
}

/// Header fields in order; names compare case-insensitively.
public struct HTTPHeaders: Sendable, Sequence, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    public private(set) var fields: [(name: String, value: String)] = []

    public init() {}
    public init(_ fields: [(String, String)]) { self.fields = fields.map { (name: $0.0, value: $0.1) } }
    public init(dictionaryLiteral elements: (String, String)...) { self.init(elements) }

    /// The first value of `name`, if present.
    public subscript(name: String) -> String? {
        fields.first { Self.sameName($0.name, name) }?.value
    }

    /// Every value of `name`, in order.
    public func values(_ name: String) -> [String] {
        fields.filter { Self.sameName($0.name, name) }.map(\.value)
    }

    public mutating func add(_ name: String, _ value: String) { fields.append((name: name, value: value)) }

    /// Replaces every value of `name` with `value`.
    public mutating func set(_ name: String, _ value: String) {
        remove(name)
        add(name, value)
    }

    public mutating func remove(_ name: String) {
        fields.removeAll { Self.sameName($0.name, name) }
    }

    /// Header names are ASCII tokens: compare them byte by byte, folding A-Z to a-z.
    static func sameName(_ a: String, _ b: String) -> Bool {
        guard a.utf8.count == b.utf8.count else { return false }
        for (x, y) in zip(a.utf8, b.utf8) where x != y {
            guard lower(x) == lower(y) else { return false }
        }
        return true
    }

    private static func lower(_ byte: UInt8) -> UInt8 { byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte }

    public var isEmpty: Bool { fields.isEmpty }
    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }
    /// Names only: header values may carry credentials.
    public var description: String { "HTTPHeaders(\(fields.map(\.name).joined(separator: ", ")))" }
}

/// One request as a handler sees it: complete (headers and body), with the route's path parameters,
/// the request id and the verified client certificate, if the connection presented one.
public struct HTTPRequest: Sendable, CustomStringConvertible {
    public let method: HTTPMethod
    /// The path without the query, percent-encoded as received (e.g. `/merchants/m%201/sessions`).
    public let path: String
    /// The raw query after `?`, if any.
    public let query: String?
    public let headers: HTTPHeaders
    public let body: Data
    /// Identifies this request in logs and in the `X-Request-Id` response header. Taken from the
    /// request's own `X-Request-Id` when that is a UUID (so calls between services share one id),
    /// otherwise new.
    public let requestID: UUID
    /// The client certificate, present only when the TLS layer verified it against the listener's
    /// trusted roots.
    public let clientCertificate: ClientCertificate?
    /// The peer's address, e.g. `127.0.0.1`.
    public let remoteAddress: String
    /// The decoded values of the route's `:name` segments.
    public internal(set) var pathParameters: [String: String] = [:]
    let baseLogger: Logger

    init(
        method: HTTPMethod, path: String, query: String?, headers: HTTPHeaders, body: Data, requestID: UUID,
        clientCertificate: ClientCertificate?, remoteAddress: String, logger: Logger
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.requestID = requestID
        self.clientCertificate = clientCertificate
        self.remoteAddress = remoteAddress
        self.baseLogger = logger
    }

    /// The server's logger with this request's id on every event.
    public var logger: Logger { baseLogger.with(["request_id": .uuid(requestID)]) }

    /// A path parameter, or a 400 naming it.
    public func parameter(_ name: String) throws(HTTPError) -> String {
        guard let value = pathParameters[name] else {
            throw HTTPError(.invalidRequest, "the path has no parameter '\(name)'")
        }
        return value
    }

    /// The query as name/value pairs, percent-decoded (`+` is a space), in order.
    public var queryItems: [(name: String, value: String)] {
        guard let query, !query.isEmpty else { return [] }
        return query.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ s: Substring) -> String {
                let spaced = s.replacingOccurrences(of: "+", with: " ")
                return spaced.removingPercentEncoding ?? spaced
            }
            return (name: decode(parts[0]), value: parts.count > 1 ? decode(parts[1]) : "")
        }
    }

    /// The first value of a query parameter.
    public func queryValue(_ name: String) -> String? { queryItems.first { $0.name == name }?.value }

    /// Decodes the body as JSON, or throws a 400 whose message says what is wrong (which field, which
    /// type) without repeating the values sent.
    public func decodeJSON<T: Decodable>(_ type: T.Type = T.self) throws(HTTPError) -> T {
        try JSONCoding.decodeRequestBody(T.self, from: body)
    }

    /// Method and path only: bodies and headers may hold card data or credentials.
    public var description: String { "\(method) \(path)" }
}

/// Clear messages for decoding failures that never quote the input.
enum JSONErrorText {
    static func describe(_ error: DecodingError) -> String {
        switch error {
        case .keyNotFound(let key, let context):
            return "missing field '\(path(context.codingPath + [key]))'"
        case .typeMismatch(let type, let context):
            if context.codingPath.isEmpty { return "the request body must be a JSON \(typeName(type))" }
            return "field '\(path(context.codingPath))' must be \(article(typeName(type)))"
        case .valueNotFound(let type, let context):
            if context.codingPath.isEmpty { return "the request body must be a JSON \(typeName(type))" }
            return "field '\(path(context.codingPath))' must not be null (expected \(article(typeName(type))))"
        case .dataCorrupted(let context):
            if context.codingPath.isEmpty { return "the request body is not valid JSON" }
            let detail = CardNumberScrubber.scrub(context.debugDescription)
            return "field '\(path(context.codingPath))' is invalid: \(detail)"
        @unknown default:
            return "the request body is not valid JSON"
        }
    }

    static func path(_ keys: [any CodingKey]) -> String {
        var out = ""
        for key in keys {
            if let index = key.intValue {
                out += "[\(index)]"
            } else {
                out += out.isEmpty ? key.stringValue : "." + key.stringValue
            }
        }
        return out.isEmpty ? "(root)" : out
    }

    static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "string"
        case is Bool.Type: "boolean"
        case is Int.Type, is Int64.Type, is Int32.Type, is UInt.Type, is UInt64.Type: "integer"
        case is Double.Type, is Float.Type, is Decimal.Type: "number"
        default:
            // Arrays of any element; everything else a keyed container decodes is an object.
            String(describing: type).hasPrefix("Array<") ? "array" : "object"
        }
    }

    static func article(_ name: String) -> String {
        (name.first.map { "aeiou".contains($0) } ?? false ? "an " : "a ") + name
    }
}

/// A handler's answer.
public struct HTTPResponse: Sendable {
    public var status: HTTPStatus
    public var headers: HTTPHeaders
    public var body: Data

    public init(status: HTTPStatus = .ok, headers: HTTPHeaders = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// `value` as JSON with sorted keys and unescaped slashes, `Content-Type: application/json`.
    public static func json(_ value: some Encodable, status: HTTPStatus = .ok) throws(HTTPError) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "application/json"], body: try JSONCoding.encode(value))
    }

    /// Plain text, `Content-Type: text/plain; charset=utf-8`.
    public static func text(_ text: String, status: HTTPStatus = .ok) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "text/plain; charset=utf-8"], body: Data(text.utf8))
    }

    /// `204 No Content`.
    public static var noContent: HTTPResponse { HTTPResponse(status: .noContent) }

    /// The `{"error":{"code","message"}}` body every Orchard service answers a refusal with, if this is one.
    public var errorBody: (code: String, message: String)? {
        struct Body: Decodable {
            struct Inner: Decodable {
                let code: String
                let message: String
            }
            let error: Inner
        }
        guard let decoded = try? JSONCoding.decoder.decode(Body.self, from: body) else { return nil }
        return (decoded.error.code, decoded.error.message)
    }

    /// Decodes the body as JSON.
    public func decodeJSON<T: Decodable>(_ type: T.Type = T.self) throws(HTTPError) -> T {
        if let duplicate = DuplicateJSONKeys.first(in: body) {
            throw HTTPError(.duplicateKey, "field '\(duplicate)' appears twice in one object of the response")
        }
        do {
            return try JSONCoding.decoder.decode(T.self, from: body)
        } catch let error as DecodingError {
            throw HTTPError(
                .invalidJSON, JSONErrorText.describe(error).replacingOccurrences(of: "request", with: "response"))
        } catch {
            throw HTTPError(.invalidJSON, "the response body is not valid JSON")
        }
    }
}

/// The JSON settings every Orchard service uses on the wire.
public enum JSONCoding {
    // Shared: encoding and decoding do not mutate them, and Foundation makes them Sendable.
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()
    static let decoder = JSONDecoder()

    /// The one strict reader of a request body (``HTTPRequest/decodeJSON(_:)`` and the handlers that hold only the
    /// body): a body that gives one key twice in an object is refused before decoding with 400 `duplicate_key`, as
    /// `JSONDecoder` would keep one of the values and a relay and the party behind it could act on different ones;
    /// anything else that is not `T` is 400 `invalid_json` with a message that names the field, never the values.
    public static func decodeRequestBody<T: Decodable>(_ type: T.Type = T.self, from body: Data) throws(HTTPError) -> T
    {
        guard !body.isEmpty else { throw HTTPError(.invalidJSON, "the request body is empty; send a JSON object") }
        if let duplicate = DuplicateJSONKeys.first(in: body) {
            throw HTTPError(.duplicateKey, "field '\(duplicate)' appears twice in one object; send each field once")
        }
        do {
            return try decoder.decode(T.self, from: body)
        } catch let error as DecodingError {
            throw HTTPError(.invalidJSON, JSONErrorText.describe(error))
        } catch {
            throw HTTPError(.invalidJSON, "the request body is not valid JSON")
        }
    }

    /// Encodes with sorted keys and unescaped slashes, so equal values give equal bytes.
    public static func encode(_ value: some Encodable) throws(HTTPError) -> Data {
        do {
            return try encoder.encode(value)
        } catch {
            throw HTTPError(.internalFailure, "a value could not be encoded as JSON (\(type(of: value)))")
        }
    }

    /// `{"error":{"code":…,"message":…}}`.
    static func errorBody(code: String, message: String) -> Data {
        struct Body: Encodable {
            struct Inner: Encodable {
                let code: String
                let message: String
            }
            let error: Inner
        }
        return (try? encode(Body(error: .init(code: code, message: message))))
            ?? Data(#"{"error":{"code":"internal_error","message":"internal error"}}"#.utf8)
    }
}
