import Foundation
import OrchardCrypto
import OrchardFixtures
import OrchardX509
import Testing

/// A real Apple Pay token from `Tests/Fixtures/apple-pay`, with the bytes its CMS signature covers.
struct AppleToken {
    let name: String
    let signature: [UInt8]
    /// ephemeralPublicKey (or wrappedKey) ‖ data ‖ transactionId ‖ applicationData, as the README says.
    let content: [UInt8]
    let signingTime: Date
    let leafCommonName: String
    let publicKeyHash: [UInt8]
    let isRSA: Bool

    static let names = ["gala-2015", "gala-2023", "basis-rsa"]

    static func load(_ name: String) throws -> AppleToken {
        let json = try #require(
            try JSONSerialization.jsonObject(with: Fixtures.data("apple-pay/\(name)/token.json")) as? [String: Any])
        let paymentData = (json["paymentData"] as? [String: Any]) ?? json
        let header = try #require(paymentData["header"] as? [String: String])
        func base64(_ s: String?) throws -> [UInt8] {
            let text = try #require(s)
            return Array(try #require(Data(base64Encoded: text)))
        }
        func hex(_ s: String) throws -> [UInt8] {
            var out: [UInt8] = []
            var chars = Array(s.utf8)
            if chars.count % 2 == 1 { chars.insert(UInt8(ascii: "0"), at: 0) }
            for i in stride(from: 0, to: chars.count, by: 2) {
                out.append(try #require(UInt8(String(decoding: chars[i...i + 1], as: UTF8.self), radix: 16)))
            }
            return out
        }
        let isRSA = header["wrappedKey"] != nil
        var content = try base64(header["ephemeralPublicKey"] ?? header["wrappedKey"])
        content += try base64(paymentData["data"] as? String)
        content += try hex(try #require(header["transactionId"]))
        if let applicationData = header["applicationData"] { content += try hex(applicationData) }

        let expected = try #require(
            try JSONSerialization.jsonObject(with: Fixtures.data("apple-pay/expected.json")) as? [String: [String: Any]]
        )
        let entry = try #require(expected[name])
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ssXXXXX"
        let signingText = try #require(entry["signing_time"] as? String)
        let signingTime = try #require(formatter.date(from: signingText))
        return AppleToken(
            name: name, signature: try base64(paymentData["signature"] as? String), content: content,
            signingTime: signingTime, leafCommonName: try #require(entry["leaf"] as? String),
            publicKeyHash: try base64(header["publicKeyHash"]), isRSA: isRSA)
    }

    static func appleRoot() throws -> Certificate {
        try Certificate(pemEncoded: Fixtures.string("apple-pay/AppleRootCA-G3.pem"))
    }
}

/// A small Apple-shaped PKI made in code: root → integration CA (marker 6.2.14) → signing leaf (marker 6.29).
struct TestPKI {
    let rootKey: CertificatePrivateKey
    let root: Certificate
    let intermediateKey: CertificatePrivateKey
    let intermediate: Certificate
    let leafKey: CertificatePrivateKey
    let leaf: Certificate

    /// 2021-01-01 … 2030-01-01 for the leaf; the CAs cover 2020 … 2040.
    static let leafStart = date(2021, 1, 1)
    static let leafEnd = date(2030, 1, 1)
    static let inside = date(2024, 6, 1)

