import OrchardHTTP

/// The one error type of the Pay server's in-app and web payment endpoints: a struct with an extensible
/// code, answered as `{"error": {"code", "message"}}` with the status each code carries. Messages name what
/// went wrong, never a nonce, DPAN, cryptogram or key.
public struct PayServerError: Error, Hashable, Sendable, CustomStringConvertible, HTTPResponseError {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidRequest = "invalid_request"
            case credentialRejected = "credential_rejected"
            case deviceNotRecognized = "device_not_recognized"
            case nonceUnknown = "nonce_unknown"
            case nonceUsed = "nonce_used"
            case nonceExpired = "nonce_expired"
            case nonceNotIssuedToDevice = "nonce_not_issued_to_device"
            case notEntitled = "not_entitled"
            case unknownMerchant = "unknown_merchant"
            case noProcessingCertificate = "no_processing_certificate"
            case unknownCertificate = "unknown_certificate"
            case internalFailure = "internal_failure"
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The request's JSON or a field in it is malformed (400).
        public static let invalidRequest = Code(.invalidRequest)
        /// The credential does not open with the Pay server's key, is malformed, or its signature, device
        /// certificate or nonce binding does not verify (400/403).
        public static let credentialRejected = Code(.credentialRejected)
        /// The client certificate is not a device certificate of this deployment (403).
        public static let deviceNotRecognized = Code(.deviceNotRecognized)
        /// The nonce was never issued, or was purged (409).
        public static let nonceUnknown = Code(.nonceUnknown)
        /// The nonce was already redeemed (409).
        public static let nonceUsed = Code(.nonceUsed)
        /// The nonce is older than its lifetime (409).
        public static let nonceExpired = Code(.nonceExpired)
        /// The nonce was issued to another device (409).
        public static let nonceNotIssuedToDevice = Code(.nonceNotIssuedToDevice)
        /// The app may not pay for this merchant ID (403).
        public static let notEntitled = Code(.notEntitled)
        /// The merchant ID is not registered (404).
        public static let unknownMerchant = Code(.unknownMerchant)
        /// The merchant has no valid, unrevoked processing certificate (409).
        public static let noProcessingCertificate = Code(.noProcessingCertificate)
        /// No certificate has this serial number (404).
        public static let unknownCertificate = Code(.unknownCertificate)
        /// Something failed that the request does not explain (500).
        public static let internalFailure = Code(.internalFailure)

        public var description: String { base.rawValue }

        var status: HTTPStatus {
            switch base {
            case .invalidRequest: .badRequest
            case .credentialRejected: .badRequest
            case .deviceNotRecognized, .notEntitled: .forbidden
            case .nonceUnknown, .nonceUsed, .nonceExpired, .nonceNotIssuedToDevice, .noProcessingCertificate:
                .conflict
            case .unknownMerchant, .unknownCertificate: .notFound
            case .internalFailure: .internalServerError
            }
        }
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public var httpStatus: HTTPStatus { code.status }
    public var httpErrorCode: String { code.status.code >= 500 ? "internal_error" : code.description }
    public var httpErrorMessage: String { code.status.code >= 500 ? "internal error" : message }
}
