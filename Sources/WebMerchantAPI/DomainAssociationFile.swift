import OrchardCrypto

/// A domain-association file as Apple issues it (notes/apple-pay-web.md §3): the upper-case ASCII hex of the
/// JSON object `{"createdOn":<ms>,"pspId":"<merchant hash>","signature":"<lowercase hex CMS>","version":1}`.
///
/// The signature is a detached CMS SignedData by the token-signing leaf over ``signedContent``: the same object
/// without its `signature` member, keys sorted, no whitespace. Orchard writes and accepts only that canonical
/// form (keys sorted, no whitespace, no other member), so a file has exactly one byte representation and the
/// signed bytes follow from it. Verifying the CMS is the Pay server's job; this type only parses and encodes.
public struct DomainAssociationFile: Sendable, Hashable {
    /// The format version Orchard writes and reads.
    public static let currentVersion = 1
    /// Larger input is refused before it is decoded (Apple's files are about 9.1 KB).
    public static let maximumFileBytes = 64 * 1024

    /// The merchant's wire identifier: 64 upper-case hex digits of SHA-256 of the merchant ID.
    public let pspId: String
    public let version: Int
    /// When the file was issued, Unix milliseconds (the CMS signingTime is the same instant, to the second).
    public let createdOn: Int64
    /// The CMS SignedData (DER or BER).
    public let signature: [UInt8]

    public init(pspId: String, version: Int = currentVersion, createdOn: Int64, signature: [UInt8]) {
        self.pspId = pspId
        self.version = version
        self.createdOn = createdOn
        self.signature = signature
    }

    /// The bytes the signature covers: `{"createdOn":<ms>,"pspId":"<hash>","version":1}`.
    public var signedContent: [UInt8] {
        Self.signedContent(pspId: pspId, version: version, createdOn: createdOn)
    }

    /// The bytes a signature for these values covers.
    public static func signedContent(pspId: String, version: Int = currentVersion, createdOn: Int64) -> [UInt8] {
        Array("{\"createdOn\":\(createdOn),\"pspId\":\"\(pspId)\",\"version\":\(version)}".utf8)
    }

    /// The canonical JSON, before hex encoding.
    public var json: [UInt8] {
        Array(
            ("{\"createdOn\":\(createdOn),\"pspId\":\"\(pspId)\",\"signature\":\""
                + hex(signature, uppercase: false) + "\",\"version\":\(version)}").utf8)
    }

    /// What the merchant hosts: the upper-case hex of ``json``.
    public var fileContents: String { hex(json, uppercase: true) }

    /// Parses a hosted file. A trailing line break (as editors add) is ignored; anything else that is not the
    /// canonical form is refused with the reason.
    public init(fileContents: some Collection<UInt8>) throws(AssociationFileError) {
        guard fileContents.count <= Self.maximumFileBytes else {
            throw AssociationFileError(
                .tooLarge, "the file has \(fileContents.count) bytes; an association file has at most 64 KiB")
        }
        var text = Array(fileContents)
        while let last = text.last, last == 0x0A || last == 0x0D { text.removeLast() }
        guard !text.isEmpty else { throw AssociationFileError(.notHex, "the file is empty") }
        guard text.count % 2 == 0, text.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x46).contains($0) })
        else {
            throw AssociationFileError(
                .notHex,
                "the file is not upper-case hex text: host the file exactly as "
                    + "`orchard merchant association-file` wrote it (a web page or a redirect target is not one)")
        }
        let json = unhex(text)
        let members: [String: JSONScalar]
        do {
            members = try FlatJSONObject.parse(json)
        } catch {
            throw AssociationFileError(.notJSON, "the decoded file is not a flat JSON object: \(error.reason)")
        }
        let expected: Set<String> = ["createdOn", "pspId", "signature", "version"]
        guard Set(members.keys) == expected else {
            let missing = expected.subtracting(members.keys).sorted()
            let extra = Set(members.keys).subtracting(expected).sorted()
            throw AssociationFileError(
                .wrongMembers,
                "the JSON object must have exactly createdOn, pspId, signature and version"
                    + (missing.isEmpty ? "" : "; missing: " + missing.joined(separator: ", "))
                    + (extra.isEmpty ? "" : "; unexpected: " + extra.joined(separator: ", ")))
        }
        guard case .integer(let version) = members["version"], version == Int64(Self.currentVersion) else {
            throw AssociationFileError(.unsupportedVersion, "version must be the integer \(Self.currentVersion)")
        }
        guard case .integer(let createdOn) = members["createdOn"], createdOn > 0 else {
            throw AssociationFileError(.wrongType, "createdOn must be a positive integer (Unix milliseconds)")
        }
        guard case .string(let pspId) = members["pspId"], pspId.utf8.count == 64,
            pspId.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x46).contains($0) })
        else {
            throw AssociationFileError(
                .wrongType, "pspId must be 64 upper-case hex digits (SHA-256 of the merchant ID)")
        }
        guard case .string(let signatureHex) = members["signature"], !signatureHex.isEmpty,
            signatureHex.utf8.count % 2 == 0,
            signatureHex.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        else {
            throw AssociationFileError(.wrongType, "signature must be lower-case hex (a CMS SignedData)")
        }
        self.init(pspId: pspId, version: Int(version), createdOn: createdOn, signature: unhex(Array(signatureHex.utf8)))
        guard self.json == json else {
            throw AssociationFileError(
                .notCanonical, "the JSON is not in canonical form (keys sorted, no whitespace, no escapes)")
        }
    }
}

