public import AccessPolicy
import Foundation
public import OrchardCrypto
import Synchronization

/// How much a route's work matters when the server is loaded: each class may use a share of the server's
/// bound on work in flight, so as load grows analytics is shed first, then order creation, then everything
/// else, and payments last.
public struct RouteClass: Hashable, Sendable, CustomStringConvertible {
    /// A name for logs and errors (`payment`, `analytics`, …).
    public let name: String
    /// The percentage (1 to 100) of ``AdmissionLimits/maxInFlight`` that may be in flight when a request of
    /// this class is admitted.
    public let share: Int

    /// A class that admits requests while fewer than `share` % of the bound are in flight.
    public init(name: String, share: Int) {
        precondition((1...100).contains(share), "a route class's share is 1 to 100 percent")
        self.name = name
        self.share = share
    }

    /// Payments (authorizations, reversals, payment submissions, nonces and credential exchanges): the whole bound.
    public static let payment = RouteClass(name: "payment", share: 100)
    /// Every route not classified otherwise: three quarters of the bound.
    public static let standard = RouteClass(name: "standard", share: 75)
    /// Order creation: half of the bound.
    public static let orderCreation = RouteClass(name: "order_creation", share: 50)
    /// Analytics: a quarter of the bound.
    public static let analytics = RouteClass(name: "analytics", share: 25)

    /// Whether the class's connections are served first by the event loop (the whole bound: payments).
    var isUrgent: Bool { share == 100 }

    /// The class's name.
    public var description: String { name }
}

/// A token bucket's refill rate and depth.
public struct RateLimit: Sendable, Hashable {
    /// Requests added back per second.
    public var perSecond: Double
    /// Requests that may come at once after a quiet spell.
    public var burst: Int

    /// A limit of `perSecond` on average with bursts of up to `burst`.
    public init(perSecond: Double, burst: Int) {
        precondition(perSecond > 0 && burst > 0, "a rate limit must be positive")
        self.perSecond = perSecond
        self.burst = burst
    }
}

/// The bounds of a server's ``AdmissionControl``.
public struct AdmissionLimits: Sendable {
    /// Requests in flight (admitted, not answered) over the whole server; a class admits up to its share.
    public var maxInFlight: Int = 256
    /// The `Retry-After` a shed request gets, in seconds.
    public var retryAfterSeconds: Int = 1
    /// Per client address on routes open without a client certificate (policy `anyone`, or a bare route that
    /// requires none); nil: no limit.
    public var openRouteRate: RateLimit? = RateLimit(perSecond: 200, burst: 1000)
    /// Connections open at which a saturated server (``maxInFlight`` requests in flight) stops accepting: new
    /// connections then wait in the kernel's backlog, costing the server no TLS handshake, until a request is
    /// answered; clients that already have a connection keep it and are answered (503 beyond their class's share).
    /// nil: twice ``maxInFlight``.
    public var acceptBound: Int?
    /// The longest a connection is held back: a kept-alive connection whose last two requests were of one class is
    /// not read while that class is over its bound (its next request waits in the client's socket, costing the
    /// server nothing, instead of being answered 503), and is read again as soon as the class has room, or after
    /// this long, whatever the load (then its request is admitted or shed as any other).
    public var holdBackLimit: Duration = .milliseconds(100)

    /// The defaults: 256 in flight, `Retry-After: 1`, 200 requests per second (bursts of 1000) per address on
    /// open routes.
    public init() {}
}

/// A request refused because the server or the caller is over a bound: `503` (the server is loaded) or `429`
/// (this caller is over its rate), with `Retry-After`. Nothing was done for it; the same request may be retried.
public struct OverloadError: Error, Sendable, HTTPResponseError, CustomStringConvertible {
    /// `503 Service Unavailable` or `429 Too Many Requests`.
    public let httpStatus: HTTPStatus
    /// `overloaded` or `rate_limited`.
    public let httpErrorCode: String
    /// What happened and when to retry.
    public let httpErrorMessage: String
    /// The `Retry-After` header's value.
    public let retryAfterSeconds: Int

