import Foundation

/// Apple Pay's payment token: the `PKPaymentToken` wrapper a device or browser hands the merchant
/// (`paymentData`, `paymentMethod`, `transactionIdentifier`), or a bare `paymentData` object.
///
/// Parsing is strict (``StrictJSONParser``): duplicate keys, unknown keys, non-standard base64, wrong hex and
/// sizes beyond the limits (token 64 KiB, signature 16 KiB, data 32 KiB, depth 16) are rejected before any
/// cryptography runs.
public struct PaymentToken: Sendable, Equatable {
    /// The encrypted payment data, its header and Apple's signature.
    public var paymentData: PaymentData
    /// The card the user chose (display data only); absent in a bare `paymentData`.
    public var paymentMethod: PaymentMethod?
    /// Equal to `header.transactionId` up to case (Apple writes it in upper case).
    public var transactionIdentifier: String?

    /// A token from its parts (a bare `paymentData` has no method and no transaction identifier).
    public init(paymentData: PaymentData, paymentMethod: PaymentMethod?, transactionIdentifier: String?) {
        self.paymentData = paymentData
        self.paymentMethod = paymentMethod
        self.transactionIdentifier = transactionIdentifier
    }

    /// Parses a wrapper or a bare `paymentData` object. `paymentData` inside a wrapper may be an object (web)
    /// or a base64 string of its JSON (PassKit's `Data`).
    public init(jsonBytes: some Collection<UInt8>) throws(PaymentTokenError) {
        let root = try StrictJSONParser.parse(jsonBytes, limits: .paymentToken)
        guard case .object(let members) = root else {
            throw PaymentTokenError(.malformedJSON, "a payment token is a JSON object")
        }
        let keys = Set(members.map(\.0))
        if keys.contains("paymentData") {
            try Fields.exact(
                members, required: ["paymentData"], optional: ["paymentMethod", "transactionIdentifier"], in: "token")
            switch root["paymentData"]! {
            case .object:
                paymentData = try PaymentData(json: root["paymentData"]!)
            case .string(let base64):
                guard let bytes = StrictEncoding.base64Decode(base64) else {
                    throw PaymentTokenError(.invalidField, "paymentData is neither an object nor standard base64")
                }
                paymentData = try PaymentData(json: StrictJSONParser.parse(bytes, limits: .paymentToken))
            default:
                throw PaymentTokenError(.invalidField, "paymentData must be an object")
            }
            paymentMethod = try root["paymentMethod"].map { v throws(PaymentTokenError) in try PaymentMethod(json: v) }
            if let id = root["transactionIdentifier"] {
                guard let s = id.stringValue, StrictEncoding.hexDecode(s) != nil else {
                    throw PaymentTokenError(.invalidField, "transactionIdentifier must be a hex string")
                }
                guard s.lowercased() == paymentData.header.transactionIdHex.lowercased() else {
                    throw PaymentTokenError(.invalidField, "transactionIdentifier differs from header.transactionId")
                }
                transactionIdentifier = s
            } else {
                transactionIdentifier = nil
            }
        } else {
            paymentData = try PaymentData(json: root)
            paymentMethod = nil
            transactionIdentifier = nil
        }
    }

    /// The JSON of the wrapper (or of the bare `paymentData` when there is no wrapper data).
    public var json: JSONValue {
        guard paymentMethod != nil || transactionIdentifier != nil else { return paymentData.json }
        var members: [(String, JSONValue)] = [("paymentData", paymentData.json)]
        if let paymentMethod { members.append(("paymentMethod", paymentMethod.json)) }
        if let transactionIdentifier { members.append(("transactionIdentifier", .string(transactionIdentifier))) }
        return .object(members)
    }

    public static func == (a: Self, b: Self) -> Bool { a.json == b.json }
}

