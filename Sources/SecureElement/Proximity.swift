public import OrchardCrypto
public import RelayAPI

/// Sealing and opening proximity advertisements (``ProximityAdvertisement``): AES-256-GCM under the sender's
/// advertising key, a random IV, the clear part (magic, version, rotating identifier) as additional data.
public enum ProximityCipher {
    /// Seals `body` under `key` with the rotating identifier `identifier` (6 bytes) and a fresh random IV.
    public static func seal(
        _ body: ProximityAdvertisement.Body, key: SymmetricKey, identifier: [UInt8], random: any RandomSource
    ) throws(SecureElementError) -> ProximityAdvertisement {
        guard key.byteCount == 32, identifier.count == ProximityAdvertisement.identifierByteCount else {
            throw SecureElementError(.invalidArgument, "an advertising key is 32 bytes and an identifier 6")
        }
        let iv = random.bytes(ProximityAdvertisement.ivByteCount)
        let clear = ProximityAdvertisement.magic + [ProximityAdvertisement.version] + identifier
        do {
            let box = try AES.GCM.seal(body.encoded, using: key, iv: iv, authenticating: clear)
            guard let advertisement = ProximityAdvertisement(identifier: identifier, iv: iv, sealed: box.combined)
            else { throw SecureElementError(.internalFailure, "an advertisement came out of the wrong length") }
            return advertisement
        } catch let error as SecureElementError {
            throw error
        } catch {
            throw SecureElementError(.internalFailure, "sealing an advertisement failed")
        }
    }

    /// The body of `advertisement` if `key` opens it (tag, additional data and body all right), else nil.
    public static func open(_ advertisement: ProximityAdvertisement, key: SymmetricKey) -> ProximityAdvertisement.Body?
    {
        guard let box = try? AES.GCM.SealedBox(combined: advertisement.sealed),
            let plaintext = try? AES.GCM.open(
                box, using: key, iv: advertisement.iv, authenticating: advertisement.additionalData)
        else { return nil }
        return try? ProximityAdvertisement.Body(parsing: plaintext)
    }
}

/// Which devices of the account this device heard, and when: the proximity a Mac needs before it offers Handoff and
/// a phone or watch before it answers one. Pure state; the radio medium feeds it under a lock.
///
/// An advertisement counts when a peer's key opens it, its counter is above the last one counted from that peer
/// (a replay, or an older one, is ignored: H3) and the counter (the sender's clock) is within the window of this
/// device's clock (an advertisement recorded elsewhere and played back later is ignored even by a device that never
/// heard it). A peer is near while its last counted advertisement was heard within the window. The last counters live
/// in memory; so that a restart does not forget them, a tracker counts nothing sent before it was made (``notBefore``):
/// an advertisement recorded before a device restarted and played to it after is stale.
public struct ProximityTracker: Sendable {
    /// A peer heard.
    public struct Heard: Sendable, Hashable {
        public let device: String
        public let kind: String
        /// The sender's counter of the last advertisement counted.
        public let counter: UInt64
        /// This device's monotonic time, in milliseconds, when it was heard.
        public let heardAt: UInt64
    }

    /// What became of an advertisement.
    public enum Outcome: Sendable, Hashable {
        case counted(device: String)
        /// No known key opens it: a foreign device's, or junk.
        case foreign
        /// A key opens it but its counter is not above the last counted from that device.
        case replayed(device: String)
        /// A key opens it but its counter is outside the window of this device's clock.
        case stale(device: String)
    }

    /// How long an advertisement keeps a device near, in milliseconds.
    public let windowMilliseconds: UInt64
    /// Counters at or below this (the hearer's wall clock, ms, when the tracker was made) are stale.
    public let notBefore: UInt64
    public private(set) var heard: [String: Heard] = [:]

    public init(windowMilliseconds: UInt64, notBefore: UInt64 = 0) {
        self.windowMilliseconds = windowMilliseconds
        self.notBefore = notBefore
    }

