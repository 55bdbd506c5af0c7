import CardBasics
import EMV
import Foundation
import Issuer
import NetworkServer
import Terminal
import Testing

/// The card network table (CardBasics) and the EMV scheme table agree: every network with a contactless
/// applet names a scheme that exists, and the two tables' card number ranges are the same.
@Suite("Card networks and EMV schemes")
struct NetworkTableTests {
    static func scheme(of network: CardNetwork) -> PaymentScheme? {
        network.paymentSchemeName.flatMap(PaymentScheme.init(name:))
    }

    @Test("Every network and every scheme: the tables agree")
    func tablesAgree() throws {
        #expect(CardNetwork.all == [.visa, .mastercard, .amex, .discover])
        var named: [PaymentScheme] = []
        for network in CardNetwork.all {
            // Names round-trip, in Apple Pay JS and PassKit spelling.
            let passKitName = try #require(network.passKitName)
            #expect(CardNetwork(network.name) == network && CardNetwork(network.name).passKitName == passKitName)
            #expect(CardNetwork(named: network.name) == network && CardNetwork(named: passKitName) == network)
            #expect(CardNetwork(named: network.name.uppercased()) == network)
            let encoded = try JSONEncoder().encode(network)
            #expect(String(decoding: encoded, as: UTF8.self) == "\"\(network.name)\"")
            #expect(try JSONDecoder().decode(CardNetwork.self, from: encoded).cardRanges == network.cardRanges)
            // ECIs are two digits.
            let eci = try #require(network.electronicCommerceIndicators)
            for value in [eci.inApp, eci.web] {
                #expect(value.utf8.count == 2 && value.utf8.allSatisfy { (0x30...0x39).contains($0) }, "\(network)")
            }
            // Ranges: digits, ends of equal length, tokens inside the network's card ranges.
            #expect(!network.cardRanges.isEmpty)
            for range in network.cardRanges + network.tokenRanges {
                #expect(range.lowerPrefix.count == range.upperPrefix.count && range.lowerPrefix <= range.upperPrefix)
                #expect(CardNetwork(pan: range.lowerPrefix + "000000000000") == network, "\(range)")
                #expect(CardNetwork(pan: range.upperPrefix + "999999999999") == network, "\(range)")
            }
            for token in network.tokenRanges {
                #expect(network.cardRanges.contains { $0.contains(token) }, "\(network) token range \(token)")
            }
            // The scheme it names exists and holds the same card number ranges.
            if let schemeName = network.paymentSchemeName {
                let scheme = try #require(PaymentScheme(name: schemeName), "\(network) names \(schemeName)")
                named.append(scheme)
                for range in network.cardRanges {
                    #expect(PaymentScheme(pan: range.lowerPrefix + "000000000000") == scheme, "\(range)")
                    #expect(PaymentScheme(pan: range.upperPrefix + "999999999999") == scheme, "\(range)")
                }
                for aid in scheme.applicationIdentifiers { #expect(PaymentScheme(aid: aid) == scheme) }
            } else {
                #expect(network.tokenRanges.isEmpty, "\(network) has tokens but no contactless applet")
            }
        }
        // Every scheme is named by exactly one network.
        #expect(named.count == PaymentScheme.all.count && Set(named) == Set(PaymentScheme.all))
        // No two networks' card (or token) ranges overlap.
        for (i, a) in CardNetwork.all.enumerated() {
            for b in CardNetwork.all[(i + 1)...] {
                for x in a.cardRanges + a.tokenRanges {
                    for y in b.cardRanges + b.tokenRanges { #expect(!x.overlaps(y), "\(a) \(x) and \(b) \(y)") }
                }
            }
        }
        // Names are unique in every spelling.
        #expect(Set(CardNetwork.all.map { $0.name.lowercased() }).count == CardNetwork.all.count)
        #expect(Set(CardNetwork.all.compactMap { $0.passKitName?.lowercased() }).count == CardNetwork.all.count)
        // The terminal accepts exactly the networks with a scheme, with that scheme.
        #expect(TerminalSettings.supportedNetworks.map(\.name) == ["visa", "masterCard"])
        #expect(TerminalSettings.supportedNetworks.map(\.scheme) == [.visa, .mastercard])
    }

    @Test("Known answers: names, ECIs, card and token ranges, and the scheme of each network")
    func knownAnswers() {
        let expected: [(CardNetwork, String, String, String, String?)] = [
            (.visa, "visa", "Visa", "05", "visa"), (.mastercard, "masterCard", "MasterCard", "02", "mastercard"),
            (.amex, "amex", "AmEx", "05", nil), (.discover, "discover", "Discover", "05", nil),
        ]
        for (network, name, passKitName, eci, scheme) in expected {
            #expect(network.name == name && network.description == name && network.passKitName == passKitName)
            #expect(network.electronicCommerceIndicators?.inApp == eci)
            #expect(network.electronicCommerceIndicators?.web == eci)
            #expect(network.paymentSchemeName == scheme)
        }
        #expect(CardNetwork.visa.cardRanges.map(\.description) == ["4"])
        #expect(CardNetwork.mastercard.cardRanges.map(\.description) == ["51…55", "2221…2720"])
        #expect(CardNetwork.amex.cardRanges.map(\.description) == ["34", "37"])
        #expect(CardNetwork.discover.cardRanges.map(\.description) == ["6011", "644…649", "65"])
        #expect(CardNetwork.visa.tokenRanges.map(\.description) == ["489537"])
        #expect(CardNetwork.mastercard.tokenRanges.map(\.description) == ["539990"])
        #expect(NetworkServerService.visaTokenPrefix == "489537")
        #expect(NetworkServerService.mastercardTokenPrefix == "539990")
        #expect(Self.scheme(of: .visa) == .visa && Self.scheme(of: .mastercard) == .mastercard)
        #expect(Self.scheme(of: .amex) == nil && Self.scheme(of: .discover) == nil)
        for card in TestCards.cards {
            #expect(CardNetwork(pan: card.pan) == card.network, "\(card.pan.suffix(4))")
        }
    }

    @Test("Unknown names and numbers: no table entry")
    func unknown() throws {
        #expect(CardNetwork(named: "unionPay") == nil && CardNetwork(named: "") == nil)
        let other = CardNetwork("unionPay")
        #expect(other.name == "unionPay" && other.passKitName == nil && other.electronicCommerceIndicators == nil)
        #expect(other.cardRanges.isEmpty && other.tokenRanges.isEmpty && other.paymentSchemeName == nil)
        #expect(!CardNetwork.all.contains(other))
        #expect(CardNetwork("Visa") != .visa)  // init(_:) takes the Apple Pay JS name exactly
        let decoded = try JSONDecoder().decode(CardNetwork.self, from: Data("\"unionPay\"".utf8))
        #expect(decoded == other)
        for pan in ["1234567890123456", "5000000000000000", "2220999999999999", "2721000000000000", "35", ""] {
            #expect(CardNetwork(pan: pan) == nil, "\(pan)")
        }
    }
}
