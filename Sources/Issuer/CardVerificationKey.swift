public import CardBasics
import Foundation
public import OrchardCrypto

/// A card verification key pair (CVK A ‖ CVK B, two-key triple DES): the issuer recomputes a card's CVV2
/// from it instead of storing the CVV anywhere.
///
/// The algorithm is the schemes' CVV method: the digits PAN ‖ expiry (YYMM) ‖ service code, zero-padded to
/// 32 nibbles, split into blocks A and B; A is encrypted with CVK A (single DES), XORed with B, encrypted
/// with CVK A ‖ B (triple DES); the result's decimal nibbles, then its hexadecimal nibbles minus ten, are
/// the CVV's digits. CVV2 (printed on the card) uses service code `000`.
public struct CardVerificationKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    private let key: SymmetricKey

    /// `key` is CVK A ‖ CVK B, 16 bytes.
    public init(_ key: SymmetricKey) throws(IssuerError) {
        guard key.byteCount == 16 else { throw IssuerError(.invalidInput, "a card verification key is 16 bytes") }
        self.key = key
    }

    /// For keys whose length is fixed in code.
    init(trustedSixteenBytes key: SymmetricKey) { self.key = key }

    /// The CVV for `pan`, `expiry` and `serviceCode`, `digits` long (3 for CVV2).
    public func cardVerificationValue(
        pan: PrimaryAccountNumber, expiry: CardExpiry, serviceCode: String = "000", digits: Int = 3
    ) throws(IssuerError) -> String {
        try cardVerificationValue(panDigits: pan.digits, yymm: expiry.yymm, serviceCode: serviceCode, digits: digits)
    }

    /// The algorithm on raw digits (the published examples use PANs without a valid check digit).
    func cardVerificationValue(
        panDigits: String, yymm: String, serviceCode: String, digits: Int
    )
        throws(IssuerError) -> String
    {
        let serviceBytes = Array(serviceCode.utf8)
        guard serviceBytes.count == 3, serviceBytes.allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw IssuerError(.invalidInput, "a service code is three digits")
        }
        guard (3...5).contains(digits) else { throw IssuerError(.invalidInput, "a CVV is 3 to 5 digits") }
        let input = Array((panDigits + yymm + serviceCode).utf8)
        guard input.allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw IssuerError(.invalidInput, "the CVV input must be digits")
        }
        var nibbles = input.map { $0 - 0x30 }
        guard nibbles.count <= 32 else { throw IssuerError(.invalidInput, "the CVV input is longer than two blocks") }
        nibbles += [UInt8](repeating: 0, count: 32 - nibbles.count)
        let bytes = stride(from: 0, to: 32, by: 2).map { nibbles[$0] << 4 | nibbles[$0 + 1] }
        let blockA = Array(bytes[0..<8])
        let blockB = Array(bytes[8..<16])
        do {
            let keyA = key.withUnsafeBytes { SymmetricKey(data: UnsafeRawBufferPointer(rebasing: $0.prefix(8))) }
            let first = try InsecureSingleDES.encryptECB(blockA, key: keyA)
            let mixed = zip(first, blockB).map { $0 ^ $1 }
            let result = try TripleDES.encryptECB(mixed, key: key)
            let resultNibbles = result.flatMap { [$0 >> 4, $0 & 0x0F] }
            let decimal = resultNibbles.filter { $0 < 10 } + resultNibbles.filter { $0 >= 10 }.map { $0 - 10 }
            return String(decoding: decimal.prefix(digits).map { $0 + 0x30 }, as: UTF8.self)
        } catch {
            throw IssuerError(.cryptoFailure, "the CVV computation failed: \(error.code)")
        }
    }

    public var description: String { "CardVerificationKey(<redacted>)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
