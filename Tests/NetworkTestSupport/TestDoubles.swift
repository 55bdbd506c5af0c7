public import CardBasics
import Foundation
public import Issuer
public import NetworkAuthorizationAPI
public import OrchardCrypto
public import TokenService

/// A TEST DOUBLE for the EMV cryptogram check, until the EMV module's issuer-side verifier is on main.
///
/// It is not EMV: the "cryptogram" is the first 8 bytes of HMAC-SHA256 under the card master key over a
/// label, the kind and the transaction data, and the transaction data is this double's own layout:
/// amount (8 bytes, big-endian minor units) ‖ currency (3 ASCII digits) ‖ unpredictable number (4 bytes) ‖
/// ATC (2 bytes, big-endian). It does depend on the right card master key, so tests of key separation,
/// replay and amount binding are meaningful through it.
public struct TestDoubleCryptogramVerifier: TokenCryptogramVerifier {
    public let kind: CryptogramKind

    public init(kind: CryptogramKind) { self.kind = kind }

    public func verify(
        _ submission: CryptogramSubmission, pan: PrimaryAccountNumber, panSequenceNumber: UInt8,
        cardMasterKey: SymmetricKey
    ) throws -> TokenCryptogramVerification {
        let data = submission.transactionData
        guard data.count == 17 else { throw TestDoubleError("the test double's transaction data is 17 bytes") }
        guard submission.kind == kind else { return .invalid(reason: "wrong kind") }
        let expected = Self.cryptogram(kind: kind, transactionData: data, cardMasterKey: cardMasterKey)
        guard constantTimeEquals(expected, submission.cryptogram) else { return .invalid(reason: "MAC mismatch") }
        let minor = data[0..<8].reduce(Int64(0)) { $0 << 8 | Int64($1) }
        let atc = UInt16(data[15]) << 8 | UInt16(data[16])
        guard
            let amount = try? Money(
                minorUnits: minor, currency: Currency(String(decoding: data[8..<11], as: UTF8.self)))
        else {
            return .invalid(reason: "bad amount")
        }
        return .valid(AuthenticatedTransaction(amount: amount, applicationTransactionCounter: atc))
    }

    /// What the simulated card computes.
    public static func cryptogram(
        kind: CryptogramKind, transactionData: [UInt8], cardMasterKey: SymmetricKey
    )
        -> [UInt8]
    {
        let input = Array("orchard-test-double-cryptogram".utf8) + Array(kind.rawValue.utf8) + transactionData
        return Array(HMAC<SHA256>.authenticationCode(for: input, using: cardMasterKey).prefix(8))
    }

    /// The double's transaction data layout.
    public static func transactionData(amount: Money, unpredictableNumber: [UInt8], atc: UInt16) -> [UInt8] {
        var out: [UInt8] = []
        withUnsafeBytes(of: amount.minorUnits.bigEndian) { out.append(contentsOf: $0) }
        out += Array(amount.currency.numericString.utf8) + unpredictableNumber.prefix(4)
        out += [UInt8(atc >> 8), UInt8(atc & 0xFF)]
        return out
    }
}

/// A TEST DOUBLE for the device-CA certificate check (the real one is `DeviceCAKeyVerifier` in
/// NetworkServer): the "chain" is one element, the SE key's DER SubjectPublicKeyInfo, and it verifies only
/// if that key was registered for the device (as the device CA would have certified it).
public final class TestDoubleDeviceKeyVerifier: DeviceKeyVerifier, @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLock()
    private var registered: [String: [UInt8]] = [:]

    public init() {}

    /// Records that the device CA certified `key` for the device `deviceID`.
    public func register(_ key: P256.KeyAgreement.PublicKey, deviceID: String) {
        lock.withLock { registered[deviceID] = key.derRepresentation }
    }

    public func verifiedSecureElementKey(
        certificateChain: [[UInt8]], deviceID: String
    ) throws
        -> P256.KeyAgreement.PublicKey
    {
        guard certificateChain.count == 1, let expected = lock.withLock({ registered[deviceID] }),
            certificateChain[0] == expected
        else { throw TestDoubleError("the SE key is not certified for this device") }
        return try P256.KeyAgreement.PublicKey(derRepresentation: expected)
    }
}

/// An issuer host that always fails (the issuer unreachable).
public struct UnreachableIssuer: IssuerHost {
    public let issuerID: String
    public init(issuerID: String) { self.issuerID = issuerID }
    public func checkCard(_ request: CardCheckRequest) async throws -> CardCheckDecision {
        throw TestDoubleError("unreachable")
    }
    public func verifyOneTimeCode(reference: String, code: String) async throws -> CardCheckDecision {
        throw TestDoubleError("unreachable")
    }
    public func authorize(_ request: IssuerAuthorizationRequest) async throws -> IssuerAuthorizationResponse {
        throw TestDoubleError("unreachable")
    }
}

public struct TestDoubleError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