    init(
        name: String = "Orchard Test", leafMarker: Bool = true, intermediateMarker: Bool = true,
        rsaLeaf: RSA.PrivateKey? = nil
    )
        throws
    {
        let random = InsecureDeterministicRandom(seed: Array(name.utf8))
        rootKey = CertificatePrivateKey(try P256.Signing.PrivateKey())
        root = try Certificate.issue(
            subject: DistinguishedName([.commonName("\(name) Root CA"), .organization("Orchard"), .country("US")]),
            publicKey: rootKey.publicKey, issuer: .selfSigned(rootKey), notValidBefore: Self.date(2020, 1, 1),
            notValidAfter: Self.date(2040, 1, 1),
            extensions: [.basicConstraints(isCA: true), .keyUsage([.keyCertSign, .cRLSign])], random: random)
        intermediateKey = CertificatePrivateKey(try P256.Signing.PrivateKey())
        var caExtensions: [Certificate.Extension] = [
            .basicConstraints(isCA: true, pathLength: 0), .keyUsage([.keyCertSign, .cRLSign]),
        ]
        if intermediateMarker { caExtensions.append(.appleApplicationIntegrationCAMarker) }
        intermediate = try Certificate.issue(
            subject: DistinguishedName([.commonName("\(name) Application Integration CA"), .organization("Orchard")]),
            publicKey: intermediateKey.publicKey, issuer: .certificate(root, key: rootKey),
            notValidBefore: Self.date(2020, 1, 1), notValidAfter: Self.date(2040, 1, 1), extensions: caExtensions,
            random: random)
        if let rsaLeaf {
            leafKey = CertificatePrivateKey(rsaLeaf)
        } else {
            leafKey = CertificatePrivateKey(try P256.Signing.PrivateKey())
        }
        var leafExtensions: [Certificate.Extension] = [.basicConstraints(isCA: false), .keyUsage([.digitalSignature])]
        if leafMarker { leafExtensions.append(.appleTokenSigningLeafMarker) }
        leaf = try Certificate.issue(
            subject: DistinguishedName([.commonName("ecc-smp-broker-sign_UC4-TEST"), .organization("Orchard")]),
            publicKey: leafKey.publicKey, issuer: .certificate(intermediate, key: intermediateKey),
            notValidBefore: Self.leafStart, notValidAfter: Self.leafEnd, extensions: leafExtensions, random: random)
    }

    static func date(_ year: Int, _ month: Int, _ day: Int) -> Date {
        var components = DateComponents()
        components.year = year
        components.month = month
        components.day = day
        components.timeZone = TimeZone(identifier: "UTC")
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar.date(from: components)!
    }
}

/// What a verification did with some input: accepted it, rejected it as a value, or threw.
enum Outcome: Equatable {
    case valid
    case invalid(VerificationFailure.Code)
    case malformed(X509Error.Code)
    /// Not an X509Error: always a defect.
    case otherError(String)
}

func outcome(_ body: () throws -> CMSVerificationResult) -> Outcome {
    do {
        switch try body() {
        case .valid: return .valid
        case .invalid(let failure): return .invalid(failure.code)
        }
    } catch let error as X509Error {
        return .malformed(error.code)
    } catch {
        return .otherError("\(error)")
    }
}

func bytes(_ hex: String) -> [UInt8] {
    let clean = hex.filter { !$0.isWhitespace }
    var out: [UInt8] = []
    var index = clean.startIndex
    while index < clean.endIndex {
        let next = clean.index(index, offsetBy: 2)
        out.append(UInt8(clean[index..<next], radix: 16)!)
        index = next
    }
    return out
}

/// Takes a DER SignedData apart into its encoded fields and puts it back together, so tests can build
/// well-formed signatures with one thing changed (fields no signature covers).
struct SignedDataParts {
    var version: [UInt8]
    var digestAlgorithms: [UInt8]
    var encapContentInfo: [UInt8]
    var certificates: [UInt8]?
    /// Each SignerInfo as its fields: version, sid, digestAlgorithm, signedAttrs, signatureAlgorithm, signature.
    var signers: [[[UInt8]]]

    init(der: [UInt8]) throws {
        let contentInfo = try ASN1.parse(der)
        let signedData = try contentInfo.childElements()[1].childElements()[0]
        let fields = try signedData.childElements()
        version = Array(fields[0].encodedBytes)
        digestAlgorithms = Array(fields[1].encodedBytes)
        encapContentInfo = Array(fields[2].encodedBytes)
        certificates = fields.count == 5 ? Array(fields[3].encodedBytes) : nil
        signers = try fields[fields.count - 1].childElements().map {
            try $0.childElements().map { Array($0.encodedBytes) }
        }
    }

    var der: [UInt8] {
        DERWriter.encode { w in
            w.appendConstructed(.sequence) { w in
                w.appendObjectIdentifier(.cmsSignedData)
                w.appendConstructed(.contextSpecific(0, constructed: true)) { w in
                    w.appendConstructed(.sequence) { w in
                        for field in [version, digestAlgorithms, encapContentInfo] { w.appendEncoded(field) }
                        if let certificates { w.appendEncoded(certificates) }
                        w.appendConstructed(.set) { w in
                            for signer in signers {
                                w.appendConstructed(.sequence) { w in for f in signer { w.appendEncoded(f) } }
                            }
                        }
                    }
                }
            }
        }
    }

    static func algorithm(_ oid: ASN1ObjectIdentifier) -> [UInt8] {
        DERWriter.encode { w in w.appendConstructed(.sequence) { $0.appendObjectIdentifier(oid) } }
    }
}
