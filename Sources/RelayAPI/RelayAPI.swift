public import AccessPolicy

/// The wire formats of the Pay server's relay between the devices of one account (the seeds' IDS): each device
/// publishes the public halves of its Secure Enclave's relay keys to its account's directory, and devices send
/// each other frames encrypted per recipient device and signed by the sender (``RelayFrame``), which the Pay
/// server queues and delivers by long poll. The Pay server reads only the frame's routing header.
///
/// Every route needs the device's client certificate from the device CA: the sender, the publisher and the
/// mailbox are the certificate's device, and the directory is the certificate's account, never a body field.
/// Byte strings travel as standard base64; public keys as X9.63 (65 bytes, uncompressed P-256).
public enum RelayAPI {
    /// The relay's routes at the Pay server.
    public enum Route {
        /// `POST` ``RelayKeyPublication`` → ``RelayDirectoryEntry``: publishes this device's relay keys.
        public static let keys = "/v1/relay/keys"
        /// `GET` → ``RelayDirectory``: the relay keys of every device of the caller's account.
        public static let directory = "/v1/relay/directory"
        /// `POST` ``RelaySendRequest`` → ``RelaySendResult``: queues a frame for a device of the caller's account.
        /// `GET ?after=N&wait=S` → ``RelayInbox``: the caller's frames after `N` (those up to `N` are acknowledged
        /// and deleted), waiting up to `S` seconds (at most ``RelayAPI/maximumWaitSeconds``) while there is none.
        public static let messages = "/v1/relay/messages"
    }

    /// The routes with their policies: only a device of the account (its client certificate) calls any of them.
    public enum Declared {
        static let device = AccessPolicy.role(CallerRoles.device)
        public static let publishKeys = DeclaredRoute("POST", Route.keys, device)
        public static let directory = DeclaredRoute("GET", Route.directory, device)
        public static let send = DeclaredRoute("POST", Route.messages, device)
        public static let receive = DeclaredRoute("GET", Route.messages, device)
        /// Every route of the contract.
        public static var all: [DeclaredRoute] { [publishKeys, directory, send, receive, vouch] + sync }
    }

    /// The longest a receive waits for a frame (seconds).
    public static let maximumWaitSeconds = 30
    /// How long the Pay server keeps an undelivered frame (seconds): seven days.
    public static let frameLifetimeSeconds = 7 * 24 * 3600
    /// The largest frame the Pay server queues (bytes).
    public static let maximumFrameByteCount = 64 << 10
    /// The most frames one receive answers.
    public static let maximumFramesPerReceive = 100
}

/// `POST /v1/relay/keys`: the device's relay encryption key (P-256 key agreement) and signing key (ECDSA P-256),
/// X9.63, base64. A device's relay keys never change: publishing other keys for the same device is refused.
public struct RelayKeyPublication: Codable, Sendable, Hashable {
    public let encryptionKey: String
    public let signingKey: String
    public init(encryptionKey: String, signingKey: String) {
        self.encryptionKey = encryptionKey
        self.signingKey = signingKey
    }
}

/// One device in an account's relay directory, with the vouches of other devices of the account for its keys.
/// Senders use a device's keys only when a chain of vouches leads to them from a device they trust (themselves
/// first): the directory alone cannot introduce or substitute a key.
public struct RelayDirectoryEntry: Codable, Sendable, Hashable {
    public let deviceID: String
    /// `phone`, `watch`, `ipad` or `mac`.
    public let kind: String
    public let encryptionKey: String
    public let signingKey: String
    public let vouches: [RelayVouchRecord]
    public init(
        deviceID: String, kind: String, encryptionKey: String, signingKey: String, vouches: [RelayVouchRecord] = []
    ) {
        self.deviceID = deviceID
        self.kind = kind
        self.encryptionKey = encryptionKey
        self.signingKey = signingKey
        self.vouches = vouches
    }
}

/// `GET /v1/relay/directory`: the registered (not erased) devices of the caller's account that published keys,
/// by device ID.
public struct RelayDirectory: Codable, Sendable, Hashable {
    public let account: String
    public let devices: [RelayDirectoryEntry]
    public init(account: String, devices: [RelayDirectoryEntry]) {
        self.account = account
        self.devices = devices
    }
}

/// `POST /v1/relay/messages`: one ``RelayFrame`` (base64). Its header's sender must be the caller's device and
/// its recipient a device of the caller's account with published keys.
public struct RelaySendRequest: Codable, Sendable, Hashable {
    public let frame: String
    public init(frame: String) { self.frame = frame }
}

/// The queue position the Pay server gave a frame.
public struct RelaySendResult: Codable, Sendable, Hashable {
    public let id: Int64
    public init(id: Int64) { self.id = id }
}

/// A queued frame as delivered.
public struct RelayDelivery: Codable, Sendable, Hashable {
    /// The queue position; pass the highest handled as `after` to acknowledge.
    public let id: Int64
    public let frame: String
    public init(id: Int64, frame: String) {
        self.id = id
        self.frame = frame
    }
}

/// `GET /v1/relay/messages`: the caller's pending frames, oldest first (empty when the wait ended without one).
public struct RelayInbox: Codable, Sendable, Hashable {
    public let messages: [RelayDelivery]
    public init(messages: [RelayDelivery]) { self.messages = messages }
}

extension RelayAPI.Route {
    /// `POST` ``RelayVouchRequest`` → ``RelayVouchRecord``: the calling device vouches for another device's keys.
    public static let vouches = "/v1/relay/vouches"
}