/// Why a domain-association file was refused.
public struct AssociationFileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of problem; more may be added.
    public struct Code: RawRepresentable, Sendable, Hashable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        public static let tooLarge = Code(rawValue: "tooLarge")
        public static let notHex = Code(rawValue: "notHex")
        public static let notJSON = Code(rawValue: "notJSON")
        public static let wrongMembers = Code(rawValue: "wrongMembers")
        public static let wrongType = Code(rawValue: "wrongType")
        public static let unsupportedVersion = Code(rawValue: "unsupportedVersion")
        public static let notCanonical = Code(rawValue: "notCanonical")
    }

    public let code: Code
    /// What is wrong and what to do, without the file's contents.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
    public static func == (a: Self, b: Self) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}

/// A JSON scalar of a flat object: association files hold strings and integers only.
enum JSONScalar: Equatable {
    case string(String)
    case integer(Int64)
}

/// A strict parser for one flat JSON object of string and integer members (no nesting, no escapes, no
/// fractions, no duplicate keys), enough for an association file and small enough to fuzz.
enum FlatJSONObject {
    struct Failure: Error {
        let reason: String
    }

    static func parse(_ bytes: [UInt8]) throws(Failure) -> [String: JSONScalar] {
        var index = 0
        func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }
        func expect(_ byte: UInt8) throws(Failure) {
            skipSpace()
            guard index < bytes.count, bytes[index] == byte else {
                throw Failure(reason: "expected '\(Character(Unicode.Scalar(byte)))' at byte \(index)")
            }
            index += 1
        }
        func string() throws(Failure) -> String {
            try expect(UInt8(ascii: "\""))
            let start = index
            while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                guard bytes[index] >= 0x20, bytes[index] != UInt8(ascii: "\\") else {
                    throw Failure(reason: "a control character or escape in a string at byte \(index)")
                }
                index += 1
            }
            guard index < bytes.count else { throw Failure(reason: "an unterminated string") }
            let value = String(decoding: bytes[start..<index], as: UTF8.self)
            index += 1
            return value
        }
        func integer() throws(Failure) -> Int64 {
            let start = index
            if index < bytes.count, bytes[index] == UInt8(ascii: "-") { index += 1 }
            while index < bytes.count, (0x30...0x39).contains(bytes[index]) { index += 1 }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            guard let value = Int64(text), !text.hasPrefix("0") || text == "0", !text.hasPrefix("-0") else {
                throw Failure(reason: "expected an integer at byte \(start)")
            }
            return value
        }

        var members: [String: JSONScalar] = [:]
        try expect(UInt8(ascii: "{"))
        skipSpace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
        } else {
            while true {
                let key = try string()
                try expect(UInt8(ascii: ":"))
                skipSpace()
                guard index < bytes.count else { throw Failure(reason: "the object ends after \"\(key)\":") }
                let value: JSONScalar =
                    bytes[index] == UInt8(ascii: "\"") ? .string(try string()) : .integer(try integer())
                guard members.updateValue(value, forKey: key) == nil else {
                    throw Failure(reason: "the key \"\(key)\" appears twice")
                }
                skipSpace()
                guard index < bytes.count else { throw Failure(reason: "the object is not closed") }
                if bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                try expect(UInt8(ascii: "}"))
                break
            }
        }
        skipSpace()
        guard index == bytes.count else { throw Failure(reason: "bytes follow the object at byte \(index)") }
        return members
    }
}

/// Hex digits of `bytes` (OrchardCrypto's codec).
func hex(_ bytes: [UInt8], uppercase: Bool) -> String { Hex.encode(bytes, lowercase: !uppercase) }

/// Bytes of hex digits already checked to be hex and of even length.
func unhex(_ digits: [UInt8]) -> [UInt8] { Hex.decode(String(decoding: digits, as: UTF8.self)) ?? [] }
