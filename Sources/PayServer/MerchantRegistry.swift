public import Foundation
public import OrchardCrypto
public import OrchardServices
public import OrchardStore
public import OrchardX509

/// The Pay server's merchant registry: registered merchant IDs, the certificates it issued them from their
/// CSRs, and which apps may pay for which merchant. The Pay server issues merchant certificates with its
/// merchant CA (`pki/merchant-ca`, under the Orchard root), as Apple does with its own.
///
/// `orchard init` uses it to onboard the demo merchant; the merchant commands and endpoints use the same calls.
public final class MerchantRegistry: MerchantOnboarding {
    /// How long a merchant certificate is valid (Apple's are valid 25 months).
    public static let certificateLifetime: TimeInterval = 25 * 30 * 86_400

    private let store: Store
    private let authority: CertificateAuthority
    private let clock: any WallClock
    private let random: any RandomSource

    public init(store: Store, authority: CertificateAuthority, clock: any WallClock, random: any RandomSource) {
        self.store = store
        self.authority = authority
        self.clock = clock
        self.random = random
    }

    public func registerMerchant(identifier merchantIdentifier: String, displayName: String) async throws {
        try Self.checkMerchantIdentifier(merchantIdentifier)
        guard !displayName.isEmpty, displayName.count <= 128 else {
            throw ServicesError(.invalidConfiguration, "a merchant display name has 1 to 128 characters")
        }
        let now = clock.now()
        try await store.write { db in
            let existing = try db.queryFirst(
                "SELECT display_name FROM merchants WHERE identifier = ?", [.text(merchantIdentifier)]
            ) { try $0.string(0) }
            if let existing {
                guard existing == displayName else {
                    throw ServicesError(
                        .invalidConfiguration, "merchant \(merchantIdentifier) is registered with another display name")
                }
                return
            }
            try db.execute(
                "INSERT INTO merchants (identifier, display_name, created_at) VALUES (?, ?, ?)",
                [.text(merchantIdentifier), .text(displayName), .milliseconds(now)])
        }
    }

    public func issuePaymentProcessingCertificate(
        for request: CertificateSigningRequest, merchantIdentifier: String
    ) async throws -> [Certificate] {
        try await issueProcessingCertificate(for: request, merchantIdentifier: merchantIdentifier, processor: nil)
    }

    /// Issues a payment processing certificate for `request`'s key (P-256 or RSA-2048, subject UID the merchant ID)
    /// and records it; `processor` names the processor the merchant delegated it to (nil: the merchant's own key).
    /// Returns the certificate then the merchant CA's.
    private func issueProcessingCertificate(
        for request: CertificateSigningRequest, merchantIdentifier: String, processor: String?
    ) async throws -> [Certificate] {
        // P-256 keys agree on a key (EC_v1); RSA-2048 keys unwrap one (RSA_v1).
        guard request.publicKey.p256 != nil || request.publicKey.rsa?.keySizeInBits == 2048 else {
            throw ServicesError(
                .pkiFailure, "payment processing certificates are issued for P-256 (EC_v1) or RSA-2048 (RSA_v1) keys")
        }
        return try await issue(
            request, merchantIdentifier: merchantIdentifier, kind: "processing", processor: processor,
            subject: request.subject,
            extensions: [
                .basicConstraints(isCA: false),
                .keyUsage(request.publicKey.rsa != nil ? [.keyEncipherment] : [.keyAgreement]),
                .appleMerchantIdentifier(merchantIdentifier),
            ])
    }

    /// Issues a payment processing certificate to a processor's key at the merchant's own request (its portal
    /// certificate, which the route checks), recording the processor. A request that is not a PEM CSR, or that the
    /// processing checks refuse (key type, subject UID, signature), is ``PayServerError/Code/invalidRequest`` and
    /// issues nothing; an unregistered merchant is ``PayServerError/Code/notFound``.
    public func issueDelegatedProcessingCertificate(
        requestPEM: String, processor: String, merchantIdentifier: String
    ) async throws -> [Certificate] {
        guard try await merchant(merchantIdentifier) != nil else {
            throw PayServerError(.notFound, "merchant \(merchantIdentifier) is not registered")
        }
        let request: CertificateSigningRequest
        do {
            request = try CertificateSigningRequest(pemEncoded: requestPEM)
        } catch {
            throw PayServerError(
                .invalidRequest, "certificateSigningRequest is not a PEM certificate signing request: \(error)")
        }
        do {
            return try await issueProcessingCertificate(
                for: request, merchantIdentifier: merchantIdentifier, processor: processor)
        } catch let error as ServicesError where error.code == .pkiFailure {
            throw PayServerError(.invalidRequest, error.message)
        }
    }

    public func issueMerchantIdentityCertificate(
        for request: CertificateSigningRequest, merchantIdentifier: String
    ) async throws -> [Certificate] {
        // Apple's portal refuses other keys ("CSR algorithm/size incorrect. Expected: RSA(2048)").
        guard request.publicKey.rsa?.keySizeInBits == 2048 else {
            throw ServicesError(
                .pkiFailure,
                "identity certificates are RSA-2048: make the CSR with an RSA 2048-bit key "
                    + "(`orchard merchant csr --kind identity`)")
        }
        guard let displayName = try await merchant(merchantIdentifier) else {
            throw ServicesError(.invalidConfiguration, "merchant \(merchantIdentifier) is not registered")
        }
        return try await issue(
            request, merchantIdentifier: merchantIdentifier, kind: "identity",
            subject: Self.identitySubject(merchantIdentifier: merchantIdentifier, displayName: displayName),
            extensions: [
                .basicConstraints(isCA: false), .keyUsage([.digitalSignature]), .extendedKeyUsage([.clientAuth]),
                .appleMerchantIdentifier(merchantIdentifier), .appleMerchantIdentityMarker,
            ])
    }