/// The card the user chose, as the merchant may see it: display name, network and type.
public struct PaymentMethod: Sendable, Equatable {
    /// The card's display name (e.g. "Visa 1234"), empty when absent.
    public var displayName: String
    /// The card's network (e.g. "Visa"), empty when absent.
    public var network: String
    /// debit, credit, prepaid, store or eMoney.
    public var type: String

    /// A payment method from its display fields.
    public init(displayName: String, network: String, type: String) {
        self.displayName = displayName
        self.network = network
        self.type = type
    }

    init(json: JSONValue) throws(PaymentTokenError) {
        guard case .object(let members) = json else {
            throw PaymentTokenError(.invalidField, "paymentMethod must be an object")
        }
        try Fields.exact(
            members, required: [], optional: ["displayName", "network", "type", "paymentPass"], in: "paymentMethod")
        displayName = try Fields.string(json, "displayName", in: "paymentMethod", required: false) ?? ""
        network = try Fields.string(json, "network", in: "paymentMethod", required: false) ?? ""
        type = try Fields.string(json, "type", in: "paymentMethod", required: false) ?? ""
    }

    /// The `paymentMethod` object, members in Apple's order.
    public var json: JSONValue {
        .object([("displayName", .string(displayName)), ("network", .string(network)), ("type", .string(type))])
    }
}

/// `paymentData`: the encrypted payment data, its header and Apple's detached CMS signature.
public struct PaymentData: Sendable, Equatable {
    /// The token format: which key agreement and cipher protect `data`.
    public enum Version: String, Sendable {
        /// Elliptic-curve: ephemeral P-256 ECDH, the single-step KDF, AES-256-GCM.
        case ecV1 = "EC_v1"
        /// RSA: a 16-byte key wrapped with RSA-OAEP (SHA-256, MGF1-SHA-256), AES-128-GCM.
        case rsaV1 = "RSA_v1"
    }

    /// The largest `data` accepted, in bytes.
    public static let maxDataBytes = 32 * 1024
    /// The largest `signature` accepted, in bytes.
    public static let maxSignatureBytes = 16 * 1024

    /// The token format; it matches the header's key material.
    public var version: Version
    /// Ciphertext ‖ 16-byte GCM tag.
    public var data: [UInt8]
    /// CMS SignedData (BER or DER), detached.
    public var signature: [UInt8]
    /// The header: key material, key hash, transaction id and application data hash.
    public var header: Header

    /// Payment data from its parts; nothing is checked until it is verified or decrypted.
    public init(version: Version, data: [UInt8], signature: [UInt8], header: Header) {
        self.version = version
        self.data = data
        self.signature = signature
        self.header = header
    }

    /// Validates a parsed `paymentData` object: exact keys, standard base64, sizes within the limits, a header matching
    /// the version.
    public init(json: JSONValue) throws(PaymentTokenError) {
        guard case .object(let members) = json else {
            throw PaymentTokenError(.malformedJSON, "paymentData must be an object")
        }
        try Fields.exact(
            members, required: ["version", "data", "signature", "header"], optional: [], in: "paymentData")
        let versionText = try Fields.string(json, "version", in: "paymentData")!
        guard let version = Version(rawValue: versionText) else {
            throw PaymentTokenError(
                .unsupportedVersion, "version must be EC_v1 or RSA_v1, not \"\(versionText.prefix(16))\"")
        }
        self.version = version
        data = try Fields.base64(json, "data", in: "paymentData", maxBytes: Self.maxDataBytes)
        guard data.count >= 16 else { throw PaymentTokenError(.invalidField, "data is shorter than its 16-byte tag") }
        signature = try Fields.base64(json, "signature", in: "paymentData", maxBytes: Self.maxSignatureBytes)
        guard !signature.isEmpty else { throw PaymentTokenError(.invalidField, "signature is empty") }
        header = try Header(json: json["header"]!, version: version)
    }