    /// The server is over its bound for `routeClass`.
    public static func overloaded(_ routeClass: RouteClass, retryAfter seconds: Int) -> OverloadError {
        OverloadError(
            httpStatus: .serviceUnavailable, httpErrorCode: "overloaded",
            httpErrorMessage:
                "the server is busy and sheds \(routeClass.name) requests; nothing was done, retry after \(seconds) "
                + "seconds",
            retryAfterSeconds: seconds)
    }

    /// The answer: status, `Retry-After` and the JSON error body. A shed request is answered from a copy made once
    /// per class and `Retry-After` (see ``AdmissionControl/admit(_:)``), so shedding encodes nothing.
    var response: HTTPResponse {
        var response = ErrorMapping.errorResponse(status: httpStatus, code: httpErrorCode, message: httpErrorMessage)
        response.headers.set("Retry-After", String(retryAfterSeconds))
        return response
    }

    /// The caller is over `what`'s rate.
    public static func rateLimited(_ what: String, retryAfter seconds: Int) -> OverloadError {
        OverloadError(
            httpStatus: .tooManyRequests, httpErrorCode: "rate_limited",
            httpErrorMessage: "too many \(what); nothing was done, retry after \(seconds) seconds",
            retryAfterSeconds: seconds)
    }

    /// Status, code and message, for logs.
    public var description: String { "\(httpStatus.code) \(httpErrorCode): \(httpErrorMessage)" }
}

/// Bounded work in flight per route class, and rate limits on routes open without a client certificate.
///
/// A request of class `c` is admitted while the server has fewer than `maxInFlight × c.share / 100` requests in
/// flight; otherwise it is answered 503 with `Retry-After` before its handler runs (so nothing changes, and no
/// Idempotency-Key is claimed). The count is one atomic over every loop thread: under load the classes are shed
/// in priority order whatever the loop.
public final class AdmissionControl: Sendable {
    /// The bounds this instance enforces.
    public let limits: AdmissionLimits
    private let inFlightCount = Atomic<Int>(0)
    private let openRoutes: RateLimiter?
    /// The 503 of each class (by name), built at its first shed.
    private let shedAnswers = Mutex<[String: (error: OverloadError, response: HTTPResponse)]>([:])

    /// Admission with `limits`; `clock` refills the open routes' buckets (inject a ManualClock in tests).
    public init(limits: AdmissionLimits = AdmissionLimits(), clock: any MonotonicClock = SystemClock()) {
        precondition(limits.maxInFlight > 0 && limits.retryAfterSeconds > 0, "admission limits must be positive")
        self.limits = limits
        openRoutes = limits.openRouteRate.map { RateLimiter($0, clock: clock) }
    }

    /// Requests admitted and not yet answered.
    public var inFlight: Int { inFlightCount.load(ordering: .relaxed) }

    /// Whether a server with `openConnections` connections should stop accepting new ones for now: every class is
    /// over its bound and at least ``AdmissionLimits/acceptBound`` connections are open.
    public func refusesNewConnections(openConnections: Int) -> Bool {
        inFlight >= limits.maxInFlight && openConnections >= (limits.acceptBound ?? 2 * limits.maxInFlight)
    }

    /// The most requests in flight when one of `routeClass` is admitted.
    public func bound(for routeClass: RouteClass) -> Int {
        max(1, limits.maxInFlight * routeClass.share / 100)
    }

    /// Admits one request of `routeClass` (call ``release()`` when it is answered), or throws the 503 it gets.
    public func admit(_ routeClass: RouteClass) throws(OverloadError) {
        let bound = bound(for: routeClass)
        let count = inFlightCount.wrappingAdd(1, ordering: .relaxed).newValue
        guard count <= bound else {
            inFlightCount.wrappingSubtract(1, ordering: .relaxed)
            throw shed(routeClass).error
        }
    }

    /// The 503 (error and answer) a request of `routeClass` gets when it is shed, made once per class.
    func shed(_ routeClass: RouteClass) -> (error: OverloadError, response: HTTPResponse) {
        let seconds = limits.retryAfterSeconds
        return shedAnswers.withLock { answers in
            if let answer = answers[routeClass.name] { return answer }
            let error = OverloadError.overloaded(routeClass, retryAfter: seconds)
            let answer = (error, error.response)
            answers[routeClass.name] = answer
            return answer
        }
    }