    /// The subject of a merchant identity certificate, as Apple's: `UID=<merchant ID>, CN=Apple Pay Merchant
    /// Identity:<merchant ID>, OU=<the merchant's account>, O=<display name>`. The Pay server chooses it; the
    /// CSR's subject only has to name the merchant ID in its UID.
    public static func identitySubject(merchantIdentifier: String, displayName: String) -> DistinguishedName {
        DistinguishedName([
            .userID(merchantIdentifier), .commonName("Apple Pay Merchant Identity:\(merchantIdentifier)"),
            .organizationalUnit(accountIdentifier(of: merchantIdentifier)), .organization(displayName),
        ])
    }

    /// The merchant's account at the Pay server, where Apple's certificates carry the developer Team ID:
    /// ten upper-case hex digits, the first of SHA-256 of the merchant ID.
    public static func accountIdentifier(of merchantIdentifier: String) -> String {
        String(Hex.encode(SHA256.hash(Array(merchantIdentifier.utf8))).prefix(10)).uppercased()
    }

    public func entitle(application applicationIdentifier: String, merchantIdentifiers: [String]) async throws {
        try Self.checkApplicationIdentifier(applicationIdentifier)
        try await store.write { db in
            for merchant in merchantIdentifiers {
                guard
                    try db.queryFirst("SELECT 1 FROM merchants WHERE identifier = ?", [.text(merchant)], { _ in true })
                        != nil
                else {
                    throw ServicesError(.invalidConfiguration, "merchant \(merchant) is not registered")
                }
                try db.execute(
                    "INSERT OR IGNORE INTO app_entitlements (application, merchant_identifier) VALUES (?, ?)",
                    [.text(applicationIdentifier), .text(merchant)])
            }
        }
    }

    /// The merchant IDs `applicationIdentifier` may pay for, sorted.
    public func entitlements(of applicationIdentifier: String) async throws -> [String] {
        try await store.read { db in
            try db.query(
                "SELECT merchant_identifier FROM app_entitlements WHERE application = ? ORDER BY 1",
                [.text(applicationIdentifier)]
            ) { try $0.string(0) }
        }
    }

    /// The display name of a registered merchant, or nil.
    public func merchant(_ merchantIdentifier: String) async throws -> String? {
        try await store.read { db in
            try db.queryFirst(
                "SELECT display_name FROM merchants WHERE identifier = ?", [.text(merchantIdentifier)]
            ) { try $0.string(0) }
        }
    }

    private func issue(
        _ request: CertificateSigningRequest, merchantIdentifier: String, kind: String, processor: String? = nil,
        subject: DistinguishedName, extensions: [Certificate.Extension]
    ) async throws -> [Certificate] {
        guard try await merchant(merchantIdentifier) != nil else {
            throw ServicesError(.invalidConfiguration, "merchant \(merchantIdentifier) is not registered")
        }
        // Apple's merchant certificates name the merchant ID in the subject UID; a CSR for another merchant
        // must not get a certificate that MerchantKit would then match to this one.
        guard request.subject.userID == merchantIdentifier else {
            throw ServicesError(
                .pkiFailure, "the CSR's subject UID is not the merchant identifier \(merchantIdentifier)")
        }
        guard request.isSignatureValid else {
            throw ServicesError(.pkiFailure, "the CSR's signature does not verify with its own public key")
        }
        let now = clock.now()
        let certificate: Certificate
        do {
            certificate = try Certificate.issue(
                subject: subject, publicKey: request.publicKey, issuer: authority.issuer,
                notValidBefore: now.addingTimeInterval(-300),
                notValidAfter: now.addingTimeInterval(Self.certificateLifetime), extensions: extensions,
                random: random)
        } catch {
            throw ServicesError(.pkiFailure, "cannot issue the \(kind) certificate", underlying: error)
        }
        let serial = Hex.encode(certificate.serialNumber)
        try await store.write { db in
            try db.execute(
                """
                INSERT INTO merchant_certificates (serial, merchant_identifier, kind, der, not_after, processor, issued_at)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
                [
                    .text(serial), .text(merchantIdentifier), .text(kind), .blob(certificate.derRepresentation),
                    .milliseconds(certificate.notValidAfter), .optional(processor), .milliseconds(now),
                ])
        }
        return [certificate, authority.certificate]
    }

    /// Merchant IDs are reverse-DNS names: `merchant.` then letters, digits, `.` and `-`, up to 128 characters.
    static func checkMerchantIdentifier(_ identifier: String) throws(ServicesError) {
        guard identifier.hasPrefix("merchant."), isReverseDNS(identifier) else {
            throw ServicesError(
                .invalidConfiguration,
                "\"\(identifier)\" is not a merchant identifier (merchant.<reverse DNS>, "
                    + "e.g. merchant.dev.orchard.demo)")
        }
    }

    static func checkApplicationIdentifier(_ identifier: String) throws(ServicesError) {
        guard identifier.contains("."), isReverseDNS(identifier) else {
            throw ServicesError(
                .invalidConfiguration,
                "\"\(identifier)\" is not an app identifier (reverse DNS, e.g. dev.orchard.demo-app)")
        }
    }

    private static func isReverseDNS(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard (3...128).contains(bytes.count), bytes.first != UInt8(ascii: "."), bytes.last != UInt8(ascii: ".")
        else { return false }
        return bytes.allSatisfy { byte in
            (0x61...0x7A).contains(byte) || (0x41...0x5A).contains(byte) || (0x30...0x39).contains(byte)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-")
        } && !text.contains("..")
    }
}
