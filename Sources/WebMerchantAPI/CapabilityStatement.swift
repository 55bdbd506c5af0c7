public import AccessPolicy

extension WebMerchantAPI {
    /// The Pay server's public side at ``HostNames/pay``: what a device asks before a page's
    /// `canMakePaymentsWithActiveCard(merchantIdentifier)` is answered.
    public enum Capability {
        /// `POST` ``CapabilityRequest``: answers a ``CapabilityStatement``.
        public static let path = "/v1/web/capability"
        /// Asked without any client certificate: the Pay server must not learn which device visits which site,
        /// so the route reads no device identity (a certificate presented is ignored) and logs no caller.
        public static let declared = DeclaredRoute("POST", path, .anyone)
    }
}

/// `POST /v1/web/capability`: the merchant ID the page names and the top-level page's domain.
public struct CapabilityRequest: Codable, Sendable, Hashable {
    public let merchantIdentifier: String
    public let domain: String

    public init(merchantIdentifier: String, domain: String) {
        self.merchantIdentifier = merchantIdentifier
        self.domain = domain
    }
}

/// Whether a merchant has a domain validated, signed by the token-signing chain (as merchant sessions are) and
/// valid for 5 minutes: `{"domain","expiresAt","issuedAt","merchantIdentifier","signature","validated"}`, keys
/// sorted, no whitespace; `validated` is 1 or 0; `merchantIdentifier` is the merchant hash. The signature is
/// lowercase hex of a detached CMS over the object without `signature` (``signedContent``), whose signingTime is
/// `issuedAt` to the second.
public struct CapabilityStatement: Sendable, Hashable {
    /// How long a statement holds (`expiresAt` − `issuedAt`).
    public static let lifetimeMilliseconds: Int64 = 300_000
    /// Larger input is refused before it is parsed.
    public static let maximumBytes = 16 * 1024

    public let domain: String
    /// 64 upper-case hex digits: SHA-256 of the merchant ID.
    public let merchantIdentifier: String
    public let issuedAt: Int64
    public let expiresAt: Int64
    public let validated: Bool
    public let signature: [UInt8]

    public init(domain: String, merchantIdentifier: String, issuedAt: Int64, validated: Bool, signature: [UInt8]) {
        self.domain = domain
        self.merchantIdentifier = merchantIdentifier
        self.issuedAt = issuedAt
        self.expiresAt = issuedAt + Self.lifetimeMilliseconds
        self.validated = validated
        self.signature = signature
    }

    private func members(signed: Bool) -> String {
        "{\"domain\":\"\(domain)\",\"expiresAt\":\(expiresAt),\"issuedAt\":\(issuedAt),\"merchantIdentifier\":\""
            + merchantIdentifier + "\""
            + (signed ? ",\"signature\":\"\(hex(signature, uppercase: false))\"" : "")
            + ",\"validated\":\(validated ? 1 : 0)}"
    }

    /// The bytes the signature covers.
    public var signedContent: [UInt8] { Array(members(signed: false).utf8) }
    /// The statement as the Pay server answers it.
    public var json: [UInt8] { Array(members(signed: true).utf8) }

    /// Parses a statement strictly: exactly its six members, canonical form.
    public init(json bytes: some Collection<UInt8>) throws(MerchantSessionError) {
        guard bytes.count <= Self.maximumBytes else {
            throw MerchantSessionError(.tooLarge, "a capability statement has at most 16 KiB")
        }
        let members: [String: JSONScalar]
        do {
            members = try FlatJSONObject.parse(Array(bytes))
        } catch {
            throw MerchantSessionError(.notJSON, "the capability statement is not a flat JSON object: \(error.reason)")
        }
        guard Set(members.keys) == ["domain", "expiresAt", "issuedAt", "merchantIdentifier", "signature", "validated"]
        else {
            throw MerchantSessionError(
                .wrongMembers,
                "a capability statement has exactly domain, expiresAt, issuedAt, merchantIdentifier, signature, validated"
            )
        }
        guard case .string(let domain) = members["domain"], MerchantSession.isPlainString(domain),
            case .string(let merchant) = members["merchantIdentifier"], merchant.utf8.count == 64,
            isHex(merchant, uppercase: true),
            case .integer(let issuedAt) = members["issuedAt"], issuedAt > 0,
            case .integer(let expiresAt) = members["expiresAt"], expiresAt == issuedAt + Self.lifetimeMilliseconds,
            case .integer(let validated) = members["validated"], validated == 0 || validated == 1,
            case .string(let signature) = members["signature"], !signature.isEmpty, signature.utf8.count % 2 == 0,
            isHex(signature, uppercase: false)
        else {
            throw MerchantSessionError(.wrongType, "a member of the capability statement has the wrong type or form")
        }
        self.init(
            domain: domain, merchantIdentifier: merchant, issuedAt: issuedAt, validated: validated == 1,
            signature: unhex(Array(signature.utf8)))
        guard json == Array(bytes) else {
            throw MerchantSessionError(.wrongType, "the capability statement is not in canonical form")
        }
    }
}
