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
        public static var all: [DeclaredRoute] { [publishKeys, directory, send, receive] }
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

/// One device in an account's relay directory.
public struct RelayDirectoryEntry: Codable, Sendable, Hashable {
    public let deviceID: String
    /// `phone`, `watch`, `ipad` or `mac`.
    public let kind: String
    public let encryptionKey: String
    public let signingKey: String
    public init(deviceID: String, kind: String, encryptionKey: String, signingKey: String) {
        self.deviceID = deviceID
        self.kind = kind
        self.encryptionKey = encryptionKey
        self.signingKey = signingKey
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
