public import Device
import Foundation
public import OrchardRuntime
import OrchardServices
public import PayAPI
import RelayAPI

/// Applies the token-status notifications the Pay server holds for this device: a suspended token's card stops
/// being offered, a resumed one comes back, a deleted one is terminated in the Secure Element (its DPAN and keys
/// erased). Acknowledges what it applied, so each notification is applied once. Records, first, whether the
/// device is in lost mode.
public enum NotificationSync {
    /// Fetches and applies the pending notifications; returns those applied.
    ///
    /// `apply` performs one change on the device (``Device/applyTokenStatus(tokenReference:_:)`` in the
    /// device's process, or through its control API); `lostMode` records the Pay server's word on lost mode
    /// (``Device/setLostMode(_:)``), called only when the Pay server says.
    public static func run(
        client: PayServerClient,
        apply: @Sendable (String, Device.TokenStatusChange) async throws -> Void,
        lostMode: @Sendable (Bool) async throws -> Void
    ) async throws -> [TokenNotification] {
        let answer = try await client.notificationsAndState(after: 0)
        if let lost = answer.lostMode { try await lostMode(lost) }
        let pending = answer.notifications
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

/// The device process's side of notifications: every `interval`, when a Pay server runs for the deployment
/// (its run record `DIR/run/pay.json`), fetch and apply the pending notifications to `device`. Without a Pay
/// server nothing happens; the next round tries again.
public final class NotificationPoller: Sendable {
    private let task: Task<Void, Never>

    public init(
        device: Device, deployment: DeploymentDirectory, interval: Duration,
        alerts: RelayJoinAlerts = RelayJoinAlerts(),
        trace: @escaping @Sendable (String) -> Void
    ) {
        task = Task {
            while !Task.isCancelled {
                await Self.pollOnce(device: device, deployment: deployment, alerts: alerts, trace: trace)
                try? await Task.sleep(for: interval)
            }
        }
    }

    /// Stops polling.
    public func stop() { task.cancel() }

    /// The device's connection to every running instance of the deployment's Pay server (failed over between in
    /// order), or nil when none runs or the device has no client identity.
    public static func client(for name: String, in deployment: DeploymentDirectory) -> PayServerClient? {
        let instances = deployment.runningInstances(of: .pay).map {
            ServiceEndpoint(host: $0.host, port: $0.port).baseURL
        }
        guard !instances.isEmpty,
            let root = try? deployment.readCertificate(named: PKIFiles.rootCA),
            let identity = try? Device.clientIdentity(of: name, in: deployment)
        else { return nil }
        return try? PayServerClient(baseURLs: instances, trustedRootPEM: root, identity: identity)
    }

    static func pollOnce(
        device: Device, deployment: DeploymentDirectory, alerts: RelayJoinAlerts, trace: @Sendable (String) -> Void
    ) async {
        guard let client = client(for: device.name, in: deployment) else { return }
        do {
            let wasLost = device.isInLostMode
            let applied = try await NotificationSync.run(
                client: client,
                apply: { reference, change in try await device.applyTokenStatus(tokenReference: reference, change) },
                lostMode: { lost in try device.setLostMode(lost) })
            if device.isInLostMode != wasLost {
                trace(
                    device.isInLostMode
                        ? "lost mode: the account owner put this device in lost mode" : "lost mode: left")
            }
            for notification in applied {
                trace("token \(notification.tokenReference): \(notification.event) → \(notification.state)")
            }
        } catch {
            trace("notifications: \(error)")
        }
        for alert in await alerts.check(device: device, client: client) { trace(alert) }
        await Self.syncAddresses(device: device, client: client, trace: trace)
    }

    /// Address sync for a device that published its relay keys and holds the account key (or is the first to sync).
    static func syncAddresses(device: Device, client: PayServerClient, trace: @Sendable (String) -> Void) async {
        guard let directory = try? await client.relayDirectory(),
            directory.devices.contains(where: { $0.deviceID == device.name })
        else { return }
        do {
            let relay = DeviceRelay(deviceID: device.name, client: client, enclave: device.secureEnclave)
            if try await relay.rotateIfRemoved() {
                trace("addresses: a device left the account: the account key rotated without it")
            }
            let changed = try await relay.syncWallet(device.wallet)
            if changed.uploaded { trace("addresses: this device's recent contacts synced to the account") }
            if changed.recorded { trace("addresses: the account's recent contacts recorded in this wallet") }
        } catch let error as PayClientError where error.code == .untrustedRelayKey {
            // Not approved yet, or removed: the join alert says so; nothing to sync.
        } catch {
            trace("addresses: \(error)")
        }
    }
}