    /// One admitted request was answered.
    public func release() { inFlightCount.wrappingSubtract(1, ordering: .relaxed) }

    /// Takes one request from `address`'s bucket for open routes, or throws the 429 it gets.
    public func admitOpenRoute(from address: String) throws(OverloadError) {
        guard let openRoutes else { return }
        if let wait = openRoutes.take(address) {
            throw .rateLimited("requests from this address", retryAfter: wait)
        }
    }
}

/// Token buckets by key (a client address, a device): each key may take `burst` at once and `perSecond` on
/// average, measured on the monotonic clock, so setting the wall clock moves nothing.
///
/// At most `maxKeys` buckets are kept; when full, buckets that have refilled (their key is idle) are dropped, and
/// if none has, the oldest is.
public final class RateLimiter: Sendable {
    /// The refill rate and depth of every bucket.
    public let limit: RateLimit
    private let clock: any MonotonicClock
    private let maxKeys: Int
    private struct Bucket {
        var tokens: Double
        var updated: UInt64
    }
    private let buckets = Mutex<[String: Bucket]>([:])

    /// Buckets of `limit` on `clock`, at most `maxKeys` of them.
    public init(_ limit: RateLimit, clock: any MonotonicClock, maxKeys: Int = 65_536) {
        precondition(maxKeys > 0, "a rate limiter keeps at least one bucket")
        self.limit = limit
        self.clock = clock
        self.maxKeys = maxKeys
    }

    /// Buckets kept.
    var keyCount: Int { buckets.withLock { $0.count } }

    /// Takes one token from `key`'s bucket: nil when it had one, otherwise the whole seconds until it will.
    public func take(_ key: String) -> Int? {
        let now = clock.nanoseconds()
        let (limit, maxKeys) = (self.limit, self.maxKeys)
        return buckets.withLock { buckets -> Int? in
            var bucket = buckets[key] ?? Bucket(tokens: Double(limit.burst), updated: now)
            let elapsed = Double(now &- min(now, bucket.updated)) / 1e9
            bucket.tokens = min(Double(limit.burst), bucket.tokens + elapsed * limit.perSecond)
            bucket.updated = now
            if buckets[key] == nil && buckets.count >= maxKeys {
                Self.evict(&buckets, now: now, limit: limit, maxKeys: maxKeys)
            }
            guard bucket.tokens >= 1 else {
                buckets[key] = bucket
                return max(1, Int(((1 - bucket.tokens) / limit.perSecond).rounded(.up)))
            }
            bucket.tokens -= 1
            buckets[key] = bucket
            return nil
        }
    }

    private static func evict(_ buckets: inout [String: Bucket], now: UInt64, limit: RateLimit, maxKeys: Int) {
        let full = Double(limit.burst) / limit.perSecond * 1e9
        buckets = buckets.filter { Double(now &- min(now, $0.value.updated)) < full }
        if buckets.count >= maxKeys, let oldest = buckets.min(by: { $0.value.updated < $1.value.updated }) {
            buckets[oldest.key] = nil
        }
    }
}

extension Router {
    /// Puts `declared` in `routeClass` (every route is ``RouteClass/standard`` unless classified).
    public mutating func classify(_ declared: DeclaredRoute, as routeClass: RouteClass) {
        routeClasses[declared.method + " " + declared.pattern] = routeClass
    }

    /// The class of `route`.
    func routeClass(of route: Route) -> RouteClass {
        routeClasses[route.key] ?? .standard
    }

    /// Whether `route` is open to a caller without a client certificate.
    func isOpen(_ route: Route) -> Bool {
        if let policy = route.policy { return policy.role == nil }
        return !route.requirement.required
    }

    /// Admits `request` on `route` under ``admission`` (nothing when there is none): returns what to call once
    /// it is answered, or throws the 429 or 503 it gets.
    func admit(_ route: Route, _ request: HTTPRequest) throws(OverloadError) -> (@Sendable () -> Void)? {
        guard let admission else { return nil }
        if isOpen(route) && request.clientCertificate == nil {
            try admission.admitOpenRoute(from: request.remoteAddress)
        }
        try admission.admit(routeClass(of: route))
        return { admission.release() }
    }
}
