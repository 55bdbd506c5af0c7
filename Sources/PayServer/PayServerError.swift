public import OrchardHTTP

/// Why the Pay server refused or failed a device's request. Maps to HTTP in one place (``httpStatus``).
public struct PayServerError: Error, Hashable, Sendable, CustomStringConvertible, HTTPResponseError {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The request is malformed.
        public static let invalidRequest = Code("invalidRequest")
        /// The client certificate and the Secure Element certificate do not describe one device.
        public static let deviceMismatch = Code("deviceMismatch")
        /// The device has not registered (or was erased).
        public static let deviceNotRegistered = Code("deviceNotRegistered")
        /// The caller may not act on this device or session.
        public static let notPermitted = Code("notPermitted")
        /// No such device, session or terms.
        public static let notFound = Code("notFound")
        /// The network refused the relayed request (its status is passed on).
        public static let networkRefused = Code("networkRefused")
        /// The network cannot be reached or failed.
        public static let networkUnavailable = Code("networkUnavailable")
        /// The Pay server's own store or configuration failed.
        public static let internalFailure = Code("internalFailure")
    }

    public let code: Code
    public let message: String
    /// For ``Code/networkRefused``: the network's status, passed on to the device.
    public let relayedStatus: Int?

    public init(_ code: Code, _ message: String, relayedStatus: Int? = nil) {
        self.code = code
        self.message = message
        self.relayedStatus = relayedStatus
    }

    public var description: String { "\(code): \(message)" }

    public var httpStatus: HTTPStatus {
        switch code {
        case .invalidRequest: return .badRequest
        case .deviceMismatch, .deviceNotRegistered, .notPermitted: return .forbidden
        case .notFound: return .notFound
        case .networkRefused:
            switch relayedStatus {
            case 400: return .badRequest
            case 403: return .forbidden
            case 404: return .notFound
            case 409: return .conflict
            case 422: return .unprocessableContent
            default: return .badGateway
            }
        case .networkUnavailable: return .badGateway
        default: return .internalServerError
        }
    }
    public var httpErrorCode: String { code.rawValue }
    public var httpErrorMessage: String { httpStatus.code >= 500 ? "the Pay server failed: \(code)" : message }
}
