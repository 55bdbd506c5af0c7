import Foundation

/// The instances of one party a client may reach (`https://host:port` each), tried in order.
///
/// Several instances of a server party share one database, so any of them answers any request, and a repeat of
/// a request with the same `Idempotency-Key` gets the first answer from whichever instance it reaches.
public struct FailoverEndpoints: Sendable, Hashable {
    /// The base URLs, without a trailing `/`, first preferred.
    public let baseURLs: [String]

    /// Throws ``HTTPError/Code/invalidURL`` for an empty list or a URL that is not `https://` or `http://`.
    public init(_ baseURLs: [String]) throws(HTTPError) {
        guard !baseURLs.isEmpty else { throw HTTPError(.invalidURL, "give at least one address of the service") }
        var trimmed: [String] = []
        for url in baseURLs {
            guard url.hasPrefix("https://") || url.hasPrefix("http://") else {
                throw HTTPError(.invalidURL, "an address of the service must start with https:// or http://")
            }
            trimmed.append(url.hasSuffix("/") ? String(url.dropLast()) : url)
        }
        self.baseURLs = trimmed
    }
}

extension HTTPClient {
    /// Sends `request`, whose `url` is a path (`/v1/…`), to the first of `endpoints` (once: the last instance alone
    /// gets the client's retries), and to the next one when an instance cannot be reached or answers 503 (Service
    /// Unavailable: overloaded, or its store stopped). The same request goes to the next instance, headers and
    /// `Idempotency-Key` included.
    ///
    /// A connection that could not be made carried nothing, so any request moves on. A failure after the request
    /// may have reached the instance (a timeout, a connection cut mid-answer) moves on only when the request may be
    /// repeated (``HTTPClientRequest/isRetryable``: an idempotent method, or an `Idempotency-Key` the party
    /// deduplicates on); otherwise it is thrown, as the instance may have acted on it. When every instance failed,
    /// the last 503 is returned, or the last error thrown: ``HTTPError/Code/connectionFailed`` only if no instance
    /// may have received the request.
    public func send(
        _ request: HTTPClientRequest, failover endpoints: FailoverEndpoints
    ) async throws(HTTPError) -> HTTPResponse {
        guard request.url.hasPrefix("/") else {
            throw HTTPError(.invalidURL, "a request sent to several instances names a path, such as /v1/…")
        }
        var lastResponse: HTTPResponse?
        var lastError: HTTPError?
        // Whether an instance before the current one may have received the request.
        var mayHaveArrived = false
        for (index, base) in endpoints.baseURLs.enumerated() {
            var attempt = request
            attempt.url = base + request.url
            do throws(HTTPError) {
                // One attempt at each instance but the last, which gets the client's retries: with another instance
                // to go to, retrying one that failed only delays the answer.
                let response: HTTPResponse
                if index < endpoints.baseURLs.count - 1 {
                    guard attempt.url.hasPrefix("https://") || attempt.url.hasPrefix("http://") else {
                        throw HTTPError(.invalidURL, "the URL must start with https:// or http://")
                    }
                    response = try await engine.perform(attempt).mapError(\.error).get()
                } else {
                    response = try await send(attempt)
                }
                guard response.status.code == 503 else { return response }
                lastResponse = response
                lastError = nil
            } catch {
                // Could not connect, or timed out before the request went out.
                let nothingSent =
                    !error.requestMayHaveArrived && (error.code == .connectionFailed || error.code == .timedOut)
                let mayRepeat = request.isRetryable && (error.code == .timedOut || error.code == .transportFailure)
                guard nothingSent || mayRepeat, !Task.isCancelled else {
                    throw error.afterAttemptThat(mayHaveArrived: mayHaveArrived)
                }
                mayHaveArrived = mayHaveArrived || error.requestMayHaveArrived
                lastError = error
                lastResponse = nil
            }
        }
        if let lastResponse { return lastResponse }
        throw lastError?.afterAttemptThat(mayHaveArrived: mayHaveArrived)
            ?? HTTPError(.internalFailure, "no instance was tried")
    }
}
