public import CardBasics
import Issuer
public import OrchardCrypto
public import PaymentCredential

// The plaintexts inside envelopes are `PaymentCredential`'s formats, which the device side writes and reads
// too; these convert them to and from the network's card types.

extension CardDataPayload {
    /// The card data a wallet seals, from the network's card types (simulations and tests; a wallet builds it
    /// from what the user typed).
    public init(
        pan: PrimaryAccountNumber, expiry: CardExpiry, cardVerificationValue: CardVerificationValue,
        cardholderName: String
    ) throws(TokenServiceError) {
        do {
            try self.init(
                cardNumber: SecretTLV.text(pan.digits), expiry: expiry.yymm,
                verificationValue: cardVerificationValue.value, cardholderName: cardholderName)
        } catch {
            throw TokenServiceError(.invalidRequest, "the card data is malformed: \(error.message)")
        }
    }

    /// The token service's reading of an opened card-data envelope, in the network's card types; anything
    /// malformed, a number failing its check digit included, is ``TokenServiceError/Code/invalidRequest``.
    public static func open(
        _ plaintext: SecureBytes
    ) throws(TokenServiceError) -> (
        pan: PrimaryAccountNumber, expiry: CardExpiry, cardVerificationValue: CardVerificationValue,
        cardholderName: String
    ) {
        do {
            let card = try CardDataPayload(decoding: plaintext)
            return (
                try PrimaryAccountNumber(card.cardNumber.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }),
                try CardExpiry(yymm: card.expiry),
                try CardVerificationValue(
                    card.verificationValue.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }),
                card.cardholderName
            )
        } catch let error as PaymentCredentialError {
            throw TokenServiceError(.invalidRequest, "the card data is malformed: \(error.message)")
        } catch let error as IssuerError {
            throw TokenServiceError(.invalidRequest, "the card data is malformed: \(error.message)")
        } catch {
            throw TokenServiceError(.invalidRequest, "the card data is malformed")
        }
    }
}

extension PersonalisationData {
    /// What the HSM seals for `token`, with the card master keys it derived.
    init(
        _ token: PersonalisationTemplate, proximityMasterKey: SymmetricKey, remoteMasterKey: SymmetricKey
    ) throws(TokenServiceError) {
        do {
            try self.init(
                tokenReference: token.tokenReference, dpan: SecretTLV.text(token.dpan.digits),
                panSequenceNumber: token.panSequenceNumber, expiry: token.tokenExpiry.yymm,
                network: token.network.name, proximityMasterKey: proximityMasterKey, remoteMasterKey: remoteMasterKey)
        } catch {
            throw TokenServiceError(.invalidRequest, "the personalisation data is malformed: \(error.message)")
        }
    }

    /// The plaintext to seal.
    func plaintext() throws(TokenServiceError) -> SecureBytes {
        do {
            return try encoded()
        } catch {
            throw TokenServiceError(.cryptoFailure, "encoding the personalisation data failed: \(error.message)")
        }
    }
}

extension SecretTLV {
    /// Encodes, with the token service's error.
    static func encoding(_ items: [(tag: UInt8, value: SecureBytes)]) throws(TokenServiceError) -> SecureBytes {
        do {
            return try encode(items)
        } catch {
            throw TokenServiceError(.cryptoFailure, "encoding a sealed payload failed: \(error.message)")
        }
    }

}
