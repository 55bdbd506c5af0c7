public import Device
import Foundation
public import OrchardCrypto
public import RelayAPI
public import SecureElement
import Synchronization
public import Wallet

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

    /// Vouches (as this device) for `device`'s relay keys with `signature` (DER) over ``RelayVouch``.
    public func vouchRelayKeys(of device: String, signature: [UInt8]) async throws(PayClientError) -> RelayVouchRecord {
        try await post(
            RelayAPI.Route.vouches,
            RelayVouchRequest(device: device, signature: Data(signature).base64EncodedString()))
    }

    /// The account key's latest generation and this device's wrap of it.
    public func accountKeyState() async throws(PayClientError) -> AccountKeyState {
        try await get(RelayAPI.Route.accountKey)
    }

    /// Uploads the next generation of the account key.
    public func uploadAccountKey(_ upload: AccountKeyUpload) async throws(PayClientError) -> AccountKeyGeneration {
        try await post(RelayAPI.Route.accountKey, upload)
    }

    /// The account's synced addresses (ciphertext), or nil before the first.
    public func syncedAddresses() async throws(PayClientError) -> SyncedRecord? {
        do {
            return try await get(RelayAPI.Route.addresses) as SyncedRecord
        } catch  where error.httpStatus == 404 {
            return nil
        }
    }

    /// Replaces the account's synced addresses.
    public func uploadAddresses(_ record: SyncedRecord) async throws(PayClientError) -> AccountKeyGeneration {
        try await post(RelayAPI.Route.addresses, record)
    }

    /// Queues a frame (its sender must be this device).
    public func sendRelayFrame(_ frame: RelayFrame) async throws(PayClientError) -> RelaySendResult {
        try await post(RelayAPI.Route.messages, RelaySendRequest(frame: Data(frame.encoded).base64EncodedString()))
    }

    /// The longest wait this client asks for: below its 15-second request timeout.
    public static let maximumRelayWaitSeconds = 10

    /// This device's frames after `after` (acknowledging those up to it), waiting up to `waitSeconds` (0 to
    /// ``maximumRelayWaitSeconds``, clamped) for one.
    public func receiveRelayFrames(after: Int64, waitSeconds: Int) async throws(PayClientError) -> RelayInbox {
        let wait = min(max(waitSeconds, 0), Self.maximumRelayWaitSeconds)
        return try await get(RelayAPI.Route.messages + "?after=\(after)&wait=\(wait)")
    }
}

/// A device's end of the relay: its Secure Enclave seals and opens, the Pay server carries frames.
///
/// The keys of other devices come from the account's directory at the Pay server, and are used only when a chain of
/// vouches leads to them from this device: this device trusts its own keys (which its Secure Enclave holds), then
/// each device that a trusted device vouched for, the vouch checked under the trusted device's signing key. A device
/// vouches after its user approved the other device with the passcode (``approve(_:keys:passcode:)``), for the keys
/// the other device itself showed, so a directory that substitutes a key, or lists a device no one approved, is
/// caught: nothing is sent to it or accepted from it, and ``trust()`` reports it.
public final class DeviceRelay: Sendable {
    /// What the directory holds as this device checks it.
    public struct Trust: Sendable {
        /// The other devices whose keys a chain of vouches from this device reaches.
        public let trusted: [RelayPeer]
        /// Devices in the directory no trusted device vouched for (a device that joined and was not approved, or a
        /// substituted key): an alert.
        public let unvouched: [String]
        /// Whether the directory lists keys for this device other than its Secure Enclave's: an alert.
        public let ownKeysSubstituted: Bool
    }

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
    private let random: any RandomSource

    public init(
        deviceID: String, client: PayServerClient, enclave: SecureEnclave, random: any RandomSource = SystemRandom()
    ) {
        self.deviceID = deviceID
        self.client = client
        self.enclave = enclave
        self.random = random
    }

    /// Has the Secure Enclave make (at the first call) its relay keys, and publishes their public halves.
    @discardableResult
    public func publishKeys() async throws -> RelayDirectoryEntry {
        try await client.publishRelayKeys(try await enclave.relayPublicKeys())
    }

    /// The other devices of the account with their relay keys, as the directory lists them (vouched for or not).
    public func peers() async throws -> [RelayPeer] {
        try await client.relayDirectory().devices.filter { $0.deviceID != deviceID }.map(Self.peer)
    }

