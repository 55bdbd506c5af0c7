public import OrchardHTTP
public import OrchardStore

/// A store that stopped writing after a disk error makes its service answer 503 with `Retry-After` instead of an
/// opaque 500: the request was fine, the service cannot keep it until an operator fixes the disk and restarts it.
/// The commit that hit the error answers the same way (it was not acknowledged; a retry with the same
/// idempotency key after the restart settles it).
extension StoreError: HTTPUnavailableError {
    /// Seconds a caller waits before retrying while the store is stopped (an operator must restart the service).
    public static let retryAfterDiskFailure = 30

    /// ``retryAfterDiskFailure`` for a stopped store or a disk error, nil for every other store error.
    public var retryAfterSeconds: Int? {
        code == .unavailable || code == .io ? Self.retryAfterDiskFailure : nil
    }
}