extension RelayAPI.Declared {
    /// Only a device of the account vouches, as itself (its certificate), for a device of the same account.
    public static let vouch = DeclaredRoute("POST", RelayAPI.Route.vouches, device)
}

/// What a device signs, with its relay signing key, to vouch for another device of its account after its user
/// approved that device: ``context`` ‖ u8 len ‖ account ‖ u8 len ‖ voucher ID ‖ u8 len ‖ device ID ‖ the device's
/// encryption key (65) ‖ signing key (65). The context differs from a frame's, so no vouch is a frame signature and
/// no frame a vouch.
public enum RelayVouch {
    public static let context: [UInt8] = Array("orchard-relay-vouch-v1".utf8) + [0]

    /// The bytes signed. Names are at most 255 bytes (device IDs 64, accounts 64).
    public static func signedContent(
        account: String, voucher: String, device: String, encryptionKey: [UInt8], signingKey: [UInt8]
    ) -> [UInt8] {
        var bytes = context
        for name in [account, voucher, device] {
            let utf8 = Array(name.utf8.prefix(255))
            bytes.append(UInt8(utf8.count))
            bytes += utf8
        }
        return bytes + encryptionKey + signingKey
    }
}

/// `POST /v1/relay/vouches`: the vouching device's ECDSA signature (DER, base64) over ``RelayVouch`` for `device`'s
/// keys as the directory lists them.
public struct RelayVouchRequest: Codable, Sendable, Hashable {
    public let device: String
    public let signature: String
    public init(device: String, signature: String) {
        self.device = device
        self.signature = signature
    }
}

/// A vouch as the directory lists it under the device vouched for.
public struct RelayVouchRecord: Codable, Sendable, Hashable {
    public let voucher: String
    public let signature: String
    public init(voucher: String, signature: String) {
        self.voucher = voucher
        self.signature = signature
    }
}

extension RelayAPI.Route {
    /// `POST` ``AccountKeyUpload`` → ``AccountKeyGeneration``: a new generation of the account key, wrapped to each
    /// device that may read it. `GET` → ``AccountKeyState``: the latest generation and the caller's wrap of it, if
    /// any.
    public static let accountKey = "/v1/relay/account-key"
    /// `POST` ``SyncedRecord`` → ``AccountKeyGeneration``: replaces the account's synced addresses (ciphertext
    /// under the latest account key). `GET` → ``SyncedRecord`` (404 before the first).
    public static let addresses = "/v1/relay/addresses"
}

extension RelayAPI.Declared {
    public static let uploadAccountKey = DeclaredRoute("POST", RelayAPI.Route.accountKey, device)
    public static let accountKey = DeclaredRoute("GET", RelayAPI.Route.accountKey, device)
    public static let uploadAddresses = DeclaredRoute("POST", RelayAPI.Route.addresses, device)
    public static let addresses = DeclaredRoute("GET", RelayAPI.Route.addresses, device)
    /// The address-sync routes.
    public static var sync: [DeclaredRoute] { [uploadAccountKey, accountKey, uploadAddresses, addresses] }
}

/// The account key of one generation, sealed to one device as a ``RelayFrame`` from the device that made it (its
/// sequence is the generation).
public struct WrappedAccountKey: Codable, Sendable, Hashable {
    public let generation: Int64
    public let device: String
    public let frame: String
    public init(generation: Int64, device: String, frame: String) {
        self.generation = generation
        self.device = device
        self.frame = frame
    }
}

/// `POST /v1/relay/account-key`: generation (the current one plus one) and its wraps; each frame's sender is the
/// caller, its recipient a device of the account, its sequence the generation.
public struct AccountKeyUpload: Codable, Sendable, Hashable {
    public let generation: Int64
    public let wrapped: [WrappedAccountKey]
    public init(generation: Int64, wrapped: [WrappedAccountKey]) {
        self.generation = generation
        self.wrapped = wrapped
    }
}

/// `GET /v1/relay/account-key`: the account key's latest generation (0: none yet) and the caller's wrap of it (none
/// when the key was not wrapped to the caller: a device removed before the rotation).
public struct AccountKeyState: Codable, Sendable, Hashable {
    public let generation: Int64
    public let wrapped: WrappedAccountKey?
    /// The devices the latest generation is wrapped to: one no longer in the directory (removed) means the key
    /// must rotate.
    public let holders: [String]
    public init(generation: Int64, wrapped: WrappedAccountKey?, holders: [String] = []) {
        self.generation = generation
        self.wrapped = wrapped
        self.holders = holders
    }
}

/// A generation number, as the Pay server accepted it.
public struct AccountKeyGeneration: Codable, Sendable, Hashable {
    public let generation: Int64
    public init(generation: Int64) { self.generation = generation }
}

/// The account's synced addresses: AES-256-GCM under the account key of `generation`, `ciphertext` = IV (12) ‖
/// ciphertext ‖ tag, additional data ``SyncedRecord/additionalData(account:generation:)``.
public struct SyncedRecord: Codable, Sendable, Hashable {
    public let generation: Int64
    public let ciphertext: String
    public init(generation: Int64, ciphertext: String) {
        self.generation = generation
        self.ciphertext = ciphertext
    }

    /// `orchard-address-sync-v1` 00 ‖ u8 len ‖ account ‖ u64 generation.
    public static func additionalData(account: String, generation: Int64) -> [UInt8] {
        let name = Array(account.utf8.prefix(255))
        return Array("orchard-address-sync-v1".utf8) + [0, UInt8(name.count)] + name
            + RelayFrame.bigEndian(UInt64(generation), 8)
    }
}
