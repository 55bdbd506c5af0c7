public import OrchardCrypto

/// The personalisation data of one payment application on a card: what a token service sends the Secure
/// Element at provisioning. Holds the card's master key, so it never prints its secrets: the description
/// shows the scheme and the last four digits only, and the mirror is empty.
public struct CardApplicationProfile: Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    /// The payment scheme whose kernel and cryptogram versions the application follows.
    public let scheme: PaymentScheme
    /// The application identifier (tag 4F / 84).
    public let aid: [UInt8]
    /// The application label (tag 50), ASCII.
    public let label: String
    /// The priority in the PPSE (tag 87; 1 is highest).
    public let priority: UInt8
    /// The PAN the card presents: for a device, the DPAN.
    public let pan: String
    /// The expiry month, `YYMM`.
    public let expiry: String
    /// The PAN sequence number (tag 5F34), 0 to 99.
    public let panSequenceNumber: Int
    /// The three-digit service code in the Track 2 equivalent data.
    public let serviceCode: String
    /// The card's master key for application cryptograms (MK-AC).
    public let masterKey: SymmetricKey
    /// The derivation key index in the IAD: which issuer master key the verifier should use.
    public let derivationKeyIndex: UInt8
    /// The cryptogram version (CVN) the card computes its application cryptograms with; it belongs to `scheme`.
    public let cryptogramVersion: CryptogramVersion
    /// The issuer's ISO 3166 numeric country code (tag 5F28).
    public let issuerCountryCode: Int
    /// Visa only: whether the IAD carries Orchard's issuer discretionary data with the CDCVM result.
    /// Off gives the plain 7-byte VIS IAD (as in vector V9), with no authenticated CDCVM.
    public let carriesCDCVMInIAD: Bool

    /// Checks the fields' form (digits, lengths, the CVN belonging to the scheme); not the PAN's Luhn digit.
    public init(
        scheme: PaymentScheme, pan: String, expiry: String, panSequenceNumber: Int = 0, masterKey: SymmetricKey,
        cryptogramVersion: CryptogramVersion? = nil, derivationKeyIndex: UInt8 = 0x01, serviceCode: String = "201",
        issuerCountryCode: Int = 840, aid: [UInt8]? = nil, label: String? = nil, priority: UInt8 = 1,
        carriesCDCVMInIAD: Bool = true
    ) throws(EMVError) {
        guard (12...19).contains(pan.utf8.count), pan.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw EMVError(.invalidArgument, "a PAN is 12 to 19 decimal digits")
        }
        guard expiry.utf8.count == 4, let month = Int(expiry.suffix(2)), Int(expiry.prefix(2)) != nil,
            (1...12).contains(month)
        else { throw EMVError(.invalidArgument, "the expiry is YYMM") }
        guard (0...99).contains(panSequenceNumber) else { throw EMVError(.invalidArgument, "the PSN is 0 to 99") }
        guard serviceCode.utf8.count == 3, serviceCode.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
            throw EMVError(.invalidArgument, "the service code is 3 digits")
        }
        guard masterKey.byteCount == 16 else { throw EMVError(.invalidArgument, "the master key is 16 bytes") }
        guard (0...999).contains(issuerCountryCode) else { throw EMVError(.invalidArgument, "bad issuer country code") }
        let version = cryptogramVersion ?? scheme.defaultCryptogramVersion
        guard version.scheme == scheme else {
            throw EMVError(.invalidArgument, "\(version) is not a \(scheme) cryptogram version")
        }
        let aid = aid ?? scheme.aid
        guard (5...16).contains(aid.count) else { throw EMVError(.invalidArgument, "an AID is 5 to 16 bytes") }
        let label = label ?? scheme.defaultApplicationLabel
        guard (1...16).contains(label.utf8.count), label.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) else {
            throw EMVError(.invalidArgument, "the label is 1 to 16 printable ASCII characters")
        }
        guard (1...15).contains(priority) else { throw EMVError(.invalidArgument, "the priority is 1 to 15") }
        self.scheme = scheme
        self.pan = pan
        self.expiry = expiry
        self.panSequenceNumber = panSequenceNumber
        self.masterKey = masterKey
        self.cryptogramVersion = version
        self.derivationKeyIndex = derivationKeyIndex
        self.serviceCode = serviceCode
        self.issuerCountryCode = issuerCountryCode
        self.aid = aid
        self.label = label
        self.priority = priority
        self.carriesCDCVMInIAD = carriesCDCVMInIAD
    }

    /// Track 2 equivalent data (tag 57): PAN, `D`, YYMM, service code, zero discretionary data up to
    /// 37 digits, and an `F` nibble to a whole byte.
    public var track2EquivalentData: [UInt8] {
        var nibbles = pan.utf8.map { $0 - 0x30 } + [0x0D]
        nibbles += expiry.utf8.map { $0 - 0x30 } + serviceCode.utf8.map { $0 - 0x30 }
        nibbles += [UInt8](repeating: 0, count: max(0, 37 - nibbles.count))
        if nibbles.count % 2 == 1 { nibbles.append(0x0F) }
        return stride(from: 0, to: nibbles.count, by: 2).map { nibbles[$0] << 4 | nibbles[$0 + 1] }
    }

    /// The expiry date (tag 5F24, YYMMDD): the last day of the expiry month.
    var expirationDate: [UInt8] {
        let year = Int(expiry.prefix(2)) ?? 0
        let month = Int(expiry.suffix(2)) ?? 1
        let days = [31, year % 4 == 0 ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][max(0, min(11, month - 1))]
        return [
            UInt8(year / 10) << 4 | UInt8(year % 10), UInt8(month / 10) << 4 | UInt8(month % 10),
            UInt8(days / 10) << 4 | UInt8(days % 10),
        ]
    }

    public var description: String { "CardApplicationProfile(\(scheme), …\(pan.suffix(4)), key redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
