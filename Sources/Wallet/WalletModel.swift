public import CardBasics
public import Foundation

/// A card's state as the wallet shows it.
public enum CardState: String, Sendable, Hashable, CaseIterable, Codable, CustomStringConvertible {
    /// Usable.
    case active
    /// Suspended by the issuer, the token service or lost mode; it may come back.
    case suspended
    /// Terminated (Authorization Random reset, erase, or deleted by the issuer); it must be added again.
    case terminated

    public var description: String { rawValue }
}

/// A card as the wallet knows it: display data only. The DPAN and the card's keys are in the Secure
/// Element; the wallet has the last four digits of the card number and of the device account number.
public struct WalletCard: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The Secure Element's identifier of the card (32 hex digits).
    public let id: String
    /// The network as Apple Pay's `supportedNetworks` spells it (`visa`, `masterCard`, `amex`, `discover`).
    public let network: String
    public let type: CardType
    /// The last four digits of the card number, as the issuer printed it.
    public let suffix: String
    /// The last four digits of the device account number.
    public let deviceAccountSuffix: String
    /// The name shown in the wallet (e.g. "Orchard Bank Visa").
    public let displayName: String
    public internal(set) var state: CardState
    /// Whether the card is offered automatically when a terminal asks for its network.
    public internal(set) var automaticSelection: Bool
    public let addedAt: Date

    /// Checks the form of every field.
    public init(
        id: String, network: String, type: CardType, suffix: String, deviceAccountSuffix: String,
        displayName: String, state: CardState = .active, automaticSelection: Bool = false, addedAt: Date
    ) throws(WalletError) {
        guard id.utf8.count == 32, id.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else { throw WalletError(.invalidArgument, "a card identifier is 32 lowercase hex digits") }
        guard (1...32).contains(network.utf8.count), network.utf8.allSatisfy({ Self.isLetterOrDigit($0) }) else {
            throw WalletError(.invalidArgument, "a network name is 1 to 32 letters or digits")
        }
        for (name, digits) in [("card suffix", suffix), ("device account suffix", deviceAccountSuffix)] {
            guard digits.utf8.count == 4, digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
                throw WalletError(.invalidArgument, "a \(name) is 4 digits")
            }
        }
        guard (1...64).contains(displayName.count), displayName.unicodeScalars.allSatisfy({ $0.value >= 0x20 }) else {
            throw WalletError(.invalidArgument, "a display name is 1 to 64 printable characters")
        }
        self.id = id
        self.network = network
        self.type = type
        self.suffix = suffix
        self.deviceAccountSuffix = deviceAccountSuffix
        self.displayName = displayName
        self.state = state
        self.automaticSelection = automaticSelection
        self.addedAt = addedAt
    }

    private static func isLetterOrDigit(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    }

    public var description: String { "\(displayName) (\(network) \(type) ••••\(suffix), \(state))" }

    private enum CodingKeys: String, CodingKey {
        case id, network, type, suffix, deviceAccountSuffix, displayName, state, automaticSelection, addedAt
    }

    /// Decoding applies the same checks as the initializer.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        try self.init(
            id: try c.decode(String.self, forKey: .id), network: try c.decode(String.self, forKey: .network),
            type: try c.decode(CardType.self, forKey: .type), suffix: try c.decode(String.self, forKey: .suffix),
            deviceAccountSuffix: try c.decode(String.self, forKey: .deviceAccountSuffix),
            displayName: try c.decode(String.self, forKey: .displayName),
            state: try c.decode(CardState.self, forKey: .state),
            automaticSelection: try c.decode(Bool.self, forKey: .automaticSelection),
            addedAt: try c.decode(Date.self, forKey: .addedAt))
    }
}

/// A postal address as a payment sheet collects it.
public struct PostalAddress: Sendable, Hashable, Codable {
    public var street: String
    /// City or town.
    public var locality: String
    /// State, province or region.
    public var administrativeArea: String
    public var postalCode: String
    /// ISO 3166 alpha-2 country code.
    public var countryCode: String

    public init(street: String, locality: String, administrativeArea: String, postalCode: String, countryCode: String) {
        self.street = street
        self.locality = locality
        self.administrativeArea = administrativeArea
        self.postalCode = postalCode
        self.countryCode = countryCode
    }

