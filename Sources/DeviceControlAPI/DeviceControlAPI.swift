public import Foundation

/// One request of the device's control API (the HTTP/1.1 JSON on `DIR/devices/NAME/control.sock`): where it
/// goes, the JSON it carries and the JSON it is answered with.
///
/// Both sides use the same types: a client sends `body` to `route` and decodes `Answer`; the device process
/// parses the route with ``DeviceControlRoute/init(method:path:)`` and decodes `Body`.
public protocol DeviceControlRequest: Sendable {
    /// The JSON body; ``NoBody`` for routes that take none (nothing is sent).
    associatedtype Body: Codable & Sendable
    /// The JSON of a successful answer.
    associatedtype Answer: Codable & Sendable
    /// The method and path, with the identifiers the path carries.
    var route: DeviceControlRoute { get }
    /// What is sent as the request's body.
    var body: Body { get }
}

extension DeviceControlRequest where Body == NoBody {
    /// Routes without a body send none.
    public var body: NoBody { NoBody() }
}

/// The body of a route that takes none (nothing is sent; the device ignores what it gets).
public struct NoBody: Codable, Sendable, Hashable {
    public init() {}
}

/// The answer `{}` of a route that only acts.
public struct Acknowledgement: Codable, Sendable, Hashable {
    public init() {}
}

/// Every refusal on the control socket: `{"error": {"code", "message"}}` with the status that fits (400
/// malformed, 403 refused by a security check, 404 unknown card, sheet or route, 409 not in this state, 422 the
/// device cannot, 429 passcode delay, 5xx the device or the Pay server failed).
public struct DeviceControlErrorBody: Codable, Sendable, Hashable {
    /// The code and the message.
    public struct Detail: Codable, Sendable, Hashable {
        /// A value a caller can branch on (`deviceLocked`, `notFound`, `invalidArgument`, ...).
        public let code: String
        /// What happened; never a card number, key, cryptogram or passcode.
        public let message: String

        public init(code: String, message: String) {
            self.code = code
            self.message = message
        }
    }

    public let error: Detail

    public init(code: String, message: String) {
        error = Detail(code: code, message: message)
    }
}

/// The JSON coding both sides use: sorted keys and unescaped slashes (as every Orchard wire), dates in ISO 8601,
/// `Data` in base64.
public enum DeviceControlJSON {
    /// The encoder of requests and answers.
    public static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }

    /// The decoder of requests and answers.
    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }
}
