public import CardBasics
public import EMV
import Foundation
public import NFCLink
import OrchardCrypto

/// A terminal's configuration: who it is (terminal ID, merchant), where it is (country), what it charges
/// in by default, what it accepts (networks, in its order of preference) and its contactless rules (TTQ,
/// limits), and which acquirer it sends authorizations to. Nothing secret.
public struct TerminalSettings: Sendable, Hashable, Codable {
    /// The networks a terminal can accept, as the wallet spells them, with their kernels: every network of
    /// ``CardNetwork/all`` whose EMV scheme Orchard implements.
    public static let supportedNetworks: [(name: String, scheme: PaymentScheme)] = CardNetwork.all.compactMap {
        network in network.paymentSchemeName.flatMap(PaymentScheme.init(name:)).map { (network.name, $0) }
    }

    /// The terminal ID the acquirer knows it by (1 to 16 letters, digits or hyphens).
    public let terminalID: String
    /// The merchant's account at the acquirer.
    public var merchantID: String
    /// The name the reader announces in its polling.
    public var merchantName: String
    /// ISO 3166 numeric country code of the terminal (tag 9F1A), e.g. 840.
    public var countryCode: Int
    /// The default currency of a charge (ISO 4217 alphabetic).
    public var currency: String
    /// The Terminal Transaction Qualifiers (tag 9F66) before per-transaction bits.
    public var terminalTransactionQualifiers: [UInt8]
    /// Amounts above this (minor units of ``currency``) are not taken contactless.
    public var contactlessLimit: Int64?
    /// Amounts at or above this (minor units of ``currency``) require a cardholder verification.
    public var cvmRequiredLimit: Int64?
    /// The networks accepted, most preferred first (`visa`, `masterCard`).
    public var acceptedNetworks: [String]
    /// The acquirer's base URL (`https://127.0.0.1:8444`); nil until one is configured.
    public var acquirerURL: String?
    /// A PEM file with the roots the acquirer's certificate must chain to (default: the deployment's root CA).
    public var acquirerRootsPath: String?

    public init(
        terminalID: String, merchantID: String = "merchant.dev.orchard.demo", merchantName: String = "Orchard Store",
        countryCode: Int = 840, currency: String = "USD",
        terminalTransactionQualifiers: [UInt8] = [0x36, 0xC0, 0x40, 0x00],
        contactlessLimit: Int64? = nil, cvmRequiredLimit: Int64? = nil,
        acceptedNetworks: [String] = TerminalSettings.supportedNetworks.map(\.name),
        acquirerURL: String? = nil, acquirerRootsPath: String? = nil
    ) throws(TerminalError) {
        self.terminalID = terminalID
        self.merchantID = merchantID
        self.merchantName = merchantName
        self.countryCode = countryCode
        self.currency = currency
        self.terminalTransactionQualifiers = terminalTransactionQualifiers
        self.contactlessLimit = contactlessLimit
        self.cvmRequiredLimit = cvmRequiredLimit
        self.acceptedNetworks = acceptedNetworks
        self.acquirerURL = acquirerURL
        self.acquirerRootsPath = acquirerRootsPath
        try validate()
    }

    /// Checks every field's form (also after decoding a stored configuration and after an edit).
    public func validate() throws(TerminalError) {
        let id = Array(terminalID.utf8)
        guard (1...16).contains(id.count), id.allSatisfy({ Self.isIdentifierByte($0) || $0 == 0x2D }) else {
            throw TerminalError(.invalidArgument, "a terminal ID is 1 to 16 letters, digits or hyphens")
        }
        let merchant = Array(merchantID.utf8)
        guard (1...64).contains(merchant.count), merchant.allSatisfy({ (0x21...0x7E).contains($0) && $0 != 0x3A })
        else {
            throw TerminalError(.invalidArgument, "a merchant ID is 1 to 64 printable characters without ':'")
        }
        guard (1...64).contains(merchantName.count), merchantName.unicodeScalars.allSatisfy({ $0.value >= 0x20 }) else {
            throw TerminalError(.invalidArgument, "a merchant name is 1 to 64 printable characters")
        }
        guard (1...999).contains(countryCode) else {
            throw TerminalError(.invalidArgument, "a country code is ISO 3166 numeric, 1 to 999")
        }
        do {
            _ = try Currency(currency)
        } catch {
            throw TerminalError(.unknownCurrency, error.message)
        }
        guard terminalTransactionQualifiers.count == 4 else {
            throw TerminalError(.invalidArgument, "the TTQ is 4 bytes (8 hex digits)")
        }
        for limit in [contactlessLimit, cvmRequiredLimit] {
            if let limit, !(0...Money.maximumMinorUnits).contains(limit) {
                throw TerminalError(.invalidArgument, "a limit is 0 to \(Money.maximumMinorUnits) minor units")
            }
        }
        guard !acceptedNetworks.isEmpty, Set(acceptedNetworks).count == acceptedNetworks.count,
            acceptedNetworks.allSatisfy({ name in Self.supportedNetworks.contains { $0.name == name } })
        else {
            let names = Self.supportedNetworks.map(\.name).joined(separator: ", ")
            throw TerminalError(.invalidArgument, "accepted networks are one or more of \(names), each once")
        }
        if let acquirerURL {
            guard acquirerURL.hasPrefix("https://"), acquirerURL.count <= 200, !acquirerURL.contains(" ") else {
                throw TerminalError(.invalidArgument, "the acquirer URL is an https:// URL")
            }
        }
    }

