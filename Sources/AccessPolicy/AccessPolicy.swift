/// Who may call a route, and which parts of the request must name the caller.
///
/// A plain value: the contract module that owns a route declares it (``DeclaredRoute``), and the server enforces it
/// in one place (OrchardHTTP's router), so a route cannot be served without the policy its contract states. Roles
/// are names (``CallerRoles``); each server says how it recognizes them in a client certificate.
public struct AccessPolicy: Sendable, Hashable, CustomStringConvertible {
    /// Who is let in.
    public enum Caller: Sendable, Hashable {
        /// Anyone the listener lets in, with or without a client certificate.
        case anyone
        /// A client certificate the server recognizes as holding the role.
        case role(String)
        /// A client certificate holding the role and naming its holder (``CallerIdentity``), of one of the
        /// bindings' kinds; the request must name that holder and nobody else.
        case identified(role: String, bindings: [IdentityBinding])
    }

    public let caller: Caller

    /// No client certificate needed.
    public static let anyone = AccessPolicy(caller: .anyone)

    /// A client certificate holding `role`.
    public static func role(_ role: String) -> AccessPolicy { AccessPolicy(caller: .role(role)) }

    /// A client certificate holding `role` whose holder is of a kind `bindings` lists; the request must satisfy
    /// that kind's binding.
    public static func identified(role: String, _ bindings: IdentityBinding...) -> AccessPolicy {
        AccessPolicy(caller: .identified(role: role, bindings: bindings))
    }

    /// The role needed, if any.
    public var role: String? {
        switch caller {
        case .anyone: nil
        case .role(let role), .identified(let role, _): role
        }
    }

    /// The binding for a holder of `kind`, when the policy binds identities and accepts that kind.
    public func binding(for kind: String) -> IdentityBinding? {
        guard case .identified(_, let bindings) = caller else { return nil }
        return bindings.first { $0.kind == kind }
    }

    public var description: String {
        switch caller {
        case .anyone: "anyone"
        case .role(let role): "role \(role)"
        case .identified(let role, let bindings):
            "role \(role) as " + bindings.map(\.description).joined(separator: " or ")
        }
    }
}

/// For one kind of caller (a terminal, a merchant, a device): the request's fields that must equal the caller's
/// identifier, and those it must not send (they would name someone else, such as a terminal's ID and STAN in a
/// merchant server's request).
public struct IdentityBinding: Sendable, Hashable, CustomStringConvertible {
    /// The ``CallerIdentity/kind`` this binding accepts.
    public let kind: String
    /// Top-level fields of the JSON body that must be present and equal the caller's identifier.
    public let bodyFields: [String]
    /// Path parameters (a pattern's `:name`) that must equal the caller's identifier.
    public let pathParameters: [String]
    /// Top-level fields of the JSON body that must be present and equal the caller's ``CallerIdentity/owner``
    /// (a terminal's merchant); a certificate that names no owner is refused.
    public let ownerBodyFields: [String]
    /// Top-level fields of the JSON body that must be absent (or null).
    public let absentBodyFields: [String]

    public init(
        kind: String, bodyFields: [String] = [], pathParameters: [String] = [], ownerBodyFields: [String] = [],
        absentBodyFields: [String] = []
    ) {
        self.kind = kind
        self.bodyFields = bodyFields
        self.pathParameters = pathParameters
        self.ownerBodyFields = ownerBodyFields
        self.absentBodyFields = absentBodyFields
    }

    public var description: String {
        let bound = bodyFields + pathParameters.map { ":" + $0 }
        return bound.isEmpty ? kind : "\(kind) (\(bound.joined(separator: ", ")))"
    }
}

/// Who a client certificate names: a kind (``CallerIdentity/terminal``, ``CallerIdentity/merchant``, …), the
/// identifier the parties know it by, and the party it acts for when that is someone else (a terminal's merchant).
///
/// Service certificates carry it in their subject's UID as `kind:identifier` or `kind:identifier@owner`
/// (``subjectUserID``); the kind keeps a terminal whose ID happens to equal a merchant's from acting as that
/// merchant, the owner keeps a terminal from charging for another merchant that has a terminal of the same ID.
public struct CallerIdentity: Sendable, Hashable, CustomStringConvertible {
    public static let terminal = "terminal"
    public static let merchant = "merchant"
    public static let device = "device"

    public let kind: String
    public let identifier: String
    /// The party the holder acts for, when it is not itself: a terminal's merchant.
    public let owner: String?

    public init(kind: String, identifier: String, owner: String? = nil) {
        self.kind = kind
        self.identifier = identifier
        self.owner = owner
    }

    /// Reads `kind:identifier` or `kind:identifier@owner`; nil when a part is empty.
    public init?(subjectUserID: String) {
        guard let colon = subjectUserID.firstIndex(of: ":") else { return nil }
        let kind = String(subjectUserID[..<colon])
        let rest = subjectUserID[subjectUserID.index(after: colon)...]
        let identifier: String
        var owner: String?
        if let at = rest.firstIndex(of: "@") {
            identifier = String(rest[..<at])
            owner = String(rest[rest.index(after: at)...])
            guard owner?.isEmpty == false else { return nil }
        } else {
            identifier = String(rest)
        }
        guard !kind.isEmpty, !identifier.isEmpty else { return nil }
        self.init(kind: kind, identifier: identifier, owner: owner)
    }

    /// `kind:identifier` or `kind:identifier@owner`, the subject UID that ``init(subjectUserID:)`` reads.
    public var subjectUserID: String { kind + ":" + identifier + (owner.map { "@" + $0 } ?? "") }

    public var description: String { subjectUserID }
}

/// The role names policies use; each server maps them to the certificates it accepts.
public enum CallerRoles {
    /// Terminals and merchant servers sending authorizations to the acquirer (certificates from the root).
    public static let acquiring = "acquiring"
    /// The token requestor (the Pay server) at the network.
    public static let tokenRequestor = "token-requestor"
    /// The issuer's lifecycle actions at the network.
    public static let issuer = "issuer"
    /// A device at the Pay server (certificates from the device CA).
    public static let device = "device"
    /// A merchant's identity at the Pay server (certificates from the merchant CA).
    public static let merchantIdentity = "merchant-identity"
}

/// A route as its contract module declares it: method, path pattern (`:name` segments are parameters) and
/// access policy.
public struct DeclaredRoute: Sendable, Hashable, CustomStringConvertible {
    /// `GET`, `POST`, …
    public let method: String
    public let pattern: String
    public let policy: AccessPolicy

    public init(_ method: String, _ pattern: String, _ policy: AccessPolicy) {
        self.method = method
        self.pattern = pattern
        self.policy = policy
    }

    public var description: String { "\(method) \(pattern): \(policy)" }
}
