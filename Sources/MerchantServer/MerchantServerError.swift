import MerchantAPI
public import OrchardHTTP

/// Why the merchant server refused or failed a request. One error type for the module, a struct with an
/// extensible code; equality compares the code. Mapped to HTTP in one place (``httpStatus``): the answer is
/// `{"error": {"code", "message"}}` (`MerchantAPI.ErrorBody`; the codes are `MerchantAPI.ErrorCode`'s). Messages say
/// what went wrong, never a card number, cryptogram or contact.
public struct MerchantServerError: Error, Hashable, Sendable, CustomStringConvertible, HTTPResponseError {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(_ rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// 400: the request body is not what the route takes (JSON, fields, amount, currency, token syntax).
        public static let malformedRequest = Code(MerchantAPI.ErrorCode.malformedRequest)
        /// 400: the order's applicationData is not canonical base64, is empty, or decodes to over 64 KiB.
        public static let invalidApplicationData = Code(MerchantAPI.ErrorCode.invalidApplicationData)
        /// 404: no order with this ID.
        public static let orderNotFound = Code(MerchantAPI.ErrorCode.orderNotFound)
        /// 409: the order was already paid (with another token).
        public static let orderAlreadyPaid = Code(MerchantAPI.ErrorCode.orderAlreadyPaid)
        /// 409: a charge for this order (or this token) is on its way; ask again for its outcome.
        public static let paymentInProgress = Code(MerchantAPI.ErrorCode.paymentInProgress)
        /// 409: this token (its transactionId) was already submitted for another order, or is another token
        /// with the transactionId of one already submitted.
        public static let tokenAlreadyUsed = Code(MerchantAPI.ErrorCode.tokenAlreadyUsed)
        /// 422: the token's signature, chain or freshness does not verify, it was made for another merchant or
        /// processing key, or it does not decrypt.
        public static let tokenRejected = Code(MerchantAPI.ErrorCode.tokenRejected)
        /// 422: the token pays another amount or currency than the order, or does not carry the order's
        /// applicationData hash.
        public static let orderMismatch = Code(MerchantAPI.ErrorCode.orderMismatch)
        /// 502: the acquirer could not be reached or did not answer (a charge without an answer was reversed).
        public static let acquirerUnavailable = Code(MerchantAPI.ErrorCode.acquirerUnavailable)
        /// 502: the acquirer refused the authorization request itself (not a card decline).
        public static let acquirerRefused = Code(MerchantAPI.ErrorCode.acquirerRefused)
        /// 500: the merchant's own store or configuration failed.
        public static let internalFailure = Code(MerchantAPI.ErrorCode.internalFailure)
        /// The gateway refused the merchant-session request or could not be reached.
        public static let merchantSessionFailed = Code(MerchantAPI.ErrorCode.merchantSessionFailed)
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
    public static func == (a: Self, b: Self) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    public var httpStatus: HTTPStatus {
        switch code {
        case .malformedRequest, .invalidApplicationData: return .badRequest
        case .orderNotFound: return .notFound
        case .orderAlreadyPaid, .paymentInProgress, .tokenAlreadyUsed: return .conflict
        case .tokenRejected, .orderMismatch: return .unprocessableContent
        case .acquirerUnavailable, .acquirerRefused, .merchantSessionFailed: return .badGateway
        default: return .internalServerError
        }
    }
    public var httpErrorCode: String { code.rawValue }
    public var httpErrorMessage: String {
        code == .internalFailure ? "the merchant server failed (see its log)" : message
    }
}
