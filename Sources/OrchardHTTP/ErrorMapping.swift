import Foundation
import OrchardLogging

/// The one place where errors become HTTP answers.
///
/// - An ``HTTPResponseError`` answers its own status with `{"error":{"code":…,"message":…}}`; a 5xx
///   among them is also logged (at error, with the request id), since the caller learns little.
/// - An ``HTTPUnavailableError`` that says so answers 503 with `Retry-After`, logged at error.
/// - An ``OverloadError`` (load shed, rate limit) answers its 503 or 429 with `Retry-After`, not logged: under
///   load the log would be one more thing to shed.
/// - Anything else is an opaque 500 whose message carries only the request id, and the error itself
///   goes to the log with that id, so an operator can match a complaint to its cause.
enum ErrorMapping {
    static func response(for error: any Error, requestID: UUID, logger: Logger) -> HTTPResponse {
        let status: HTTPStatus
        let code: String
        let message: String
        if let unavailable = error as? any HTTPUnavailableError, let seconds = unavailable.retryAfterSeconds {
            logger.error(
                "request failed with 503: the service cannot store requests until it is restarted",
                metadata: ["request_id": .uuid(requestID), "error": .describing(error)])
            var response = errorResponse(
                status: .serviceUnavailable, code: "service_unavailable",
                message: "the service cannot store requests right now; retry after \(seconds) seconds "
                    + "with the same idempotency key (request id \(requestID.lowercasedString))")
            response.headers.set("Retry-After", String(seconds))
            return response
        }
        if let overload = error as? OverloadError { return overload.response }
        if let known = error as? any HTTPResponseError {
            status = known.httpStatus
            code = known.httpErrorCode
            message = known.httpErrorMessage
            if status.code >= 500 {
                logger.error(
                    "request failed with \(status.code)",
                    metadata: ["request_id": .uuid(requestID), "error": .describing(error)])
            }
        } else {
            status = .internalServerError
            code = "internal_error"
            message = "internal error (request id \(requestID.lowercasedString))"
            logger.error(
                "unhandled error in a handler",
                metadata: [
                    "request_id": .uuid(requestID), "error_type": .string(String(describing: type(of: error))),
                    "error": .describing(error),
                ])
        }
        return errorResponse(status: status, code: code, message: message)
    }

    /// A JSON error answer.
    static func errorResponse(status: HTTPStatus, code: String, message: String) -> HTTPResponse {
        HTTPResponse(
            status: status, headers: ["Content-Type": "application/json"],
            body: JSONCoding.errorBody(code: code, message: CardNumberScrubber.scrub(message)))
    }
}
