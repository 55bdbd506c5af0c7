import Foundation
public import OrchardCrypto
public import RelayAPI
public import SecureElement

extension PayServerClient {
    /// Publishes this device's relay public keys to its account's directory (idempotent).
    public func publishRelayKeys(_ keys: RelayPublicKeys) async throws(PayClientError) -> RelayDirectoryEntry {
        try await post(
            RelayAPI.Route.keys,
            RelayKeyPublication(
                encryptionKey: Data(keys.encryption.x963Representation).base64EncodedString(),
                signingKey: Data(keys.signing.x963Representation).base64EncodedString()))
    }

    /// The relay directory of this device's account.
    public func relayDirectory() async throws(PayClientError) -> RelayDirectory {
        try await get(RelayAPI.Route.directory)
    }

    /// Queues a frame (its sender must be this device).
    public func sendRelayFrame(_ frame: RelayFrame) async throws(PayClientError) -> RelaySendResult {
        try await post(RelayAPI.Route.messages, RelaySendRequest(frame: Data(frame.encoded).base64EncodedString()))
    }

    /// This device's frames after `after` (acknowledging those up to it), waiting up to `waitSeconds` for one.
    public func receiveRelayFrames(after: Int64, waitSeconds: Int) async throws(PayClientError) -> RelayInbox {
        try await get(RelayAPI.Route.messages + "?after=\(after)&wait=\(waitSeconds)")
    }
}

/// A device's end of the relay: its Secure Enclave seals and opens, the Pay server carries frames.
///
/// The keys of other devices come from the account's directory at the Pay server. Vouching between the account's
/// devices is not built yet, so this end trusts the directory's keys for the devices it names: what it proves is
/// that the Pay server cannot read, forge, alter, replay or reorder a frame between keys it handed out honestly.
public final class DeviceRelay: Sendable {
    /// What a receive handed back: the frames accepted and those refused (with why), and the queue position to
    /// acknowledge next time.
    public struct Receipt: Sendable {
        public let accepted: [RelayMessage]
        public let refused: [(id: Int64, error: SecureElementError)]
        public let lastID: Int64
    }

    public let deviceID: String
    private let client: PayServerClient
    private let enclave: SecureEnclave

    public init(deviceID: String, client: PayServerClient, enclave: SecureEnclave) {
        self.deviceID = deviceID
        self.client = client
        self.enclave = enclave
    }

    /// Has the Secure Enclave make (at the first call) its relay keys, and publishes their public halves.
    @discardableResult
    public func publishKeys() async throws -> RelayDirectoryEntry {
        try await client.publishRelayKeys(try await enclave.relayPublicKeys())
    }

    /// The other devices of the account with their relay keys, as the directory lists them.
    public func peers() async throws -> [RelayPeer] {
        try await client.relayDirectory().devices.filter { $0.deviceID != deviceID }.map(Self.peer)
    }

    /// Encrypts `plaintext` to `recipient` (a device of the account in the directory), signs it and queues it.
    @discardableResult
    public func send(_ plaintext: SecureBytes, to recipient: String) async throws -> RelaySendResult {
        guard let peer = try await peers().first(where: { $0.deviceID == recipient }) else {
            throw PayClientError(.invalidArgument, "\(recipient) is not a device of this account with relay keys")
        }
        let frame = try await enclave.sealRelayMessage(plaintext, from: deviceID, to: peer)
        return try await client.sendRelayFrame(frame)
    }

    /// Receives this device's frames after `after` (acknowledging up to it), waiting up to `waitSeconds`, and
    /// opens each with the Secure Enclave against its sender's directory keys.
    public func receive(after: Int64, waitSeconds: Int) async throws -> Receipt {
        let inbox = try await client.receiveRelayFrames(after: after, waitSeconds: waitSeconds)
        let peers = inbox.messages.isEmpty ? [] : try await peers()
        var accepted: [RelayMessage] = []
        var refused: [(id: Int64, error: SecureElementError)] = []
        for delivery in inbox.messages {
            do throws(SecureElementError) {
                guard let bytes = Data(base64Encoded: delivery.frame).map(Array.init),
                    let frame = try? RelayFrame(parsing: bytes)
                else { throw SecureElementError(.invalidRelayFrame, "the relay frame does not parse") }
                guard let peer = peers.first(where: { $0.deviceID == frame.header.sender }) else {
                    throw SecureElementError(.invalidRelayFrame, "the relay frame's sender is not in the directory")
                }
                accepted.append(try await enclave.openRelayMessage(frame, to: deviceID, from: peer))
            } catch {
                refused.append((delivery.id, error))
            }
        }
        return Receipt(accepted: accepted, refused: refused, lastID: inbox.messages.last?.id ?? after)
    }

    static func peer(_ entry: RelayDirectoryEntry) throws -> RelayPeer {
        guard let encryption = Data(base64Encoded: entry.encryptionKey),
            let signing = Data(base64Encoded: entry.signingKey),
            let encryptionKey = try? P256.KeyAgreement.PublicKey(x963Representation: encryption),
            let signingKey = try? P256.Signing.PublicKey(x963Representation: signing)
        else {
            throw PayClientError(.protocolViolation, "the directory's keys for \(entry.deviceID) are not P-256 keys")
        }
        return RelayPeer(
            deviceID: entry.deviceID, keys: RelayPublicKeys(encryption: encryptionKey, signing: signingKey))
    }
}
