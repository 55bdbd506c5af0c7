import Foundation
import OrchardCrypto
import OrchardStore
import PayAPI
import PaymentToken

/// Merchant tokens (Apple Pay's version 14 payment types: recurring, automatic reload, deferred): the Pay server mints
/// one identifier per merchant and device account (the token reference of the card the user pays with), at random
/// (``RandomSource``), never from a card number or device account number, and keeps it: the same merchant and card
/// get the same identifier again, another merchant another. The payment data of such a payment carries it
/// (`merchantTokenIdentifier`) with the card's display data (`merchantTokenMetadata`) beside the device account
/// number and cryptogram of the payment itself.
///
/// The table ties a merchant to a token reference (that is what a merchant token is), never to an amount, a time of
/// payment or an app: `created_at` is when the merchant token was minted.
enum MerchantTokens {
    static let migrationName = "merchant tokens"
    static let migrationSQL = """
        CREATE TABLE merchant_tokens (
            merchant_identifier TEXT NOT NULL,
            token_reference TEXT NOT NULL,
            identifier TEXT NOT NULL UNIQUE,
            created_at INTEGER NOT NULL,
            PRIMARY KEY (merchant_identifier, token_reference)
        );
        """

    /// The merchant token of one payment: its identifier and the card's display data.
    struct Minted: Sendable {
        let identifier: String
        let suffix: String
        let description: String
    }

    /// The merchant token for `merchant` and the card `tokenReference` of `deviceID`, minted on first use (inside
    /// the exchange's write transaction, so a refused exchange mints nothing). The card must be an active card of
    /// the calling device: another device's card, an unknown, suspended or deleted one is refused.
    static func mint(
        merchant: String, tokenReference: String, deviceID: String, at now: Date, random: any RandomSource,
        in db: Database
    ) throws -> Minted {
        guard
            let card = try db.queryFirst(
                "SELECT suffix, description, state FROM device_cards WHERE token_reference = ? AND device_id = ?",
                [.text(tokenReference), .text(deviceID)], { (try $0.string(0), try $0.string(1), try $0.string(2)) })
        else {
            throw PayServerError(
                .invalidRequest, "the merchant token's card is not a card of this device: give its token reference")
        }
        guard card.2 == "active" else {
            throw PayServerError(.notPermitted, "the merchant token's card is \(card.2): it cannot pay")
        }
        let fresh = identifier(random.bytes(16))
        try db.execute(
            """
            INSERT INTO merchant_tokens (merchant_identifier, token_reference, identifier, created_at)
            VALUES (?, ?, ?, ?) ON CONFLICT (merchant_identifier, token_reference) DO NOTHING
            """, [.text(merchant), .text(tokenReference), .text(fresh), .milliseconds(now)])
        guard
            let kept = try db.queryFirst(
                "SELECT identifier FROM merchant_tokens WHERE merchant_identifier = ? AND token_reference = ?",
                [.text(merchant), .text(tokenReference)], { try $0.string(0) })
        else { throw PayServerError(.internalFailure, "the merchant token was not recorded") }
        return Minted(identifier: kept, suffix: card.0, description: card.1)
    }

    /// `MTK` and 26 characters of RFC 4648 base32 (A–Z, 2–7) of 16 random bytes: no run of digits a card number
    /// could be mistaken for.
    static func identifier(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        var text = "MTK"
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = (buffer << 8) | UInt32(byte)
            bits += 8
            while bits >= 5 {
                text.append(alphabet[Int((buffer >> UInt32(bits - 5)) & 31)])
                bits -= 5
            }
        }
        if bits > 0 { text.append(alphabet[Int((buffer << UInt32(5 - bits)) & 31)]) }
        return text
    }

    /// The payment data's `merchantTokenIdentifier` and `merchantTokenMetadata` members.
    static func members(_ minted: Minted) -> [(String, JSONValue)] {
        [
            ("merchantTokenIdentifier", .string(minted.identifier)),
            (
                "merchantTokenMetadata",
                .object([
                    ("cardArt", .array([])),
                    (
                        "cardMetadata",
                        .object([
                            ("fpanSuffix", .string(minted.suffix)),
                            ("longDescription", .string(minted.description)),
                            ("shortDescription", .string(minted.description)),
                        ])
                    ),
                ])
            ),
        ]
    }
}
