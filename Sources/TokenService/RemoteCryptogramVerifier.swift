public import CardBasics
import Foundation
import Issuer
public import NetworkAuthorizationAPI
public import OrchardCrypto
import PaymentCredential

/// The remote (in-app and web) cryptogram check: ``PaymentCredential/RemoteCryptogram`` under the card's
/// remote master key, which the HSM derives from the token range's remote issuer master key exactly as
/// provisioning derived the key it sent the Secure Element.
///
/// The submission carries the 20-byte cryptogram, its ATC, and as transaction data the 42-byte
/// ``RemoteTransactionData`` the acquirer built from the merchant's Apple-style merchant ID and the amount it
/// charges. The cryptogram verifies only for that merchant, amount, currency and ATC; the token service then
/// compares the amount and the merchant (the Apple merchant ID the acquirer vouches for) with the authorization
/// and keeps the ATC window (a second use or a stale ATC is
/// declined). Every failure here becomes response code `88` (``ResponseCode/cryptographicFailure``) with
/// reason `cryptogramInvalid`.
public struct RemoteCryptogramVerifier: TokenCryptogramVerifier {
    public var kind: CryptogramKind { .remote }

    public init() {}

    public func verify(
        _ submission: CryptogramSubmission, pan: PrimaryAccountNumber, panSequenceNumber: UInt8,
        cardMasterKey: SymmetricKey
    ) throws -> TokenCryptogramVerification {
        guard submission.kind == .remote else { return .invalid(reason: "not a remote cryptogram") }
        let cryptogram: RemoteCryptogram
        let data: RemoteTransactionData
        do {
            cryptogram = try RemoteCryptogram(bytes: submission.cryptogram)
            data = try RemoteTransactionData(encoded: submission.transactionData)
        } catch {
            return .invalid(reason: error.message)
        }
        guard cryptogram.keyIndex == RemoteCryptogram.defaultKeyIndex else {
            return .invalid(reason: "unknown remote key index \(cryptogram.keyIndex)")
        }
        guard cryptogram.atc == submission.applicationTransactionCounter else {
            return .invalid(reason: "the ATC differs from the one in the cryptogram")
        }
        guard
            (1...999).contains(data.currency),
            try cryptogram.verify(
                masterKey: cardMasterKey, amount: data.amount, currency: data.currency,
                merchantIdentifierHash: data.merchantIdentifierHash)
        else { return .invalid(reason: "the remote cryptogram's MAC does not verify") }
        guard let currency = Currency(numericCode: Int(data.currency)),
            // try?: an amount out of range is the invalid result below.
            let amount = try? Money(minorUnits: data.amount, currency: currency)
        else {
            return .invalid(reason: "the remote transaction data holds no usable amount")
        }
        return .valid(
            AuthenticatedTransaction(
                amount: amount, applicationTransactionCounter: cryptogram.atc,
                merchantIdentifierHash: data.merchantIdentifierHash))
    }
}