    /// What an app may see before the user authorizes (to compute shipping): no street.
    public var redacted: PostalAddress {
        PostalAddress(
            street: "", locality: locality, administrativeArea: administrativeArea, postalCode: postalCode,
            countryCode: countryCode)
    }
}

/// A contact as a payment sheet collects it; every field is optional except that one must be present.
public struct Contact: Sendable, Hashable, Codable {
    public var name: String?
    public var emailAddress: String?
    public var phoneNumber: String?
    public var postalAddress: PostalAddress?

    public init(
        name: String? = nil, emailAddress: String? = nil, phoneNumber: String? = nil,
        postalAddress: PostalAddress? = nil
    ) {
        self.name = name
        self.emailAddress = emailAddress
        self.phoneNumber = phoneNumber
        self.postalAddress = postalAddress
    }

    /// Checks that the contact is not empty and every field is of reasonable size.
    func validate() throws(WalletError) {
        let fields = [name, emailAddress, phoneNumber].compactMap { $0 }
        let address =
            postalAddress.map {
                [$0.street, $0.locality, $0.administrativeArea, $0.postalCode, $0.countryCode]
            } ?? []
        guard !fields.isEmpty || postalAddress != nil else {
            throw WalletError(.invalidArgument, "a contact needs at least one field")
        }
        for field in fields + address where field.utf8.count > 256 {
            throw WalletError(.invalidArgument, "a contact field is at most 256 bytes")
        }
        if let code = postalAddress?.countryCode {
            guard code.utf8.count == 2, code.utf8.allSatisfy({ (0x41...0x5A).contains($0) }) else {
                throw WalletError(.invalidArgument, "a country code is two upper-case letters (ISO 3166 alpha-2)")
            }
        }
    }
}

/// The three lists of recently used contacts a payment sheet offers.
public enum ContactRole: String, Sendable, Hashable, CaseIterable, Codable {
    case contact, shipping, billing
}

/// The wallet's settings.
public struct WalletSettings: Sendable, Hashable, Codable {
    /// Websites may ask whether this device can pay and has an active card ("Check for Apple Pay"). Off:
    /// every such query is answered false and no server is asked.
    public var allowWebsiteQueries: Bool
    /// A double-click of the side button (Home button on touch devices) presents the default card.
    public var doubleClickPresentsCards: Bool
    /// The room of the simulated radio medium the device is in (docs/handoff.md, "Proximity"): it hears the devices
    /// in the same room. A room name is 1 to 32 lowercase letters, digits and hyphens (``isRoomName(_:)``).
    public var room: String
    /// A phone or watch offers its cards to the account's Macs near it (Handoff); off: it answers their discovery with
    /// a refusal.
    public var allowPaymentsOnMac: Bool

    /// The room a device starts in.
    public static let defaultRoom = "home"

    public init(
        allowWebsiteQueries: Bool = true, doubleClickPresentsCards: Bool = true, room: String = defaultRoom,
        allowPaymentsOnMac: Bool = true
    ) {
        self.allowWebsiteQueries = allowWebsiteQueries
        self.doubleClickPresentsCards = doubleClickPresentsCards
        self.room = room
        self.allowPaymentsOnMac = allowPaymentsOnMac
    }

    /// Whether `name` is a room's name: 1 to 32 of `a`–`z`, `0`–`9` and `-`.
    public static func isRoomName(_ name: String) -> Bool {
        (1...32).contains(name.utf8.count)
            && name.utf8.allSatisfy { (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2D }
    }
}

/// What a website may ask the wallet.
public enum WebsiteQuery: Sendable, Hashable {
    /// `canMakePayments`: can this device pay at all?
    case canMakePayments
    /// `canMakePaymentsWithActiveCard`: is there an active credit, debit or prepaid card on one of these
    /// networks?
    case canMakePaymentsWithActiveCard(networks: [String])
}

/// Why the wallet offers a card in an NFC field.
public enum CardSelectionReason: String, Sendable, Hashable, Codable {
    /// The user chose it by hand.
    case chosen
    /// The terminal asked for its network and the card has automatic selection on.
    case automatic
    /// The default card.
    case `default`
}