    /// The user of this device approved `device`, whose keys (`keys`) that device showed itself: the Secure Enclave
    /// checks the passcode and signs a vouch, which goes to the directory.
    @discardableResult
    public func approve(_ device: String, keys: RelayPublicKeys, passcode: SecureBytes) async throws -> RelayVouchRecord
    {
        let signature = try await enclave.vouchForRelayDevice(
            RelayPeer(deviceID: device, keys: keys), voucherID: deviceID, passcode: passcode)
        return try await client.vouchRelayKeys(of: device, signature: signature.derRepresentation)
    }

    /// Checks the directory's vouches from this device outwards.
    public func trust() async throws -> Trust {
        let directory = try await client.relayDirectory()
        let own = try await enclave.relayPublicKeys()
        var entries: [String: (RelayDirectoryEntry, RelayPeer)] = [:]
        for entry in directory.devices { entries[entry.deviceID] = (entry, try Self.peer(entry)) }
        let substituted = entries[deviceID].map { $0.1.keys != own } ?? false
        var trusted: [String: RelayPublicKeys] = [deviceID: own]
        var grew = true
        while grew {
            grew = false
            for (id, (entry, peer)) in entries where trusted[id] == nil {
                let vouched = entry.vouches.contains { vouch in
                    guard let voucherKeys = trusted[vouch.voucher], vouch.voucher != id,
                        let der = Data(base64Encoded: vouch.signature),
                        let signature = try? P256.Signing.ECDSASignature(derRepresentation: der)
                    else { return false }
                    return voucherKeys.signing.isValidSignature(
                        signature,
                        for: RelayVouch.signedContent(
                            account: directory.account, voucher: vouch.voucher, device: id,
                            encryptionKey: peer.keys.encryption.x963Representation,
                            signingKey: peer.keys.signing.x963Representation))
                }
                if vouched {
                    trusted[id] = peer.keys
                    grew = true
                }
            }
        }
        return Trust(
            trusted: trusted.filter { $0.key != deviceID }.map { RelayPeer(deviceID: $0.key, keys: $0.value) }
                .sorted { $0.deviceID < $1.deviceID },
            unvouched: entries.keys.filter { trusted[$0] == nil && $0 != deviceID }.sorted(),
            ownKeysSubstituted: substituted)
    }

    /// The trusted peers, or a refusal when the directory changed this device's own keys.
    private func trustedPeers() async throws -> [RelayPeer] {
        let trust = try await trust()
        guard !trust.ownKeysSubstituted else {
            throw PayClientError(
                .untrustedRelayKey, "the directory lists other relay keys for this device: it was tampered with")
        }
        return trust.trusted
    }

    /// Encrypts `plaintext` to `recipient`, signs it and queues it. The recipient's keys must be vouched for
    /// (``trust()``); a key no trusted device vouched for is refused.
    @discardableResult
    public func send(_ plaintext: SecureBytes, to recipient: String) async throws -> RelaySendResult {
        guard let peer = try await trustedPeers().first(where: { $0.deviceID == recipient }) else {
            throw PayClientError(
                .untrustedRelayKey,
                "\(recipient) has no relay keys a device of this account vouched for: approve it on a trusted device")
        }
        let frame = try await enclave.sealRelayMessage(plaintext, from: deviceID, to: peer)
        return try await client.sendRelayFrame(frame)
    }

