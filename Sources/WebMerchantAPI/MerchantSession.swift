public import AccessPolicy

extension WebMerchantAPI {
    /// The Pay server's web gateway at ``HostNames/gateway`` (Apple: `apple-pay-gateway.apple.com`), which a
    /// merchant's server calls with its identity certificate (notes/apple-pay-web.md §2).
    public enum Gateway {
        /// `POST` ``PaymentSessionRequest``: answers a ``MerchantSession``.
        public static let paymentSession = "/paymentservices/paymentSession"
        /// `POST` the legacy body `{merchantIdentifier, domainName, displayName}` (Apple: "being phased out").
        public static let startSession = "/paymentservices/startSession"
        /// Request bodies larger than this are refused (Apple's are about 150 bytes).
        public static let maximumRequestBytes = 4096

        /// The routes. The policy is ``AccessPolicy/anyone`` at the router because the gateway answers every
        /// refusal in Apple's format (``GatewayError``), status 400, instead of the router's 401/403: the handler
        /// itself admits only a merchant identity certificate the Pay server issued, unrevoked and valid, and acts
        /// only for the merchant it names. A certificate from another CA is refused by the listener at the
        /// handshake. The `GET`s exist to answer Apple's refusal of a GET.
        public enum Declared {
            public static let paymentSession = DeclaredRoute("POST", Gateway.paymentSession, .anyone)
            public static let startSession = DeclaredRoute("POST", Gateway.startSession, .anyone)
            public static let paymentSessionGET = DeclaredRoute("GET", Gateway.paymentSession, .anyone)
            public static let startSessionGET = DeclaredRoute("GET", Gateway.startSession, .anyone)

            /// Every gateway route.
            public static var all: [DeclaredRoute] {
                [paymentSession, startSession, paymentSessionGET, startSessionGET]
            }
        }
    }
}

/// `POST /paymentservices/paymentSession`'s body (and the legacy `startSession`'s, which sends `domainName`
/// instead of `initiative` and `initiativeContext`).
public struct PaymentSessionRequest: Codable, Sendable, Hashable {
    /// The merchant ID (`merchant.…`) or its hash (64 hex digits, either case).
    public var merchantIdentifier: String
    public var displayName: String
    /// `web`; `in_app` and `messaging` are not offered.
    public var initiative: String?
    /// For `web`: the fully qualified domain name shown in the address bar, exactly a validated domain.
    public var initiativeContext: String?
    /// The legacy body's domain.
    public var domainName: String?

    public init(
        merchantIdentifier: String, displayName: String, initiative: String? = "web", initiativeContext: String?,
        domainName: String? = nil
    ) {
        self.merchantIdentifier = merchantIdentifier
        self.displayName = displayName
        self.initiative = initiative
        self.initiativeContext = initiativeContext
        self.domainName = domainName
    }
}

/// A refusal as Apple's gateway words it: `{"statusMessage":"Payment Services Exception …","statusCode":"400"}`.
public struct GatewayError: Codable, Sendable, Hashable, Error {
    public let statusMessage: String
    public let statusCode: String

    public init(statusMessage: String, statusCode: String = "400") {
        self.statusMessage = statusMessage
        self.statusCode = statusCode
    }
}

/// The opaque merchant session the gateway answers (notes/apple-pay-web.md §2.3), which a merchant passes to
/// the page untouched and the page to the device.
///
/// Signed content: the object without `signature`, keys sorted, no whitespace (``signedContent``); `signature`
/// is lowercase hex of a detached CMS SignedData by the token-signing leaf whose `signingTime` is
/// `epochTimestamp` to the second. Orchard writes members in Apple's order (``json``) and parses the session
/// strictly: exactly these members, string and integer values without escapes.
public struct MerchantSession: Sendable, Hashable {
    /// `expiresAt` − `epochTimestamp`, as in every Apple session (one hour).
    public static let expiresAtOffset: Int64 = 3_600_000
    /// How long a session may be used (Apple: "expires five minutes after it is created"), once.
    public static let usableMilliseconds: Int64 = 300_000
    /// The constant part after `_` in every session identifier (Apple's is constant too).
    public static let identifierSuffix = "9A1F1E7D0C2B4E6A8F3D5C7B9E1A2C4D6F8B0A2C4E6D8F1A3B5C7D9E0F2A4B6C"
    /// Larger input is refused before it is parsed (Apple's sessions are about 3.9 KB).
    public static let maximumBytes = 32 * 1024

