/// What kind of device a Secure Enclave and Secure Element are built into.
public enum DeviceKind: String, Sendable, Hashable, CaseIterable, Codable, CustomStringConvertible {
    case phone, ipad, watch, mac

    /// Only phones and watches join an NFC field (pay at a terminal).
    public var joinsNFCField: Bool { self == .phone || self == .watch }

    public var description: String { rawValue }
}

/// The biometric sensor of a device.
public enum Biometry: String, Sendable, Hashable, CaseIterable, Codable, CustomStringConvertible {
    case face, touch, none

    public var description: String { rawValue }
}

/// A device as its factory built it: kind, biometry and the account it belongs to (the seeds' "same iCloud
/// account").
///
/// Only real combinations exist: a phone or an iPad has Face ID or Touch ID, a Mac has Touch ID or none,
/// a watch has no biometric sensor (it relies on wrist detection).
public struct DeviceProfile: Sendable, Hashable, Codable, CustomStringConvertible {
    public let kind: DeviceKind
    public let biometry: Biometry
    /// The account name: 1 to 64 lowercase letters, digits, `.`, `_`, `-` or `@`.
    public let account: String

    public init(kind: DeviceKind, biometry: Biometry, account: String) throws(SecureElementError) {
        let allowed: Set<Biometry>
        switch kind {
        case .phone, .ipad: allowed = [.face, .touch]
        case .mac: allowed = [.touch, .none]
        case .watch: allowed = [.none]
        }
        guard allowed.contains(biometry) else {
            let names = allowed.map(\.rawValue).sorted().joined(separator: " or ")
            throw SecureElementError(.unsupportedDevice, "a \(kind) has biometry \(names), not \(biometry)")
        }
        let bytes = Array(account.utf8)
        let valid = bytes.allSatisfy {
            (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || [0x2E, 0x5F, 0x2D, 0x40].contains($0)
        }
        guard (1...64).contains(bytes.count), valid else {
            throw SecureElementError(
                .invalidArgument, "an account name is 1 to 64 lowercase letters, digits, '.', '_', '-' or '@'")
        }
        self.kind = kind
        self.biometry = biometry
        self.account = account
    }

    /// The biometric method of this device, if any.
    public var biometricMethod: AuthenticationMethod? {
        switch biometry {
        case .face: return .faceID
        case .touch: return .touchID
        case .none: return nil
        }
    }

    /// Whether the device can authorize a payment itself (a Mac without Touch ID hands off to a phone or
    /// watch instead).
    public var authorizesPayments: Bool { !(kind == .mac && biometry == .none) }

    /// The transaction types the device may authorize: contactless only on phones and watches.
    public var transactionTypes: Set<TransactionType> {
        guard authorizesPayments else { return [] }
        return kind.joinsNFCField ? [.contactless, .inApp, .web] : [.inApp, .web]
    }

    public var description: String { "\(kind) (\(biometry)) of \(account)" }

    private enum CodingKeys: String, CodingKey { case kind, biometry, account }

    /// Decoding applies the same checks as ``init(kind:biometry:account:)``.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try self.init(
            kind: try container.decode(DeviceKind.self, forKey: .kind),
            biometry: try container.decode(Biometry.self, forKey: .biometry),
            account: try container.decode(String.self, forKey: .account))
    }
}
