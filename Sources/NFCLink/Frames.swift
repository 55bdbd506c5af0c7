import Foundation
import OrchardCrypto
import OrchardRuntime

/// The kind of a device that answers a reader's field. Only phones and watches have an NFC controller
/// that emulates a card; the others are named so the link can refuse them by name.
public enum NFCDeviceKind: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    case phone, watch, ipad, mac

    /// Whether this kind may join a reader's field (phones and watches only).
    public var mayJoinField: Bool { self == .phone || self == .watch }

    public var description: String { rawValue }
}

/// What a reader's polling reveals to the device that enters its field: the applications it asks for (in
/// its order of preference), the networks they belong to (as the wallet spells them: `visa`,
/// `masterCard`), and optionally the merchant's name. Nothing about the amount or the terminal's identity.
public struct NFCPolling: Sendable, Hashable, Codable {
    /// The protocol version the reader speaks.
    public let version: Int
    /// The AIDs the reader accepts, most preferred first (5 to 16 bytes each, at most 16).
    public let applicationIdentifiers: [[UInt8]]
    /// The networks the reader asks for, most preferred first (at most 8, 1 to 32 letters or digits).
    public let networks: [String]
    /// The merchant's name as a terminal may announce it (at most 64 printable characters).
    public let merchantName: String?

    /// Checks every field's form.
    public init(
        applicationIdentifiers: [[UInt8]], networks: [String], merchantName: String? = nil,
        version: Int = NFCLinkProtocol.version
    ) throws(NFCLinkError) {
        guard applicationIdentifiers.count <= 16, applicationIdentifiers.allSatisfy({ (5...16).contains($0.count) })
        else { throw NFCLinkError(.invalidArgument, "a polling names at most 16 AIDs of 5 to 16 bytes") }
        guard networks.count <= 8,
            networks.allSatisfy({
                (1...32).contains($0.utf8.count) && $0.utf8.allSatisfy { NFCLinkProtocol.isLetterOrDigit($0) }
            })
        else { throw NFCLinkError(.invalidArgument, "a polling names at most 8 networks of 1 to 32 letters or digits") }
        if let merchantName {
            guard (1...64).contains(merchantName.count), merchantName.unicodeScalars.allSatisfy({ $0.value >= 0x20 })
            else { throw NFCLinkError(.invalidArgument, "a merchant name is 1 to 64 printable characters") }
        }
        self.version = version
        self.applicationIdentifiers = applicationIdentifiers
        self.networks = networks
        self.merchantName = merchantName
    }

    private enum CodingKeys: String, CodingKey {
        case version, applicationIdentifiers = "aids", networks, merchantName = "merchant"
    }

    /// Decoding applies the same checks as the initializer; AIDs travel as hex.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let hex = try container.decode([String].self, forKey: .applicationIdentifiers)
        let aids = try hex.map { text -> [UInt8] in
            guard let bytes = NFCLinkProtocol.bytes(hex: text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .applicationIdentifiers, in: container, debugDescription: "an AID is hex")
            }
            return bytes
        }
        do {
            try self.init(
                applicationIdentifiers: aids, networks: try container.decode([String].self, forKey: .networks),
                merchantName: try container.decodeIfPresent(String.self, forKey: .merchantName),
                version: try container.decode(Int.self, forKey: .version))
        } catch let error as NFCLinkError {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(version, forKey: .version)
        try container.encode(applicationIdentifiers.map(NFCLinkProtocol.hex), forKey: .applicationIdentifiers)
        try container.encode(networks, forKey: .networks)
        try container.encodeIfPresent(merchantName, forKey: .merchantName)
    }
}

/// The device's answer to a field it joins: its kind, and whether a card is already authorized (the user
/// authenticated before the tap). A device that is not ready sends ``NFCFrameType/ready`` once it is.
public struct NFCJoin: Sendable, Hashable, Codable {
    public let version: Int
    public let kind: NFCDeviceKind
    public let ready: Bool

    public init(kind: NFCDeviceKind, ready: Bool, version: Int = NFCLinkProtocol.version) {
        self.version = version
        self.kind = kind
        self.ready = ready
    }
}

/// A device's refusal: it does not join the field, or leaves it. `code` is a short name (`deviceLocked`,
/// `noCard`, `unsupported`, `busy`, ...), `message` a sentence for the terminal's display and log.
public struct NFCRefusal: Sendable, Hashable, Codable, CustomStringConvertible {
    public let code: String
    public let message: String

    /// Clips both fields to their limits (32 and 200 characters) and drops control characters, so a
    /// refusal always fits a frame.
    public init(code: String, message: String) {
        let codeScalars = code.unicodeScalars.filter { $0.isASCII && NFCLinkProtocol.isLetterOrDigit(UInt8($0.value)) }
        self.code = String(String.UnicodeScalarView(codeScalars.prefix(32)))
        let messageScalars = message.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }
        self.message = String(String.UnicodeScalarView(messageScalars.prefix(200)))
    }

    public var description: String { "\(code): \(message)" }
}

/// The frame types of the link. Reader to device: `poll`, `command`, `fieldOff`. Device to reader:
/// `joined`, `ready`, `response`, `refused`.
public enum NFCFrameType: UInt8, Sendable, Hashable, CustomStringConvertible {
    /// The field comes on: the reader's polling (JSON ``NFCPolling``). The first frame of a session.
    case poll = 0x01
    /// A command APDU.
    case command = 0x02
    /// The field goes off: the session ends.
    case fieldOff = 0x03
    /// The device joins (JSON ``NFCJoin``).
    case joined = 0x81
    /// The user authorized a card since the device joined.
    case ready = 0x82
    /// A response APDU (data ‖ SW1 SW2).
    case response = 0x83
    /// The device refuses the field or leaves it (JSON ``NFCRefusal``).
    case refused = 0x84

