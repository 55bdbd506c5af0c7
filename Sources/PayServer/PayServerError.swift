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

        // In-app payments (InAppPayments.swift).
        /// The payment credential does not open with the credential key, is malformed, or its signature,
        /// Secure Element certificate or nonce binding does not verify.
        public static let credentialRejected = Code("credentialRejected")
        /// The nonce was never issued (or was purged).
        public static let nonceUnknown = Code("nonceUnknown")
        /// The nonce was already redeemed.
        public static let nonceUsed = Code("nonceUsed")
        /// The nonce is older than its lifetime.
        public static let nonceExpired = Code("nonceExpired")
        /// The nonce was issued to another device.
        public static let nonceNotIssuedToDevice = Code("nonceNotIssuedToDevice")
        /// The app is not entitled to pay for the merchant ID.
        public static let notEntitled = Code("notEntitled")
        /// The merchant has no valid, unrevoked payment processing certificate.
        public static let noProcessingCertificate = Code("noProcessingCertificate")

        // Web credentials (MerchantSessions.swift).
        /// The web credential's merchant session was not issued by this Pay server, or is another merchant's,
        /// another domain's, or its nonce differs.
        public static let sessionMismatch = Code("sessionMismatch")
        /// The merchant session was already used for a token.
        public static let sessionUsed = Code("sessionUsed")
        /// The merchant session is older than its 5 minutes.
        public static let sessionExpired = Code("sessionExpired")
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
        case .invalidRequest, .credentialRejected: return .badRequest
        case .notEntitled: return .forbidden
        case .nonceUnknown, .nonceUsed, .nonceExpired, .nonceNotIssuedToDevice, .noProcessingCertificate:
            return .conflict
        case .sessionMismatch: return .forbidden
        case .sessionUsed, .sessionExpired: return .conflict
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
