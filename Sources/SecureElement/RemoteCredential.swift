import CardBasics
import EMV
import Foundation
public import OrchardCrypto
import PaymentCredential

/// What the payment sheet asks the Secure Element to pay for in an app or on a website. Summary-item labels
/// and the raw applicationData are not part of it: only the hash of applicationData leaves the device.
public struct RemotePaymentRequest: Sendable, Hashable {
    /// The merchant ID the app is entitled to (or the web session's merchant).
    public let merchantIdentifier: String
    /// The app's identifier (in-app) or the page's domain (web).
    public let applicationIdentifier: String
    /// The total the user authorized.
    public let amount: PaymentAmount
    /// SHA-256 of the request's applicationData, when it has some.
    public let applicationDataHash: [UInt8]?
    /// A web payment's merchant session (its `merchantSessionIdentifier` and `nonce`), which the credential
    /// carries (version 2); nil in an app.
    public let merchantSessionIdentifier: String?
    public let merchantSessionNonce: String?

    public init(
        merchantIdentifier: String, applicationIdentifier: String, amount: PaymentAmount,
        applicationDataHash: [UInt8]?, merchantSessionIdentifier: String? = nil, merchantSessionNonce: String? = nil
    ) throws(SecureElementError) {
        guard (1...128).contains(merchantIdentifier.utf8.count), (1...255).contains(applicationIdentifier.utf8.count)
        else { throw SecureElementError(.invalidArgument, "the merchant ID or app ID is empty or too long") }
        guard applicationDataHash == nil || applicationDataHash?.count == 32 else {
            throw SecureElementError(.invalidArgument, "the applicationData hash is 32 bytes (SHA-256)")
        }
        self.merchantIdentifier = merchantIdentifier
        self.applicationIdentifier = applicationIdentifier
        self.amount = amount
        self.applicationDataHash = applicationDataHash
        guard (merchantSessionIdentifier == nil) == (merchantSessionNonce == nil) else {
            throw SecureElementError(.invalidArgument, "a merchant session has both an identifier and a nonce")
        }
        self.merchantSessionIdentifier = merchantSessionIdentifier
        self.merchantSessionNonce = merchantSessionNonce
    }
}

extension SecureElement {
    /// The ECI the credential carries: the device verified the cardholder, so the network's "fully
    /// authenticated" value for the channel (``CardNetwork/electronicCommerceIndicators``); nil for a network
    /// with no table entry.
    static func electronicCommerceIndicator(network: String, web: Bool) -> String? {
        CardNetwork(named: network)?.electronicCommerceIndicators.map { web ? $0.web : $0.inApp }
    }