    public let epochTimestamp: Int64
    public let expiresAt: Int64
    /// `SSH` + 32 upper-case hex + `_` + ``identifierSuffix``.
    public let merchantSessionIdentifier: String
    /// Eight lower-case hex digits.
    public let nonce: String
    /// 64 upper-case hex digits: SHA-256 of the merchant ID.
    public let merchantIdentifier: String
    public let domainName: String
    public let displayName: String
    /// The CMS SignedData.
    public let signature: [UInt8]
    /// `<displayName>:<merchant hash>`.
    public let operationalAnalyticsIdentifier: String
    public let retries: Int64
    /// For a direct merchant, the merchant hash.
    public let pspId: String

    public init(
        epochTimestamp: Int64, merchantSessionIdentifier: String, nonce: String, merchantIdentifier: String,
        domainName: String, displayName: String, signature: [UInt8], pspId: String
    ) {
        self.epochTimestamp = epochTimestamp
        self.expiresAt = epochTimestamp + Self.expiresAtOffset
        self.merchantSessionIdentifier = merchantSessionIdentifier
        self.nonce = nonce
        self.merchantIdentifier = merchantIdentifier
        self.domainName = domainName
        self.displayName = displayName
        self.signature = signature
        self.operationalAnalyticsIdentifier = displayName + ":" + merchantIdentifier
        self.retries = 0
        self.pspId = pspId
    }

    /// Whether `text` can stand in a session's string member: printable, no `"` or `\` (the format has no
    /// escapes), at most 128 bytes.
    public static func isPlainString(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return !bytes.isEmpty && bytes.count <= 128
            && bytes.allSatisfy { $0 >= 0x20 && $0 != 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }
    }

    /// The members other than `signature`, in Apple's order.
    private var unsignedMembers: [(String, String)] {
        [
            ("epochTimestamp", "\(epochTimestamp)"), ("expiresAt", "\(expiresAt)"),
            ("merchantSessionIdentifier", quoted(merchantSessionIdentifier)), ("nonce", quoted(nonce)),
            ("merchantIdentifier", quoted(merchantIdentifier)), ("domainName", quoted(domainName)),
            ("displayName", quoted(displayName)),
            ("operationalAnalyticsIdentifier", quoted(operationalAnalyticsIdentifier)), ("retries", "\(retries)"),
            ("pspId", quoted(pspId)),
        ]
    }

    /// The bytes the signature covers: every member but `signature`, keys sorted, no whitespace.
    public var signedContent: [UInt8] {
        Array(object(unsignedMembers.sorted { $0.0 < $1.0 }).utf8)
    }

    /// The session as the gateway answers it, members in Apple's order.
    public var json: [UInt8] {
        var members = unsignedMembers
        members.insert(("signature", quoted(hex(signature, uppercase: false))), at: 7)
        return Array(object(members).utf8)
    }

