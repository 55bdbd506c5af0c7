public import OrchardHTTP
public import OrchardStore

/// A store that stopped writing after a disk error makes its service answer 503 with `Retry-After` instead of an
/// opaque 500: the request was fine, the service cannot keep it until an operator fixes the disk and restarts it.
/// The commit that hit the error answers the same way (it was not acknowledged; a retry with the same
/// idempotency key after the restart settles it).
extension StoreError: HTTPUnavailableError {
    /// Seconds a caller waits before retrying while the store is stopped (an operator must restart the service).
    public static let retryAfterDiskFailure = 30

    /// Seconds a caller waits before retrying a write that concurrent instances on one PostgreSQL database kept
    /// conflicting with (SQLSTATE 40001 or 40P01 after every retry of the store): rolled back whole, nothing kept.
    public static let retryAfterConflict = 1

    /// ``retryAfterDiskFailure`` for a stopped store or a disk error, ``retryAfterConflict`` for a write rolled back
    /// by serialization failures (503: the request was fine, a retry or another instance may succeed), nil for
    /// every other store error.
    public var retryAfterSeconds: Int? {
        if code == .unavailable || code == .io { return Self.retryAfterDiskFailure }
        return code == .serializationFailure ? Self.retryAfterConflict : nil
    }
}
