import CardBasics
import Foundation
import OrchardCrypto
import PaymentCredential

/// A card as the user types it into the wallet: number, expiry, CVV and name. Checked on the device (Luhn,
/// lengths, expiry form) and encoded straight into ``SecureBytes`` for sealing to the token service; the
/// value itself never appears in a description.
public struct CardEntry: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    let number: SecureBytes
    /// `YYMM`.
    let expiry: String
    let verificationValue: SecureBytes
    public let cardholderName: String
    /// The last four digits, which the wallet may show.
    public let suffix: String

    /// - Parameters:
    ///   - number: 12 to 19 digits passing the Luhn check (spaces allowed).
    ///   - expiry: `MM/YY`.
    ///   - verificationValue: 3 or 4 digits.
    ///   - cardholderName: 1 to 100 bytes.
    public init(
        number: String, expiry: String, verificationValue: String, cardholderName: String
    )
        throws(PayClientError)
    {
        let digits = Array(number.utf8.filter { $0 != UInt8(ascii: " ") })
        guard (12...19).contains(digits.count), digits.allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw PayClientError(.invalidCard, "a card number is 12 to 19 digits")
        }
        guard Luhn.isValid(digits.map { Int($0 - 0x30) }) else {
            throw PayClientError(.invalidCard, "the card number fails its check digit (Luhn); check for a typo")
        }
        let parts = expiry.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count == 2, parts[1].count == 2,
            let month = Int(parts[0]), (1...12).contains(month), Int(parts[1]) != nil
        else {
            throw PayClientError(.invalidCard, "an expiry is MM/YY")
        }
        let cvv = Array(verificationValue.utf8)
        guard (3...4).contains(cvv.count), cvv.allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw PayClientError(.invalidCard, "a CVV is 3 or 4 digits")
        }
        guard (1...100).contains(cardholderName.utf8.count) else {
            throw PayClientError(.invalidCard, "a cardholder name is 1 to 100 bytes")
        }
        self.number = SecureBytes(digits)
        self.expiry = String(parts[1]) + String(parts[0])
        self.verificationValue = SecureBytes(cvv)
        self.cardholderName = cardholderName
        suffix = String(decoding: digits.suffix(4), as: UTF8.self)
    }

    /// The card-data plaintext the wallet seals to the token service (`PaymentCredential`'s ``CardDataPayload``).
    func encoded() throws(PayClientError) -> SecureBytes {
        do {
            return try CardDataPayload(
                cardNumber: number, expiry: expiry, verificationValue: verificationValue, cardholderName: cardholderName
            ).encoded()
        } catch {
            throw PayClientError(.invalidCard, "cannot encode the card data: \(error.message)")
        }
    }

    public var description: String { "CardEntry(•••• \(suffix), <redacted>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
