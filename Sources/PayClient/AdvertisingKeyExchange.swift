public import Device
import Foundation
import OrchardCrypto
import RelayAPI
import SecureElement
import Synchronization

/// The advertising keys of an account's devices, exchanged over the relay (docs/handoff.md, "Proximity"): at each
/// sync, a device sends its advertising key to each device it trusts that has not had it from this process yet, and
/// records the keys the others sent it. The relay carries them end to end encrypted, so the Pay server never learns
/// a key and cannot recognise a device's advertisements.
public final class AdvertisingKeyExchange: Sendable {
    private struct State {
        var sentTo: Set<String> = []
        var cursor: Int64 = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// One round: send this device's key to the trusted devices not sent to yet, then record the keys received.
    /// Returns the devices whose keys were recorded.
    @discardableResult
    public func exchange(device: Device, client: PayServerClient) async throws -> [String] {
        let relay = DeviceRelay(deviceID: device.name, client: client, enclave: device.secureEnclave)
        let trust = try await relay.trust()
        let sent = state.withLock { $0.sentTo }
        let pending = trust.trusted.map(\.deviceID).filter { !sent.contains($0) }
        if !pending.isEmpty {
            let key = try await device.secureEnclave.advertisingKey()
            let message = HandoffMessage(kind: .advertisingKey, advertisingKey: key.bytes.unsafeCopyOfBytes())
            let plaintext = SecureBytes(try JSONEncoder().encode(message))
            for peer in pending {
                try await relay.send(plaintext, to: peer)
                state.withLock { _ = $0.sentTo.insert(peer) }
            }
        }
        let receipt = try await relay.receive(after: state.withLock { $0.cursor }, waitSeconds: 0)
        var recorded: [String] = []
        for message in receipt.accepted {
            guard
                let handoff = try? message.plaintext.withUnsafeBytes({
                    try JSONDecoder().decode(HandoffMessage.self, from: Data($0))
                }), handoff.kind == .advertisingKey, let bytes = handoff.advertisingKey, bytes.count == 32
            else { continue }
            try await device.secureEnclave.recordAdvertisingKey(SymmetricKey(SecureBytes(bytes)), of: message.sender)
            recorded.append(message.sender)
        }
        state.withLock { $0.cursor = receipt.lastID }
        return recorded
    }
}
