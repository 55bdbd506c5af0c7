public import CardBasics
public import EMV
import Foundation
import Issuer
public import NetworkAuthorizationAPI
public import OrchardCrypto

/// The proximity ARQC check: the EMV module's issuer-side verifier behind the token service's
/// ``TokenCryptogramVerifier`` protocol, installed in the HSM.
///
/// The submission's transaction data is field 55 (the chip data objects the terminal sent). The EMV
/// verifier rebuilds the MAC input in the order the cryptogram version fixes and compares under the session
/// key from the card master key the HSM derived for the DPAN. This adapter also requires that the submitted
/// cryptogram and ATC are the ones inside field 55, and reports the amount (9F02) and currency (5F2A) the
/// cryptogram covers so the token service can compare them with the authorization. The ATC window is the
/// token service's (``ATCWindow``), so the EMV verifier's own last-seen check is not used here.
public struct EMVProximityCryptogramVerifier: TokenCryptogramVerifier {
    public var kind: CryptogramKind { .proximityARQC }
    private let verifier: EMV.CryptogramVerifier
    /// Whether a cryptogram must authenticate a performed CDCVM (the device verified the user).
    public let requiresCDCVM: Bool

    /// - Parameters:
    ///   - acceptedVersions: the cryptogram versions (CVNs) accepted.
    ///   - requiresCDCVM: refuse cryptograms whose MAC does not cover a performed CDCVM. A phone wallet
    ///     always verifies the user, so Orchard requires it.
    public init(acceptedVersions: [CryptogramVersion] = CryptogramVersion.all, requiresCDCVM: Bool = true) {
        verifier = EMV.CryptogramVerifier(acceptedVersions: acceptedVersions)
        self.requiresCDCVM = requiresCDCVM
    }

    public func verify(
        _ submission: CryptogramSubmission, pan: PrimaryAccountNumber, panSequenceNumber: UInt8,
        cardMasterKey: SymmetricKey
    ) throws -> TokenCryptogramVerification {
        let data = try ChipAuthorizationData(
            pan: pan.digits, panSequenceNumber: Int(panSequenceNumber), field55: submission.transactionData)
        guard data.atc == submission.applicationTransactionCounter else {
            return .invalid(reason: "the ATC differs from the one in field 55")
        }
        guard let inField55 = data.value(.applicationCryptogram), constantTimeEquals(inField55, submission.cryptogram)
        else { return .invalid(reason: "the cryptogram differs from the one in field 55") }
        switch try verifier.verify(data, masterKey: cardMasterKey, lastSeenATC: nil) {
        case .invalid(let rejection):
            return .invalid(reason: rejection.description)
        case .valid(let verified):
            if requiresCDCVM, verified.cdcvm?.performed != true {
                return .invalid(reason: "the cryptogram does not authenticate a performed CDCVM")
            }
            guard let amountBytes = data.value(.amountAuthorised),
                let minorUnits = EMVNumeric.value(ofNumeric: amountBytes), minorUnits <= UInt64(Int64.max),
                let currencyBytes = data.value(.transactionCurrencyCode),
                let currencyCode = EMVNumeric.value(ofNumeric: currencyBytes), currencyCode <= 999,
                let currency = Currency(numericCode: Int(currencyCode)),
                // try?: an amount out of range is the invalid result below.
                let amount = try? Money(minorUnits: Int64(minorUnits), currency: currency)
            else { return .invalid(reason: "field 55 lacks a usable amount (9F02) or currency (5F2A)") }
            return .valid(AuthenticatedTransaction(amount: amount, applicationTransactionCounter: verified.atc))
        }
    }
}