    /// Computes the payment credential for an in-app or web payment, signed with this Secure Element's key
    /// and sealed to the Pay server's device-to-server key (docs/in-app.md).
    ///
    /// Guarantees: nothing is computed without an in-app or web authorization of the paired Secure Enclave
    /// for this card and exactly this amount (``authorizeRemote(_:card:amount:)``, which consumes it); the
    /// ATC is incremented and stored durably before the cryptogram is computed, from the card's one counter
    /// (shared with contactless, so the token service sees one increasing sequence); the cryptogram binds the
    /// amount, currency, nonce, merchant ID and ATC; the credential holds the DPAN only inside the envelope.
    ///
    /// - Parameters:
    ///   - nonce: the 32-byte nonce the Pay server issued to this device.
    ///   - payServerKey: the public key of the Pay server's `pki/pay-credential` certificate (the caller checks
    ///     that certificate chains to the Orchard root).
    /// - Returns: the sealed credential, for the Pay server's exchange endpoint.
    public func remotePaymentCredential(
        authorization: SignedEnclaveStatement, card: CardIdentifier, request: RemotePaymentRequest, nonce: [UInt8],
        payServerKey: P256.KeyAgreement.PublicKey
    ) throws(SecureElementError) -> [UInt8] {
        guard nonce.count == PaymentCredential.nonceByteCount else {
            throw SecureElementError(
                .invalidArgument, "a Pay server nonce is \(PaymentCredential.nonceByteCount) bytes")
        }
        let type = try authorizeRemote(authorization, card: card, amount: request.amount)
        // A web credential is bound to its merchant session; an in-app one has none.
        let session: PaymentCredential.MerchantSessionBinding?
        switch (type, request.merchantSessionIdentifier, request.merchantSessionNonce) {
        case (.web, let identifier?, let nonce?):
            do {
                session = try PaymentCredential.MerchantSessionBinding(identifier: identifier, nonce: nonce)
            } catch {
                throw SecureElementError(.invalidArgument, error.message)
            }
        case (.web, _, _):
            throw SecureElementError(.invalidArgument, "a web payment credential needs the page's merchant session")
        case (_, nil, nil): session = nil
        default:
            throw SecureElementError(.invalidArgument, "only a web payment credential carries a merchant session")
        }
        let material = try remoteCardMaterial(card)
        guard let eci = Self.electronicCommerceIndicator(network: material.network, web: type == .web) else {
            throw SecureElementError(
                .unsupportedNetwork, "no electronic commerce indicator for network \(material.network)")
        }
        let atc: UInt16
        do {
            guard let next = try material.atcStore.incrementATC() else {
                throw SecureElementError(.cardTerminated, "card \(card) has used its last transaction counter")
            }
            atc = next
        } catch let error as SecureElementError {
            throw error
        } catch {
            throw SecureElementError(.storageFailure, "the transaction counter of card \(card) could not be stored")
        }
        do throws(PaymentCredentialError) {
            // A web payment's merchant session names the merchant by its wire identifier, the hex SHA-256 of its
            // ID: the cryptogram binds those bytes, as it binds the hash of an app's merchant ID.
            let wireIdentifier =
                session != nil && request.merchantIdentifier.utf8.count == 64
                ? Hex.decode(request.merchantIdentifier) : nil
            let cryptogram =
                if let wireIdentifier, wireIdentifier.count == 32 {
                    try RemoteCryptogram.generate(
                        masterKey: material.remoteMasterKey, atc: atc, amount: request.amount.minorUnits,
                        currency: request.amount.currency, nonce: nonce, merchantIdentifierHash: wireIdentifier)
                } else {
                    try RemoteCryptogram.generate(
                        masterKey: material.remoteMasterKey, atc: atc, amount: request.amount.minorUnits,
                        currency: request.amount.currency, nonce: nonce, merchantIdentifier: request.merchantIdentifier)
                }
            let credential = try PaymentCredential(
                nonce: nonce, merchantIdentifier: request.merchantIdentifier,
                applicationIdentifier: request.applicationIdentifier, dpan: material.dpan,
                expiry: Self.expiryDate(material.expiry),
                cryptogram: cryptogram, eci: eci,
                amount: request.amount.minorUnits, currency: request.amount.currency,
                applicationDataHash: request.applicationDataHash, channel: type == .web ? .web : .inApp,
                merchantSession: session)
            return try SealedPaymentCredential.seal(
                credential, signingKey: material.signingKey, to: payServerKey, random: material.random)
        } catch {
            throw SecureElementError(.internalFailure, "the payment credential could not be made: \(error.message)")
        }
    }

    /// The public key this Secure Element signs credentials with (the key of its device certificate).
    public nonisolated var credentialSigningKey: P256.Signing.PublicKey {
        get throws(SecureElementError) {
            do {
                return try P256.Signing.PublicKey(x963Representation: publicKey.x963Representation)
            } catch {
                throw SecureElementError(.internalFailure, "the Secure Element key is not a valid signing key")
            }
        }
    }

    /// YYMM → YYMMDD with the month's last day (a card is valid through the end of its expiry month);
    /// YYMMDD is kept as it is.
    static func expiryDate(_ expiry: String) -> String {
        guard expiry.count == 4, let year = Int(expiry.prefix(2)), let month = Int(expiry.suffix(2)),
            (1...12).contains(month)
        else { return expiry }
        let fullYear = 2000 + year
        let leap = fullYear % 4 == 0 && (fullYear % 100 != 0 || fullYear % 400 == 0)
        let days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
        return expiry + String(days)
    }
}