    public var description: String {
        switch self {
        case .poll: "poll"
        case .command: "command"
        case .fieldOff: "field-off"
        case .joined: "joined"
        case .ready: "ready"
        case .response: "response"
        case .refused: "refused"
        }
    }
}

/// One frame: `type (1) ‖ length (2, big-endian) ‖ payload`. Written with one `send`, so an APDU crosses
/// the link as one message.
public struct NFCFrame: Sendable, Hashable {
    public let type: NFCFrameType
    public let payload: [UInt8]

    public init(_ type: NFCFrameType, _ payload: [UInt8] = []) {
        self.type = type
        self.payload = payload
    }

    /// The frame's bytes. Throws ``NFCLinkError/Code/frameTooLarge`` above `maximumPayload`.
    public func encoded(maximumPayload: Int = NFCLinkProtocol.maximumPayload) throws(NFCLinkError) -> [UInt8] {
        guard payload.count <= min(maximumPayload, Int(UInt16.max)) else {
            throw NFCLinkError(.frameTooLarge, "a \(type) frame of \(payload.count) bytes is above \(maximumPayload)")
        }
        return [type.rawValue, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] + payload
    }

    /// The frame at the start of `bytes` and the bytes it takes, or nil when `bytes` holds only part of one.
    /// Throws ``NFCLinkError/Code/frameTooLarge`` for a length above `maximumPayload` and
    /// ``NFCLinkError/Code/protocolViolation`` for an unknown type, as soon as the 3-byte header is in.
    public static func decode(
        prefixOf bytes: [UInt8], maximumPayload: Int = NFCLinkProtocol.maximumPayload
    ) throws(NFCLinkError) -> (frame: NFCFrame, count: Int)? {
        guard bytes.count >= 3 else { return nil }
        let length = Int(bytes[1]) << 8 | Int(bytes[2])
        guard length <= maximumPayload else {
            throw NFCLinkError(.frameTooLarge, "the peer announced a frame of \(length) bytes")
        }
        guard let type = NFCFrameType(rawValue: bytes[0]) else {
            throw NFCLinkError(.protocolViolation, "the peer sent an unknown frame type")
        }
        guard bytes.count >= 3 + length else { return nil }
        return (NFCFrame(type, Array(bytes[3..<(3 + length)])), 3 + length)
    }

    /// A frame carrying `value` as JSON.
    public static func json(_ type: NFCFrameType, _ value: some Encodable) throws(NFCLinkError) -> NFCFrame {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            return NFCFrame(type, Array(try encoder.encode(value)))
        } catch {
            throw NFCLinkError(.invalidArgument, "a \(type) frame could not be encoded")
        }
    }

    /// The payload decoded from JSON; a ``NFCLinkError/Code/protocolViolation`` when it is not `T`.
    func decode<T: Decodable>(_: T.Type) throws(NFCLinkError) -> T {
        if DuplicateJSONKeys.first(in: Data(payload)) != nil {
            throw NFCLinkError(.protocolViolation, "the \(type) frame's payload names a field twice")
        }
        do {
            return try JSONDecoder().decode(T.self, from: Data(payload))
        } catch {
            throw NFCLinkError(.protocolViolation, "the \(type) frame's payload is not what the link expects")
        }
    }
}

/// Constants and small helpers shared by both ends of the link.
public enum NFCLinkProtocol {
    /// The version both ends speak; a peer with another version is refused.
    public static let version = 1
    /// The largest payload of any frame: a short APDU with 255 data bytes and Le is 261 bytes, a response
    /// 258; JSON control frames are far smaller.
    public static let maximumPayload = 1024

    static func isLetterOrDigit(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    }

    static func hex(_ bytes: [UInt8]) -> String { Hex.encode(bytes) }

    static func bytes(hex text: String) -> [UInt8]? { Hex.decode(text) }
}

/// The link's deadlines and limits. Every wait has a deadline, so a silent peer costs a bounded time.
public struct NFCLinkLimits: Sendable, Hashable {
    /// The largest frame payload accepted (at most ``NFCLinkProtocol/maximumPayload``).
    public var maximumPayload: Int
    /// How long a reader waits for the device to join after the field comes on.
    public var joinTimeout: Duration
    /// How long one APDU exchange may take, command sent to response read (and how long the rest of a
    /// frame may take once its first byte arrived).
    public var exchangeTimeout: Duration
    /// How long a device stays in a silent field before it leaves.
    public var idleTimeout: Duration
    /// The most APDU exchanges in one session (a transaction needs fewer than ten).
    public var maximumExchanges: Int
    /// How often a device that joined without an authorization checks whether one arrived.
    public var readinessInterval: Duration

    public init(
        maximumPayload: Int = NFCLinkProtocol.maximumPayload, joinTimeout: Duration = .seconds(3),
        exchangeTimeout: Duration = .seconds(2), idleTimeout: Duration = .seconds(60), maximumExchanges: Int = 32,
        readinessInterval: Duration = .milliseconds(10)
    ) {
        self.maximumPayload = max(16, min(maximumPayload, NFCLinkProtocol.maximumPayload))
        self.joinTimeout = joinTimeout
        self.exchangeTimeout = exchangeTimeout
        self.idleTimeout = idleTimeout
        self.maximumExchanges = max(1, maximumExchanges)
        self.readinessInterval = readinessInterval
    }
}