    /// Parses a session strictly: exactly the eleven members, each of its type and format.
    public init(json bytes: some Collection<UInt8>) throws(MerchantSessionError) {
        guard bytes.count <= Self.maximumBytes else {
            throw MerchantSessionError(.tooLarge, "a merchant session has at most 32 KiB; this one has \(bytes.count)")
        }
        let members: [String: JSONScalar]
        do {
            members = try FlatJSONObject.parse(Array(bytes))
        } catch {
            throw MerchantSessionError(.notJSON, "the merchant session is not a flat JSON object: \(error.reason)")
        }
        let names: Set<String> = [
            "epochTimestamp", "expiresAt", "merchantSessionIdentifier", "nonce", "merchantIdentifier", "domainName",
            "displayName", "signature", "operationalAnalyticsIdentifier", "retries", "pspId",
        ]
        guard Set(members.keys) == names else {
            throw MerchantSessionError(
                .wrongMembers, "a merchant session has exactly the members \(names.sorted().joined(separator: ", "))")
        }
        func string(_ name: String) throws(MerchantSessionError) -> String {
            guard case .string(let value) = members[name] else {
                throw MerchantSessionError(.wrongType, "\(name) must be a string")
            }
            return value
        }
        func integer(_ name: String) throws(MerchantSessionError) -> Int64 {
            guard case .integer(let value) = members[name] else {
                throw MerchantSessionError(.wrongType, "\(name) must be an integer")
            }
            return value
        }
        let epochTimestamp = try integer("epochTimestamp")
        let identifier = try string("merchantSessionIdentifier")
        let nonce = try string("nonce")
        let merchantHash = try string("merchantIdentifier")
        let signatureHex = try string("signature")
        guard epochTimestamp > 0, try integer("expiresAt") == epochTimestamp + Self.expiresAtOffset else {
            throw MerchantSessionError(.wrongType, "expiresAt must be epochTimestamp + 3600000")
        }
        guard Self.isSessionIdentifier(identifier) else {
            throw MerchantSessionError(
                .wrongType,
                "merchantSessionIdentifier must be SSH, 32 upper-case hex digits, _ and the gateway's suffix")
        }
        guard nonce.utf8.count == 8, isHex(nonce, uppercase: false) else {
            throw MerchantSessionError(.wrongType, "nonce must be 8 lower-case hex digits")
        }
        guard merchantHash.utf8.count == 64, isHex(merchantHash, uppercase: true) else {
            throw MerchantSessionError(.wrongType, "merchantIdentifier must be 64 upper-case hex digits")
        }
        guard !signatureHex.isEmpty, signatureHex.utf8.count % 2 == 0, isHex(signatureHex, uppercase: false) else {
            throw MerchantSessionError(.wrongType, "signature must be lower-case hex (a CMS SignedData)")
        }
        self.init(
            epochTimestamp: epochTimestamp, merchantSessionIdentifier: identifier, nonce: nonce,
            merchantIdentifier: merchantHash, domainName: try string("domainName"),
            displayName: try string("displayName"), signature: unhex(Array(signatureHex.utf8)),
            pspId: try string("pspId"))
        guard try string("operationalAnalyticsIdentifier") == operationalAnalyticsIdentifier else {
            throw MerchantSessionError(
                .wrongType, "operationalAnalyticsIdentifier must be <displayName>:<merchant hash>")
        }
        guard try integer("retries") == 0 else { throw MerchantSessionError(.wrongType, "retries must be 0") }
        guard pspId.utf8.count == 64, isHex(pspId, uppercase: true) else {
            throw MerchantSessionError(.wrongType, "pspId must be 64 upper-case hex digits")
        }
        guard Self.isPlainString(domainName), Self.isPlainString(displayName) else {
            throw MerchantSessionError(.wrongType, "domainName and displayName must be 1 to 128 printable bytes")
        }
    }

    /// `SSH` + 32 upper-case hex + `_` + ``identifierSuffix``.
    public static func isSessionIdentifier(_ identifier: String) -> Bool {
        let bytes = Array(identifier.utf8)
        guard bytes.count == 3 + 32 + 1 + 64, identifier.hasPrefix("SSH"), bytes[35] == UInt8(ascii: "_") else {
            return false
        }
        return isHex(String(decoding: bytes[3..<35], as: UTF8.self), uppercase: true)
            && String(decoding: bytes[36...], as: UTF8.self) == identifierSuffix
    }
}

/// Why a merchant session was refused by ``MerchantSession/init(json:)``.
public struct MerchantSessionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of problem; more may be added.
    public struct Code: RawRepresentable, Sendable, Hashable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        public static let tooLarge = Code(rawValue: "tooLarge")
        public static let notJSON = Code(rawValue: "notJSON")
        public static let wrongMembers = Code(rawValue: "wrongMembers")
        public static let wrongType = Code(rawValue: "wrongType")
    }

    public let code: Code
    /// What is wrong, without the session's contents.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
    public static func == (a: Self, b: Self) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}

private func quoted(_ text: String) -> String { "\"" + text + "\"" }

private func object(_ members: [(String, String)]) -> String {
    "{" + members.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
}

func isHex(_ text: String, uppercase: Bool) -> Bool {
    text.utf8.allSatisfy { byte in
        (0x30...0x39).contains(byte) || (uppercase ? (0x41...0x46).contains(byte) : (0x61...0x66).contains(byte))
    }
}