    /// The EMV kernel's configuration for a charge in `currency`, with the terminal's limits.
    ///
    /// The limits are amounts in the terminal's ``currency`` and the terminal keeps no exchange rates, so a
    /// terminal with a contactless or CVM limit charges only in its own currency: another throws
    /// ``TerminalError/Code/currencyNotAccepted`` (a charge in another currency would otherwise
    /// escape the limits). A terminal without limits charges in any currency it knows.
    public func kernelConfiguration(for currency: Currency) throws(TerminalError) -> TerminalConfiguration {
        let applications = acceptedNetworks.compactMap { name in
            Self.supportedNetworks.first { $0.name == name }.map {
                TerminalConfiguration.SupportedApplication(aid: $0.scheme.aid, scheme: $0.scheme)
            }
        }
        guard currency.code == self.currency || (contactlessLimit == nil && cvmRequiredLimit == nil) else {
            throw TerminalError(
                .currencyNotAccepted,
                "this terminal's limits are in \(self.currency); it charges only in \(self.currency), not \(currency)")
        }
        return TerminalConfiguration(
            countryCode: countryCode, currencyCode: Int(currency.numericCode),
            terminalTransactionQualifiers: terminalTransactionQualifiers, supportedApplications: applications,
            preferredAID: applications.first?.aid, contactlessTransactionLimit: contactlessLimit.map { UInt64($0) },
            cvmRequiredLimit: cvmRequiredLimit.map { UInt64($0) })
    }

    /// What the reader's polling reveals: the accepted AIDs and networks in order of preference, and the
    /// merchant's name.
    public func polling() throws(TerminalError) -> NFCPolling {
        let schemes = acceptedNetworks.compactMap { name in Self.supportedNetworks.first { $0.name == name }?.scheme }
        do {
            return try NFCPolling(
                applicationIdentifiers: schemes.map(\.aid), networks: acceptedNetworks, merchantName: merchantName)
        } catch {
            throw TerminalError(.invalidArgument, error.message)
        }
    }

    private static func isIdentifierByte(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
    }

    private enum CodingKeys: String, CodingKey {
        case terminalID = "terminalId", merchantID = "merchantId", merchantName, countryCode, currency
        case terminalTransactionQualifiers, contactlessLimit, cvmRequiredLimit, acceptedNetworks
        case acquirerURL = "acquirerUrl", acquirerRootsPath
    }

    /// Decoding applies the same checks as the initializer; the TTQ is hex.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let ttqText = try c.decode(String.self, forKey: .terminalTransactionQualifiers)
        guard let ttq = Hex.decode(ttqText) else {
            throw DecodingError.dataCorruptedError(
                forKey: .terminalTransactionQualifiers, in: c, debugDescription: "the TTQ is hex")
        }
        do {
            try self.init(
                terminalID: try c.decode(String.self, forKey: .terminalID),
                merchantID: try c.decode(String.self, forKey: .merchantID),
                merchantName: try c.decode(String.self, forKey: .merchantName),
                countryCode: try c.decode(Int.self, forKey: .countryCode),
                currency: try c.decode(String.self, forKey: .currency), terminalTransactionQualifiers: ttq,
                contactlessLimit: try c.decodeIfPresent(Int64.self, forKey: .contactlessLimit),
                cvmRequiredLimit: try c.decodeIfPresent(Int64.self, forKey: .cvmRequiredLimit),
                acceptedNetworks: try c.decode([String].self, forKey: .acceptedNetworks),
                acquirerURL: try c.decodeIfPresent(String.self, forKey: .acquirerURL),
                acquirerRootsPath: try c.decodeIfPresent(String.self, forKey: .acquirerRootsPath))
        } catch let error as TerminalError {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: error.message))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(terminalID, forKey: .terminalID)
        try c.encode(merchantID, forKey: .merchantID)
        try c.encode(merchantName, forKey: .merchantName)
        try c.encode(countryCode, forKey: .countryCode)
        try c.encode(currency, forKey: .currency)
        try c.encode(Hex.encode(terminalTransactionQualifiers), forKey: .terminalTransactionQualifiers)
        try c.encodeIfPresent(contactlessLimit, forKey: .contactlessLimit)
        try c.encodeIfPresent(cvmRequiredLimit, forKey: .cvmRequiredLimit)
        try c.encode(acceptedNetworks, forKey: .acceptedNetworks)
        try c.encodeIfPresent(acquirerURL, forKey: .acquirerURL)
        try c.encodeIfPresent(acquirerRootsPath, forKey: .acquirerRootsPath)
    }
}
