/// A server process of a deployment; it has a section in `config.json` and a run record in `DIR/run/`.
public struct ServiceName: Hashable, Sendable, Comparable, CustomStringConvertible, Codable {
    /// The name as it appears in `config.json`, file names and `orchard serve <name>`.
    public let rawValue: String

    /// Accepts lowercase letters, digits and inner hyphens, 1 to 32 characters.
    public init(_ rawValue: String) throws(RuntimeError) {
        guard isPlainName(rawValue, maximum: 32) else {
            throw RuntimeError(
                .invalidName, "\"\(rawValue)\" is not a service name (lowercase letters, digits and hyphens)"
            )
        }
        self.rawValue = rawValue
    }

    private init(known: String) { rawValue = known }

    /// The Orchard Pay server (the seeds' "Apple Pay servers").
    public static let pay = ServiceName(known: "pay")
    /// The card network with its token service.
    public static let network = ServiceName(known: "network")
    /// The card-issuing bank.
    public static let issuer = ServiceName(known: "issuer")
    /// The acquirer.
    public static let acquirer = ServiceName(known: "acquirer")
    /// The demo merchant's server.
    public static let merchant = ServiceName(known: "merchant")
    /// Every service of a deployment, in start order.
    public static let all: [ServiceName] = [.issuer, .acquirer, .network, .pay, .merchant]

    public var description: String { rawValue }
    public static func < (lhs: ServiceName, rhs: ServiceName) -> Bool { lhs.rawValue < rhs.rawValue }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        self = try ServiceName(text)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// A party that keeps its own SQLite file and log: each service, the terminal, and each device.
///
/// The separation of the parties' data is a security property, so every party has a file of its own even
/// when all run in one process.
public struct Party: Hashable, Sendable, CustomStringConvertible {
    /// The file stem: `pay`, `terminal`, `device-<name>`.
    public let rawValue: String

    private init(known: String) { rawValue = known }

    /// The party behind a service.
    public init(_ service: ServiceName) { rawValue = service.rawValue }

    /// Parses a stem such as `network` or `device-alice-phone`.
    public init(_ rawValue: String) throws(RuntimeError) {
        if rawValue.hasPrefix("device-") {
            self = try Party.device(String(rawValue.dropFirst("device-".count)))
        } else if rawValue == "terminal" {
            self = .terminal
        } else if let service = ServiceName.all.first(where: { $0.rawValue == rawValue }) {
            self = Party(service)
        } else {
            throw RuntimeError(
                .invalidName,
                "\"\(rawValue)\" is not a party (pay, network, issuer, acquirer, merchant, terminal, device-<name>)"
            )
        }
    }

    public static let pay = Party(ServiceName.pay)
    public static let network = Party(ServiceName.network)
    public static let issuer = Party(ServiceName.issuer)
    public static let acquirer = Party(ServiceName.acquirer)
    public static let merchant = Party(ServiceName.merchant)
    /// The point-of-sale terminal.
    public static let terminal = Party(known: "terminal")

    /// A user's device; `name` is lowercase letters, digits and inner hyphens, 1 to 32 characters.
    public static func device(_ name: String) throws(RuntimeError) -> Party {
        guard isPlainName(name, maximum: 32) else {
            throw RuntimeError(
                .invalidName, "\"\(name)\" is not a device name (1-32 lowercase letters, digits and hyphens)"
            )
        }
        return Party(known: "device-" + name)
    }

    /// The device name, for a device party.
    public var deviceName: String? {
        rawValue.hasPrefix("device-") ? String(rawValue.dropFirst("device-".count)) : nil
    }

    public var description: String { rawValue }
}

/// Lowercase ASCII letters, digits and hyphens, not starting or ending with a hyphen: safe in file names,
/// environment variable names and URLs.
func isPlainName(_ name: String, maximum: Int) -> Bool {
    let bytes = Array(name.utf8)
    guard (1...maximum).contains(bytes.count), bytes.first != UInt8(ascii: "-"), bytes.last != UInt8(ascii: "-")
    else { return false }
    return bytes.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == UInt8(ascii: "-") }
}
