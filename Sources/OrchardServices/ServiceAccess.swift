public import AccessPolicy
import Foundation
public import OrchardCrypto
public import OrchardHTTP
public import OrchardRuntime
public import OrchardX509

/// What a service-to-service client certificate lets its holder do. The role is the certificate's
/// organizationalUnit; only certificates the Orchard root CA issued directly carry one that counts (the
/// device CA and the merchant CA issue under the root, but what they issue is never a service role).
public struct ServiceRole: Hashable, Sendable, CustomStringConvertible {
    /// The OU value.
    public let rawValue: String

    public init(_ rawValue: String) { self.rawValue = rawValue }

    /// The token requestor (the Pay server): provisioning and the cardholder's lifecycle actions at the network.
    public static let tokenRequestor = ServiceRole(CallerRoles.tokenRequestor)
    /// Terminals and merchant servers sending authorizations to the acquirer.
    public static let acquiring = ServiceRole(CallerRoles.acquiring)
    /// The issuer's lifecycle actions at the network.
    public static let issuer = ServiceRole(CallerRoles.issuer)

    public var description: String { rawValue }
}

/// Client certificates between services: issuing them at `init`, and the per-route requirement that checks them.
public enum ServiceAccess {
    /// Issues a TLS client certificate for `role` directly from the root CA (EKU clientAuth, O=Orchard,
    /// OU=role, CN=`commonName`, and UID=``CallerIdentity/subjectUserID`` when it names a caller: a terminal and
    /// its merchant, or a merchant, for role `acquiring`) and writes it and its key as `pki/<name>.pem` and
    /// `pki/<name>.key`.
    @discardableResult
    public static func issueClientIdentity(
        named name: String, role: ServiceRole, commonName: String, identity: CallerIdentity? = nil,
        by root: CertificateAuthority, to directory: DeploymentDirectory, clock: any WallClock,
        random: any RandomSource
    ) throws(ServicesError) -> Certificate {
        let key = try DeploymentPKI.newSigningKey()
        let certificate = try issueClientCertificate(
            for: CertificatePublicKey(key.publicKey), role: role, commonName: commonName, identity: identity, by: root,
            clock: clock, random: random)
        try DeploymentPKI.writeSigningKey(key, named: name, to: directory)
        try DeploymentPKI.writeCertificates([certificate], named: name, to: directory)
        return certificate
    }

    /// The client certificate of ``issueClientIdentity(named:role:commonName:identity:by:to:clock:random:)`` for a
    /// key held elsewhere: another party's, from its signing request (`orchard pki import`). The subject is the one
    /// this side decides (role, common name, caller), never the request's.
    public static func issueClientCertificate(
        for publicKey: CertificatePublicKey, role: ServiceRole, commonName: String, identity: CallerIdentity? = nil,
        by root: CertificateAuthority, clock: any WallClock, random: any RandomSource
    ) throws(ServicesError) -> Certificate {
        let now = clock.now()
        var subject: [DistinguishedName.Attribute] = [
            .organization("Orchard"), .organizationalUnit(role.rawValue), .commonName(commonName),
        ]
        if let identity { subject.append(.userID(identity.subjectUserID)) }
        do {
            return try Certificate.issue(
                subject: DistinguishedName(subject), publicKey: publicKey, issuer: root.issuer,
                notValidBefore: now.addingTimeInterval(-300),
                notValidAfter: now.addingTimeInterval(DeploymentPKI.leafLifetime),
                extensions: [
                    .basicConstraints(isCA: false), .keyUsage([.digitalSignature]), .extendedKeyUsage([.clientAuth]),
                ], random: random)
        } catch {
            throw ServicesError(.pkiFailure, "cannot issue the client certificate of \(commonName)", underlying: error)
        }
    }

    /// The signing request `name` of `request`, parsed and its self-signature checked.
    public static func signingRequest(
        named name: String, in request: PartyRequest
    ) throws(ServicesError)
        -> CertificateSigningRequest
    {
        guard let pem = request.signingRequests[name] else {
            throw ServicesError(.invalidBundle, "the \(request.kind) request carries no signing request \(name)")
        }
        let parsed: CertificateSigningRequest
        do {
            parsed = try CertificateSigningRequest(pemEncoded: pem)
        } catch {
            throw ServicesError(.invalidBundle, "the signing request \(name) is not one: \(error)")
        }
        guard parsed.isSignatureValid else {
            throw ServicesError(.invalidBundle, "the signing request \(name) is not signed by its key")
        }
        return parsed
    }

    /// A P-256 signing request for `key` (subject `CN=commonName`), for a ``PartyRequest``.
    public static func signingRequestPEM(
        for key: P256.Signing.PrivateKey, commonName: String
    ) throws(ServicesError) -> String {
        do {
            return try CertificateSigningRequest.create(
                subject: DistinguishedName([.commonName(commonName)]), key: CertificatePrivateKey(key)
            ).pemRepresentation
        } catch {
            throw ServicesError(.pkiFailure, "cannot make the signing request of \(commonName)", underlying: error)
        }
    }

    /// A route requirement: a verified client certificate issued directly by `root` whose OU is one of `roles`
    /// and whose extended key usage allows client authentication (401 without a certificate, 403 otherwise).
    /// The caller it names is its subject UID read as ``CallerIdentity/init(subjectUserID:)``.
    public static func requirement(_ roles: Set<ServiceRole>, root: Certificate) -> ClientCertificateRequirement {
        let rootKey = try? root.publicKey
        return .required(
            where: { presented in
                guard let rootKey, let certificate = try? Certificate(derEncoded: presented.derRepresentation),
                    certificate.issuer == root.subject, certificate.isSignature(validUnder: rootKey),
                    (try? certificate.extendedKeyUsage)?.contains(.clientAuth) == true,
                    let unit = certificate.subject.organizationalUnit
                else { return false }
                return roles.contains(ServiceRole(unit))
            },
            identity: { presented in
                (try? Certificate(derEncoded: presented.derRepresentation))?.subject.userID.flatMap(
                    CallerIdentity.init(subjectUserID:))
            })
    }
}

/// A web merchant's portal login: a client certificate from the Orchard root whose subject UID is
/// `merchant:<merchant ID>`, with the role its contract names (WebMerchantAPI's `merchant-portal`). The Pay
/// server's domain routes act only for the merchant it names, as Apple's developer portal acts only for the
/// account's own merchant IDs. `init` issues the demo merchant's, `orchard merchant register` each new merchant's.
public enum MerchantPortal {
    /// `pki/merchant-portal-<16 hex digits of SHA-256(merchant ID)>`: a file name for any merchant ID (which may be
    /// longer than a PKI file name allows, or differ from another only in case).
    public static func fileName(for merchantIdentifier: String) -> String {
        "merchant-portal-" + String(Hex.encode(SHA256.hash(Array(merchantIdentifier.utf8))).prefix(16)).lowercased()
    }

    /// Issues `merchantIdentifier`'s portal certificate with `role` from `root` and writes it and its key as
    /// ``fileName(for:)``.
    @discardableResult
    public static func issue(
        for merchantIdentifier: String, role: ServiceRole, by root: CertificateAuthority,
        to directory: DeploymentDirectory, clock: any WallClock, random: any RandomSource
    ) throws(ServicesError) -> Certificate {
        try ServiceAccess.issueClientIdentity(
            named: fileName(for: merchantIdentifier), role: role, commonName: merchantIdentifier,
            identity: CallerIdentity(kind: CallerIdentity.merchant, identifier: merchantIdentifier), by: root,
            to: directory, clock: clock, random: random)
    }
}