    /// The `paymentData` object, members in Apple's order.
    public var json: JSONValue {
        .object([
            ("version", .string(version.rawValue)),
            ("data", .string(StrictEncoding.base64Encode(data))),
            ("signature", .string(StrictEncoding.base64Encode(signature))),
            ("header", header.json),
        ])
    }

    /// The bytes Apple's signature covers: ephemeralPublicKey (or wrappedKey) ‖ data ‖ transactionId ‖
    /// applicationData, the first two base64-decoded, the last two hex-decoded.
    public var signedBytes: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(
            header.keyMaterialBytes.count + data.count + header.transactionId.count
                + (header.applicationData?.count ?? 0))
        bytes += header.keyMaterialBytes
        bytes += data
        bytes += header.transactionId
        if let applicationData = header.applicationData { bytes += applicationData }
        return bytes
    }
}

/// The `header` of `paymentData`.
public struct Header: Sendable, Equatable {
    /// What carries the symmetric key: an ephemeral P-256 public key (EC_v1) or an RSA-wrapped key (RSA_v1).
    public enum KeyMaterial: Sendable, Equatable {
        /// DER SubjectPublicKeyInfo of the ephemeral P-256 key.
        case ephemeralPublicKey([UInt8])
        /// RSA-OAEP ciphertext of the 16-byte AES key.
        case wrappedKey([UInt8])
    }

    /// The ephemeral public key (EC_v1) or the wrapped key (RSA_v1).
    public var keyMaterial: KeyMaterial
    /// SHA-256 of the merchant payment processing certificate's SubjectPublicKeyInfo (32 bytes).
    public var publicKeyHash: [UInt8]
    /// The transaction id as bytes (hex-decoded; 32 bytes in Apple's tokens).
    public var transactionId: [UInt8]
    /// SHA-256 of the merchant's applicationData (hex-decoded), when the request had some.
    public var applicationData: [UInt8]?

    /// A header from its parts.
    public init(keyMaterial: KeyMaterial, publicKeyHash: [UInt8], transactionId: [UInt8], applicationData: [UInt8]?) {
        self.keyMaterial = keyMaterial
        self.publicKeyHash = publicKeyHash
        self.transactionId = transactionId
        self.applicationData = applicationData
    }

    init(json: JSONValue, version: PaymentData.Version) throws(PaymentTokenError) {
        guard case .object(let members) = json else {
            throw PaymentTokenError(.invalidField, "header must be an object")
        }
        let keyName = version == .ecV1 ? "ephemeralPublicKey" : "wrappedKey"
        try Fields.exact(
            members, required: [keyName, "publicKeyHash", "transactionId"], optional: ["applicationData"],
            in: "header (\(version.rawValue))")
        let key = try Fields.base64(json, keyName, in: "header", maxBytes: 1024)
        keyMaterial = version == .ecV1 ? .ephemeralPublicKey(key) : .wrappedKey(key)
        publicKeyHash = try Fields.base64(json, "publicKeyHash", in: "header", maxBytes: 64)
        guard publicKeyHash.count == 32 else {
            throw PaymentTokenError(.invalidField, "publicKeyHash must be 32 bytes")
        }
        transactionId = try Fields.hex(json, "transactionId", in: "header", maxBytes: 64)
        guard !transactionId.isEmpty else { throw PaymentTokenError(.invalidField, "transactionId is empty") }
        if json["applicationData"] != nil {
            let hash = try Fields.hex(json, "applicationData", in: "header", maxBytes: 64)
            guard hash.count == 32 else {
                throw PaymentTokenError(.invalidField, "applicationData must be a 32-byte SHA-256 in hex")
            }
            applicationData = hash
        } else {
            applicationData = nil
        }
    }

    /// The token format the key material implies: EC_v1 for an ephemeral key, RSA_v1 for a wrapped key.
    public var version: PaymentData.Version {
        if case .ephemeralPublicKey = keyMaterial { return .ecV1 }
        return .rsaV1
    }

