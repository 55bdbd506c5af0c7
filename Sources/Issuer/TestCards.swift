public import CardBasics
import Foundation
import OrchardCrypto

/// The test cards of the demo issuer ("Orchard Test Bank"), as seed data. All are Luhn-valid, expire
/// 12/34, and take the CVV2 that ``insecureDemoCardVerificationKey`` gives them (listed by
/// ``TestCards/cardVerificationValues()``):
///
/// | number | network | type | provisioning |
/// |---|---|---|---|
/// | 4111111111111111 | Visa | credit | approve |
/// | 5555555555554444 | Mastercard | credit | approve |
/// | 4000056655665556 | Visa | debit | approve |
/// | 4000000000003220 | Visa | credit | step-up, one-time code `123456` |
/// | 4000000000000002 | Visa | credit | decline |
public enum TestCards {
    /// One test card and the account behind it.
    public struct Card: Sendable {
        public let pan: String
        public let network: CardNetwork
        public let type: CardType
        public let policy: IssuedCard.ProvisioningPolicy
        public let productName: String
    }

    public static let issuerID = "orchard-test-bank"
    public static let issuerName = "Orchard Test Bank"
    /// The BIN prefixes the test cards use; token ranges must stay clear of them.
    public static let cardBINPrefixes = ["411111", "555555", "400005", "400000"]
    /// Every test card expires in December 2034.
    public static let expiryYear = 2034
    public static let expiryMonth = 12
    /// US dollars.
    public static let currency = "840"
    public static let cardholderName = "Orchard Tester"

    public static let cards: [Card] = [
        Card(pan: "4111111111111111", network: .visa, type: .credit, policy: .approve, productName: "Orchard Visa"),
        Card(
            pan: "5555555555554444", network: .mastercard, type: .credit, policy: .approve,
            productName: "Orchard Mastercard"),
        Card(pan: "4000056655665556", network: .visa, type: .debit, policy: .approve, productName: "Orchard Debit"),
        Card(
            pan: "4000000000003220", network: .visa, type: .credit, policy: .stepUp,
            productName: "Orchard Visa Secure"),
        Card(pan: "4000000000000002", network: .visa, type: .credit, policy: .decline, productName: "Orchard Visa"),
    ]

    /// A fixed, published card verification key so the demo cards have CVVs a README can list.
    /// Loudly named: anyone can compute every demo card's CVV from it. Never use it for real cards.
    public static var insecureDemoCardVerificationKey: CardVerificationKey {
        // CVK A ‖ CVK B as ASCII "ORCHARD-DEMO-CVK" (16 bytes).
        CardVerificationKey(trustedSixteenBytes: SymmetricKey(data: Array("ORCHARD-DEMO-CVK".utf8)))
    }

    /// The demo issuer's configuration.
    public static var configuration: IssuerConfiguration {
        IssuerConfiguration(issuerID: issuerID, name: issuerName, cardBINPrefixes: cardBINPrefixes)
    }

    /// Opens one account per test card (credit line 5,000.00; debit balance 2,500.00; per-transaction
    /// limit 2,000.00) and issues the cards.
    public static func seed(into issuer: Issuer) async throws {
        let expiry = try CardExpiry(year: expiryYear, month: expiryMonth)
        for (index, card) in cards.enumerated() {
            let accountID = "acct-\(index + 1)"
            let account = IssuerAccount(
                accountID: accountID, holderName: cardholderName, currency: currency, kind: card.type,
                balance: card.type == .credit ? 0 : 250_000, creditLimit: card.type == .credit ? 500_000 : 0,
                perTransactionLimit: 200_000)
            try await issuer.openAccount(account)
            try await issuer.issueCard(
                IssuedCard(
                    pan: try PrimaryAccountNumber(card.pan), expiry: expiry, network: card.network, type: card.type,
                    accountID: accountID, cardholderName: cardholderName, provisioningPolicy: card.policy,
                    productName: card.productName))
        }
    }

    /// Each test card's number and its CVV2 under ``insecureDemoCardVerificationKey``.
    public static func cardVerificationValues() throws -> [(pan: String, cvv: String)] {
        let expiry = try CardExpiry(year: expiryYear, month: expiryMonth)
        return try cards.map { card in
            (
                card.pan,
                try insecureDemoCardVerificationKey.cardVerificationValue(
                    pan: try PrimaryAccountNumber(card.pan), expiry: expiry)
            )
        }
    }
}
