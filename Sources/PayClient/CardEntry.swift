import Foundation
import OrchardCrypto

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
        guard Self.luhnValid(digits) else {
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

    /// The token service's card-data plaintext (docs/provisioning.md): items `tag ‖ length (2, big endian) ‖
    /// value`, tags `00` version 1, `30` card number (ASCII digits), `31` expiry YYMM, `32` CVV, `33` name.
    func encoded() throws(PayClientError) -> SecureBytes {
        let items: [(UInt8, SecureBytes)] = [
            (0x00, SecureBytes([1])), (0x30, number), (0x31, SecureBytes(Array(expiry.utf8))),
            (0x32, verificationValue), (0x33, SecureBytes(Array(cardholderName.utf8))),
        ]
        let total = items.reduce(0) { $0 + 3 + $1.1.count }
        do {
            return try SecureBytes(count: total) { (buffer) throws(CryptoError) in
                var offset = 0
                for (tag, value) in items {
                    buffer[offset] = tag
                    buffer[offset + 1] = UInt8(value.count >> 8)
                    buffer[offset + 2] = UInt8(value.count & 0xFF)
                    offset += 3
                    value.withUnsafeBytes { bytes in
                        for index in 0..<bytes.count { buffer[offset + index] = bytes[index] }
                    }
                    offset += value.count
                }
            }
        } catch {
            throw PayClientError(.deviceFailure, "cannot encode the card data")
        }
    }

    static func luhnValid(_ digits: [UInt8]) -> Bool {
        var sum = 0
        for (index, digit) in digits.reversed().enumerated() {
            var value = Int(digit - 0x30)
            if index % 2 == 1 {
                value *= 2
                if value > 9 { value -= 9 }
            }
            sum += value
        }
        return sum % 10 == 0
    }

    public var description: String { "CardEntry(•••• \(suffix), <redacted>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
