import Foundation
public import OrchardCrypto
public import OrchardX509
public import WebMerchantAPI

/// The device's check of a page's merchant session before any sheet (docs/web.md, "The browser agent"), as
/// Safari's PassKit checks Apple's: signed under the token-signing root (`pki/pay/token-root.pem`) by a
/// merchant-session signing leaf (a leaf of another kind, such as the token-signing leaf, is refused) at its
/// `epochTimestamp`, for the top-level page's host, not used before on this device, and at most 5 minutes old.
/// The Pay server consumes the session once more when it exchanges the credential.
public final class MerchantSessionCheck: Sendable {
    private let verifier: CMSVerifier
    private let clock: any WallClock
    private let used = Used()

    public init(tokenRoot: Certificate, clock: any WallClock) throws(X509Error) {
        self.clock = clock
        verifier = try CMSVerifier(
            trustRoots: [tokenRoot], policy: .signingLeaf(.merchantSession), cacheCapacity: 16, clock: clock)
    }

    /// Why `session` may not start a sheet for a page whose top-level host is `domain`, or nil; a session that
    /// passes is recorded as used.
    public func problem(with session: MerchantSession, domain: String) -> String? {
        if let problem = verifier.signingProblem(
            session.signature, content: session.signedContent, signedAt: session.epochTimestamp,
            field: "its epochTimestamp", signed: "the merchant session")
        {
            return problem
        }
        guard session.domainName == domain.lowercased() else {
            return "the merchant session is for \(session.domainName), but the page is \(domain)"
        }
        let now = Int64((clock.now().timeIntervalSince1970 * 1000).rounded(.down))
        let age = now - session.epochTimestamp
        guard age >= -60_000 else { return "the merchant session is dated in the future" }
        guard age <= MerchantSession.usableMilliseconds else {
            return "the merchant session expired: it was created \(age / 1000) s ago and is usable for 300 s"
        }
        guard used.insert(session.merchantSessionIdentifier) else {
            return "the merchant session was already used: the page must ask its server for a new one"
        }
        return nil
    }
}

/// The identifiers of the sessions this device started a sheet with (a session lives 5 minutes: the last 4096 are
/// plenty).
private final class Used: @unchecked Sendable {
    // @unchecked: guarded by `lock`.
    private let lock = NSLock()
    private var set: Set<String> = []
    private var order: [String] = []

    func insert(_ identifier: String) -> Bool {
        lock.withLock {
            guard set.insert(identifier).inserted else { return false }
            order.append(identifier)
            if order.count > 4096 { set.remove(order.removeFirst()) }
            return true
        }
    }
}