    /// Receives this device's frames after `after` (acknowledging up to it), waiting up to `waitSeconds`, and
    /// opens each with the Secure Enclave against its sender's vouched-for keys (a frame from a device no trusted
    /// device vouched for is refused).
    public func receive(after: Int64, waitSeconds: Int) async throws -> Receipt {
        let inbox = try await client.receiveRelayFrames(after: after, waitSeconds: waitSeconds)
        let peers = inbox.messages.isEmpty ? [] : try await trustedPeers()
        var accepted: [RelayMessage] = []
        var refused: [(id: Int64, error: SecureElementError)] = []
        for delivery in inbox.messages {
            do throws(SecureElementError) {
                guard let bytes = Data(base64Encoded: delivery.frame).map(Array.init),
                    let frame = try? RelayFrame(parsing: bytes)
                else { throw SecureElementError(.invalidRelayFrame, "the relay frame does not parse") }
                guard let peer = peers.first(where: { $0.deviceID == frame.header.sender }) else {
                    throw SecureElementError(
                        .invalidRelayFrame, "the relay frame's sender has no keys a trusted device vouched for")
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

    // MARK: Address sync

    /// Rotates the account key: a new random key of the next generation, wrapped to this device and to every device
    /// it trusts now (``trust()``), and the synced addresses re-encrypted under it. A device removed from the
    /// account (erased: gone from the directory) or never vouched for gets no wrap, so it cannot read what is synced
    /// after. Returns the new generation.
    @discardableResult
    public func rotateAccountKey() async throws -> Int64 {
        let existing = try await client.accountKeyState().generation > 0 ? try await fetchAddresses() : nil
        let generation = try await rotate()
        if let existing { try await upload(existing) }
        return generation
    }

    /// Rotates the account key when the latest generation is wrapped to a device the directory no longer lists (it
    /// was removed), provided this device holds that generation. Returns whether it rotated.
    @discardableResult
    public func rotateIfRemoved() async throws -> Bool {
        let state = try await client.accountKeyState()
        guard state.generation > 0, state.wrapped != nil else { return false }
        let listed = Set(try await client.relayDirectory().devices.map(\.deviceID))
        guard state.holders.contains(where: { !listed.contains($0) }) else { return false }
        try await rotateAccountKey()
        return true
    }

    /// Encrypts `addresses` under the account key (making the first one when there is none) and stores them at the
    /// Pay server, replacing what was synced.
    public func syncAddresses(_ addresses: SyncedAddresses) async throws {
        if try await client.accountKeyState().generation == 0 { try await rotate() }
        try await upload(addresses)
    }

    /// The account's synced addresses, or nil before the first sync.
    /// - Throws: ``PayClientError/Code/untrustedRelayKey`` when the latest account key is not wrapped to this
    ///   device or was wrapped by a device this device does not trust.
    public func fetchAddresses() async throws -> SyncedAddresses? {
        guard let record = try await client.syncedAddresses() else { return nil }
        let (account, generation, key) = try await currentKey()
        guard record.generation == generation, let sealed = Data(base64Encoded: record.ciphertext).map(Array.init),
            sealed.count >= 28
        else { throw PayClientError(.protocolViolation, "the synced addresses are not under the latest account key") }
        let plaintext: [UInt8]
        do {
            plaintext = try AES.GCM.open(
                try AES.GCM.SealedBox(combined: sealed[12...]), using: key, iv: sealed[..<12],
                authenticating: SyncedRecord.additionalData(account: account, generation: generation))
        } catch {
            throw PayClientError(.protocolViolation, "the synced addresses do not open under the account key")
        }
        do {
            return try JSONDecoder().decode(SyncedAddresses.self, from: Data(plaintext))
        } catch {
            throw PayClientError(.protocolViolation, "the synced addresses are not the expected JSON")
        }
    }

    /// Two-way sync of `wallet`'s recent contacts with the account's: contacts used here and not yet synced go to
    /// the front of the synced list (uploaded), and synced contacts this wallet lacks are recorded in it after its
    /// own, so its payment sheets offer them. Nothing is uploaded when this wallet has nothing new, so devices
    /// converge instead of reordering each other's lists. Returns what changed: (uploaded, recorded here).
    @discardableResult
    public func syncWallet(_ wallet: Wallet) async throws -> (uploaded: Bool, recorded: Bool) {
        let local = try await SyncedAddresses(wallet: wallet)
        let remote = try await fetchAddresses() ?? SyncedAddresses()
        let new = local.missing(from: remote)
        if !new.isEmpty { try await syncAddresses(remote.prepending(new)) }
        let missing = remote.missing(from: local)
        if !missing.isEmpty {
            // Older than anything used here: recorded first, then this wallet's own uses again on top.
            try await missing.record(in: wallet)
            try await local.record(in: wallet)
        }
        return (!new.isEmpty, !missing.isEmpty)
    }

    private func upload(_ addresses: SyncedAddresses) async throws {
        let (account, generation, key) = try await currentKey()
        let iv = random.bytes(12)
        let box = try AES.GCM.seal(
            try JSONEncoder().encode(addresses), using: key, iv: iv,
            authenticating: SyncedRecord.additionalData(account: account, generation: generation))
        _ = try await client.uploadAddresses(
            SyncedRecord(generation: generation, ciphertext: Data(iv + box.combined).base64EncodedString()))
    }

    @discardableResult
    private func rotate() async throws -> Int64 {
        let generation = try await client.accountKeyState().generation + 1
        let key = SymmetricKey(data: random.bytes(32))
        let own = RelayPeer(deviceID: deviceID, keys: try await enclave.relayPublicKeys())
        var wrapped: [WrappedAccountKey] = []
        for peer in [own] + (try await trustedPeers()) {
            let frame = try await enclave.wrapAccountKey(
                key, generation: UInt64(generation), from: deviceID, to: peer)
            wrapped.append(
                WrappedAccountKey(
                    generation: generation, device: peer.deviceID, frame: Data(frame.encoded).base64EncodedString()))
        }
        return try await client.uploadAccountKey(AccountKeyUpload(generation: generation, wrapped: wrapped))
            .generation
    }

    /// The account, the latest generation and its key, unwrapped by the Secure Enclave from a trusted device's wrap.
    private func currentKey() async throws -> (String, Int64, SymmetricKey) {
        let state = try await client.accountKeyState()
        guard let wrapped = state.wrapped, let bytes = Data(base64Encoded: wrapped.frame).map(Array.init),
            let frame = try? RelayFrame(parsing: bytes)
        else {
            throw PayClientError(
                .untrustedRelayKey,
                "the latest account key is not wrapped to this device: it was removed or not approved")
        }
        let account = try await client.relayDirectory().account
        let own = RelayPeer(deviceID: deviceID, keys: try await enclave.relayPublicKeys())
        guard let sender = ([own] + (try await trustedPeers())).first(where: { $0.deviceID == frame.header.sender })
        else {
            throw PayClientError(
                .untrustedRelayKey, "the account key was wrapped by a device this device does not trust")
        }
        let key = try await enclave.unwrapAccountKey(
            frame, generation: UInt64(state.generation), to: deviceID, from: sender)
        return (account, state.generation, key)
    }
}

/// The recently used contacts the devices of an account share (the seeds' iCloud Keychain sync), most recent
/// first per role, as the wallet keeps them.
public struct SyncedAddresses: Codable, Sendable, Equatable {
    public var contact: [Contact]
    public var shipping: [Contact]
    public var billing: [Contact]
    public init(contact: [Contact] = [], shipping: [Contact] = [], billing: [Contact] = []) {
        self.contact = contact
        self.shipping = shipping
        self.billing = billing
    }

    /// The wallet's recent contacts of every role.
    public init(wallet: Wallet) async throws {
        contact = try await wallet.recentContacts(.contact)
        shipping = try await wallet.recentContacts(.shipping)
        billing = try await wallet.recentContacts(.billing)
    }

    /// Whether no role has a contact.
    public var isEmpty: Bool { contact.isEmpty && shipping.isEmpty && billing.isEmpty }

    /// The contacts of each role that `other` lacks, in this order.
    public func missing(from other: SyncedAddresses) -> SyncedAddresses {
        SyncedAddresses(
            contact: contact.filter { !other.contact.contains($0) },
            shipping: shipping.filter { !other.shipping.contains($0) },
            billing: billing.filter { !other.billing.contains($0) })
    }

    /// `front` before these contacts, each role at most ``Wallet/recentContactLimit`` long.
    public func prepending(_ front: SyncedAddresses) -> SyncedAddresses {
        let limit = Wallet.recentContactLimit
        return SyncedAddresses(
            contact: Array((front.contact + contact).prefix(limit)),
            shipping: Array((front.shipping + shipping).prefix(limit)),
            billing: Array((front.billing + billing).prefix(limit)))
    }

    /// Records the synced contacts in `wallet` (oldest first, so the most recent ends in front), so its payment
    /// sheets offer them.
    public func record(in wallet: Wallet) async throws {
        for (role, contacts) in [(ContactRole.contact, contact), (.shipping, shipping), (.billing, billing)] {
            for item in contacts.reversed() { try await wallet.recordUse(item, as: role) }
        }
    }
}

/// The relay alerts a device shows once each (`orchard device run` traces them at every sync): a device of the
/// account that no device this one trusts vouched for (it joined and was not approved, or its key was substituted),
/// and a directory that lists other keys for this device. Only a device that published its relay keys checks.
public final class RelayJoinAlerts: Sendable {
    private let shown = Mutex<[String]>([])

    public init() {}

    /// Every alert shown so far, oldest first.
    public var shownAlerts: [String] { shown.withLock { $0 } }

    /// The alerts not shown before, for `device` as its client sees the directory now.
    public func check(device: Device, client: PayServerClient) async -> [String] {
        guard let directory = try? await client.relayDirectory(),
            directory.devices.contains(where: { $0.deviceID == device.name }),
            let trust = try? await DeviceRelay(deviceID: device.name, client: client, enclave: device.secureEnclave)
                .trust()
        else { return [] }
        var alerts: [String] = []
        if trust.ownKeysSubstituted {
            alerts.append("relay alert: the Pay server's directory lists other relay keys for \(device.name)")
        }
        for id in trust.unvouched {
            alerts.append(
                "relay alert: device \(id) joined account \(directory.account) and no device \(device.name) trusts "
                    + "approved it (approve it: orchard device approve --name \(device.name) --new \(id))")
        }
        return shown.withLock { shown in
            let fresh = alerts.filter { !shown.contains($0) }
            shown += fresh
            return fresh
        }
    }
}