    /// The ephemeral key's or the wrapped key's bytes.
    public var keyMaterialBytes: [UInt8] {
        switch keyMaterial {
        case .ephemeralPublicKey(let b), .wrappedKey(let b): b
        }
    }

    /// Lower-case hex of ``transactionId``.
    public var transactionIdHex: String { StrictEncoding.hexEncode(transactionId) }

    /// The `header` object, members in Apple's order.
    public var json: JSONValue {
        var members: [(String, JSONValue)] = []
        if let applicationData {
            members.append(("applicationData", .string(StrictEncoding.hexEncode(applicationData))))
        }
        switch keyMaterial {
        case .ephemeralPublicKey(let b): members.append(("ephemeralPublicKey", .string(StrictEncoding.base64Encode(b))))
        case .wrappedKey(let b): members.append(("wrappedKey", .string(StrictEncoding.base64Encode(b))))
        }
        members.append(("publicKeyHash", .string(StrictEncoding.base64Encode(publicKeyHash))))
        members.append(("transactionId", .string(transactionIdHex)))
        return .object(members)
    }
}

/// Field access with exact field sets and strict encodings.
enum Fields {
    /// Every member is in `required` or `optional`, and every `required` key is present. Plain arrays, not
    /// sets: the lists are short, and building sets cost more than the scans on every token.
    static func exact(
        _ members: [(String, JSONValue)], required: [String], optional: [String], in context: String
    ) throws(PaymentTokenError) {
        precondition(required.count <= 64, "Fields.exact takes at most 64 required keys")
        var found: UInt64 = 0
        for (key, _) in members {
            if let i = required.firstIndex(of: key) {
                found |= 1 << UInt64(i)
            } else if !optional.contains(key) {
                throw PaymentTokenError(.unknownField, "unknown key \"\(key.prefix(40))\" in \(context)")
            }
        }
        let all: UInt64 = required.count == 64 ? .max : (1 << UInt64(required.count)) - 1
        guard found != all else { return }
        for key in required.sorted() where !members.contains(where: { $0.0 == key }) {
            throw PaymentTokenError(.missingField, "\(context) lacks \"\(key)\"")
        }
    }

    static func string(
        _ json: JSONValue, _ key: String, in context: String, required: Bool = true
    )
        throws(PaymentTokenError) -> String?
    {
        guard let value = json[key] else {
            if required { throw PaymentTokenError(.missingField, "\(context) lacks \"\(key)\"") }
            return nil
        }
        guard let s = value.stringValue else {
            throw PaymentTokenError(.invalidField, "\(context).\(key) must be a string")
        }
        return s
    }

    /// A member's value that must be a string.
    static func memberString(_ value: JSONValue, _ key: String, in context: String) throws(PaymentTokenError) -> String
    {
        guard case .string(let s) = value else {
            throw PaymentTokenError(.invalidField, "\(context).\(key) must be a string")
        }
        return s
    }

    static func base64(
        _ json: JSONValue, _ key: String, in context: String, maxBytes: Int
    ) throws(PaymentTokenError)
        -> [UInt8]
    {
        let text = try string(json, key, in: context)!
        guard text.utf8.count <= (maxBytes + 2) / 3 * 4 else {
            throw PaymentTokenError(.invalidField, "\(context).\(key) is longer than \(maxBytes) bytes")
        }
        guard let bytes = StrictEncoding.base64Decode(text) else {
            throw PaymentTokenError(.invalidField, "\(context).\(key) is not standard base64")
        }
        return bytes
    }

    static func hex(
        _ json: JSONValue, _ key: String, in context: String, maxBytes: Int
    ) throws(PaymentTokenError)
        -> [UInt8]
    {
        let text = try string(json, key, in: context)!
        guard text.utf8.count <= maxBytes * 2, let bytes = StrictEncoding.hexDecode(text) else {
            throw PaymentTokenError(.invalidField, "\(context).\(key) is not hex of at most \(maxBytes) bytes")
        }
        return bytes
    }
}
