/// What kind of cryptogram a transaction carries; each kind is checked with its own key family.
public enum CryptogramKind: String, Hashable, Sendable, Codable {
    /// An EMV application cryptogram (ARQC) from a contactless transaction, under the proximity key.
    case proximityARQC
    /// A remote-payment cryptogram (in-app, web), under the remote key.
    case remote
}

/// A cryptogram as it arrived in an authorization. Its description, debug description and mirror show the kind
/// and counter only, never the cryptogram or the data it covers.
public struct CryptogramSubmission: Hashable, Sendable, Codable, CustomStringConvertible,
    CustomDebugStringConvertible, CustomReflectable
{
    public let kind: CryptogramKind
    /// The cryptogram itself (ARQC 9F26: 8 bytes; remote: the scheme's layout).
    public let cryptogram: [UInt8]
    /// The application transaction counter (9F36) the card used.
    public let applicationTransactionCounter: UInt16
    /// The data the cryptogram covers, in the form the verifier expects (for an ARQC: the DE 55 TLVs).
    /// Opaque to the token service: only the verifier parses it.
    public let transactionData: [UInt8]

    public init(
        kind: CryptogramKind, cryptogram: [UInt8], applicationTransactionCounter: UInt16, transactionData: [UInt8]
    ) {
        self.kind = kind
        self.cryptogram = cryptogram
        self.applicationTransactionCounter = applicationTransactionCounter
        self.transactionData = transactionData
    }

    public var description: String { "cryptogram \(kind.rawValue) ATC \(applicationTransactionCounter)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
