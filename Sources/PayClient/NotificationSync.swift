public import Device
import Foundation
public import PayAPI

/// Applies the token-status notifications the Pay server holds for this device: a suspended token's card stops
/// being offered, a resumed one comes back, a deleted one is terminated in the Secure Element (its DPAN and keys
/// erased). Acknowledges what it applied, so each notification is applied once.
public enum NotificationSync {
    /// Fetches and applies the pending notifications; returns those applied.
    ///
    /// `apply` performs one change on the device (``Device/applyTokenStatus(tokenReference:_:)`` in the
    /// device's process, or through its control API).
    public static func run(
        client: PayServerClient,
        apply: @Sendable (String, Device.TokenStatusChange) async throws -> Void
    ) async throws -> [TokenNotification] {
        let pending = try await client.notifications(after: 0)
        for notification in pending {
            guard let change = Device.TokenStatusChange(rawValue: notification.state) else { continue }
            try await apply(notification.tokenReference, change)
        }
        if let last = pending.last {
            _ = try await client.notifications(after: last.sequence)  // acknowledges them
        }
        return pending
    }
}