    /// Counts `bytes` heard at `monotonic` (this device's monotonic clock, ms) when its wall clock reads `wall`
    /// (ms since 1970), trying each of `keys` (peer device → advertising key).
    public mutating func hear(
        _ bytes: [UInt8], keys: [String: SymmetricKey], wall: UInt64, monotonic: UInt64
    ) -> Outcome {
        guard let advertisement = try? ProximityAdvertisement(parsing: bytes) else { return .foreign }
        for (device, key) in keys.sorted(by: { $0.key < $1.key }) {
            guard let body = ProximityCipher.open(advertisement, key: key) else { continue }
            if let last = heard[device], body.counter <= last.counter { return .replayed(device: device) }
            let skew = body.counter > wall ? body.counter - wall : wall - body.counter
            guard skew <= windowMilliseconds, body.counter > notBefore else { return .stale(device: device) }
            heard[device] = Heard(device: device, kind: body.kind, counter: body.counter, heardAt: monotonic)
            return .counted(device: device)
        }
        return .foreign
    }

    /// The devices heard within the window before `monotonic`, by name.
    public func near(at monotonic: UInt64) -> [Heard] {
        heard.values.filter {
            $0.heardAt > 0 && monotonic >= $0.heardAt && monotonic - $0.heardAt <= windowMilliseconds
        }
        .sorted { $0.device < $1.device }
    }

    /// Forgets every device heard (the device moved to another room).
    public mutating func forgetNearby() {
        heard = heard.mapValues { Heard(device: $0.device, kind: $0.kind, counter: $0.counter, heardAt: 0) }
    }
}

extension SecureEnclave {
    static let advertisingKeyKind = "advertising-key"
    static let ownAdvertisingKeyID = "own"

    /// This device's advertising key (32 bytes). Made at the first call and kept, sealed, for the device's life; it
    /// goes only to the account's devices, over the relay.
    public func advertisingKey() throws(SecureElementError) -> SymmetricKey {
        if let own = try storedAdvertisingKeys()[Self.ownAdvertisingKeyID] { return own }
        let key = SymmetricKey(SecureBytes(random.bytes(32)))
        try storeAdvertisingKey(key, id: Self.ownAdvertisingKeyID)
        return key
    }

    /// Records `key` as `device`'s advertising key (received over the relay from that device), replacing an older
    /// one.
    public func recordAdvertisingKey(_ key: SymmetricKey, of device: String) throws(SecureElementError) {
        guard key.byteCount == 32, RelayFrame.isDeviceID(device) else {
            throw SecureElementError(.invalidArgument, "an advertising key is 32 bytes, of a device with an ID")
        }
        try storeAdvertisingKey(key, id: "peer:" + device)
    }

    /// The advertising keys of the peers that sent theirs, by device.
    public func peerAdvertisingKeys() throws(SecureElementError) -> [String: SymmetricKey] {
        var peers: [String: SymmetricKey] = [:]
        for (id, key) in try storedAdvertisingKeys() where id.hasPrefix("peer:") {
            peers[String(id.dropFirst(5))] = key
        }
        return peers
    }

    private func storedAdvertisingKeys() throws(SecureElementError) -> [String: SymmetricKey] {
        var keys: [String: SymmetricKey] = [:]
        for record in try storage.loadRecords(kind: Self.advertisingKeyKind) {
            let bytes = try sealer.open(record.sealed, kind: Self.advertisingKeyKind, id: record.id)
            guard bytes.count == 32 else {
                throw SecureElementError(.corruptState, "an advertising key record is not 32 bytes")
            }
            keys[record.id] = SymmetricKey(bytes)
        }
        return keys
    }

    private func storeAdvertisingKey(_ key: SymmetricKey, id: String) throws(SecureElementError) {
        let sealed = try sealer.seal(key.bytes, kind: Self.advertisingKeyKind, id: id)
        try storage.write([SealedRecordChange(kind: Self.advertisingKeyKind, id: id, sealed: sealed)])
    }
}
